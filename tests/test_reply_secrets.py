"""A model reply that repeats the user's own API key or URL password is stored and shown redacted.

An OpenAI-compatible fake server on 127.0.0.1 writes the key it was sent (its
Authorization header) into its answer. The key reached `ask`'s output, `--json`,
the SQLite cache, `run`'s predictions.jsonl and `serve` answers in plain text;
the API backends now hide their own key, password and Basic form in every
string of a reply before it becomes a Generation. Real `python -m selfrag`
processes and the app under a real uvicorn.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

import selfrag
from selfrag.llm import create_backend
from selfrag.llm.retry import RetryPolicy
from selfrag.serve.background import BackgroundServer
from tests.helpers.servers import ScriptedHTTPServer

from .test_serve_kit import QUESTION, make_answerer, make_app

SRC = str(Path(selfrag.__file__).resolve().parents[1])
KEY = "sk-echo-0123456789abcdef"
TOKEN = "tok-9f8e7d6c5b4a"  # a token alone in the URL: http://TOKEN@host
PASSWORD = "pa55-word-xyz"
pytestmark = pytest.mark.server


def echoing_in_the_answer(path, body, headers):
    """Answers with whatever credentials it was sent, as a model that repeats its prompt's secrets might."""
    auth = headers.get("authorization", "")
    shown = auth
    if auth.lower().startswith("basic "):
        shown += " = " + base64.b64decode(auth[6:]).decode()
    content = f"Paris. (You sent {shown}; the key is {auth.partition(' ')[2]}.)"
    return 200, {"choices": [{"message": {"content": content}, "finish_reason": "stop",
                              "logprobs": None}],
                 "usage": {"prompt_tokens": 3, "completion_tokens": 5}, "model": f"m-{auth}"}, {}


