"""Secret scrubbing: realistic keys are redacted; hashes, UUIDs and base64 images are not."""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import scaled

import agentmem
from agentmem.errors import InvalidArgumentError
from agentmem.scrub import scrub_near, scrub_secrets

# Realistic shapes, assembled at run time so no scanner mistakes this file for a leak.
SECRETS = {
    "openai_key": "sk-proj-" + "Xy7" * 8 + "T3BlbkFJ" + "aB9" * 8,
    "openai_legacy": "sk-" + "4fQ2" * 12,
    "anthropic_key": "sk-ant-api03-" + "Q" * 40 + "-" + "w9" * 20 + "AA",
    "github_token": "ghp_" + "16C7e42F292c6912E7710c838347Ae178B4a",
    "github_pat": "github_pat_" + "11ABCDEFG0" + "x" * 12 + "_" + "Y" * 59,
    "slack_token": "xoxb-" + "2630894512-" + "1234567890123-" + "AbCdEfGhIjKlMnOpQrStUvWx",
    "slack_webhook": "https://hooks.slack.com/services/" + "T00000000/B00000000/" + "X" * 24,
    "stripe_key": "sk_" + "live_" + "51H8s" + "q" * 30,
    "google_api_key": "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    "aws_access_key": "AKIA" + "IOSFODNN7EXAMPLE",
    "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9."
    + "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
    + "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
}


@pytest.mark.parametrize("name", sorted(SECRETS))
@pytest.mark.parametrize(
    "template",
    ["{s}", "key: {s}", 'export X="{s}"', "use {s}, then", "(`{s}`)", "KEY={s}\nnext"],
)
def test_provider_keys_are_redacted(name: str, template: str) -> None:
    secret = SECRETS[name]
    out = scrub_secrets(template.format(s=secret))
    assert secret not in out
    assert "[REDACTED:" in out
    assert scrub_secrets(out) == out


@pytest.mark.parametrize(
    ("text", "gone", "kept"),
    [
        ("Authorization: Bearer abc123DEF456ghi789JKL", "abc123DEF456ghi789JKL", "Bearer "),
        ("curl -H 'authorization: basic dXNlcjpwYXNzd29yZDEy'", "dXNlcjpwYXNzd29yZDEy", "basic"),
        ("postgres://admin:hunter2@db:5432/app", "hunter2", "postgres://admin:"),
        ("https://user:p%40ss@example.com/x", "p%40ss", "@example.com/x"),
        ("password=hunter2 then", "hunter2", "password="),
        ('{"db_password": "s3cr3t!"}', "s3cr3t!", '"db_password": "'),
        ("API_KEY: abcdefgh12345678", "abcdefgh12345678", "API_KEY: "),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalr", "aws_"),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n"
            "-----END OPENSSH PRIVATE KEY-----\nafter",
            "b3BlbnNzaC1rZXktdjEAAAA",
            "after",
        ),
        ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B (cut off)", "MIIEvQ", ""),
    ],
)
def test_credentials_in_context_are_redacted(text: str, gone: str, kept: str) -> None:
    out = scrub_secrets(text)
    assert gone not in out
    assert kept in out
    assert scrub_secrets(out) == out


def _png_data_url() -> str:
    payload = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4 + b"sk-proj-AKIA" * 5
    return "data:image/png;base64," + base64.b64encode(payload).decode()


LEAVE_ALONE = [
    "commit 3f786850e387550fdab836ed7e6dc881de23001b fixed it",
    "sha256:" + hashlib.sha256(b"x").hexdigest(),
    "digest " + hashlib.sha512(b"x").hexdigest(),
    f"session {uuid.UUID(int=0x1234_5678_9ABC_DEF0_1234_5678_9ABC_DEF0)}",
    f"ids {uuid.uuid5(uuid.NAMESPACE_DNS, 'agentmem.dev')} and {uuid.UUID(int=7)}",
    "![img](" + _png_data_url() + ")",
    "max_tokens=4096, token: 5, tokens=12",
    "the password field is required",
    "see https://github.com/org/repo/blob/main/README.md#usage",
    "ghp is a prefix; sk- too; AKIA alone",
    "the sk-this-is-a-long-kebab-case-slug option",
    "base64 blob: " + base64.b64encode(bytes(range(200))).decode(),
    "[REDACTED:openai_key] already",
]


