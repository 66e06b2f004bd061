"""The wheel and the sdist a user gets, and the wheel installed alone in a fresh venv.

``python -m build`` (the ``dev`` extra's ``build``, with ``--no-isolation`` when the
``hatchling`` backend is installed, so no network is needed) builds the sdist and the
wheel from it into a temporary folder. Their contents and metadata are checked against
pyproject.toml and, in a git checkout, against the tracked files.

Then the wheel goes into a new venv made without the system site-packages and without
pip (``python -m venv --without-pip``), installed by this interpreter's pip
(``pip --python``) with only its runtime dependencies, from the package index pip is
configured with. When that index cannot be reached the venv tests skip with one line.
In that venv (``tests/_fresh_venv_child.py``, network cut, warnings as errors,
``TIKTOKEN_CACHE_DIR`` empty, ``-I`` so nothing from this checkout is on the path):
``import agentmem``, a Memory session round trip, token counting with no tokenizer
extra, every module under ``agentmem/`` importing or naming its extra, and the CLI.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHILD = Path(__file__).resolve().parent / "_fresh_venv_child.py"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]
VERSION = re.search(  # where [tool.hatch.version] reads it
    r'^__version__ = "([^"]+)"$', (ROOT / "agentmem" / "__init__.py").read_text(), re.M
)
assert VERSION is not None
NAME_VERSION = f"{PROJECT['name']}-{VERSION.group(1)}"
EXTRA_ERROR = re.compile(r"pip install 'agentmem\[([a-z0-9-]+)\]'")

# What pip prints when it cannot reach the index (or the index lacks what is asked).
OFFLINE_SIGNS = (
    "No matching distribution found",
    "Could not find a version that satisfies",
    "NewConnectionError",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "Max retries exceeded",
)
# Never in the sdist: environments, caches, the demo's output, build output, probes.
NOT_IN_SDIST = {
    ".venv",
    ".agentmem",
    "agentmem-quickstart",
    "__pycache__",
    ".hypothesis",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".git",
    "dist",
    "build",
    "probe",
}
SDIST_NEEDS = (
    "pyproject.toml",
    "README.md",
    "CHANGELOG.md",
    "CONTRIBUTING.md",
    "LICENSE",
    ".ci/run",
    "scripts/pg_test_cluster.py",
    "agentmem/__init__.py",
    "agentmem/py.typed",
    "tests/conftest.py",
    "tests/test_packaging.py",
    "examples/quickstart.py",
    "docs/index.md",
    "docs/install.md",
    "bench/bench_import.py",
)
SDIST_TRACKED_DIRS = ("agentmem/", "tests/", "examples/", "docs/", "bench/", "scripts/")


def _clean_env(**extra: str) -> dict[str, str]:
    """This environment without anything that would put this checkout on a path."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV"}
        and not k.startswith(("AGENTMEM_", "TIKTOKEN_", "DATA_GYM_"))
    }
    env.update(extra)
    return env


def _run(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)


def _offline(output: str) -> bool:
    return any(sign in output for sign in OFFLINE_SIGNS)


@dataclass(frozen=True)
class Dist:
    wheel: Path
    sdist: Path


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    if importlib.util.find_spec("build") is None:
        pytest.skip("`build` is not installed (the dev extra: pip install -e '.[dev]')")
    out = tmp_path_factory.mktemp("dist")
    isolation = ["--no-isolation"] if importlib.util.find_spec("hatchling") else []
    done = _run([sys.executable, "-m", "build", *isolation, "--outdir", str(out), str(ROOT)])
    output = done.stdout + done.stderr
    if done.returncode != 0 and not isolation and _offline(output):
        pytest.skip("hatchling is not installed and the package index is unreachable")
    assert done.returncode == 0, output
    wheels = list(out.glob("*.whl"))
    sdists = list(out.glob("*.tar.gz"))
    assert [p.name for p in wheels] == [f"{NAME_VERSION}-py3-none-any.whl"]
    assert [p.name for p in sdists] == [f"{NAME_VERSION}.tar.gz"]
    return Dist(wheels[0], sdists[0])


def _tracked(prefixes: tuple[str, ...]) -> set[str] | None:
    """Files git tracks under ``prefixes``, or None outside a git checkout."""
    if shutil.which("git") is None:
        return None
    done = _run(["git", "-C", str(ROOT), "ls-files", "-z", *prefixes])
    if done.returncode != 0:
        return None
    return {p for p in done.stdout.split("\0") if p and (ROOT / p).is_file()}


