"""Secret scrubbing: realistic keys are redacted; hashes, UUIDs and base64 images are not."""

from __future__ import annotations

import base64
import hashlib
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from profiles import scaled

from agentmem.scrub import scrub_secrets

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