@pytest.mark.parametrize("text", LEAVE_ALONE)
def test_look_alikes_are_left_alone(text: str) -> None:
    assert scrub_secrets(text) == text


@settings(max_examples=scaled(100))
@given(
    st.one_of(
        st.binary(min_size=20, max_size=64).map(lambda b: b.hex()),
        st.uuids().map(str),
        st.binary(min_size=1, max_size=300).map(
            lambda b: "data:image/jpeg;base64," + base64.b64encode(b).decode()
        ),
    )
)
def test_hex_uuid_and_data_urls_never_change(text: str) -> None:
    assert scrub_secrets(f"value {text} end") == f"value {text} end"


@settings(max_examples=scaled(150))
@given(st.text(max_size=200))
def test_scrubbing_is_idempotent(text: str) -> None:
    once = scrub_secrets(text)
    assert scrub_secrets(once) == once


# --------------------------------------------------------------------------- whole values


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("postgres://admin:p@ss:w/rd@db.example.com:5432/app", "p@ss:w/rd"),
        ("redis://:S3cr%40t%2Fx@cache:6379/0", "S3cr%40t%2Fx"),
        ('password: "correct horse battery staple"', "correct horse battery staple"),
        ("DB_PASSWORD=abc;defGHI&jk,lm", "abc;defGHI&jk,lm"),
        ("Server=db;User Id=sa;Password=my pass word;Encrypt=True", "my pass word"),
        ("AccountName=x;AccountKey=" + "Zm9v" * 22 + "==;EndpointSuffix=core", "Zm9v" * 22),
        ("hf token " + "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh", "AbCdEfGhIjKlMnOpQrSt"),
    ],
)
def test_the_whole_value_is_redacted(text: str, secret: str) -> None:
    """The old scrubber stopped at the first "@", space or ";" and kept the rest."""
    out = scrub_secrets(text)
    assert not any(secret[i : i + 6] in out for i in range(len(secret) - 5)), out
    assert scrub_secrets(out) == out


# --------------------------------------------------------------------------- write sites

KEY = "ghp_" + "Zx81Qw72Er63Ty54Ui45Op36As27Df18Gh09"
PASSWORD = "p@ss:w/rd" + "Q7x"
TASK = f"Deploy it: export GITHUB_TOKEN={KEY} and use postgres://admin:{PASSWORD}@db/app now."
MATERIAL = (KEY, PASSWORD)


def leaks(text: str) -> list[str]:
    """Runs of 6+ characters of the planted secrets found in ``text``."""
    return [m[i : i + 6] for m in MATERIAL for i in range(len(m) - 5) if m[i : i + 6] in text]


def tool_round(s: agentmem.Session, i: int) -> None:
    s.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"c{i}",
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"cmd": f"step {i}"})},
                }
            ],
        }
    )
    s.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"step {i} done\n" * 12})


def test_no_durable_cross_session_file_holds_a_secret(tmp_path: Path) -> None:
    """Task summaries, the trim checkpoint, notes, LTM, topics: only the session keeps the words."""
    root = tmp_path / ".agentmem"
    with agentmem.Memory(root=root, working_dir=tmp_path) as mem:
        s = mem.session(name="deploy", context_window=1_500)
        s.start_task(TASK)
        for i in range(30):
            tool_round(s, i)
            s.context()
        assert (root / "memory" / "session_progress.md").exists()  # a trim ran
        mem.notes.store("deploy", TASK)
        mem.ltm.add_discovery(TASK)
        mem.topics.write("deploy", TASK)
        # What the agent and the host read back holds no secret either.
        assert not leaks(mem.notes.retrieve("session_progress") or "")
        tool = mem.tools.dispatch({"operation": "retrieve", "key": "session_progress"})
        assert tool["ok"] and not leaks(json.dumps(tool))
        assert not leaks(json.dumps(s.time_machine.get_task_history()))
        # The conversation itself stays as it was said (the model needs it).
        assert s.history.to_list()[0]["content"] == TASK
        s.close()
    found = {
        str(path.relative_to(root)): leaks(path.read_bytes().decode("utf-8", "replace"))
        for path in root.rglob("*")
        if path.is_file() and not path.name.startswith("sessions.sqlite")
    }
    assert "memory/session_progress.md" in found
    assert {name: runs for name, runs in found.items() if runs} == {}


