"""Secret scrubbing: what is redacted before text reaches durable cross-session memory.

Long-term memory and notes outlive the conversation that produced them and
are injected into later prompts, so a key the agent saw once must not be
kept there. :func:`scrub_secrets` replaces common credentials with
``[REDACTED:<kind>]``:

* provider keys: OpenAI / Anthropic (``sk-...``, ``sk-ant-...``), GitHub
  (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``, ``github_pat_``), Slack
  (``xoxb-``... and webhook URLs), Stripe (``sk_live_``, ``rk_test_``...),
  Google (``AIza...``), AWS access key ids (``AKIA``/``ASIA``...);
* ``Authorization: Bearer ...`` / ``Basic ...`` credentials, JWTs, PEM private
  key blocks;
* the password in ``scheme://user:password@host`` URLs, and the value of
  ``password=`` / ``secret:`` / ``api_key=`` / ``token=``-style assignments.

It leaves alone what merely *looks* random: git hashes, sha256 digests,
UUIDs and base64 ``data:`` URLs (the scan skips ``data:...;base64,...``
spans, and every key pattern must start at a token boundary, so a key
prefix inside a longer base64 or hex run does not match). Scrubbing is
idempotent: scrubbing scrubbed text changes nothing.

A host may pass its own scrubber (any ``Callable[[str], str]``, see
:data:`Scrubber`) as ``Memory(scrub_secrets=...)``, or ``False`` to store text
as given.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from agentmem.errors import AgentMemError, ConfigurationError

__all__ = ["REDACTED", "Scrubber", "scrub_secrets"]

Scrubber = Callable[[str], str]
"""A scrubber: takes text about to be stored, returns the text to store."""

REDACTED = "[REDACTED:{kind}]"

# A key must not continue a longer token (base64, hex, identifiers, URL-safe base64).
_START = r"(?<![A-Za-z0-9_+/.-])"
_END = r"(?![A-Za-z0-9_-])"

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private_key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|.*\Z)",
            re.DOTALL,
        ),
    ),
    ("jwt", re.compile(_START + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("anthropic_key", re.compile(_START + r"sk-ant-[A-Za-z0-9_-]{20,}" + _END)),
    # Real keys are random base62 and carry digits; a long kebab-case slug ("sk-...") does not.
    (
        "openai_key",
        re.compile(
            _START + r"sk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z_-]*\d)[A-Za-z0-9_-]{20,}" + _END
        ),
    ),
    ("github_token", re.compile(_START + r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{30,})")),
    ("slack_token", re.compile(_START + r"xox[abposre]-[A-Za-z0-9-]{10,}")),
    (
        "slack_webhook",
        re.compile(r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_-]{10,}"),
    ),
    ("stripe_key", re.compile(_START + r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}" + _END)),
    ("google_api_key", re.compile(_START + r"AIza[0-9A-Za-z_-]{35}" + _END)),
    (
        "aws_access_key",
        re.compile(_START + r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA)[0-9A-Z]{16}" + _END),
    ),
)

# "Authorization: Bearer <token>" -> keep the scheme word, drop the credential.
_BEARER = re.compile(r"(?i)\b((?:bearer|basic)\s+)(?!\[REDACTED)[A-Za-z0-9._~+/-]{16,}=*")

# scheme://user:password@host -> keep the user, drop the password.
_URL_PASSWORD = re.compile(r"(?<=[A-Za-z][A-Za-z0-9+.-]://)([^\s:/@]*):(?!\[REDACTED)([^\s@/]+)@")

# password=..., "api_key": "...", SECRET_TOKEN: ... (the value; the name stays).
_ASSIGNMENT = re.compile(
    r"""(?ix)
    (?P<name>\b[\w.-]*?(?:password|passwd|pwd|passphrase|secret|api[_-]?key|access[_-]?key|
        auth[_-]?token|access[_-]?token|refresh[_-]?token|client[_-]?secret|token)\b)
    (?P<sep>["']?\s*(?::|=|:=)\s*)
    (?P<quote>["']?)
    (?!\[REDACTED)
    (?P<value>[^\s"',;&}]+)
    """
)
_PASSWORD_NAMES = re.compile(r"(?i)password|passwd|pwd|passphrase")

_DATA_URL = re.compile(r"data:[\w.+-]+/[\w.+-]+(?:;[\w.+-]+=[\w.+-]+)*;base64,[A-Za-z0-9+/=]+")


def _mark(kind: str) -> str:
    return REDACTED.format(kind=kind)


def _assignment(match: re.Match[str]) -> str:
    value = match.group("value")
    is_password = bool(_PASSWORD_NAMES.search(match.group("name")))
    # A short value after "token:" is prose ("token: 5"); a password of any length is a secret.
    if not is_password and len(value) < 8:
        return match.group(0)
    kind = "password" if is_password else "secret"
    return f"{match.group('name')}{match.group('sep')}{match.group('quote')}{_mark(kind)}"


def _scrub_plain(text: str) -> str:
    for kind, pattern in _PATTERNS:
        text = pattern.sub(_mark(kind), text)
    text = _BEARER.sub(lambda m: m.group(1) + _mark("bearer_token"), text)
    text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}:{_mark('password')}@", text)
    return _ASSIGNMENT.sub(_assignment, text)


def scrub_secrets(text: str) -> str:
    """Return ``text`` with common secrets replaced by ``[REDACTED:<kind>]``.

    Args:
        text: Text about to be stored in durable memory.

    Returns:
        The scrubbed text (``text`` itself when nothing matched).
    """
    if not text:
        return text
    pieces: list[str] = []
    last = 0
    for match in _DATA_URL.finditer(text):
        pieces.append(_scrub_plain(text[last : match.start()]))
        pieces.append(match.group(0))
        last = match.end()
    pieces.append(_scrub_plain(text[last:]))
    return "".join(pieces)


def resolve_scrubber(setting: bool | Scrubber) -> Scrubber | None:
    """The scrubber a ``scrub_secrets=`` setting means (``None``: store as given).

    A host's callable is wrapped so that its failure, or a result that is not
    a string, raises :class:`~agentmem.errors.ConfigurationError` (nothing is
    stored) instead of an arbitrary exception.
    """
    if setting is True:
        return scrub_secrets
    if setting is False:
        return None
    custom = setting

    def checked(text: str) -> str:
        try:
            result = custom(text)
        except AgentMemError:
            raise
        except Exception as exc:
            raise ConfigurationError(f"the scrub_secrets callable failed: {exc!r}") from exc
        if not isinstance(result, str):
            raise ConfigurationError(
                f"the scrub_secrets callable must return a string, got {type(result).__name__}"
            )
        return result

    return checked
