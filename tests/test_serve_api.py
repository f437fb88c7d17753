"""The API in process: /v1/ask (JSON and events), /v1/chat/completions, /v1/methods, /health, and every error as JSON."""

from __future__ import annotations

import json
import logging

from selfrag.llm.scripted import ScriptedBackend
from selfrag.serve.settings import Limits

from .test_serve_kit import QUESTION, HeldBackend, client, make_answerer, make_app


def events(text: str) -> list[tuple[str, dict]]:
    """(event name, data) of each event of a text/event-stream body (comments skipped)."""
    out = []
    for block in text.split("\n\n"):
        name, data = "message", None
        for line in block.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data = line[5:].strip()
        if data is not None:
            out.append((name, json.loads(data) if data != "[DONE]" else "[DONE]"))
    return out


def assert_json_error(r, status: int, *fragments: str) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    error = r.json()["error"]
    for fragment in fragments:
        assert fragment in error["message"]
    assert "Traceback" not in r.text
    return error


def test_ask_returns_the_ask_json_with_citations_and_the_view():
    with client(make_app(make_answerer(method="self_rag"))) as c:
        r = c.post("/v1/ask", json={"question": QUESTION})
    assert r.status_code == 200, r.text
    data = r.json()
    # The keys of `selfrag ask --json`, then what the server adds.
    for key in ("answer", "method", "model", "num_llm_calls", "total_tokens", "sources", "candidates",
                "reasoning_chain", "details", "citations", "abstained", "view"):
        assert key in data
    assert data["answer"] == "Paris" and data["method"] == "self_rag"
    assert data["num_llm_calls"] == 1 + 2 * 2
    # Which passages a method cites is its own rule (docs/methods.md); the server passes them on.
    cited = {c["id"] for c in data["citations"]}
    assert "paris" in cited and cited <= {s["id"] for s in data["sources"]}
    view = data["view"]
    assert view["selected"] == 0 and view["candidates"][0]["selected"] and view["candidates"][0]["text"] == "Paris"
    paris = next(p for p in view["passages"] if p["id"] == "paris")
    assert paris["cited"] and paris["relevance"] == "relevant" and paris["support"] == "fully supported"
    start, end = paris["highlights"][0]
    assert paris["text"][start:end] == "Paris is the capital of France."
    assert [s["action"] for s in view["timeline"]][:2] == ["retrieval_decision", "retrieve"]


def test_method_by_name_and_the_default():
    with client(make_app()) as c:
        assert c.post("/v1/ask", json={"question": QUESTION, "method": "no_retrieval"}).json()["method"] == "no_retrieval"
        assert c.post("/v1/ask", json={"question": QUESTION}).json()["method"] == "vanilla_rag"


def test_ask_stream_sends_progress_then_the_result():
    with client(make_app(make_answerer(method="self_rag"))) as c:
        r = c.post("/v1/ask", json={"question": QUESTION, "stream": True})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    got = events(r.text)
    names = [n for n, _ in got]
    assert names[0] == "start" and names[-1] == "result"
    progress = [d for n, d in got if n == "progress"]
    assert [p["calls"] for p in progress] == [1, 2, 3, 4, 5]
    assert got[-1][1]["answer"] == "Paris" and got[-1][1]["view"]["selected"] == 0


def test_chat_completion_in_openai_shape():
    with client(make_app()) as c:
        r = c.post("/v1/chat/completions", json={
            "model": "vanilla_rag", "temperature": 0.2,
            "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"},
                         {"role": "assistant", "content": "hi"},
                         {"role": "user", "content": [{"type": "text", "text": QUESTION}]}],
        })
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["object"] == "chat.completion" and data["model"] == "vanilla_rag"
    message = data["choices"][0]["message"]
    assert message["role"] == "assistant" and message["content"] == "Paris [1]"
    assert message["citations"] == [{"n": c["n"], "id": c["id"], "title": c["title"]} for c in data["selfrag"]["citations"]]
    assert message["citations"] and message["citations"][0]["id"] == "paris"
    assert data["usage"]["total_tokens"] == data["selfrag"]["total_tokens"] > 0
    # The earlier turns: the question was first read with them (one call), then answered.
    assert [s["action"] for s in data["selfrag"]["reasoning_chain"][:2]] == ["standalone_question", "retrieve"]
    assert data["selfrag"]["details"]["followup"] == {"asked": QUESTION, "standalone": QUESTION}