def test_a_task_summary_is_scrubbed_before_it_is_cut(tmp_path: Path) -> None:
    """A key straddling the 200-character cut must not leave its first half behind."""
    with agentmem.Memory(root=tmp_path / "r", working_dir=tmp_path) as mem:
        s = mem.session()
        s.start_task("x" * 185 + " " + KEY + " tail")
        summary = s.time_machine.get_task_history()[-1]["summary"]
        assert not leaks(summary) and summary.startswith("x" * 185)
        s.close()


def test_a_session_keeps_its_messages_with_scrubbing_on(tmp_path: Path) -> None:
    with agentmem.Memory(root=tmp_path / "r", working_dir=tmp_path) as mem:
        s = mem.session(session_id="keep")
        s.start_task(TASK)
        s.close()
        again = mem.session("keep")
        assert again.history.to_list()[0]["content"] == TASK
        again.close()


def test_recall_previews_are_scrubbed(tmp_path: Path) -> None:
    with agentmem.Memory(root=tmp_path / "r", working_dir=tmp_path) as mem:
        s = mem.session()
        s.start_task(TASK)
        s.close()
        hits = mem.recall("deploy postgres")
        assert hits and "[REDACTED:" in hits[0].preview
        assert not leaks(json.dumps([h.preview for h in hits]))


@pytest.mark.parametrize("name", [KEY, "token=" + KEY[4:], KEY + ".backup"])
def test_a_note_key_or_topic_name_holding_a_secret_is_refused(tmp_path: Path, name: str) -> None:
    """Names are file names and lookup keys: refused whole, never written, never echoed."""
    with agentmem.Memory(root=tmp_path / "r", working_dir=tmp_path) as mem:
        with pytest.raises(InvalidArgumentError, match="note key") as caught:
            mem.notes.store(name, "content")
        assert not leaks(str(caught.value))
        with pytest.raises(InvalidArgumentError, match="topic name") as caught:
            mem.topics.write(name, "content")
        assert not leaks(str(caught.value))
        out = mem.tools.dispatch({"operation": "store", "key": name, "content": "c"})
        assert out["ok"] is False and not leaks(json.dumps(out))
        assert mem.notes.list() == [] and [t.topic for t in mem.topics.list()] == []
    assert not any(leaks(p.name) for p in (tmp_path / "r").rglob("*"))


def test_names_are_only_checked_when_scrubbing_is_on(tmp_path: Path) -> None:
    with agentmem.Memory(root=tmp_path / "r", working_dir=tmp_path, scrub_secrets=False) as mem:
        mem.notes.store("db-" + KEY, "as given")
        assert mem.notes.retrieve("db-" + KEY) == "as given"


def test_semantic_ids_and_metadata_keys_holding_a_secret_are_refused(tmp_path: Path) -> None:
    from agentmem.semantic import LocalMemoryClient

    with agentmem.Memory(root=tmp_path / "r", working_dir=tmp_path) as mem:
        client = LocalMemoryClient(mem, embedder=None)
        for scope in (
            {"user_id": KEY},
            {"user_id": "u", "agent_id": KEY},
            {"user_id": "u", "run_id": KEY},
        ):
            with pytest.raises(InvalidArgumentError, match="_id") as caught:
                client.add("I like tea", infer=False, **scope)
            assert not leaks(str(caught.value))
        with pytest.raises(InvalidArgumentError, match="metadata key"):
            client.add("I like tea", user_id="u", infer=False, metadata={"k": {KEY: 1}})
        client.add("I like tea", user_id="u", infer=False, metadata={"note": [TASK]})
        stored = client.get_all(user_id="u")
        assert len(stored) == 1 and not leaks(json.dumps(stored[0].metadata))
        assert client.get_all(user_id=KEY) == []
        client.close()
    database = (tmp_path / "r" / "semantic.sqlite").read_bytes().decode("utf-8", "replace")
    assert not leaks(database)


