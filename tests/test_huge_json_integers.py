"""A JSON integer longer than Python converts (4,300 digits) is bad JSON on every door.

json raises a bare ValueError for it, not a JSONDecodeError, so it escaped the
readers' "not valid JSON" handling as a traceback: `--docs` JSONL, dataset files
(even with `skip_invalid`), scripted files, index manifests and run files, and
a request body. Each case here is a real `python -m selfrag` process or the app
under a real uvicorn.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

import selfrag
from selfrag.serve.background import BackgroundServer
from selfrag.validation import decode_json, load_json

from .test_serve_kit import QUESTION, make_app

SRC = str(Path(selfrag.__file__).resolve().parents[1])
BIG = "9" * 5000  # over sys.get_int_max_str_digits() (4,300)


def selfrag_cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "selfrag", *argv], cwd=cwd, env={**os.environ, "PYTHONPATH": SRC},
                          capture_output=True, text=True, timeout=300)


def one_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    return proc.stderr.strip()


def test_the_reader_turns_a_huge_integer_into_a_json_error_at_its_line():
    text = '{"ok": 1,\n"n": ' + BIG + "}"
    with pytest.raises(json.JSONDecodeError, match="an integer has more than 4300 digits") as info:
        load_json(text)
    assert info.value.lineno == 2
    with pytest.raises(json.JSONDecodeError):
        decode_json("[-" + BIG + "]")
    # Up to the limit, and long floats, load as before.
    assert load_json("[" + "9" * 4300 + "]") == [int("9" * 4300)]
    assert load_json("[1." + "5" * 5000 + "]") == [1.5555555555555556]


@pytest.fixture
def project(tmp_path) -> Path:
    (tmp_path / "docs.jsonl").write_text('{"id": "d1", "text": "Paris is the capital of France."}\n')
    (tmp_path / "big_docs.jsonl").write_text('{"id": "d1", "text": "Paris."}\n{"id": "d2", "text": "x", "n": ' + BIG + "}\n")
    (tmp_path / "script.json").write_text('{"capital": "Paris"}')
    (tmp_path / "big_script.json").write_text('{"capital": ' + BIG + "}")
    (tmp_path / "questions.jsonl").write_text(
        json.dumps({"id": "q1", "question": "What is the capital?", "answers": ["Paris"]}) + "\n"
        + '{"id": "q2", "question": "x", "answers": [' + BIG + "]}\n")
    (tmp_path / "good.jsonl").write_text(json.dumps({"id": "q1", "question": "What is the capital?", "answers": ["Paris"]}) + "\n")
    for name, path, extra in (("exp", "questions.jsonl", ""), ("skip", "questions.jsonl", ", skip_invalid: true"),
                              ("good", "good.jsonl", "")):
        (tmp_path / f"{name}.yaml").write_text(f"data: {{dataset: jsonl, path: {path}{extra}}}\n"
                                               "architecture: {name: no_retrieval}\ncache: {enabled: false}\n")
    (tmp_path / "big_ix").mkdir()
    (tmp_path / "big_ix" / "manifest.json").write_text('{"kind": "selfrag-index", "n": ' + BIG + "}")
    return tmp_path


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["ask", "q", "--docs", "big_docs.jsonl", "--llm", "scripted:script.json"],
         "big_docs.jsonl:2: not valid JSON (an integer has more than 4300 digits"),
        (["index", "build", "--docs", "big_docs.jsonl", "--out", "ix"],
         "big_docs.jsonl:2: not valid JSON (an integer has more than 4300 digits"),
        (["ask", "capital?", "--docs", "docs.jsonl", "--llm", "scripted:big_script.json"],
         "big_script.json: line 1: not valid JSON (an integer has more than 4300 digits"),
        (["run", "exp.yaml", "--llm", "scripted:script.json", "--no-progress", "--output", "out"],
         "questions.jsonl:2: not valid JSON (an integer has more than 4300 digits"),
        (["index", "info", "big_ix"], "manifest.json is corrupt"),
    ],
    ids=["docs-jsonl", "index-build", "scripted-file", "dataset-line", "index-manifest"],
)
def test_a_huge_integer_in_a_file_is_one_line_naming_file_and_line(project, argv, expected):
    assert expected in one_line(selfrag_cli(*argv, cwd=project))


def test_a_dataset_line_with_a_huge_integer_is_skipped_with_skip_invalid(project):
    proc = selfrag_cli("run", "skip.yaml", "--llm", "scripted:script.json", "--no-progress", "--output", "out",
                       cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    (run,) = (project / "out").iterdir()
    ids = [json.loads(line)["id"] for line in (run / "predictions.jsonl").read_text().splitlines()]
    assert ids == ["q1"]


@pytest.fixture
def run_dir(project) -> Path:
    proc = selfrag_cli("run", "good.yaml", "--llm", "scripted:script.json", "--no-progress", "--output", "runs",
                       cwd=project)
    assert proc.returncode == 0, proc.stderr
    (run,) = (project / "runs").iterdir()
    return run


@pytest.mark.parametrize("name", ["predictions.jsonl", "ledger.jsonl"])
def test_a_huge_integer_in_a_run_line_is_an_unreadable_line(project, run_dir, name):
    with (run_dir / name).open("a") as fh:
        fh.write('{"id": "q9", "session": 1, "n": ' + BIG + "}\n")
    analyze = selfrag_cli("analyze", str(run_dir), cwd=project)
    assert analyze.returncode == 0 and "Traceback" not in analyze.stderr, analyze.stderr
    assert "1 answered, 0 errors, of 1" in analyze.stdout
    resume = selfrag_cli("run", "--resume", str(run_dir), "--llm", "scripted:script.json", "--no-progress", cwd=project)
    assert resume.returncode == 0 and "Traceback" not in resume.stderr, resume.stderr


def test_a_huge_integer_in_a_summary_is_one_line(project, run_dir):
    summary = run_dir / "summary.json"
    summary.write_text(summary.read_text().replace("{", '{"big": ' + BIG + ", ", 1))
    other = project / "runs" / "other"
    shutil.copytree(run_dir, other)
    for argv in (["analyze", str(run_dir)], ["compare", str(other), str(run_dir)],
                 ["run", "--resume", str(run_dir), "--llm", "scripted:script.json", "--no-progress"]):
        line = one_line(selfrag_cli(*argv, cwd=project))
        assert "summary.json:1: not valid JSON (an integer has more than 4300 digits" in line, line


@pytest.mark.server
def test_a_request_body_with_a_huge_integer_is_400():
    with BackgroundServer(make_app()) as server:
        bad = httpx.post(server.url + "/v1/ask", headers={"content-type": "application/json"}, timeout=30,
                         content=('{"question": "q", "top_k": ' + BIG + "}").encode())
        after = httpx.post(server.url + "/v1/ask", json={"question": QUESTION}, timeout=30)
    assert bad.status_code == 400, bad.text
    assert bad.json()["error"]["code"] == "bad_json" and "more than 4300 digits" in bad.json()["error"]["message"]
    assert after.status_code == 200