def test_chat_stream_chunks_add_up_to_the_answer():
    llm = ScriptedBackend({QUESTION: "Paris, on the Seine"})
    with client(make_app(make_answerer(llm))) as c:
        r = c.post("/v1/chat/completions", json={"model": "vanilla_rag", "stream": True,
                                                 "stream_options": {"include_usage": True},
                                                 "messages": [{"role": "user", "content": QUESTION}]})
    got = [d for _, d in events(r.text)]
    assert got[-1] == "[DONE]"
    chunks = got[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Paris, on the Seine\n[1]"
    final = next(c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"] == "stop")
    assert final["selfrag"]["answer"] == "Paris, on the Seine" and final["citations"][0]["n"] == 1
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0


def test_methods_and_health():
    with client(make_app()) as c:
        methods = c.get("/v1/methods").json()
        health = c.get("/health").json()
        models = c.get("/v1/models").json()
    ids = [m["id"] for m in methods["data"]]
    assert "self_rag" in ids and "vanilla_rag" in ids and methods == models
    assert next(m for m in methods["data"] if m["id"] == "vanilla_rag")["default"]
    assert health["status"] == "ok" and health["answering"] and health["default_method"] == "vanilla_rag"
    assert health["auth_required"] is False


def test_request_errors_are_one_json_line_each():
    limits = Limits(max_body_bytes=2000, max_question_chars=50)
    with client(make_app(limits=limits)) as c:
        assert_json_error(c.post("/v1/ask", content=b'{"question": "x"}', headers={"content-type": "text/plain"}),
                          415, "application/json")
        assert_json_error(c.post("/v1/ask", content=b"{nope", headers={"content-type": "application/json"}),
                          400, "not valid JSON")
        assert_json_error(c.post("/v1/ask", json=["a list"]), 400, "JSON object")
        assert_json_error(c.post("/v1/ask", json={"question": "   "}), 400, "empty")
        assert_json_error(c.post("/v1/ask", json={"question": 42}), 400, "string")
        assert_json_error(c.post("/v1/ask", json={"question": "x" * 51}), 400, "51 characters", "limit is 50")
        assert_json_error(c.post("/v1/ask", json={"question": QUESTION, "stream": "yes"}), 400, "true or false")
        assert_json_error(c.post("/v1/ask", json={"question": "x" * 40, "pad": "y" * 3000}), 413, "limit is 2000")
        err = assert_json_error(c.post("/v1/ask", json={"question": QUESTION, "method": "gpt-4"}), 404, "unknown method")
        assert err["code"] == "model_not_found"
        assert_json_error(c.post("/v1/chat/completions", json={"model": "vanilla_rag", "messages": []}), 400, "messages")
        assert_json_error(c.post("/v1/chat/completions", json={
            "model": "vanilla_rag", "messages": [{"role": "system", "content": "x"}]}), 400, "role 'user'")
        assert_json_error(c.get("/v1/nothing-here"), 404, "no such endpoint")
        assert_json_error(c.get("/v1/ask"), 405, "GET is not allowed")


def test_a_chunked_body_over_the_limit_is_refused_while_read():
    def body():
        for _ in range(10):
            yield b"x" * 500

    with client(make_app(limits=Limits(max_body_bytes=2000))) as c:
        r = c.post("/v1/ask", content=body(), headers={"content-type": "application/json"})
    assert_json_error(r, 413, "over the limit of 2000")


def test_backend_failure_is_502_and_a_crash_is_500_without_a_traceback(caplog):
    class Crashing(HeldBackend):
        async def generate_request(self, request):
            raise RuntimeError("boom in sk-abcdefghijklmnop internals")

    failing = ScriptedBackend({QUESTION: {"error": "model overloaded", "status": 400}})
    with caplog.at_level(logging.WARNING, logger="selfrag.serve"), client(make_app(make_answerer(failing))) as c:
        err = assert_json_error(c.post("/v1/ask", json={"question": QUESTION}), 502, "HTTP 400", "error id")
    # What the upstream said is in the server log under the error id, not in the reply.
    assert "model overloaded" not in err["message"] and f"{err['id']}: scripted error: model overloaded" in caplog.text
    with caplog.at_level(logging.ERROR, logger="selfrag.serve"), client(make_app(make_answerer(Crashing()))) as c:
        r = c.post("/v1/ask", json={"question": QUESTION})
        err = assert_json_error(r, 500, "internal error")
        assert "boom" not in r.text and "RuntimeError" not in r.text and err["code"] == "internal_error"
        streamed = events(c.post("/v1/ask", json={"question": QUESTION, "stream": True}).text)
    assert streamed[-1][0] == "error" and "internal error" in streamed[-1][1]["error"]["message"]
    assert "boom" in caplog.text  # the server log has it, the client does not


def test_an_answer_over_the_timeout_is_504():
    with client(make_app(make_answerer(HeldBackend(), timeout_s=0.2))) as c:
        assert_json_error(c.post("/v1/ask", json={"question": QUESTION}), 504, "no answer within 0.2 s")
        assert c.get("/health").json()["in_flight"] == 0


def test_a_method_that_needs_documents_on_a_server_without_any():
    with client(make_app(make_answerer(docs=None))) as c:
        assert_json_error(c.post("/v1/ask", json={"question": QUESTION}), 400, "--docs PATH or --index DIR")
        assert c.post("/v1/ask", json={"question": QUESTION, "method": "no_retrieval"}).status_code == 200


def test_a_runs_only_server_does_not_answer():
    from selfrag.serve.app import create_app
    from selfrag.serve.settings import ServeSettings

    with client(create_app(ServeSettings(), None)) as c:
        assert_json_error(c.post("/v1/ask", json={"question": QUESTION}), 503, "shows runs only")
        assert c.get("/health").json()["answering"] is False
        assert c.get("/v1/methods").status_code == 200


def test_the_pages_and_their_files_are_served_with_a_strict_policy():
    with client(make_app()) as c:
        page = c.get("/")
        runs = c.get("/runs")
        script = c.get("/static/trace.js")
    assert page.status_code == 200 and 'id="ask-form"' in page.text
    assert runs.status_code == 200 and 'id="run-a"' in runs.text
    assert script.status_code == 200 and "renderTrace" in script.text
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    for html in (page.text, runs.text):  # nothing from elsewhere: the page works offline
        assert "http://" not in html and "https://" not in html
