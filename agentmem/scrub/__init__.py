"""Secret scrubbing: what is redacted before text reaches durable cross-session memory.

Long-term memory, notes, topic files, semantic memories, task summaries and
the trim checkpoint outlive the conversation that produced them and are
injected into later prompts, so a key the agent saw once must not be kept
there. :func:`scrub_secrets` replaces credentials with ``[REDACTED:<kind>]``,
always the **whole** credential:

* keys recognisable by their shape (:mod:`agentmem.scrub._tokens`): OpenAI,
  Anthropic, GitHub, GitLab, Slack, Stripe, Google, AWS access key ids,
  Hugging Face, npm, PyPI, Twilio, SendGrid, Mailgun, Heroku, DigitalOcean,
  Discord, Telegram and a dozen more, JWTs and PEM private key blocks (also
  inside a JSON string, also cut off);
* secrets recognisable by their context (:mod:`agentmem.scrub._context`): the
  password of ``scheme://user:password@host`` (even holding ``@ : /``), the
  value of ``password=`` / ``secret:`` / ``api_key`` / ``AccountKey=`` /
  ``sig=``-style assignments (quoted values whole, ``.env`` lines to the end of
  the line, connection-string values to the next ``;``), ``Authorization:``
  headers, ``curl -u user:pass``, ``auth=("user", "pass")``,
  ``<password>...</password>`` and ``.netrc`` lines.

It leaves alone what merely *looks* random: git hashes, sha256 digests,
UUIDs and base64 ``data:`` URLs (the scan skips ``data:...;base64,...``
spans, and every key pattern must start at a token boundary, so a key
prefix inside a longer base64 or hex run does not match), and code that
merely names a secret (``password=None``, ``api_key = os.environ[...]``).
Scrubbing is idempotent: scrubbing scrubbed text changes nothing.
``tests/test_scrub_corpus.py`` holds both promises to a generated corpus of
several hundred secrets of 60+ kinds and as many look-alikes.

Names cannot be redacted the same way: a note key, a topic name or a semantic
``user_id`` is a file name or a lookup key, and a redacted one would collide
with every other redacted name and could never be looked up again.
:func:`refuse_secret_name` refuses them instead
(:class:`~agentmem.errors.InvalidArgumentError`, nothing stored): a name the
scrubber would change is refused.

A host may pass its own scrubber (any ``Callable[[str], str]``, see
:data:`Scrubber`) as ``Memory(scrub_secrets=...)``, or ``False`` to store text
as given.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentmem.errors import AgentMemError, ConfigurationError, InvalidArgumentError
from agentmem.scrub._context import scrub_context
from agentmem.scrub._tokens import scrub_tokens

__all__ = [
    "REDACTED",
    "Scrubber",
    "refuse_secret_name",
    "refuse_secret_names",
    "resolve_scrubber",
    "scrub_json",
    "scrub_near",
    "scrub_secrets",
    "scrub_with",
]

Scrubber = Callable[[str], str]
"""A scrubber: takes text about to be stored, returns the text to store."""

REDACTED = "[REDACTED:{kind}]"

_DATA_URL = re.compile(r"data:[\w.+-]+/[\w.+-]+(?:;[\w.+-]+=[\w.+-]+)*;base64,[A-Za-z0-9+/=]+")


def _scrub_plain(text: str) -> str:
    return scrub_context(scrub_tokens(text))


def scrub_secrets(text: str) -> str:
    """Return ``text`` with secrets replaced by ``[REDACTED:<kind>]``.

    Args:
        text: Text about to be stored in durable memory.

    Returns:
        The scrubbed text (``text`` itself when nothing matched).
    """
    if not text:
        return text
    if "base64," not in text:
        return _scrub_plain(text)
    pieces: list[str] = []
    last = 0
    for match in _DATA_URL.finditer(text):
        pieces.append(_scrub_plain(text[last : match.start()]))
        pieces.append(match.group(0))
        last = match.end()
    pieces.append(_scrub_plain(text[last:]))
    return "".join(pieces)


NEAR_MARGIN = 4096
"""Characters kept on each side of the match by :func:`scrub_near` (longer than any key
but a PEM block, which is found whole)."""


def scrub_near(text: str, words: Sequence[str], margin: int = NEAR_MARGIN) -> str:
    """The scrubbed part of ``text`` around the first of ``words`` found (lower-case).

    For previews of long texts (recall hits): scrubbing a 100 KB tool output
    costs milliseconds, its 200-character preview needs only the neighbourhood.
    Up to ``margin`` characters are kept on each side of the first match (from
    the start when none is found), and the window reaches back to a PEM block's
    ``-----BEGIN`` line that starts before it, so no key is cut in two inside
    the part a preview can show.
    """
    if len(text) <= 2 * margin:
        return scrub_secrets(text)
    lowered = text.lower()
    at = min((i for i in (lowered.find(w) for w in words if w) if i >= 0), default=0)
    start, end = max(0, at - margin), at + margin
    begin = text.rfind("-----BEGIN", max(0, start - 64 * margin), start)
    if begin >= 0 and "-----END" not in text[begin:start]:
        start = begin
    return scrub_secrets(text[start:end])


def scrub_with(scrubber: Scrubber | None, text: str) -> str:
    """``text`` through ``scrubber`` (``None``: as given)."""
    return text if scrubber is None else scrubber(text)


def refuse_secret_name(scrubber: Scrubber | None, name: object, what: str) -> None:
    """Refuse a name (a file name, a lookup key) that holds a secret.

    A secret cannot be redacted out of a name without losing the name, so a
    name the scrubber would change is refused; the message shows the name
    scrubbed, never the secret.

    Args:
        scrubber: The store's scrubber (``None``: scrubbing is off, nothing is refused).
        name: The name about to be stored (non-strings are left to the caller's checks).
        what: What the name is, for the message (``"note key"``).

    Raises:
        InvalidArgumentError: the name holds what the scrubber redacts.
    """
    if scrubber is None or not isinstance(name, str) or not name:
        return
    scrubbed = scrubber(name)
    if scrubbed != name:
        raise InvalidArgumentError(
            f"{what} {scrubbed!r} holds a secret; a {what} is stored as written (it names a "
            f"file or is looked up), so it cannot be redacted: choose a {what} without it"
        )


def refuse_secret_names(scrubber: Scrubber | None, names: Mapping[str, object]) -> None:
    """:func:`refuse_secret_name` for each ``what -> name`` of ``names`` (``None`` skipped)."""
    for what, name in names.items():
        refuse_secret_name(scrubber, name, what)


def scrub_json(scrubber: Scrubber | None, value: Any, what: str) -> Any:
    """A JSON value with every string scrubbed and every object key checked.

    Keys are lookup names (metadata filters match them), so a key that holds a
    secret is refused (:func:`refuse_secret_name`) rather than redacted.

    Raises:
        InvalidArgumentError: an object key holds a secret.
    """
    if scrubber is None:
        return value
    if isinstance(value, str):
        return scrubber(value)
    if isinstance(value, list):
        return [scrub_json(scrubber, v, what) for v in value]
    if isinstance(value, dict):
        for key in value:
            refuse_secret_name(scrubber, key, f"{what} key")
        return {k: scrub_json(scrubber, v, what) for k, v in value.items()}
    return value


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