def test_mem0_refuses_secret_ids_and_scrubs_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentmem.semantic import Mem0Client

    sent: list[Any] = []
    client = Mem0Client("http://127.0.0.1:9/", retries=0)
    monkeypatch.setattr(client, "_request", lambda method, path, **kw: sent.append(kw) or [])
    with pytest.raises(InvalidArgumentError, match="user_id"):
        client.add("I like tea", user_id=KEY)
    with pytest.raises(InvalidArgumentError, match="metadata key"):
        client.add("I like tea", user_id="u", metadata={KEY: "x"})
    assert sent == []
    client.add("I like tea", user_id="u", metadata={"note": TASK})
    assert len(sent) == 1 and not leaks(json.dumps(sent))


_FRAGMENTS = [
    "password",
    "Password",
    "DB_PASSWORD",
    "token",
    "api_key",
    "AccountKey",
    "key",
    "sig",
    "pwd",
    "=",
    ": ",
    ":",
    '"',
    "'",
    '\\"',
    "\\n",
    ";",
    "&",
    ",",
    "\n",
    " ",
    "export ",
    "--password ",
    "{",
    "}",
    "(",
    "<x>",
    "${X}",
    "://",
    "@",
    "/",
    "admin",
    "db.example.com",
    "5432",
    "hunter2",
    "Zx81Qw72Er63Ty54",
    "ghp_" + "Zx81Qw72Er63Ty54Ui45Op36As27Df18Gh09",
    "AKIA" + "IOSFODNN7EXAMPLE",
    "[REDACTED:password]",
    "Bearer ",
    "Authorization: ",
    "-u ",
    "-----BEGIN PRIVATE KEY-----",
    "None",
    "self.password",
    "İ",  # lower-cases to two characters: positions in the lowered text shift
]


@settings(max_examples=scaled(300))
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=14).map("".join))
def test_scrubbing_secret_shaped_text_is_idempotent(text: str) -> None:
    """Text built from the pieces the rules look for: a second pass finds nothing new."""
    once = scrub_secrets(text)
    assert scrub_secrets(once) == once


def test_scrub_near_scrubs_the_neighbourhood_of_a_long_text() -> None:
    """Previews of long hits scrub a window around the match; no key is cut in two inside it."""
    filler = "lorem ipsum dolor sit amet " * 400  # ~10.8 KB
    body = base64.b64encode(bytes(range(256)) * 12).decode()
    pem = "-----BEGIN RSA PRIVATE KEY-----\n" + body + "\n-----END RSA PRIVATE KEY-----"
    text = filler + pem + " deploy " + KEY + " " + filler
    near = scrub_near(text, ["deploy"])
    assert "deploy" in near and len(near) < len(text) / 2
    assert not leaks(near) and body[-40:] not in near and "[REDACTED:private_key]" in near
    short = "deploy " + KEY
    assert scrub_near(short, ["deploy"]) == scrub_secrets(short)


def test_recall_previews_of_long_messages_are_scrubbed(tmp_path: Path) -> None:
    with agentmem.Memory(root=tmp_path / "r", working_dir=tmp_path) as mem:
        s = mem.session()
        s.start_task("run the deploy")
        tool_round(s, 0)
        s.append({"role": "user", "content": "x " * 6000 + f"deploy token {KEY} " + "y " * 6000})
        s.close()
        hits = mem.recall("deploy token")
        assert hits and not leaks(json.dumps([(h.preview, h.previous, h.next) for h in hits]))


def test_the_summary_of_an_interrupted_start_is_scrubbed(tmp_path: Path) -> None:
    """A kill between storing the turn and starting the task: the next open writes the
    summary from the stored turn, scrubbed like start_task's."""
    with agentmem.Memory(root=tmp_path / "r", working_dir=tmp_path) as mem:
        s = mem.session("x")
        s.start_task("one")

        def killed(*args: Any, **kwargs: Any) -> int:
            raise KeyboardInterrupt  # the process dies between the two writes

        s.time_machine.start_new_task = killed  # type: ignore[method-assign]
        with pytest.raises(KeyboardInterrupt):
            s.start_task(TASK)
        s.close()
        again = mem.session("x")
        summary = again.time_machine.get_task_history()[-1]["summary"]
        assert summary.startswith("Deploy it:") and not leaks(summary)
        again.close()
    snapshots = [p for p in (tmp_path / "r").rglob("*") if p.is_file() and "snapshots" in p.parts]
    assert snapshots and not any(
        leaks(p.read_bytes().decode("utf-8", "replace")) for p in snapshots
    )
