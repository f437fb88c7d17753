"""The runs view's API over real run directories (written by `selfrag run`), and nothing outside --runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from selfrag.cli.main import main
from selfrag.serve.app import create_app
from selfrag.serve.runs import RunsRoot, correct
from selfrag.serve.settings import ServeSettings

from .test_serve_kit import client

REPO = Path(__file__).resolve().parents[1]


def write_run(tmp: Path, run_id: str, replies: dict, method: str = "vanilla_rag") -> None:
    (tmp / f"{run_id}.json").write_text(json.dumps(replies))
    code = main(["run", str(tmp / "exp.yaml"), "--llm", f"scripted:{tmp / f'{run_id}.json'}",
                 "--set", f"architecture.name={method}", "--set", "run.max_error_rate=1.0",
                 "--output", str(tmp / "results" / "nested"), "--run-id", run_id, "--no-progress"])
    assert code == 0


def make_runs(tmp: Path) -> Path:
    """results/nested/{a,b}: four questions each; a: 1 wrong, 1 error; b: all right but one abstention.

    Also outside/ (a run-like folder beside results/) and results/linked, a link to it.
    """
    rows = [{"id": f"q{i}", "question": f"Who wrote book {i}?", "answers": [f"Author {i}"],
             "contexts": [{"title": f"Book {i}", "text": f"Book {i} was written by Author {i}."}]}
            for i in range(1, 5)]
    (tmp / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp / "exp.yaml").write_text(
        f"inherits: {REPO / 'configs' / 'vanilla_rag.yaml'}\n"
        f"data: {{dataset: jsonl, path: {tmp / 'questions.jsonl'}}}\n"
        "cache: {enabled: false}\n"
    )
    write_run(tmp, "a", {"book 1?": "Author 1", "book 2?": "nobody",
                         "book 3?": {"error": "bad request", "status": 400}, "book 4?": "Author 4"})
    write_run(tmp, "b", {"book 1?": "Author 1", "book 2?": "Author 2", "book 3?": "Author 3",
                         "book 4?": "Author 4"}, method="no_retrieval")
    # Each line says whether the method abstained; these scripted answers never do, so mark one.
    preds = tmp / "results" / "nested" / "b" / "predictions.jsonl"
    lines = [json.loads(x) for x in preds.read_text().splitlines()]
    for rec in lines:
        rec["abstained"] = rec["id"] == "q4"
    preds.write_text("".join(json.dumps(r) + "\n" for r in lines))
    (tmp / "outside").mkdir()
    (tmp / "outside" / "config.yaml").write_text("experiment: {name: secret}\n")
    (tmp / "outside" / "predictions.jsonl").write_text('{"id": "s1", "question": "secret?"}\n')
    os.symlink(tmp / "outside", tmp / "results" / "linked")
    return tmp


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    return make_runs(tmp_path_factory.mktemp("runs"))


@pytest.fixture
def c(runs):
    app = create_app(ServeSettings(runs_dir=runs / "results"), None)
    with client(app) as test_client:
        yield test_client


def test_the_list_finds_nested_runs_but_not_linked_ones(c):
    data = c.get("/v1/runs").json()
    assert [r["id"] for r in data["runs"]] == ["nested/a", "nested/b"]
    assert data["runs"][0]["method"] == "vanilla_rag" and data["runs"][0]["n_answered"] == 3
    assert data["root"] == "results"  # the folder's name, not where it is


def test_one_run_summary_and_its_questions(c):
    data = c.get("/v1/runs/table", params={"run": "nested/a"}).json()
    s = data["summary"]
    assert s["method"] == "vanilla_rag" and s["n_answered"] == 3 and s["n_errors"] == 1
    assert s["run_dir"] == "nested/a"  # the name, not where the folder is
    rows = {r["id"]: r for r in data["questions"]}
    assert rows["q1"]["correct"] is True and rows["q2"]["correct"] is False
    assert rows["q3"]["error"] and rows["q3"]["correct"] is None and "bad request" in rows["q3"]["error"]
    assert not any(r["abstained"] for r in rows.values())
    b = {r["id"]: r for r in c.get("/v1/runs/table", params={"run": "nested/b"}).json()["questions"]}
    assert [q for q, r in b.items() if r["abstained"]] == ["q4"]


def test_one_question_with_its_trace_view(c):
    data = c.get("/v1/runs/question", params={"run": "nested/a", "id": "q1"}).json()
    assert data["record"]["prediction"] == "Author 1"
    view = data["view"]
    assert view["answer"] == "Author 1" and view["decision"]["kind"] == "fixed" and view["decision"]["needed"]
    assert [p["title"] for p in view["passages"]] == ["Book 1"] and view["passages"][0]["cited"]
    assert view["citations_known"] and data["record"]["abstained"] is False
    assert [s["action"] for s in view["timeline"]] == ["retrieve", "generate"]
    missing = c.get("/v1/runs/question", params={"run": "nested/a", "id": "q99"})
    assert missing.status_code == 404 and "q99" in missing.json()["error"]["message"]


def test_two_runs_question_by_question(c):
    data = c.get("/v1/runs/compare", params={"a": "nested/a", "b": "nested/b"}).json()
    assert data["a"]["row"]["method"] == "vanilla_rag" and data["b"]["row"]["method"] == "no_retrieval"
    by_id = {q["id"]: q for q in data["questions"]}
    assert by_id["q1"]["outcome"] == "both right" and by_id["q2"]["outcome"] == "b only"
    assert by_id["q3"]["outcome"] == "unscored"  # an error is not scored
    assert by_id["q2"]["f1_delta"] == 1.0


@pytest.mark.parametrize("bad", ["../outside", "nested/../../outside", "..", "/etc", "nested/./a", ".hidden",
                                 "nested\\..\\..\\outside", "", "nested//a"])
def test_paths_that_leave_the_runs_folder_are_refused(c, bad):
    for path, params in (("/v1/runs/table", {"run": bad}), ("/v1/runs/question", {"run": bad, "id": "s1"}),
                         ("/v1/runs/compare", {"a": "nested/a", "b": bad})):
        r = c.get(path, params=params)
        assert r.status_code in (400, 403), (bad, r.text)
        assert "secret" not in r.text and "Traceback" not in r.text


def test_percent_encoded_dots_are_refused_too(c):
    r = c.get("/v1/runs/table?run=%2e%2e%2foutside")
    assert r.status_code == 400 and "secret" not in r.text


def test_a_link_out_of_the_folder_is_refused(c):
    r = c.get("/v1/runs/table", params={"run": "linked"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "outside_runs"


def test_a_missing_run_is_404_and_a_server_without_runs_says_so(c):
    assert c.get("/v1/runs/table", params={"run": "nested/zz"}).status_code == 404
    with client(create_app(ServeSettings(), None)) as other:
        r = other.get("/v1/runs")
    assert r.status_code == 404 and "--runs DIR" in r.json()["error"]["message"]


def test_resolve_keeps_to_the_root(runs):
    root = RunsRoot(runs / "results")
    assert root.resolve("nested/a") == (runs / "results" / "nested" / "a").resolve()


def test_correctness_reads_accuracy_then_match_then_em():
    assert correct({"accuracy": 1.0, "em": 0.0}) is True
    assert correct({"em": 0.0, "match": 1.0}) is True
    assert correct({"em": 0.0, "f1": 0.5}) is False
    assert correct({"f1": 0.5}) is None
