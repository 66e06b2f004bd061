"""Credentials recognisable by their own shape: provider keys, JWTs, PEM private keys.

Each rule is a regular expression for one kind of credential plus the literal
strings ("triggers") that every match must contain. :func:`scrub_tokens` runs
a rule only when one of its triggers occurs in the text (a C-speed substring
test), so a message that holds no ``ghp_`` never pays for the GitHub pattern:
the cost of the whole table on ordinary text is a few dozen ``in`` tests, on
the text's runs of 12+ non-space characters only (a key is one such run).

A key must start at a token boundary (:data:`START`): not inside a longer
base64, hex or identifier run, so a key prefix that happens to occur inside a
sha256 digest, a base64 image or a UUID does not match. ``//`` before a key is
a boundary (``https://ghp_...@github.com``); ``x/`` is not (a path or base64).
Patterns whose prefix is short or word-like (``hf_``, Discord's dotted tokens)
also ask the body to look random (:func:`random_enough`), so an identifier
such as ``hf_loadPretrainedModelFromHubCache`` stays.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

__all__ = ["START", "TokenRule", "mark", "random_enough", "scrub_tokens"]

START = r"(?<![A-Za-z0-9_+.\]-])(?<![A-Za-z0-9_+.=\]-]/)"
"""Where a key with an alphanumeric prefix (``AKIA``, ``AIza``) starts: not after a token
character, nor after ``x/``, since such a prefix may occur inside a base64 run or a path."""

LOOSE_START = r"(?<![A-Za-z0-9_\]-])"
"""Where a key whose prefix holds ``_``, ``-`` or ``.`` (``ghp_``, ``glpat-``) starts: such a
prefix cannot occur inside standard base64, so ``/``, ``+``, ``.`` and ``=`` may precede it
(``https://ghp_...@github.com``, ``--token=ghp_...``). A ``]`` is a token character for both,
so that a key right after a redaction mark is judged as it was before the redaction."""

_END = r"(?![A-Za-z0-9_-])"


def mark(kind: str) -> str:
    """The text that replaces a credential of ``kind``."""
    return f"[REDACTED:{kind}]"


def random_enough(body: str) -> bool:
    """Whether ``body`` looks like random key material rather than a word or identifier.

    Random base62 of 20+ characters nearly always mixes digits with letters or
    has both cases in similar measure; an identifier (snake_case, camelCase) has
    few capitals and at most a version digit.
    """
    digits = sum(c.isdigit() for c in body)
    upper = sum(c.isupper() for c in body)
    lower = sum(c.islower() for c in body)
    letters = upper + lower
    if digits >= 2 and letters:
        return True
    return letters > 0 and min(upper, lower) >= 0.25 * letters


class TokenRule(NamedTuple):
    """One kind of self-identifying credential."""

    kind: str
    pattern: re.Pattern[str]
    triggers: tuple[str, ...]
    check: Callable[[re.Match[str]], bool] | None = None
    hint: re.Pattern[str] | None = None
    """For a rule whose pattern starts with a character class (slow to search for):
    a pattern starting with a literal that every match contains, searched first."""


def _rule(
    kind: str,
    body: str,
    *triggers: str,
    check: Callable[[re.Match[str]], bool] | None = None,
    hint: str | None = None,
    strict: bool = False,
) -> TokenRule:
    start = START if strict else LOOSE_START
    return TokenRule(
        kind, re.compile(start + body), triggers, check, None if hint is None else re.compile(hint)
    )


def _body_random(group: int = 1) -> Callable[[re.Match[str]], bool]:
    return lambda m: random_enough(m.group(group))


def _discord(m: re.Match[str]) -> bool:
    return any(c.isdigit() for c in m.group(1)) and random_enough(m.group(3))


RULES: tuple[TokenRule, ...] = (
    # PEM blocks first: their base64 body must go whole, whatever it happens to contain.
    TokenRule(
        "private_key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|.*\Z)",
            re.DOTALL,
        ),
        ("PRIVATE KEY",),
    ),
    _rule("age_secret_key", r"AGE-SECRET-KEY-1[0-9A-Z]{50,}", "AGE-SECRET-KEY-"),
    _rule(
        "jwt", r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", "eyJ", strict=True
    ),
    _rule("mapbox_token", r"[sp]k\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}", "k.eyJ"),
    _rule("anthropic_key", r"sk-ant-[A-Za-z0-9_-]{20,}" + _END, "sk-ant-"),
    # Real keys are random base62 and carry digits; a long kebab-case slug ("sk-...") does not.
    _rule(
        "openai_key",
        r"sk-(?:proj-|svcacct-|admin-|None-)?(?=[A-Za-z_-]*\d)[A-Za-z0-9_-]{20,}" + _END,
        "sk-",
    ),
    _rule(
        "github_token",
        r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
    ),
    _rule(
        "gitlab_token",
        r"gl(?:pat|dt|rt|ptt|soat|cbt|ft|imt|agent|oas|ffct)-[A-Za-z0-9_-]{20,}",
        "gl",
    ),
    _rule("gitlab_runner_token", r"GR1348941[A-Za-z0-9_-]{20,}", "GR1348941", strict=True),
    _rule(
        "slack_token",
        r"(?:xox[abposre]-[A-Za-z0-9-]{10,}|xapp-\d-[A-Za-z0-9-]{10,})",
        "xox",
        "xapp-",
    ),
    TokenRule(
        "slack_webhook",
        re.compile(
            r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{10,}"
        ),
        ("hooks.slack.com",),
    ),
    _rule(
        "stripe_key",
        r"(?:(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})" + _END,
        "_live_",
        "_test_",
        "whsec_",
    ),
    _rule("google_api_key", r"AIza[0-9A-Za-z_-]{35}" + _END, "AIza", strict=True),
    _rule("google_oauth_secret", r"GOCSPX-[A-Za-z0-9_-]{20,}", "GOCSPX-"),
    _rule("google_oauth_token", r"ya29\.[A-Za-z0-9_-]{30,}", "ya29."),
    _rule(
        "aws_access_key",
        r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[0-9A-Z]{16}" + _END,
        "AKIA",
        "ASIA",
        "ABIA",
        "ACCA",
        "AGPA",
        "AIDA",
        "AROA",
        "AIPA",
        "ANPA",
        "ANVA",
        "APKA",
        strict=True,
    ),
    _rule(
        "huggingface_token",
        r"(?:hf_|api_org_)([A-Za-z0-9]{30,})" + _END,
        "hf_",
        "api_org_",
        check=_body_random(),
    ),
    _rule("npm_token", r"npm_[A-Za-z0-9]{36}" + _END, "npm_"),
    _rule("pypi_token", r"pypi-AgE[A-Za-z0-9_-]{50,}", "pypi-AgE"),
    _rule("twilio_api_key", r"SK[0-9a-fA-F]{32}" + _END, "SK", strict=True),
    _rule("sendgrid_key", r"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,50}", "SG."),
    _rule("mailgun_key", r"key-[0-9a-f]{32}" + _END, "key-"),
    _rule("heroku_key", r"HRKU-[A-Za-z0-9_-]{20,}", "HRKU-"),
    _rule("digitalocean_token", r"do[opr]_v1_[a-f0-9]{64}" + _END, "_v1_"),
    _rule(
        "discord_token",
        r"([MNO][A-Za-z0-9_-]{23,27})\.([A-Za-z0-9_-]{6,7})\.([A-Za-z0-9_-]{27,40})" + _END,
        ".",
        check=_discord,
        hint=r"\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27}",
        strict=True,
    ),
    # Often inside an API URL (``https://api.telegram.org/bot<token>/...``): "bot" is a boundary.
    TokenRule(
        "telegram_bot_token",
        re.compile(r"(?:(?<=bot)|(?<![A-Za-z0-9_\]]))\d{8,10}:([A-Za-z0-9_-]{35})" + _END),
        (":",),
        _body_random(),
        re.compile(r":[A-Za-z0-9_-]{35}"),
    ),
    _rule("shopify_token", r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}" + _END, "shp"),
    _rule("databricks_token", r"dapi[0-9a-f]{32}(?:-\d)?" + _END, "dapi", strict=True),
    _rule("atlassian_token", r"ATATT3[A-Za-z0-9_=-]{100,}", "ATATT3", strict=True),
    _rule("postman_key", r"PMAK-[0-9a-f]{24}-[0-9a-f]{34}" + _END, "PMAK-"),
    _rule(
        "grafana_token",
        r"(?:glc_[A-Za-z0-9+/]{32,}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})",
        "glc_",
        "glsa_",
    ),
    _rule("sentry_token", r"sntry[su]_[A-Za-z0-9+/=_-]{40,}", "sntry"),
    _rule("newrelic_key", r"NRAK-[A-Z0-9]{27}" + _END, "NRAK-"),
    _rule("linear_key", r"lin_api_[A-Za-z0-9]{40}" + _END, "lin_api_"),
    _rule(
        "notion_token",
        r"(?:secret_|ntn_)([A-Za-z0-9]{40,})" + _END,
        "secret_",
        "ntn_",
        check=_body_random(),
    ),
    _rule("square_token", r"sq0(?:atp|csp)-[A-Za-z0-9_-]{22,}", "sq0"),
    _rule("groq_key", r"gsk_[A-Za-z0-9]{48,}" + _END, "gsk_"),
    _rule("xai_key", r"xai-[A-Za-z0-9]{60,}" + _END, "xai-"),
    _rule("replicate_token", r"r8_[A-Za-z0-9]{37}" + _END, "r8_"),
    _rule("perplexity_key", r"pplx-[A-Za-z0-9]{40,}" + _END, "pplx-"),
    _rule("tavily_key", r"tvly-(?:dev-)?[A-Za-z0-9]{20,}" + _END, "tvly-"),
    _rule("langsmith_key", r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}" + _END, "lsv2_"),
    _rule("supabase_token", r"sbp_[a-f0-9]{40}" + _END, "sbp_"),
    _rule(
        "doppler_token",
        r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}" + _END,
        "dp.",
    ),
    _rule("pulumi_token", r"pul-[a-f0-9]{40}" + _END, "pul-"),
    _rule(
        "terraform_token",
        r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}",
        ".atlasv1.",
        strict=True,
    ),
    _rule("vault_token", r"hv[sb]\.[A-Za-z0-9_-]{24,}" + _END, "hvs.", "hvb."),
)


_PEM = RULES[0]
_TRIGGERS = tuple((t, i) for i, rule in enumerate(RULES) if i for t in rule.triggers)
_LONG_RUN = re.compile(r"\S{12,}")
"""Every key but a PEM block is a run of 12+ non-space characters holding its trigger."""


def scrub_tokens(text: str) -> str:
    """``text`` with every self-identifying credential replaced by its mark."""
    if "PRIVATE KEY" in text:
        text = _PEM.pattern.sub(mark(_PEM.kind), text)
    # Triggers are looked for in the long runs only: prose words cannot hold a key,
    # and the runs are usually a small part of a message.
    runs = " ".join(_LONG_RUN.findall(text))
    if not runs:
        return text
    present = {index for trigger, index in _TRIGGERS if trigger in runs}
    for index in sorted(present):
        rule = RULES[index]
        if rule.hint is not None and rule.hint.search(text) is None:
            continue
        text = rule.pattern.sub(_replacer(rule), text)
    return text


def _replacer(rule: TokenRule) -> str | Callable[[re.Match[str]], str]:
    replacement = mark(rule.kind)
    check = rule.check
    if check is None:
        return replacement
    return lambda m: replacement if check(m) else m.group(0)
