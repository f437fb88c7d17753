"""`selfrag serve --trace` as a real process (scripted backend): every answer, through the page's
endpoint and the OpenAI route, is answered and logged as one line on stderr."""

from __future__ import annotations

import json

import httpx
import pytest

from .test_serve_cli import ServeProcess

pytestmark = pytest.mark.server
QUESTION = "What is the capital of France?"


def _serve(tmp_path, *args: str) -> ServeProcess:
    (tmp_path / "docs.jsonl").write_text(
        '{"id": "paris", "title": "Paris", "text": "Paris is the capital of France."}\n'
        '{"id": "rome", "title": "Rome", "text": "Rome is the capital of Italy."}\n')
    (tmp_path / "script.json").write_text(json.dumps({"capital of France": "Paris"}))
    return ServeProcess(tmp_path / "serve.log", "--docs", str(tmp_path / "docs.jsonl"), "--method", "vanilla_rag",
                        "--llm", f"scripted:{tmp_path / 'script.json'}", *args)


def _events(url: str, body: dict) -> list[tuple[str, dict]]:
    out, name = [], None
    with httpx.stream("POST", url + "/v1/ask", json=body, timeout=60) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:") and name:
                out.append((name, json.loads(line[5:])))
                name = None
    return out


def test_serve_trace_answers_the_page_and_the_openai_client(tmp_path):
    openai = pytest.importorskip("openai", reason="the openai client is in the `dev` extra")
    server = _serve(tmp_path, "--trace")
    try:
        # The page's own call: /v1/ask as a stream of events.
        events = _events(server.url, {"question": QUESTION, "stream": True})
        assert events[-1][0] == "result", events[-1]
        assert events[-1][1]["answer"] == "Paris"
        # /v1/ask without a stream.
        r = httpx.post(server.url + "/v1/ask", json={"question": QUESTION}, timeout=60)
        assert r.status_code == 200 and r.json()["answer"] == "Paris", r.text
        # The OpenAI route, through the official client, plain and streamed, with an earlier turn.
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=60)
        messages = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"},
                    {"role": "user", "content": QUESTION}]
        reply = client.chat.completions.create(model="vanilla_rag", messages=messages)
        assert reply.choices[0].message.content.startswith("Paris")
        streamed = "".join(c.choices[0].delta.content or ""
                           for c in client.chat.completions.create(model="vanilla_rag", messages=messages, stream=True)
                           if c.choices)
        assert streamed.startswith("Paris")
    finally:
        server.close()
    log = server.log.read_text()
    assert "Traceback" not in log and "TypeError" not in log and "internal error" not in log, log
    # One line per answer: what the method did.
    assert log.count("selfrag: vanilla_rag: ") == 4, log
