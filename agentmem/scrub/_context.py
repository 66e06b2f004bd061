"""Credentials recognisable by what surrounds them: names, headers, URLs, flags.

A password has no shape of its own; what gives it away is its context:
``password: "multi word pass"``, ``DB_PASSWORD=abc;def``,
``postgres://admin:p@ss@db/app``, ``Authorization: Basic ...``,
``curl -u user:pass``, ``<password>...</password>``. This module finds the
value in each context and redacts the **whole** value, keeping the name so
the text still reads (``password: "[REDACTED:password]"``).

**Assignments** (:func:`scrub_assignments`) are scanned in a loop rather
than with one substitution, because where a value ends depends on the
context:

* a quoted value ends at its closing quote (escapes honoured, also inside a
  JSON string: ``\\"password\\": \\"...\\"``), so spaces, ``;`` and ``,`` in it
  are redacted too;
* ``NAME=value`` at the start of a line (a ``.env`` line) runs to the end of
  the line (before a `` #`` comment);
* in a connection string (``...;Password=a b;...``) the value runs to the next
  ``;``;
* otherwise the value is the run of non-space characters, cut before
  ``;``/``&``/``,`` only where another ``name=`` follows (``?token=x&page=2``),
  and stripped of closing punctuation.

Not every ``password = ...`` holds a password. Kept as they are: code
(``password=None``, ``password=self.password``, ``api_key = os.environ[...]``,
``token = get_token()``, ``password: str``, snake_case variables such as
``password=new_password``), placeholders (``${DB_PASSWORD}``, ``<password>``,
``{{ secrets.X }}``, ``***``), names that only contain a keyword
(``token_count=1234``, ``max_tokens=4096``, ``secretName: x``, ``monkey=...``)
and prose (``Password: at least 12 characters``). A password-like name
(``password``, ``passwd``, ``pwd``, ``passphrase``, ``*_pass``) redacts any
other value; ``secret``, ``token``, ``credentials`` and ``api_key``-like names
a quoted value of 8+ characters or an unquoted one that looks random and is
not a path or a URL (``credentials: ~/.aws/credentials``); a bare ``key``,
``auth`` or ``sig`` only a random-looking value of 8+ characters that is not a
digest or a UUID (``cache_key=<sha1>``).

Every rule here works between redaction marks (:func:`_between_marks`): a mark
is opaque, so scrubbing scrubbed text changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from agentmem.scrub._tokens import mark, random_enough

__all__ = ["scrub_context"]

# ---------------------------------------------------------------------------- values

_PLACEHOLDER = re.compile(
    r"""(?x)
    \$\{[^}\n]*\}? | \$\([^)\n]*\)? | \$[A-Za-z_]\w* | %[A-Za-z_]\w*% | %\(\w+\)[sd]
    | \{\{.*?\}\}? | \{%.*?%\} | \{[A-Za-z_][\w.]*\} | <[^<>\n]*> | \[REDACTED(?::\w+)?\]?
    | \*{3,} | [xX]{3,} | \.{3,} | … | \?{3,}
    """
)
_KEEP_WORDS = frozenset(
    {
        *("none", "null", "nil", "true", "false", "undefined", "required", "optional"),
        *("string", "str", "bytes", "int", "float", "bool", "number", "any", "object"),
        *("secretstr", "hidden", "masked", "redacted", "unset", "empty", "omitted"),
    }
)
_CODE_NAME = re.compile(r"[a-z_]+(?:\.[A-Za-z_]\w*)+")  # self.password, os.environ, args.token
_CALL_OR_INDEX = re.compile(r"[A-Za-z_][\w.]*[(\[]")  # getpass(), os.getenv(, config[
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A file path or a URL without credentials is where a secret lives, not the secret.
_LOCATION = re.compile(
    r"(?:~|\.{1,2})?/[\w.~-]|[A-Za-z]:\\|[a-z][a-z0-9+.-]*://[^\s:@/]+(?:[/:]|$)"
)
# A digest or a UUID under a bare "key" is a cache or lookup key.
_DIGEST = re.compile(r"[0-9a-fA-F]{16,}|[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
# "Password: at least 12 characters" is prose, not a password.
_PROSE_WORDS = frozenset(
    {
        *("is", "the", "a", "an", "at", "must", "should", "will", "can", "be", "was", "and"),
        *("or", "not", "for", "to", "of", "in", "on", "with", "see", "use", "set", "your"),
        *("change", "reset", "enter", "field", "none", "same", "as"),
    }
)
_SYMBOL = re.compile(r"[^A-Za-z0-9\s._-]")

PASSWORD, STRONG, WEAK = "password", "secret", "weak"


def _placeholder(value: str) -> bool:
    return bool(_PLACEHOLDER.fullmatch(value)) or value.lower() in _KEEP_WORDS


def _code(value: str, keyword: str) -> bool:
    """Whether an unquoted ``value`` is an expression (a variable, a call) rather than a literal."""
    if _CODE_NAME.fullmatch(value) or _CALL_OR_INDEX.match(value):
        return True
    if not _IDENT.fullmatch(value):
        return False
    lowered = value.lower()
    # new_password, apiKey, token_value: a variable named after what it holds.
    if keyword.lower() in lowered.replace("_", ""):
        return True
    return "_" in value.strip("_") and not random_enough(value)


def _is_secret(value: str, strength: str, *, quoted: bool, keyword: str) -> bool:
    if not value.strip() or _placeholder(value.strip()):
        return False
    if not quoted and _code(value, keyword):
        return False
    if strength == PASSWORD:
        return quoted or value.lower() not in _PROSE_WORDS
    if not quoted and _LOCATION.match(value):
        return False
    if len(value) < 8:
        return False
    if strength == WEAK:
        return random_enough(value) and not _DIGEST.fullmatch(value)
    if quoted:
        return True
    return random_enough(value) or bool(_SYMBOL.search(value))


# ---------------------------------------------------------------------------- assignments

# Keywords are searched in the lower-cased text (a case-sensitive search is 5x faster
# than an IGNORECASE one); the separator is then matched in the original text.
_KEYWORD = re.compile(
    r"(?:pass(?:word|wd|phrase)?|pwd|secret|credentials?|token|key|auth|sig)(?![a-z0-9_])"
)
_KEYWORD_ANY_CASE = re.compile(_KEYWORD.pattern, re.IGNORECASE)
# ": ", "=", ":=", "=>", after a closing quote and bracket too (os.environ["X_PASSWORD"] = ...)
_SEP = re.compile(r"\\?[\"']?\]?[ \t]*(?::=|=>|:|=(?!=))[ \t]*|[ \t]+")
# The names that make "key" a secret's name: api_key, AccountKey, x-api-key, SharedAccessKey...
_KEY_PREFIX = re.compile(
    r"(?:api|access|secret|private|account|auth|master|signing|encryption|client|app|license"
    r"|sharedaccess|subscription|serviceaccount|storage|consumer|webhook|deploy|admin)$"
)
_SHORT = frozenset({"key", "pwd", "pass", "auth", "sig"})
_PASSWORD_WORDS = frozenset({"password", "passwd", "passphrase", "pwd", "pass"})
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_ENV_NAME = re.compile(r"[ \t]*(?:export[ \t]+)?[A-Z][A-Z0-9_]*")
# A backslash escape (\n, \" inside a JSON string) ends an unquoted value.
_TOKEN = re.compile(r"<[^<>\s]*>|(?:[^\s\"'`<>\\]|\\(?![nrt\"'\\]))+")
_NEXT_PAIR = re.compile(r"[;&,](?=[A-Za-z_][\w.-]*=)")
_TRAILING = re.compile(r"[.,;:!)\]}>]+$")
_BRACED = re.compile(r"\{[^{}\n\"':]*\}")  # Password={a;b}, not {"type": "string"}
_QUOTE_PREFIX = re.compile(r"(?:[fbrFBR]{1,2})?(\\?[\"'`])")


def _strength(keyword: str, name: str) -> str:
    lowered = keyword.lower()
    if lowered in _PASSWORD_WORDS:
        return PASSWORD
    if lowered == "key":
        before = name[: len(name) - len(keyword)].lower().replace("_", "").replace("-", "")
        return STRONG if _KEY_PREFIX.search(before) else WEAK
    if lowered in {"auth", "sig"}:
        return WEAK
    return STRONG


def _boundary_ok(text: str, start: int, keyword: str) -> bool:
    """A short keyword must begin a name part: ``db_pass``, ``x-api-key``, ``AccountKey``."""
    if keyword.lower() not in _SHORT or start == 0:
        return True
    before = text[start - 1]
    if not before.isalnum():
        return True
    return (before.islower() or before.isdigit()) and keyword[0].isupper()


def _name_start(text: str, end: int) -> int:
    start = end
    while start > 0 and text[start - 1] in _NAME_CHARS:
        if text[start - 1] == "n" and text[start - 2 : start - 1] == "\\":
            break  # an escaped newline inside a JSON string ends the name
        start -= 1
    return start


def _quoted_end(text: str, start: int, quote: str) -> int | None:
    """Where the value opened at ``start`` by ``quote`` ends (``None``: not on this line)."""
    line_end = text.find("\n", start)
    line_end = len(text) if line_end < 0 else line_end
    if len(quote) == 2:  # \" inside a JSON string: the value ends at the next \"
        at = text.find(quote, start, line_end)
        return at if at >= 0 else None
    i = start
    while i < line_end:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == quote:
            return i
        i += 1
    return None


def _line_start(text: str, at: int) -> int:
    """Start of the line holding ``at``; an escaped ``\\n`` (inside a JSON string) counts."""
    return max(text.rfind("\n", 0, at) + 1, text.rfind("\\n", 0, at) + 2)


def _line_end(text: str, start: int) -> int:
    """End of the line from ``start``: a newline, an escaped ``\\n`` or an escaped quote."""
    ends = [text.find(stop, start) for stop in ("\n", "\\n", '\\"')]
    return min((e for e in ends if e >= 0), default=len(text))


def _value_span(
    text: str, start: int, sep: str, sep_start: int, name_start: int
) -> tuple[int, int, bool] | None:
    """Where the value of an assignment is: ``(start, end, quoted)``."""
    quote = _QUOTE_PREFIX.match(text, start)
    if quote is not None:
        opened = quote.end()
        end = _quoted_end(text, opened, quote.group(1))
        if end is not None:
            return opened, end, True
        start = opened  # no closing quote (a cut-off text): the value is the token after it
    token = _TOKEN.match(text, start)
    if token is None:
        return None
    value = token.group(0)
    if value[0] in "[(":
        return None  # a list, a tuple, a call: a structure, not a literal
    if value[0] == "{":
        braced = _BRACED.match(text, start)
        if braced is None:
            return None  # a JSON object ({"type": "string"}), not a value
        return start + 1, braced.end() - 1, True
    line_start = _line_start(text, name_start)
    if sep == "=" and _ENV_NAME.fullmatch(text, line_start, sep_start):
        # A .env line: the value is the rest of the line, before a " #" comment.
        end = _line_end(text, start)
        quote_at = text.find('"', start, end)
        end = quote_at if quote_at >= 0 else end
        comment = text.find(" #", start, end)
        end = comment if comment >= 0 else end
        return start, len(text[start:end].rstrip()) + start, False
    before = text[:name_start].rstrip()
    if sep.strip() == "=" and before.endswith(";"):
        # In a connection string the value runs to the next ";".
        end = _line_end(text, start)
        for stop in (";", '"', "'"):
            at = text.find(stop, start, end)
            if at >= 0:
                end = at
        return start, end, False
    if value.startswith("<") and value.endswith(">"):
        return start, start + len(value), False  # <your-password>: a placeholder
    cut = _NEXT_PAIR.search(value)
    if cut is not None:
        value = value[: cut.start()]
    value = _TRAILING.sub("", value)
    if not value:
        return None
    return start, start + len(value), False


def scrub_assignments(text: str) -> str:
    """Redact the value of every secret-named assignment in ``text``."""
    lowered = text.lower()
    keywords = _KEYWORD if len(lowered) == len(text) else _KEYWORD_ANY_CASE
    haystack = lowered if keywords is _KEYWORD else text
    out: list[str] = []
    pos = 0  # end of the text already copied to out
    seen = 0  # end of the last value looked at: a value is never also a name
    for m in keywords.finditer(haystack):
        kw_start, kw_end = m.span()
        if kw_start < seen:
            continue
        keyword = text[kw_start:kw_end]
        if not _boundary_ok(text, kw_start, keyword):
            continue
        sep_match = _SEP.match(text, kw_end)
        if sep_match is None:
            continue
        sep = sep_match.group(0)
        name_start = _name_start(text, kw_start)
        if not sep.strip() and not text.startswith("-", name_start):
            continue  # "--password value" only: "the password is" is prose
        span = _value_span(text, sep_match.end(), sep, kw_end, name_start)
        if span is None:
            continue
        start, end, quoted = span
        seen = end
        value = text[start:end]
        if keyword.lower() == "pwd" and value.startswith(("/", "~")):
            continue  # PWD=/home/user is a directory
        strength = _strength(keyword, text[name_start:kw_end])
        if not _is_secret(value, strength, quoted=quoted, keyword=keyword):
            continue
        out.append(text[pos:start])
        out.append(mark("password" if strength == PASSWORD else "secret"))
        pos = end
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


# ---------------------------------------------------------------------------- other contexts

# scheme://user:password@host -- the password may hold "@", ":" and "/" (the last "@"
# that is followed by a host ends it); quotes and spaces end the URL.
_URL = re.compile(
    r"(?<=[A-Za-z0-9])://(?P<user>[^\s:/@\"'<>`]*):"
    r"(?P<password>[^\s\"'<>`]+)@"
    r"(?=(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*)"
    r"(?::\d{1,5})?(?:[/?#\s\"'<>),;\]}`]|$))"
)
_PORT_AND_PATH = re.compile(r"\d{1,5}(?:[/?#].*)?")


def _url(m: re.Match[str]) -> str:
    password = m.group("password")
    if password.startswith("[REDACTED") or _PORT_AND_PATH.fullmatch(password):
        return m.group(0)  # already redacted, or host:port/path@... (no credentials)
    head = m.group(0)[: m.start("password") - m.start()]
    return f"{head}{mark('password')}@"


_AUTH_HEADER = re.compile(
    r"(?i)(?P<head>\b(?:proxy-)?authorization\\?[\"']?[ \t]*[:=][ \t]*[fF]?\\?[\"']?[ \t]*"
    r"(?:(?:bearer|basic|token|digest|apikey|api-key|sso-key|negotiate|ntlm|sharedaccesssignature)"
    r"[ \t]+)?)(?P<value>[^\s\"'\\`,;]+)"
)
_BARE_SCHEME = re.compile(
    r"(?i)\b(?P<head>(?:bearer|basic)[ \t]+)(?P<value>[A-Za-z0-9._~+/-]{16,}=*)"
)


def _auth_header(m: re.Match[str]) -> str:
    value = m.group("value")
    if len(value) < 8 or _placeholder(value):
        return m.group(0)
    return m.group("head") + mark("authorization")


def _bare_scheme(m: re.Match[str]) -> str:
    value = m.group("value")
    if not random_enough(value):
        return m.group(0)  # "basic internationalization"
    return m.group("head") + mark("authorization")


# curl -u user:password, --user=user:password (not -u 1000:1000, a uid:gid)
_CURL_USER = re.compile(
    r"(?<!\S)(?:-u|--user|--proxy-user)(?:[ \t]+|=)(?P<q>\\?[\"']?)(?P<user>[^\s:\"'@]+):"
    r"(?P<password>[^\s\"']+)(?P=q)"
)


def _curl_user(m: re.Match[str]) -> str:
    password = m.group("password")
    if (password.isdigit() and m.group("user").isdigit()) or _placeholder(password):
        return m.group(0)
    text, at = m.string, m.start()
    line = text[text.rfind("\n", 0, at) + 1 : _line_end(text, at)]
    if m.group(0).startswith("-u") and "curl" not in line and "://" not in line:
        return m.group(0)  # python -u app.py:main, sort -u a:b: not a credential
    head = m.group(0)[: m.start("password") - m.start()]
    return head + mark("password") + m.group("q")


# requests' auth=("user", "password"), HTTPBasicAuth("user", "password")
_AUTH_PAIR = re.compile(
    r"(?i)(?P<head>(?:\bauth[ \t]*=[ \t]*|(?:Basic|Digest)Auth)[ \t]*\([ \t]*"
    r"(?P<q1>\\?[\"'])[^\"'\n\\]*(?P=q1)[ \t]*,[ \t]*(?P<q2>\\?[\"']))(?P<value>[^\"'\n\\]+)(?P=q2)"
)


def _auth_pair(m: re.Match[str]) -> str:
    if _placeholder(m.group("value")):
        return m.group(0)
    return m.group("head") + mark("password") + m.group("q2")


_XML = re.compile(
    r"(?i)<(?P<tag>[\w:.-]*?(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|"
    r"private[_-]?key|account[_-]?key|client[_-]?secret|credentials?))>"
    r"(?P<value>[^<\n]+)</(?P=tag)>"
)


def _xml(m: re.Match[str]) -> str:
    value = m.group("value")
    if _placeholder(value.strip()):
        return m.group(0)
    return m.group(0)[: m.start("value") - m.start()] + mark("secret") + f"</{m.group('tag')}>"


_NETRC = re.compile(
    r"(?m)\b(?P<head>machine[ \t]+\S+[ \t]+login[ \t]+\S+[ \t]+password[ \t]+)(?P<value>\S+)"
)


_MARK = re.compile(r"\[REDACTED:\w+\]")


def _between_marks(rule: Callable[[str], str], text: str) -> str:
    """Apply ``rule`` to the text between redaction marks: a mark is opaque (its ``:`` is
    not a separator, its ``]`` not punctuation), so scrubbing scrubbed text changes nothing."""
    if "[REDACTED:" not in text:
        return rule(text)
    pieces: list[str] = []
    last = 0
    for m in _MARK.finditer(text):
        pieces.append(rule(text[last : m.start()]))
        pieces.append(m.group(0))
        last = m.end()
    pieces.append(rule(text[last:]))
    return "".join(pieces)


def scrub_context(text: str) -> str:
    """``text`` with every context-revealed credential redacted (see the module docstring)."""
    if "://" in text:
        text = _between_marks(lambda t: _URL.sub(_url, t), text)
    lowered = text.lower()
    if "authorization" in lowered:
        text = _between_marks(lambda t: _AUTH_HEADER.sub(_auth_header, t), text)
    if "bearer" in lowered or "basic" in lowered:
        text = _between_marks(lambda t: _BARE_SCHEME.sub(_bare_scheme, t), text)
    if "-u" in text or "--user" in text or "--proxy-user" in text:
        text = _between_marks(lambda t: _CURL_USER.sub(_curl_user, t), text)
    if "auth" in lowered:
        text = _between_marks(lambda t: _AUTH_PAIR.sub(_auth_pair, t), text)
    if "</" in text:
        text = _between_marks(lambda t: _XML.sub(_xml, t), text)
    if "machine" in text:
        text = _between_marks(
            lambda t: _NETRC.sub(lambda m: m.group("head") + mark("password"), t), text
        )
    return _between_marks(scrub_assignments, text)
