"""Files a shell command writes, for summaries of agents that edit through a shell.

Agents that have no file-editing tool (mini-swe-agent, SWE-agent's bash,
Codex's ``shell``, Claude Code's ``Bash``) change files with ``sed -i``,
``cat > f <<EOF``, ``tee``, redirections, ``mv``, ``cp``, ``rm`` and ``git mv``.
:func:`written_files` reads one command string and returns the paths it
writes, creates, moves or deletes, in order of appearance.

It is a heuristic reader, not a shell: it never raises, never executes
anything, and costs O(length of the command). It understands quoting,
heredocs (their bodies are data, not commands), ``&&``/``||``/``;``/``|``
chains and line continuations, ``bash -c '...'``, fd redirections
(``2>&1``, ``>/dev/null`` write no file), and ignores paths built from
variables, command substitutions or globs, which it cannot resolve.
Python run from the shell counts only when it opens a literal path for
writing (``python - <<'EOF'`` that only reads writes nothing).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

__all__ = ["commands_in_call", "commands_in_text", "written_files"]

# Keys under which tool-call arguments carry a shell command; the generic ones only
# when the tool's name says it is a shell.
COMMAND_KEYS: Final = ("command", "cmd", "commands")
SHELL_ONLY_KEYS: Final = ("script", "input")
MAX_COMMAND_CHARS: Final = 20_000
"""Longer commands are read up to here (heredoc bodies, which are data, do not count)."""
# Tool names that take a shell command as their whole argument.
SHELL_TOOL_WORDS: Final = ("bash", "shell", "sh", "terminal", "exec", "run", "command", "cmd")
# Fenced code blocks in assistant text that hold shell commands (mini-swe-agent style).
_FENCE_RE: Final = re.compile(r"```[ \t]*([\w-]*)[^\n]*\n(.*?)```", re.S)
_SHELL_FENCES: Final = frozenset({"bash", "sh", "shell", "zsh", "console", "terminal"})
_HEREDOC_RE: Final = re.compile(r"<<(-?)[ \t]*(['\"]?)([A-Za-z_][\w.-]*)\2")
# A file descriptor number glued to a redirection ("2>", "2>>", "1>&2"): dropped before
# tokenizing so the number does not read as an argument.
_FD_RE: Final = re.compile(r"(?:(?<=\s)|^)\d+(?=>)", re.M)
_SEPARATORS: Final = frozenset({";", "&&", "||", "|", "&", "|&", "(", ")", ";;"})
_WRAPPERS: Final = frozenset(
    {"sudo", "env", "time", "nohup", "command", "exec", "builtin", "nice", "stdbuf", "xargs"}
)
_SHELLS: Final = frozenset({"bash", "sh", "zsh", "dash"})
_ASSIGNMENT_RE: Final = re.compile(r"^[A-Za-z_]\w*=")
_MAX_DEPTH: Final = 3
# Python run from the shell (python -c, python - <<EOF) writing a literal path.
_PYTHON_RE: Final = re.compile(r"\bpython[\d.]*\b")
_PY_WRITE_RE: Final = re.compile(
    r"""open\(\s*[rRbBfFuU]?(['"])([^'"\n]{1,300})\1\s*,\s*[rRbBfFuU]?(['"])[^'"\n]*[wax]"""
    r"""|Path\(\s*(['"])([^'"\n]{1,300})\4\s*\)\s*\.write_(?:text|bytes)\("""
)


# `patch` or `git apply` with the diff in the same command (a heredoc, or a file the
# command wrote just before): the files are the diff's targets.
_APPLY_RE: Final = re.compile(r"(?:^|[\s;&|(])(?:patch|git\s+apply)\b", re.M)
_DIFF_TARGET_RE: Final = re.compile(r"^--- (\S+)[^\n]*\n\+\+\+ (\S+)", re.M)


def _diff_targets(text: str) -> Iterator[str]:
    """Paths a unified diff in ``text`` changes (``b/`` and ``a/`` prefixes dropped)."""
    for match in _DIFF_TARGET_RE.finditer(text):
        old, new = match.group(1), match.group(2)
        path = old if new == "/dev/null" else new
        if path.startswith(("a/", "b/")):
            path = path[2:]
        if _usable(path):
            yield path


def written_files(script: str) -> list[str]:
    """Paths ``script`` writes, creates, moves or deletes, in order (duplicates kept).

    Python code the script runs (``python -c '...'``, ``python - <<'EOF'``)
    counts when it opens a literal path for writing or calls
    ``Path('...').write_text``; reading code writes nothing. ``patch`` and
    ``git apply`` count the targets of a unified diff the same command holds.
    """
    found = list(_written(script, 0))
    head = script[:MAX_COMMAND_CHARS]
    if "+++ " in head and _APPLY_RE.search(head):
        found.extend(_diff_targets(head))
    if ("open(" in head or ".write_" in head) and _PYTHON_RE.search(head):
        for match in _PY_WRITE_RE.finditer(head):
            path = match.group(2) or match.group(5)
            if path and _usable(path):
                found.append(path)
    return found


def commands_in_text(text: str) -> list[str]:
    """Shell commands in fenced ```bash (or sh, shell, console) blocks of ``text``."""
    if "```" not in text:
        return []
    out = []
    for match in _FENCE_RE.finditer(text):
        label = match.group(1).lower()
        if label in _SHELL_FENCES or "bash" in label:
            out.append(match.group(2))
    return out


def commands_in_call(name: str, arguments: Any, args: Mapping[str, Any]) -> list[str]:
    """Shell commands a tool call runs.

    Args:
        name: The tool's name.
        arguments: The raw ``arguments`` (a JSON string, usually).
        args: ``arguments`` decoded to an object (``{}`` when it is not one).
    """
    found: list[str] = []
    lowered = name.lower()
    shell = any(word in lowered for word in SHELL_TOOL_WORDS)
    for key in COMMAND_KEYS + (SHELL_ONLY_KEYS if shell else ()):
        value = args.get(key)
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            # Codex-style argv: ["bash", "-lc", "script"], or a list of commands.
            found.append(shlex.join(value) if key != "commands" else "\n".join(value))
    if found or args:
        return found
    # A shell tool whose arguments are the command itself (a plain or JSON string).
    if isinstance(arguments, str) and shell:
        text = arguments.strip()
        if text.startswith('"') and text.endswith('"'):
            try:
                decoded = json.loads(text)
            except ValueError:
                decoded = None
            if isinstance(decoded, str):
                text = decoded
        if text and not text.startswith(("{", "[")):
            return [text]
    return []


# --------------------------------------------------------------------------- parsing


def _strip_heredocs(script: str) -> str:
    """``script`` without heredoc bodies and with line continuations joined."""
    script = script.replace("\\\r\n", " ").replace("\\\n", " ")
    if "<<" not in script:
        return script
    out: list[str] = []
    pending: list[tuple[str, bool]] = []  # (delimiter, strip leading tabs)
    for line in script.split("\n"):
        if pending:
            delimiter, strip = pending[0]
            if (line.lstrip("\t") if strip else line).rstrip("\r") == delimiter:
                pending.pop(0)
            continue
        out.append(line)
        for match in _HEREDOC_RE.finditer(line):
            if not line[match.end() :].startswith("<"):  # "<<<" is a here-string
                pending.append((match.group(3), match.group(1) == "-"))
    return "\n".join(out)


def _tokens(script: str) -> list[str]:
    text = _FD_RE.sub("", _strip_heredocs(script)[:MAX_COMMAND_CHARS])
    lexer = shlex.shlex(text, posix=True, punctuation_chars="();<>|&\n")
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: fall back to plain words
        return text.replace("\n", " ; ").split()


def _simple_commands(tokens: Sequence[str]) -> Iterator[list[str]]:
    """Token lists of the simple commands, split at separators and line breaks."""
    current: list[str] = []
    comment = False
    for token in tokens:
        if token in _SEPARATORS or token.startswith("\n"):
            if current:
                yield current
            current, comment = [], False
        elif comment:
            continue
        elif token.startswith("#") and not current:
            comment = True
        else:
            current.append(token)
    if current:
        yield current


def _usable(path: str) -> bool:
    """A literal path worth naming: not a device, variable, substitution or glob."""
    if not path or path == "-" or path.startswith(("/dev/", "/proc/", "&", "-")):
        return False
    return not any(c in path for c in "$`*?\n") and len(path) <= 500


def _written(script: str, depth: int) -> Iterator[str]:
    for words in _simple_commands(_tokens(script)):
        # Redirections first: "> f", ">> f", "&> f", ">| f"; "<", "<<", "<<<" read.
        argv: list[str] = []
        i = 0
        while i < len(words):
            word = words[i]
            if word and set(word) <= {">", "&", "|"} and ">" in word:
                target = words[i + 1] if i + 1 < len(words) else ""
                if word.endswith("&") and target.isdigit():
                    pass  # ">&2": duplicate a descriptor, no file
                elif _usable(target):
                    yield target
                i += 2
            elif word and set(word) <= {"<"}:
                i += 2
            else:
                argv.append(word)
                i += 1
        yield from _argv_writes(argv, depth)


def _argv_writes(argv: list[str], depth: int) -> Iterator[str]:
    while argv and (argv[0] in _WRAPPERS or _ASSIGNMENT_RE.match(argv[0])):
        argv = argv[1:]
        while argv and argv[0].startswith("-") and argv[0] != "--":
            argv = argv[1:]  # options of the wrapper (sudo -u ..., env -i)
    if not argv:
        return
    program = argv[0].rsplit("/", 1)[-1]
    args = argv[1:]
    if program in _SHELLS:
        if depth < _MAX_DEPTH:
            for k, arg in enumerate(args[:-1]):
                if arg.startswith("-") and "c" in arg and not arg.startswith("--"):
                    yield from _written(args[k + 1], depth + 1)
                    break
        return
    if program == "git" and args:
        # git -C dir mv a b
        while args and args[0] in ("-C", "-c") and len(args) > 1:
            args = args[2:]
        if args and args[0] in ("mv", "rm"):
            yield from _operands(args[1:])
        elif args and args[0] in ("checkout", "restore") and "--" in args:
            yield from _operands(args[args.index("--") + 1 :])
        return
    if program in ("mv", "rm", "touch", "tee", "unlink", "shred", "truncate"):
        yield from _operands(args, skip_values=("-s", "--size") if program == "truncate" else ())
    elif program in ("cp", "install", "ln"):
        operands = list(_operands(args, skip_values=("-t", "-m", "-o", "-g", "-S")))
        if len(operands) >= 2:
            yield operands[-1]
    elif program in ("sed", "gsed"):
        yield from _sed_files(args)
    elif program == "perl":
        if any(a.startswith("-") and "i" in a[1:].split("e")[0] for a in args):
            yield from _script_files(args, script_flags=("-e", "-E"), value_flags=("-M", "-I"))
    elif program == "patch":
        return  # reads the diff from stdin: see _diff_targets
    elif program == "dd":
        for arg in args:
            if arg.startswith("of=") and _usable(arg[3:]):
                yield arg[3:]


def _operands(args: Sequence[str], skip_values: Sequence[str] = ()) -> Iterator[str]:
    """Non-option arguments (everything after ``--`` is an operand)."""
    options = True
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if options and arg == "--":
            options = False
        elif options and arg.startswith("-") and arg != "-":
            skip = arg in skip_values
        elif _usable(arg):
            yield arg


def _sed_files(args: list[str]) -> Iterator[str]:
    in_place = False
    rest: list[str] = []
    k = 0
    while k < len(args):
        arg = args[k]
        if arg in ("-i", "--in-place") or (arg.startswith("-i") and not arg.startswith("--")):
            in_place = True
            # BSD sed: "-i ''" or "-i .bak" takes the suffix as its own argument.
            if arg == "-i" and k + 1 < len(args) and (args[k + 1] == "" or args[k + 1] == ".bak"):
                k += 1
        elif arg.startswith("--in-place="):
            in_place = True
        elif arg.startswith("-") and not arg.startswith("--") and "i" in arg[1:]:
            in_place = True  # "-ni", "-Ei"
            if (flags := arg.replace("i", "")) != "-":
                rest.append(flags)
        else:
            rest.append(arg)
        k += 1
    if in_place:
        yield from _script_files(rest, script_flags=("-e", "--expression"), value_flags=("-f",))


def _script_files(
    args: Sequence[str], *, script_flags: Sequence[str], value_flags: Sequence[str]
) -> Iterator[str]:
    """File operands of ``sed``/``perl``: the first operand is the script unless -e gave one."""
    has_script = any(a in script_flags or a in value_flags for a in args)
    skip = False
    operands: list[str] = []
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in script_flags or arg in value_flags:
            skip = True
        elif arg.startswith("-") and arg != "-":
            if arg[:2] in ("-e", "-E") and len(arg) > 2 and arg[1] in "eE":
                has_script = True
            continue
        else:
            operands.append(arg)
    if not has_script and operands:
        operands = operands[1:]
    yield from (a for a in operands if _usable(a))
