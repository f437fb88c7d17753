"""Credentials a server echoes back in an error body are hidden (issue 55, defect 5)."""

from __future__ import annotations

import base64

import pytest

from selfrag.redaction import redact_secrets, redact_values, secret_forms

BASIC = base64.b64encode(b"alice:pa55-word").decode()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("invalid key: Bearer abc123def456ghi", "invalid key: Bearer ***"),
        ('{"authorization": "bearer eyJhbGciOiJIUzI1NiJ9.e30.x"}', '{"authorization": "bearer ***"}'),
        (f"got Authorization: Basic {BASIC}", "got Authorization: Basic ***"),
        (f'"headers": {{"Authorization": "BASIC {BASIC}"}}', '"headers": {"Authorization": "BASIC ***"}'),
    ],
)
def test_echoed_auth_headers_are_hidden(text, expected):
    assert redact_secrets(text) == expected


@pytest.mark.parametrize("text", [
    "bearer bonds are a basic idea",
    "Basic Auth is not supported; use Bearer tokens",
    "The Basic plan (Basic dGVzdA==) has no colon inside",  # base64 of "test": not user:password
])
def test_ordinary_words_are_left_alone(text):
    assert redact_secrets(text) == text


def test_known_secrets_are_hidden_in_any_form():
    forms = secret_forms(["Bearer k-0123456789", "k-0123456789"], ("alice", "pa55-word"))
    text = f"echo k-0123456789 then {BASIC} then pa55-word then alice"
    assert redact_values(text, forms) == "echo *** then *** then *** then alice"
    assert secret_forms(["abc"]) == []  # too short to hide without hiding ordinary text
