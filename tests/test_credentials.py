"""Credentials: which key goes to which host, and secrets in URLs never shown or stored.

Every header check is made against a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import base64
import logging
import sqlite3

import pytest
import yaml

from selfrag.cli.main import main
from selfrag.config import dump_yaml, load_config, redact
from selfrag.errors import BackendError, ConfigError
from selfrag.llm import RetryPolicy, create_backend
from selfrag.llm.credentials import resolve_credentials
from selfrag.redaction import redact_secrets
from selfrag.retrieval.encoders import canonical_model_name, create_encoder, get_encoder
from tests.helpers.hashing import hashed_vector
from tests.helpers.servers import ScriptedHTTPServer

OPENAI_REPLY = {
    "model": "fake",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Paris"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
}
ANTHROPIC_REPLY = {
    "model": "claude-x",
    "content": [{"type": "text", "text": "Paris"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 3, "output_tokens": 1},
}


HI = [{"role": "user", "content": "hi"}]


def ok(reply):
    return lambda path, body, headers: (200, reply, {})


def embeddings(path, body, headers):
    rows = [{"index": i, "embedding": hashed_vector(t, 8)} for i, t in enumerate(body["input"])]
    return 200, {"data": rows}, {}


def with_userinfo(url: str, userinfo: str) -> str:
    return url.replace("http://", f"http://{userinfo}@", 1)


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


# -- one redaction function --------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("http://user:PASS@127.0.0.1:8/v1", "http://***@127.0.0.1:8/v1"),
        ("https://TOKEN@host.example/v1", "https://***@host.example/v1"),
        ("openai:m@http://u:p@ss@h:1/v1", "openai:m@http://***@h:1/v1"),  # a raw '@' in the password
        ("cannot reach http://a:b@h/v1 (ConnectError)", "cannot reach http://***@h/v1 (ConnectError)"),
        ("openai:m@http://127.0.0.1:8/v1", "openai:m@http://127.0.0.1:8/v1"),  # nothing to hide
        ("key sk-abcdefghijklmnop here", "key *** here"),
        ("openai:m@https://task-runner-server.example/v1", "openai:m@https://task-runner-server.example/v1"),
    ],
)
def test_redact_secrets_hides_userinfo_of_any_form_and_api_keys(text, expected):
    assert redact_secrets(text) == expected


def test_config_redaction_covers_token_only_urls_but_not_env_var_names(tmp_path):
    cfg = load_config(overrides=[
        "llm.spec=openai:m@http://TOKEN123@127.0.0.1:9/v1",
        "llm.api_key_env=MY_SERVER_KEY",
    ])
    text = dump_yaml(cfg)
    assert "TOKEN123" not in text
    dumped = yaml.safe_load(text)
    assert dumped["llm"]["spec"] == "openai:m@http://***@127.0.0.1:9/v1"
    # The name of an environment variable is not a secret: resume needs it as written.
    assert dumped["llm"]["api_key_env"] == "MY_SERVER_KEY"
    assert redact({"summary": {"llm_spec": "anthropic:c@https://T0K@proxy/v1"}}) == {
        "summary": {"llm_spec": "anthropic:c@https://***@proxy/v1"}
    }


def test_api_key_env_must_be_an_environment_variable_name():
    with pytest.raises(ConfigError, match="llm.api_key_env"):
        load_config(overrides=["llm.api_key_env=not a name"])


# -- which key is sent where ---------------------------------------------------------


def test_resolution_sends_the_default_key_only_to_the_official_host(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-official-000000")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-official-0000")
    official = resolve_credentials("openai", None)
    assert (official.base_url, official.api_key, official.key_env) == (
        "https://api.openai.com/v1", "sk-official-000000", "OPENAI_API_KEY")
    assert resolve_credentials("openai", "https://api.openai.com/v1/").api_key == "sk-official-000000"
    assert resolve_credentials("anthropic", None).api_key == "sk-ant-official-0000"
    for url in ("http://127.0.0.1:8000/v1", "https://api.openai.com.evil.example/v1",
                "http://api.openai.com/v1", "https://api.openai.com:8443/v1"):
        creds = resolve_credentials("openai", url)
        assert creds.api_key is None and creds.key_env is None, url
    assert resolve_credentials("anthropic", "https://proxy.example/v1").api_key is None


def test_a_named_env_var_opts_in_for_any_host_and_must_be_set(monkeypatch):
    monkeypatch.setenv("MY_SERVER_KEY", "server-secret-1")
    creds = resolve_credentials("openai", "http://127.0.0.1:8000/v1", api_key_env="MY_SERVER_KEY")
    assert (creds.api_key, creds.key_env) == ("server-secret-1", "MY_SERVER_KEY")
    monkeypatch.delenv("MY_SERVER_KEY")
    with pytest.raises(ConfigError, match="MY_SERVER_KEY is not set.*export MY_SERVER_KEY="):
        resolve_credentials("openai", "http://127.0.0.1:8000/v1", api_key_env="MY_SERVER_KEY")


def test_official_host_without_a_key_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY is not set"):
        resolve_credentials("openai", "https://api.openai.com/v1")


@pytest.mark.server
async def test_openai_key_is_not_sent_to_a_custom_server_unless_opted_in(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-official-should-stay-home")
    monkeypatch.setenv("MY_SERVER_KEY", "server-secret-2")
    with ScriptedHTTPServer(ok(OPENAI_REPLY)) as server:
        plain = create_backend(f"openai:m@{server.url}/v1")
        await plain.generate(HI)
        await plain.aclose()
        opted = create_backend(f"openai:m@{server.url}/v1", api_key_env="MY_SERVER_KEY")
        await opted.generate(HI)
        await opted.aclose()
    first, second = (headers for _, _, headers in server.requests)
    assert "authorization" not in first
    assert second["authorization"] == "Bearer server-secret-2"


@pytest.mark.server
async def test_anthropic_key_is_not_sent_to_a_custom_server_unless_opted_in(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-should-stay-home")
    monkeypatch.setenv("PROXY_KEY", "proxy-secret")
    with ScriptedHTTPServer(ok(ANTHROPIC_REPLY)) as server:
        for extra in ({}, {"api_key_env": "PROXY_KEY"}):
            llm = create_backend(f"anthropic:claude-x@{server.url}", **extra)
            assert (await llm.generate(HI)).text == "Paris"
            await llm.aclose()
    first, second = (headers for _, _, headers in server.requests)
    assert "x-api-key" not in first and "authorization" not in first
    assert second["x-api-key"] == "proxy-secret"


@pytest.mark.server
def test_embeddings_key_policy_is_the_same(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-official-should-stay-home")
    monkeypatch.setenv("EMBED_KEY", "embed-secret")
    with ScriptedHTTPServer(embeddings) as server:
        plain = create_encoder(f"openai:m@{server.url}/v1")
        plain.encode(["x"])
        plain.close()
        monkeypatch.setenv("SELFRAG_EMBEDDING_API_KEY_ENV", "EMBED_KEY")
        opted = create_encoder(f"openai:m@{server.url}/v1")
        opted.encode(["x"])
        opted.close()
    first, second = (headers for _, _, headers in server.requests)
    assert "authorization" not in first
    assert second["authorization"] == "Bearer embed-secret"


@pytest.mark.server
def test_cli_llm_api_key_env_sends_the_named_key(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-official-should-stay-home")
    monkeypatch.setenv("MY_SERVER_KEY", "server-secret-3")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "d.txt").write_text("Paris is the capital of France.")
    with ScriptedHTTPServer(ok(OPENAI_REPLY)) as server:
        code = main(["ask", "capital?", "--docs", str(tmp_path / "docs"), "--llm", f"openai:m@{server.url}/v1",
                     "--set", "llm.api_key_env=MY_SERVER_KEY"])
    assert code == 0, capsys.readouterr().err
    assert server.requests[0][2]["authorization"] == "Bearer server-secret-3"


# -- credentials in the URL ----------------------------------------------------------


@pytest.mark.server
async def test_userinfo_is_sent_as_basic_auth_and_never_shown_or_stored(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    with ScriptedHTTPServer(ok(OPENAI_REPLY)) as server:
        spec = f"openai:m@{with_userinfo(server.url, 'user:PASS-42')}/v1"
        llm = create_backend(spec, cache_path=tmp_path / "c.db")
        assert (await llm.generate(HI)).text == "Paris"
        await llm.aclose()
    assert server.requests[0][2]["authorization"] == basic("user", "PASS-42")
    assert llm.spec == f"openai:m@http://***@127.0.0.1:{server.port}/v1"
    assert "PASS-42" not in repr(llm)
    # httpx logs every request at INFO (shown by -v): no secret there either.
    assert caplog.records and not any("PASS-42" in r.getMessage() for r in caplog.records)
    stored = sqlite3.connect(tmp_path / "c.db").execute("SELECT backend, request, response FROM generations").fetchall()
    assert stored and "PASS-42" not in repr(stored)


@pytest.mark.server
async def test_a_token_only_url_is_hidden_in_errors_and_retry_logs(caplog):
    def unavailable(path, body, headers):
        return 503, {"error": {"message": "busy"}}, {"Retry-After": "0"}

    with ScriptedHTTPServer(unavailable) as server:
        spec = f"openai:m@{with_userinfo(server.url, 'TOKEN-77')}/v1"
        llm = create_backend(spec, retry=RetryPolicy(max_attempts=2))
        with pytest.raises(BackendError) as info:
            await llm.generate(HI)
        await llm.aclose()
    assert server.requests[0][2]["authorization"] == basic("TOKEN-77", "")
    assert "TOKEN-77" not in str(info.value) and "***@127.0.0.1" in str(info.value)
    assert not any("TOKEN-77" in r.getMessage() for r in caplog.records)


def test_unreachable_server_error_line_has_no_password(tmp_path, capsys):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "d.txt").write_text("Paris is the capital of France.")
    spec = "openai:m@http://user:PASS-99@127.0.0.1:9/v1"
    code = main(["ask", "q", "--docs", str(tmp_path / "docs"), "--llm", spec, "--set", "llm.max_attempts=1"])
    err = capsys.readouterr().err
    # Nothing listens on 127.0.0.1:9: a refused local connection (tests/test_connection_refused.py).
    assert code == 2 and err.startswith("selfrag: error: openai:m: connection refused by http://127.0.0.1:9/v1")
    assert len(err.strip().splitlines()) == 1
    assert "PASS-99" not in err


def test_embedding_model_names_hide_userinfo_but_keep_encoders_apart():
    one, two = "openai:m@http://user:one@127.0.0.1:9/v1", "openai:m@http://user:two@127.0.0.1:9/v1"
    assert canonical_model_name(one) == "openai:m@http://***@127.0.0.1:9/v1"
    # Same model and server: one name (manifests, embedding cache); different credentials: different clients.
    assert get_encoder(one).name == get_encoder(two).name == canonical_model_name(one)
    assert get_encoder(one) is not get_encoder(two)
    assert get_encoder(one) is get_encoder(one + "/")


def test_doctor_and_bad_url_errors_hide_credentials(tmp_path, capsys):
    from selfrag.doctor.checks import check_llm

    check = check_llm("openai:m@http://user:SECRET-5@127.0.0.1:9/v1", timeout=2)
    assert not check.ok and "SECRET-5" not in repr(check) and "***@127.0.0.1" in check.name
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "d.txt").write_text("Paris is the capital of France.")
    code = main(["ask", "q", "--docs", str(tmp_path / "docs"), "--llm", "openai:m@http://u:SECRET-6@h:port/v1"])
    err = capsys.readouterr().err
    assert code == 2 and "invalid port" in err and "SECRET-6" not in err


@pytest.mark.server
async def test_a_refused_custom_server_says_how_to_send_the_withheld_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-official-should-stay-home")
    refuse = lambda path, body, headers: (401, {"error": {"message": "missing bearer token"}}, {})  # noqa: E731
    with ScriptedHTTPServer(refuse) as server:
        llm = create_backend(f"openai:m@{server.url}/v1")
        with pytest.raises(BackendError) as info:
            await llm.generate(HI)
        await llm.aclose()
    message = str(info.value)
    assert "HTTP 401: missing bearer token" in message
    assert "OPENAI_API_KEY is sent only to api.openai.com" in message
    assert "--set llm.api_key_env=OPENAI_API_KEY" in message and "sk-official" not in message


def test_url_credentials_and_a_bearer_key_together_are_refused():
    with pytest.raises(ConfigError, match="give the server's credentials once"):
        create_backend("openai:m@http://u:p@127.0.0.1:9/v1", api_key_env="PATH")


@pytest.mark.server
def test_a_saved_index_finds_its_url_credentials_in_the_config_not_on_disk(tmp_path, monkeypatch):
    from selfrag.retrieval import DenseRetriever, load_index, save_index
    from selfrag.types import Document

    monkeypatch.setenv("SELFRAG_EMBEDDING_CACHE", str(tmp_path / "embeddings.db"))
    docs = [Document(id="tea", title="Tea", text="green tea leaves"), Document(id="cocoa", title="", text="cocoa pods")]

    def needs_auth(path, body, headers):
        if headers.get("authorization") != basic("svc", "IDX-SECRET"):
            return 401, {"error": {"message": "who are you"}}, {}
        return embeddings(path, body, headers)

    with ScriptedHTTPServer(needs_auth) as server:
        spec = f"openai:m@{with_userinfo(server.url, 'svc:IDX-SECRET')}/v1"
        save_index(DenseRetriever(docs, embedding_model=spec), tmp_path / "idx")
        for saved in (tmp_path / "idx").rglob("*"):
            if saved.is_file():
                assert b"IDX-SECRET" not in saved.read_bytes(), saved
        loaded = load_index(tmp_path / "idx", documents=docs, options={"embedding_model": spec})
        assert loaded.retrieve_sync("tea leaves", 1).documents[0].id == "tea"
    assert server.requests and all(h["authorization"] == basic("svc", "IDX-SECRET") for _, _, h in server.requests)
