"""The README's two commands exist, and CI runs the README's test command verbatim."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _sh_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [b.strip() for b in re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL)]


def test_readme_has_demo_and_test_commands() -> None:
    blocks = _sh_blocks()
    assert any("examples/quickstart.py" in b for b in blocks)
    assert any("pytest" in b for b in blocks)


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    test_command = next(b for b in _sh_blocks() if "pytest" in b)
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test_command in ci_lines
