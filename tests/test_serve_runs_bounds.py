"""The runs view over run directories that are damaged, edited by hand or very large (real run
directories written by `selfrag run`, the app under a real uvicorn on 127.0.0.1): one bad run never
breaks the list, an error never shows where the server keeps its files, and a run's files are parsed
once while they stay the same, with a bound on their size."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import httpx
import pytest

import selfrag.eval.results
import selfrag.serve.runs
from selfrag.serve.app import create_app
from selfrag.serve.background import BackgroundServer
from selfrag.serve.settings import Limits, ServeSettings

from .test_serve_runs import make_runs

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    return make_runs(tmp_path_factory.mktemp("made"))


@pytest.fixture
def results(made, tmp_path) -> Path:
    """A fresh copy of the runs for each test (tests damage them)."""
    out = tmp_path / "results"
    shutil.copytree(made / "results" / "nested", out / "nested")
    return out


def serve(results: Path, **limits):
    return BackgroundServer(create_app(ServeSettings(runs_dir=results, limits=Limits(**limits)), None))


def get(server, path: str, **params) -> httpx.Response:
    return httpx.get(server.url + path, params=params, timeout=60)


@pytest.mark.parametrize("summary", ["[1, 2, 3]", '"a string"', "7", "null"])
def test_a_summary_that_is_not_an_object_breaks_only_its_own_run(results, summary, caplog):
    (results / "nested" / "a" / "summary.json").write_text(summary)
    with caplog.at_level(logging.INFO), serve(results) as server:
        listed = get(server, "/v1/runs")
        assert listed.status_code == 200, listed.text
        assert [r["id"] for r in listed.json()["runs"]] == ["nested/a", "nested/b"]
        assert listed.json()["runs"][1]["method"] == "no_retrieval"
        table = get(server, "/v1/runs/table", run="nested/a")
        assert table.status_code == 400 and "summary.json is not a JSON object" in table.json()["error"]["message"]
        assert get(server, "/v1/runs/table", run="nested/b").status_code == 200
    assert "Traceback" not in caplog.text


@pytest.mark.parametrize("summary", ['{"n_questions": "four"}', '{"max_error_rate": "high"}',
                                     '{"metrics": 3, "n_questions": [1]}'])
def test_a_summary_with_values_of_the_wrong_type_is_a_400(results, summary, caplog):
    (results / "nested" / "a" / "summary.json").write_text(summary)
    with caplog.at_level(logging.INFO), serve(results) as server:
        assert get(server, "/v1/runs").status_code == 200
        table = get(server, "/v1/runs/table", run="nested/a")
        compare = get(server, "/v1/runs/compare", a="nested/a", b="nested/b")
    for r in (table, compare):
        assert r.status_code == 400 and r.json()["error"]["code"] == "bad_run", r.text
    assert "Traceback" not in caplog.text


def test_a_record_with_an_id_that_is_not_text_is_a_400(results, caplog):
    with (results / "nested" / "a" / "predictions.jsonl").open("a") as fh:
        fh.write('{"id": [1, 2], "prediction": "x"}\n')
    with caplog.at_level(logging.INFO), serve(results) as server:
        r = get(server, "/v1/runs/table", run="nested/a")
        assert r.status_code == 400 and "predictions.jsonl" in r.json()["error"]["message"], r.text
        assert get(server, "/v1/runs/question", run="nested/a", id="q1").status_code == 200
    assert "Traceback" not in caplog.text


def test_an_error_names_the_run_not_the_server_s_folders(results):
    (results / "nested" / "a" / "summary.json").write_text('{"method": ')
    with serve(results) as server:
        r = get(server, "/v1/runs/table", run="nested/a")
    message = r.json()["error"]["message"]
    assert r.status_code == 400 and message.startswith("nested/a/summary.json:1: not valid JSON"), message
    assert str(results) not in r.text and str(results.parent) not in r.text


def _count_reads(monkeypatch) -> list[str]:
    """The name of every run file read in full (both readers: the runs view's and eval's)."""
    reads: list[str] = []
    real = selfrag.eval.results.read_bytes

    def counting(path, within=None):
        reads.append(Path(path).name)
        return real(path, within)

    monkeypatch.setattr(selfrag.eval.results, "read_bytes", counting)
    monkeypatch.setattr(selfrag.serve.runs, "read_bytes", counting)
    return reads


def test_a_run_is_parsed_once_while_its_files_stay_the_same(results, monkeypatch):
    reads = _count_reads(monkeypatch)
    with serve(results) as server:
        first = get(server, "/v1/runs/table", run="nested/a").json()
        parsed = reads.count("predictions.jsonl")
        assert parsed >= 1
        for _ in range(5):
            assert get(server, "/v1/runs/table", run="nested/a").json() == first
        assert get(server, "/v1/runs/compare", a="nested/a", b="nested/b").status_code == 200
        assert reads.count("predictions.jsonl") == parsed + 2  # run b's, for the comparison, once
        # A question's trace is read from its own line.
        q1 = get(server, "/v1/runs/question", run="nested/a", id="q1").json()
        assert q1["record"]["prediction"] == "Author 1" and q1["view"]["timeline"]
        # The file changes (a resumed run appends): read again, the new question is there.
        preds = results / "nested" / "a" / "predictions.jsonl"
        extra = json.loads(preds.read_text().splitlines()[0]) | {"id": "q9", "prediction": "Author 9"}
        with preds.open("a") as fh:
            fh.write(json.dumps(extra) + "\n")
        rows = get(server, "/v1/runs/table", run="nested/a").json()["questions"]
        assert [r["id"] for r in rows][-1] == "q9"
        assert get(server, "/v1/runs/question", run="nested/a", id="q9").json()["record"]["prediction"] == "Author 9"


def test_a_run_file_over_the_bound_is_refused_by_name(results):
    preds = results / "nested" / "a" / "predictions.jsonl"
    size = preds.stat().st_size
    with serve(results, max_run_file_bytes=size - 1) as server:
        assert get(server, "/v1/runs").status_code == 200
        for r in (get(server, "/v1/runs/table", run="nested/a"), get(server, "/v1/runs/question", run="nested/a", id="q1")):
            error = r.json()["error"]
            assert r.status_code == 413 and error["code"] == "run_too_large", r.text
            assert "nested/a/predictions.jsonl" in error["message"] and "--max-run-file-mb" in error["message"]
            assert str(results) not in r.text
