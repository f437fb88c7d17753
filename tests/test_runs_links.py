"""The runs view reads no file that a link inside a run points to outside --runs (issue 55, defect 1).

Real run directories written by `selfrag run`, real symbolic links, the app under
a real uvicorn on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import httpx
import pytest

from selfrag.eval.report import load_run
from selfrag.serve.app import create_app
from selfrag.serve.background import BackgroundServer
from selfrag.serve.settings import ServeSettings

from .test_serve_runs import make_runs

SECRET = "sk-outside0123456789secret"


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """results/ with the runs of test_serve_runs, plus runs whose files link outside it."""
    tmp = make_runs(tmp_path_factory.mktemp("links"))
    results, outside = tmp / "results", tmp / "secrets"
    outside.mkdir()
    (outside / "secret.json").write_text(json.dumps({"method": "LEAKED", "model": SECRET, "api_key": SECRET}))
    (outside / "records.jsonl").write_text(json.dumps({"id": "s1", "question": f"what is {SECRET}?"}) + "\n")
    (outside / "config.yaml").write_text(f"experiment: {{name: {SECRET}}}\n")
    real = results / "nested" / "a"
    for name, linked in (("summary.json", "secret.json"), ("predictions.jsonl", "records.jsonl"),
                         ("ledger.jsonl", "records.jsonl"), ("config.yaml", "config.yaml")):
        run = results / f"via_{name.split('.')[0]}"
        run.mkdir()
        shutil.copy(real / "config.yaml", run / "config.yaml")
        (run / "predictions.jsonl").write_text((real / "predictions.jsonl").read_text())
        (run / name).unlink(missing_ok=True)
        os.symlink(outside / linked, run / name)
    # A link that stays inside the runs folder is fine.
    inside = results / "inside"
    inside.mkdir()
    shutil.copy(real / "config.yaml", inside / "config.yaml")
    os.symlink(real / "predictions.jsonl", inside / "predictions.jsonl")
    os.symlink(real / "summary.json", inside / "summary.json")
    return tmp


@pytest.fixture(scope="module")
def server(tree):
    with BackgroundServer(create_app(ServeSettings(runs_dir=tree / "results"), None)) as srv:
        yield srv


@pytest.mark.server
@pytest.mark.parametrize("run", ["via_summary", "via_predictions", "via_ledger", "via_config"])
@pytest.mark.parametrize("route", ["table", "question", "compare"])
def test_a_file_linked_outside_the_runs_folder_is_refused_on_every_route(server, run, route):
    params = {"table": {"run": run}, "question": {"run": run, "id": "s1"}, "compare": {"a": "nested/a", "b": run}}
    r = httpx.get(f"{server.url}/v1/runs/{route}", params=params[route], timeout=30)
    assert r.status_code == 403, r.text
    error = r.json()["error"]
    assert error["code"] == "outside_runs" and "links outside the runs folder" in error["message"]
    assert "\n" not in error["message"]
    assert SECRET not in r.text and "LEAKED" not in r.text


@pytest.mark.server
def test_the_list_shows_no_facts_from_outside_and_inside_links_still_work(server):
    listed = {r["id"]: r for r in httpx.get(f"{server.url}/v1/runs", timeout=30).json()["runs"]}
    assert listed["via_summary"]["method"] is None  # listed, but nothing read through the link
    assert "LEAKED" not in json.dumps(listed)
    inside = httpx.get(f"{server.url}/v1/runs/table", params={"run": "inside"}, timeout=30)
    assert inside.status_code == 200
    assert [q["id"] for q in inside.json()["questions"]] == ["q1", "q2", "q3", "q4"]


def test_the_reader_checks_the_opened_file_not_the_name(tree, tmp_path):
    from selfrag.eval.results import OutsideRoot, read_bytes

    root = (tree / "results").resolve()
    with pytest.raises(OutsideRoot):
        read_bytes(root / "via_summary" / "summary.json", root)
    # The same link is read by the CLI, which names a run directly and has no bound.
    assert json.loads(read_bytes(root / "via_summary" / "summary.json"))["method"] == "LEAKED"
    fifo = root / "inside" / "pipe.json"
    os.mkfifo(fifo)
    try:
        with pytest.raises(OutsideRoot, match="not a regular file"):
            read_bytes(fifo, root)  # refused at once, not blocked waiting for a writer
    finally:
        fifo.unlink()
    with pytest.raises(OutsideRoot):
        load_run(root / "via_ledger", within=root)


@pytest.mark.server
def test_odd_contents_of_a_run_are_a_refusal_or_a_reading_never_a_500(tree):
    results = tree / "results"
    real = results / "nested" / "a"
    deep, odd = results / "deep", results / "odd"
    for run in (deep, odd):
        run.mkdir()
        shutil.copy(real / "config.yaml", run / "config.yaml")
    nest = "[" * 5000 + "]" * 5000
    (deep / "summary.json").write_text(nest)
    (deep / "predictions.jsonl").write_text('{"id": "x", "question": ' + nest + "}\n")
    (odd / "predictions.jsonl").write_text('{"id": "s1", "question": "x \\ud800", "prediction": "y \\udfff"}\n')
    with BackgroundServer(create_app(ServeSettings(runs_dir=results), None)) as srv:
        table = httpx.get(f"{srv.url}/v1/runs/table", params={"run": "deep"}, timeout=30)
        question = httpx.get(f"{srv.url}/v1/runs/question", params={"run": "odd", "id": "s1"}, timeout=30)
    assert table.status_code == 400 and "nested more than 100 levels deep" in table.json()["error"]["message"]
    assert question.status_code == 200 and question.json()["record"]["question"] == "x \ufffd"
    from selfrag.cli.main import main

    assert main(["analyze", str(deep)]) == 2  # one line (checked by the CLI's own tests), not a RecursionError