def selfrag_cli(*argv: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "selfrag", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": SRC, **env})


@pytest.fixture
def project(tmp_path) -> Path:
    (tmp_path / "docs.jsonl").write_text('{"id": "d1", "text": "Paris is the capital of France."}\n')
    (tmp_path / "q.jsonl").write_text(json.dumps({"id": "q1", "question": "What is the capital of France?",
                                                  "answers": ["Paris"]}) + "\n")
    (tmp_path / "exp.yaml").write_text("data: {dataset: jsonl, path: q.jsonl, corpus: docs.jsonl}\n"
                                       "architecture: {name: vanilla_rag}\n")
    return tmp_path


def files_text(folder: Path) -> str:
    """Every byte under ``folder`` (SQLite pages included), as text."""
    return "".join(p.read_bytes().decode("latin-1") for p in folder.rglob("*") if p.is_file())


def assert_hidden(text: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in text, f"{secret!r} leaked"


def test_ask_hides_an_echoed_key_in_its_output_json_and_cache(project):
    with ScriptedHTTPServer(echoing_in_the_answer) as upstream:
        spec = f"openai:m@{upstream.url}/v1"
        common = ["--docs", "docs.jsonl", "--llm", spec, "--method", "vanilla_rag", "--set", "llm.api_key_env=MY_KEY"]
        plain = selfrag_cli("ask", "What is the capital of France?", *common, "--cache", "cache.db", cwd=project,
                            MY_KEY=KEY)
        as_json = selfrag_cli("ask", "What is the capital of France?", *common, "--json", cwd=project, MY_KEY=KEY)
        cached = selfrag_cli("ask", "What is the capital of France?", *common, "--cache", "cache.db", "--json",
                             cwd=project, MY_KEY=KEY)
    for proc in (plain, as_json, cached):
        assert proc.returncode == 0, proc.stderr
        assert_hidden(proc.stdout + proc.stderr, KEY)
    assert plain.stdout.startswith("Paris. (You sent ***; the key is ***.)")
    assert json.loads(as_json.stdout)["answer"].startswith("Paris. (You sent ***; the key is ***.)")
    assert json.loads(cached.stdout)["answer"] == json.loads(as_json.stdout)["answer"]
    assert_hidden(files_text(project), KEY)  # the cache file holds the redacted reply only


def test_url_credentials_echoed_in_a_reply_are_hidden(project):
    with ScriptedHTTPServer(echoing_in_the_answer) as upstream:
        host = upstream.url.removeprefix("http://")
        for userinfo, secrets in ((f"alice:{PASSWORD}", (PASSWORD, base64.b64encode(f"alice:{PASSWORD}".encode()).decode())),
                                  (TOKEN, (TOKEN, base64.b64encode(f"{TOKEN}:".encode()).decode()))):
            proc = selfrag_cli("ask", "What is the capital of France?", "--docs", "docs.jsonl", "--llm",
                               f"openai:m@http://{userinfo}@{host}/v1", "--method", "vanilla_rag", "--json",
                               cwd=project)
            assert proc.returncode == 0, proc.stderr
            assert_hidden(proc.stdout + proc.stderr, *secrets)
            assert "***" in json.loads(proc.stdout)["answer"]


def test_run_stores_no_echoed_key(project):
    with ScriptedHTTPServer(echoing_in_the_answer) as upstream:
        proc = selfrag_cli("run", "exp.yaml", "--llm", f"openai:m@{upstream.url}/v1", "--set", "llm.api_key_env=MY_KEY",
                           "--no-progress", "--output", "out",
                           "--cache", "out/cache.db", cwd=project, MY_KEY=KEY)
    assert proc.returncode == 0, proc.stderr
    (run,) = [p for p in (project / "out").iterdir() if p.is_dir()]
    record = json.loads((run / "predictions.jsonl").read_text().splitlines()[0])
    assert record["prediction"].startswith("Paris. (You sent ***; the key is ***.)")
    assert_hidden(files_text(project / "out") + proc.stdout + proc.stderr, KEY)


def test_serve_answers_hide_an_echoed_key(monkeypatch):
    monkeypatch.setenv("ECHO_KEY", KEY)
    with ScriptedHTTPServer(echoing_in_the_answer) as upstream:
        llm = create_backend(f"openai:m@{upstream.url}/v1", api_key_env="ECHO_KEY", retry=RetryPolicy(max_attempts=1))
        with BackgroundServer(make_app(make_answerer(llm))) as server:
            asked = httpx.post(server.url + "/v1/ask", json={"question": QUESTION}, timeout=30)
            streamed = httpx.post(server.url + "/v1/ask", json={"question": QUESTION, "stream": True}, timeout=30)
            chat = httpx.post(server.url + "/v1/chat/completions", timeout=30,
                              json={"model": "selfrag", "messages": [{"role": "user", "content": QUESTION}]})
    for response in (asked, streamed, chat):
        assert response.status_code == 200, response.text
        assert_hidden(response.text, KEY)
    assert asked.json()["answer"].startswith("Paris. (You sent ***; the key is ***.)")


async def test_anthropic_replies_hide_the_key_and_other_text_is_left_as_written(monkeypatch):
    def handler(path, body, headers):
        text = f"Your key is {headers.get('x-api-key')}. Example header: Authorization: Bearer abc123def456ghi, sk-example123456"
        return 200, {"content": [{"type": "text", "text": text}], "usage": {"input_tokens": 1, "output_tokens": 1}}, {}

    monkeypatch.setenv("MY_KEY", KEY)
    with ScriptedHTTPServer(handler) as upstream:
        llm = create_backend(f"anthropic:m@{upstream.url}/v1", api_key_env="MY_KEY")
        gen = await llm.generate([{"role": "user", "content": "hi"}])
        await llm.aclose()
    # Only this client's own secret is hidden: a model writing about tokens reads as written.
    assert gen.text == "Your key is ***. Example header: Authorization: Bearer abc123def456ghi, sk-example123456"