def test_wheel_holds_the_package_and_nothing_else(dist: Dist) -> None:
    names = set(zipfile.ZipFile(dist.wheel).namelist())
    info = f"{NAME_VERSION}.dist-info/"
    package = {n for n in names if not n.startswith(info)}
    # Every file of the package's source folder (code and data: py.typed, anything
    # bundled) is in the wheel, and nothing from outside it.
    source = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "agentmem").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    assert package == source
    assert "agentmem/py.typed" in package
    assert {f"{info}licenses/LICENSE", f"{info}METADATA", f"{info}RECORD"} <= names


def test_wheel_metadata_matches_pyproject(dist: Dist) -> None:
    with zipfile.ZipFile(dist.wheel) as wheel:
        meta = Parser().parsestr(wheel.read(f"{NAME_VERSION}.dist-info/METADATA").decode())
        entry_points = (
            wheel.read(f"{NAME_VERSION}.dist-info/entry_points.txt").decode()
            if f"{NAME_VERSION}.dist-info/entry_points.txt" in wheel.namelist()
            else ""
        )
    assert meta["Name"] == PROJECT["name"]
    assert meta["Requires-Python"] == PROJECT["requires-python"]
    assert meta["License-Expression"] == PROJECT["license"]
    assert meta.get_all("License-File") == ["LICENSE"]
    requires = meta.get_all("Requires-Dist") or []
    runtime = sorted(r for r in requires if "extra ==" not in r)
    assert runtime == sorted(PROJECT["dependencies"])
    assert sorted(meta.get_all("Provides-Extra") or []) == sorted(PROJECT["optional-dependencies"])
    assert set(meta.get_all("Classifier") or []) == set(PROJECT["classifiers"])
    for script, target in PROJECT.get("scripts", {}).items():
        assert f"{script} = {target}" in entry_points


def test_sdist_holds_the_sources_tests_and_docs_and_no_caches(dist: Dist) -> None:
    with tarfile.open(dist.sdist) as sdist:
        members = [m.name for m in sdist.getmembers() if m.isfile()]
    prefix = f"{NAME_VERSION}/"
    assert all(m.startswith(prefix) for m in members)
    files = {m.removeprefix(prefix) for m in members}
    for needed in SDIST_NEEDS:
        assert needed in files, needed
    for name in files:
        assert not NOT_IN_SDIST & set(Path(name).parts), name
        assert not name.endswith((".pyc", ".pyo")), name
    tracked = _tracked(SDIST_TRACKED_DIRS)
    if tracked is not None:  # every tracked source, test, example, doc and bench file
        assert tracked <= files, sorted(tracked - files)


def test_import_agentmem_loads_no_part_before_it_is_used() -> None:
    # Public names are imported on first use (agentmem/__init__.py, PEP 562), so
    # ``import agentmem`` loads neither the facade nor pydantic, tiktoken, filelock,
    # sqlite3 or asyncio; docs/install.md gives the import time this buys.
    heavy = ("pydantic", "tiktoken", "filelock", "sqlite3", "asyncio")
    facade = ("agentmem.memory", "agentmem.context", "agentmem.session_store")
    loaded = f"sorted(m for m in sys.modules if m.split('.')[0] in {heavy} or m in {facade})"
    code = (
        f"import sys, agentmem\nprint({loaded})\nagentmem.Memory\nprint({loaded})\n"
        "print(agentmem.tokens.__name__, hasattr(agentmem, 'no_such_part'))"
    )
    done = _run([sys.executable, "-c", code], cwd=ROOT)
    assert done.returncode == 0, done.stderr
    before, after, submodule = done.stdout.splitlines()
    assert before == "[]"
    assert submodule == "agentmem.tokens False"  # agentmem.<part> works as it always did
    for name in ("pydantic", "filelock", "sqlite3", *facade):  # what the facade needs
        assert repr(name) in after, name


