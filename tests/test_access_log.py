"""`selfrag serve` logs one line per request: time, method, path, status, latency; never a query or a header."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from selfrag.serve.access_log import line, safe_path
from tests.test_serve_kit import QUESTION, client, make_answerer, make_app

LINE = re.compile(r'^selfrag: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ "(?P<method>[A-Z]+) (?P<path>\S+)" (?P<status>\d{3}|-) '
                  r'(?P<ms>\d+\.\d) ms$')


def logged(err: str) -> list[re.Match]:
    out = []
    for text in err.splitlines():
        m = LINE.match(text)
        if m:
            out.append(m)
    return out


def test_each_request_is_one_line_with_method_path_status_and_latency(capsys):
    with client(make_app()) as c:
        assert c.get("/v1/models?api_key=sk-secret-in-query", headers={"Authorization": "Bearer sk-hdr-secret"}) \
            .status_code == 200
        assert c.post("/v1/ask", json={"question": QUESTION, "method": "vanilla_rag"}).status_code == 200
        assert c.get("/no/such/page").status_code == 404
    err = capsys.readouterr().err
    lines = logged(err)
    assert [(m["method"], m["path"], m["status"]) for m in lines] == [
        ("GET", "/v1/models", "200"), ("POST", "/v1/ask", "200"), ("GET", "/no/such/page", "404")]
    assert all(float(m["ms"]) >= 0 for m in lines)
    assert "sk-secret-in-query" not in err and "sk-hdr-secret" not in err and "api_key" not in err
    assert "Bearer" not in err and "authorization" not in err.lower()


def test_refused_requests_are_logged_too(capsys):
    with client(make_app(), host=("10.1.2.3", 4000)) as c:  # another machine, no API key: the guard refuses
        assert c.get("/v1/models").status_code == 403
    (m,) = logged(capsys.readouterr().err)
    assert (m["method"], m["path"], m["status"]) == ("GET", "/v1/models", "403")


def test_a_streamed_answer_is_timed_to_its_end(capsys):
    with client(make_app(make_answerer())) as c:
        r = c.post("/v1/chat/completions", json={"model": "vanilla_rag", "stream": True,
                                                 "messages": [{"role": "user", "content": QUESTION}]})
        assert r.status_code == 200 and "[DONE]" in r.text
    (m,) = logged(capsys.readouterr().err)
    assert (m["method"], m["path"], m["status"]) == ("POST", "/v1/chat/completions", "200")


def test_the_log_can_be_turned_off(capsys):
    from selfrag.serve.app import create_app
    from selfrag.serve.settings import Limits, ServeSettings

    app = create_app(ServeSettings(limits=Limits()), make_answerer(), access_log=False)
    with client(app) as c:
        assert c.get("/v1/models").status_code == 200
    assert logged(capsys.readouterr().err) == []


@pytest.mark.parametrize(("path", "shown"), [
    ("/v1/models", "/v1/models"),
    ('/a b"c', "/a%20b%22c"),
    ("/x\nselfrag: forged", "/x%0Aselfrag:%20forged"),
])
def test_paths_cannot_forge_or_split_lines(path, shown):
    assert safe_path(path) == shown
    assert "\n" not in line("GET", path, 200, 0.0123)
    assert len(safe_path("/" + "a" * 500)) == 200


def test_the_line_format():
    when = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)
    assert line("POST", "/v1/ask", 200, 1.8432, when) == '2025-06-01T12:00:00Z "POST /v1/ask" 200 1843.2 ms'
    assert line("GET", "/", None, 0.0, when).endswith('"GET /" - 0.0 ms')
