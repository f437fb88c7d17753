"""Safe by default: this machine only without a key, the key checked on every API call, never shown."""

from __future__ import annotations

import logging

import pytest

from selfrag.cli.main import main
from selfrag.errors import ConfigError
from selfrag.serve.settings import check_bind, is_loopback

from .test_serve_kit import QUESTION, client, make_app

KEY = "s3cret-key-for-tests-only"
ELSEWHERE = ("203.0.113.7", 40000)  # a documentation address: "another machine"


def ask(c, **headers):
    return c.post("/v1/ask", json={"question": QUESTION}, headers=headers)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.5"])
def test_loopback_names(host):
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.com"])
def test_other_addresses_need_a_key_to_bind(host):
    assert not is_loopback(host)
    with pytest.raises(ConfigError, match="--api-key"):
        check_bind(host, None)
    check_bind(host, KEY)  # with a key it may


def test_the_command_refuses_a_public_address_without_a_key(capsys, monkeypatch):
    monkeypatch.delenv("SELFRAG_API_KEY", raising=False)
    code = main(["serve", "--docs", "x", "--host", "0.0.0.0"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--api-key" in err


def test_without_a_key_requests_from_another_address_are_refused():
    app = make_app()
    with client(app, host=ELSEWHERE) as c:
        for r in (ask(c), c.get("/health"), c.get("/")):
            assert r.status_code == 403 and r.json()["error"]["code"] == "not_local"
    with client(app) as c:  # the same app, from this machine
        assert ask(c).status_code == 200


def test_with_a_key_every_api_call_must_carry_it():
    app = make_app(api_key=KEY, host="0.0.0.0")
    for host in (ELSEWHERE, ("127.0.0.1", 50000)):  # this machine too: a proxy in front looks local
        with client(app, host=host) as c:
            missing = ask(c)
            wrong = ask(c, authorization="Bearer not-the-key")
            other_scheme = ask(c, authorization=f"Basic {KEY}")
            right = ask(c, authorization=f"Bearer {KEY}")
            methods = c.get("/v1/methods")
            page, health = c.get("/"), c.get("/health")
        for r in (missing, wrong, other_scheme, methods):
            assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
            assert r.headers["www-authenticate"] == "Bearer"
        assert right.status_code == 200 and right.json()["answer"] == "Paris"
        # The page and its files hold no data: the browser loads them, then sends the key with each call.
        assert page.status_code == 200 and health.json()["auth_required"] is True


def test_the_key_is_never_in_a_response_or_the_log(caplog):
    app = make_app(api_key=KEY, host="0.0.0.0")
    with caplog.at_level(logging.DEBUG), client(app, host=ELSEWHERE) as c:
        bodies = [ask(c, authorization="Bearer wrong").text, ask(c, authorization=f"Bearer {KEY}").text,
                  c.get("/health").text, c.get("/v1/methods", headers={"authorization": f"Bearer {KEY}"}).text]
    assert all(KEY not in b for b in bodies)
    assert KEY not in caplog.text
    assert KEY not in repr(app.state.selfrag.settings)


def test_a_local_server_answers_only_to_local_host_names():
    # DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends Host: evil.example.
    with client(make_app()) as c:
        refused = c.post("/v1/ask", json={"question": QUESTION}, headers={"host": "evil.example:8000"})
        assert refused.status_code == 421 and refused.json()["error"]["code"] == "bad_host"
        for host in ("localhost:8000", "127.0.0.1", "[::1]:8000"):
            assert c.get("/health", headers={"host": host}).status_code == 200


def test_cross_site_form_posts_are_refused():
    # A form or a no-preflight fetch from another site can only send these content types.
    with client(make_app()) as c:
        for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
            r = c.post("/v1/ask", content=b'{"question": "x"}', headers={"content-type": ctype})
            assert r.status_code == 415
        r = c.post("/v1/ask", content=b'{"question": "x"}')  # no content type at all
        assert r.status_code == 415