@pytest.fixture(scope="module")
def venv(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel and its runtime dependencies only; its python."""
    where = tmp_path_factory.mktemp("fresh-venv")
    done = _run([sys.executable, "-m", "venv", "--without-pip", str(where / "venv")])
    assert done.returncode == 0, done.stderr
    python = where / "venv" / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", str(python), "install"]
    done = _run([*install, "--no-compile", "--quiet", str(dist.wheel)], env=_clean_env())
    if done.returncode != 0 and _offline(done.stdout + done.stderr):
        pytest.skip("package index unreachable: cannot install the wheel's runtime dependencies")
    assert done.returncode == 0, done.stdout + done.stderr
    return python


def _child(python: Path, mode: str, cwd: Path) -> dict[str, Any]:
    cache = cwd / "tiktoken-cache"
    cache.mkdir()
    done = _run(
        [str(python), "-I", "-W", "error", str(CHILD), mode],
        cwd=cwd,
        env=_clean_env(TIKTOKEN_CACHE_DIR=str(cache)),
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # every log record goes to the child's recorder, no print
    out: dict[str, Any] = json.loads(done.stdout)
    assert out["connections"] == []  # nothing was downloaded (or tried)
    return out


@pytest.mark.slow
def test_the_wheel_works_alone_offline(venv: Path, tmp_path: Path) -> None:
    import agentmem

    out = _child(venv, "session", tmp_path)
    assert Path(out["file"]).is_relative_to(venv.parent.parent)  # the wheel, not this checkout
    assert out["version"] == agentmem.__version__
    assert out["all_resolved"] == sorted(agentmem.__all__)
    assert out["round_trip"] is True
    assert out["context_roles"] == ["system", "user", "assistant"]
    assert [True, "Please remember the word pelican."] in out["recall"]
    # Without a tokenizer extra nothing is downloaded: a gpt-4o session counts with a
    # LearningEstimator on characters, and says so in ONE warning per process
    # (docs/install.md, docs/tokens.md) ...
    (warning,) = out["records_during_session"]
    assert warning["logger"] == "agentmem.tokens" and warning["level"] == "WARNING"
    assert "'o200k_base' is not available offline" in warning["message"]
    assert out["counter_for_model"] == "LearningEstimator"
    # ... not again: the resume, recall and two TiktokenCounters (heuristic) are silent.
    assert [name for name, _ in out["tiktoken_counters"]] == ["heuristic", "heuristic"]
    assert out["records_later"] == []
    # Features reached at call time name their extra.
    assert out["postgres"]["type"] == "agentmem.errors.ConfigurationError"
    assert "pip install 'agentmem[postgres]'" in out["postgres"]["message"]
    for name in ("wordllama", "minilm"):
        assert out["embedders"][name]["type"] == "agentmem.errors.ConfigurationError"
        assert f"pip install 'agentmem[{name}]'" in out["embedders"][name]["message"]


@pytest.mark.slow
def test_every_module_imports_or_names_its_extra(venv: Path, tmp_path: Path) -> None:
    out = _child(venv, "modules", tmp_path)
    assert out["walk_errors"] == []
    modules: dict[str, dict[str, str]] = out["modules"]
    on_disk = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for p in (ROOT / "agentmem").rglob("*.py")
    } - {"agentmem", "agentmem.__main__"}  # __main__ runs the CLI: test_the_cli_runs...
    assert set(modules) == on_disk  # the walk saw every module
    failures = {name: r for name, r in modules.items() if r["outcome"] == "error"}
    assert failures == {}
    extras = set(PROJECT["optional-dependencies"])
    missing = {}
    for name, result in modules.items():
        if result["outcome"] == "missing-extra":
            assert result["type"] == "agentmem.errors.ConfigurationError"
            found = EXTRA_ERROR.search(result["message"])
            assert found, result["message"]
            assert found.group(1) in extras, result["message"]
            missing[name] = found.group(1)
    # The runtime dependencies install none of the frameworks or psycopg, so these
    # (and only modules like these) must have said which extra to install.
    assert missing == {
        "agentmem._storage.pg_documents": "postgres",
        "agentmem.doctor._postgres": "postgres",
        "agentmem.integrations.anthropic_memory": "anthropic",
        "agentmem.integrations.langchain": "langchain",
        "agentmem.integrations.langgraph": "langgraph",
        "agentmem.integrations.openai_agents": "openai-agents",
    }


@pytest.mark.slow
def test_the_cli_runs_from_the_wheel(venv: Path, tmp_path: Path) -> None:
    if not (ROOT / "agentmem" / "__main__.py").exists():
        pytest.skip("no agentmem/__main__.py in this tree: the CLI is not built yet")
    env = _clean_env()
    done = _run([str(venv), "-I", "-m", "agentmem", "--help"], cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout and "doctor" in done.stdout
    for script in PROJECT.get("scripts", {}):
        done = _run([str(venv.parent / script), "--help"], cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("usage:")
