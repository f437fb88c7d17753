"""Deep JSON nesting and text that is not Unicode, from every door (issue 55, defects 6 and 7).

A request body, a `--docs` JSONL line, a scripted file and a dataset line nested
thousands deep, and a question holding a byte that is not UTF-8 or a lone
surrogate: each is a 400 (server) or one line naming the file and line (CLI),
never a RecursionError or UnicodeEncodeError traceback. CLI cases run as real
`python -m selfrag` processes; server cases against the app under a real uvicorn.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

import selfrag
from selfrag.serve.background import BackgroundServer
from selfrag.serve.settings import Limits
from tests.helpers.servers import ScriptedHTTPServer

from .test_serve_kit import QUESTION, make_app

SRC = str(Path(selfrag.__file__).resolve().parents[1])
DEEP = "[" * 30000 + "]" * 30000  # 60 KB, the body
MAX_JSON_DEPTH = 100  # selfrag.validation.MAX_JSON_DEPTH (checked below)


def selfrag_cli(*argv: str | bytes, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "selfrag", *argv], cwd=cwd, env={**os.environ, "PYTHONPATH": SRC},
                          capture_output=True, text=True, errors="replace", timeout=300)


def one_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    return proc.stderr.strip()


# -- the shared reader -------------------------------------------------------------------------


@pytest.mark.parametrize("text", [DEEP, '{"a": ' * 5000 + "1" + "}" * 5000, "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)])
def test_nesting_beyond_the_bound_is_a_json_error_not_a_recursion_error(text):
    from selfrag.validation import MAX_JSON_DEPTH as bound
    from selfrag.validation import load_json

    assert bound == MAX_JSON_DEPTH
    with pytest.raises(json.JSONDecodeError, match=f"nested more than {MAX_JSON_DEPTH} levels deep"):
        load_json(text)


def test_nesting_within_the_bound_and_ordinary_json_load_as_before():
    from selfrag.validation import decode_json, load_json

    text = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert load_json(text) == json.loads(text)
    doc = {"a": [1, {"b": "caf\u00e9 \U0001f600"}], "c": None}
    assert load_json(json.dumps(doc)) == doc and load_json(json.dumps(doc).encode()) == doc
    assert decode_json('  {"x": 1} tail', 2) == ({"x": 1}, 10)
    with pytest.raises(json.JSONDecodeError, match="Extra data"):
        load_json('{"x": 1} tail')


def test_the_error_points_at_the_line_that_goes_too_deep():
    from selfrag.validation import load_json

    text = '{"ok": 1,\n"deep":\n' + "[" * 500 + "]" * 500 + "}"
    with pytest.raises(json.JSONDecodeError) as info:
        load_json(text)
    assert info.value.lineno == 3


def test_lone_surrogates_are_refused_or_replaced():
    from selfrag.validation import load_json, lone_surrogate

    with pytest.raises(json.JSONDecodeError, match=r"lone surrogate \\ud800"):
        load_json('{"q": "x \\ud800"}')
    assert load_json('{"q": "x \\ud800"}', surrogates="replace") == {"q": "x \ufffd"}
    assert load_json('{"q": "\\ud83d\\ude00"}') == {"q": "\U0001f600"}  # a pair is a character
    assert lone_surrogate("x \udcff") == "byte 0xff at character 3 is not UTF-8"
    assert lone_surrogate("plain caf\u00e9") is None


# -- the server ---------------------------------------------------------------------------------


@pytest.mark.server
@pytest.mark.parametrize("path", ["/v1/ask", "/v1/chat/completions"])
def test_a_deeply_nested_body_is_400(path):
    with BackgroundServer(make_app(limits=Limits(max_body_bytes=200_000))) as server:
        r = httpx.post(server.url + path, content=DEEP.encode(), headers={"content-type": "application/json"},
                       timeout=30)
        nested_question = httpx.post(server.url + path, headers={"content-type": "application/json"}, timeout=30,
                                     content=b'{"question": ' + DEEP.encode() + b"}")
        after = httpx.post(server.url + "/v1/ask", json={"question": QUESTION}, timeout=30)
    for bad in (r, nested_question):
        assert bad.status_code == 400, bad.text
        assert bad.json()["error"]["code"] == "bad_json" and "nested more than" in bad.json()["error"]["message"]
    assert after.status_code == 200


@pytest.mark.server
def test_a_body_that_is_not_an_object_is_named_in_json_terms():
    with BackgroundServer(make_app()) as server:
        r = httpx.post(server.url + "/v1/ask", content=b"null", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["message"] == "the body must be a JSON object, not null"


# -- the CLI: files -------------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path) -> Path:
    (tmp_path / "docs.jsonl").write_text('{"id": "d1", "text": "Paris is the capital of France."}\n')
    (tmp_path / "deep.jsonl").write_text('{"id": "d1", "text": "Paris."}\n{"id": "d2", "text": ' + DEEP + "}\n")
    (tmp_path / "surrogate.jsonl").write_text('{"id": "d1", "text": "Paris."}\n{"id": "d2", "text": "x \\ud800"}\n')
    (tmp_path / "script.json").write_text('{"capital": "Paris"}')
    (tmp_path / "deep_script.json").write_text('{"capital": ' + DEEP + "}")
    (tmp_path / "questions.jsonl").write_text(
        json.dumps({"id": "q1", "question": "What is the capital?", "answers": ["Paris"]}) + "\n"
        + '{"id": "q2", "question": "x", "answers": ' + DEEP + "}\n")
    (tmp_path / "surrogate_q.jsonl").write_text('{"id": "q1", "question": "x \\ud800", "answers": ["y"]}\n')
    (tmp_path / "exp_sur.yaml").write_text("data: {dataset: jsonl, path: surrogate_q.jsonl}\n"
                                           "architecture: {name: no_retrieval}\ncache: {enabled: false}\n")
    (tmp_path / "deep_ix").mkdir()
    (tmp_path / "deep_ix" / "manifest.json").write_text(DEEP)
    (tmp_path / "exp.yaml").write_text("data: {dataset: jsonl, path: questions.jsonl}\narchitecture: {name: no_retrieval}\n"
                                       "cache: {enabled: false}\n")
    return tmp_path


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["ask", "q", "--docs", "deep.jsonl", "--llm", "scripted:script.json"], "deep.jsonl:2: not valid JSON (nested more than"),
        (["index", "build", "--docs", "deep.jsonl", "--out", "ix"], "deep.jsonl:2: not valid JSON (nested more than"),
        (["ask", "q", "--docs", "surrogate.jsonl", "--llm", "scripted:script.json"], "surrogate.jsonl:2: not valid JSON (a string holds the lone surrogate"),
        (["ask", "capital?", "--docs", "docs.jsonl", "--llm", "scripted:deep_script.json"], "deep_script.json: line 1: not valid JSON (nested more than"),
        (["run", "exp.yaml", "--llm", "scripted:script.json", "--no-progress", "--output", "out"], "questions.jsonl:2: not valid JSON (nested more than"),
        (["run", "exp_sur.yaml", "--llm", "scripted:script.json", "--no-progress", "--output", "out"], "surrogate_q.jsonl:1: not valid JSON (a string holds the lone surrogate"),
        (["index", "info", "deep_ix"], "manifest.json is corrupt"),
    ],
    ids=["docs-jsonl", "index-build", "docs-surrogate", "scripted-file", "dataset-line", "dataset-surrogate",
         "index-manifest"],
)
def test_a_deep_or_broken_line_in_a_file_is_one_line_naming_file_and_line(project, argv, expected):
    assert expected in one_line(selfrag_cli(*argv, cwd=project))


def test_ask_with_a_question_byte_that_is_not_utf8_is_one_line(project):
    calls = []

    def upstream(path, body, headers):
        calls.append(body)
        return 200, {"choices": [{"message": {"content": "Paris"}, "finish_reason": "stop"}]}, {}

    with ScriptedHTTPServer(upstream) as server:
        spec = f"openai:m@{server.url}/v1"
        bad = selfrag_cli("ask", b"x \xff", "--docs", "docs.jsonl", "--llm", spec, "--method", "vanilla_rag",
                          cwd=project)
        good = selfrag_cli("ask", "What is the capital?", "--docs", "docs.jsonl", "--llm", spec,
                           "--method", "vanilla_rag", cwd=project)
    line = one_line(bad)
    assert "the question is not UTF-8 text (byte 0xff at character 3 is not UTF-8)" in line
    assert good.returncode == 0 and "Paris" in good.stdout
    assert len(calls) == 1  # the bad question never reached the server
