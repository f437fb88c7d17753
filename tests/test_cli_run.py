"""selfrag run / analyze / compare through the command line, and their one-line errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from selfrag.cli.main import main

REPO = Path(__file__).resolve().parents[1]


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """A working directory with a small dataset, a script and a config using relative paths."""
    monkeypatch.chdir(tmp_path)
    rows = [
        {"id": f"q{i}", "question": f"Who wrote book {i}?", "answers": [f"Author {i}"],
         "type": "bridge" if i < 3 else "comparison", "level": "hard" if i % 2 else "easy",
         "contexts": [{"title": f"Book {i}", "text": f"Book {i} was written by Author {i}."}],
         "supporting_titles": [f"Book {i}"]}
        for i in range(1, 5)
    ]
    Path("questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    Path("script.json").write_text(json.dumps({"book 1?": "Author 1", "book 2?": "Author 2",
                                               "book 3?": "nobody", "book 4?": "Author 4"}))
    Path("exp.yaml").write_text(
        f"inherits: {REPO / 'configs' / 'vanilla_rag.yaml'}\n"
        "experiment: {name: cli}\n"
        "llm: {spec: 'scripted:script.json'}\n"
        "data: {dataset: jsonl, path: questions.jsonl}\n"
        "cache: {path: cache.db}\n"
    )
    return tmp_path


def test_run_analyze_compare_end_to_end(workspace, capsys):
    code, out, err = run_cli(capsys, "run", "exp.yaml", "--limit", "3", "--run-id", "a", "--no-progress")
    assert code == 0, err
    run_a = workspace / "results" / "a"
    assert f"results: {run_a}" in out and "em " in out
    summary = json.loads((run_a / "summary.json").read_text())
    assert summary["n_answered"] == 3 and summary["metrics"]["em"] == pytest.approx(2 / 3)

    code, out, err = run_cli(capsys, "run", "exp.yaml", "--set", "architecture.name=no_retrieval",
                             "--output", "other", "--run-id", "b", "--concurrency", "2")
    assert code == 0, err
    run_b = workspace / "other" / "b"
    assert json.loads((run_b / "summary.json").read_text())["n_answered"] == 4
    assert "4/4" in err  # the progress bar (stderr) shows done/total

    code, out, _ = run_cli(capsys, "analyze", str(run_a))
    assert code == 0 and "vanilla_rag (bm25, top_k 5)" in out and "retrieval_recall@5" in out
    code, out, _ = run_cli(capsys, "analyze", str(run_a), "--breakdown")
    assert "By question type:" in out and "By level:" in out and "By retrieval decision:" in out
    assert "comparison" in out.split("By level:")[0]  # the third question is a comparison one
    code, out, _ = run_cli(capsys, "analyze", str(run_a), "--json")
    assert json.loads(out)["run_id"] == "a"

    code, out, err = run_cli(capsys, "compare", str(run_a), str(run_b), "--plot", "plots/cmp.png")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:5] == ["run", "method", "retriever", "model", "n"]
    assert lines[2].split()[:5] == ["a", "vanilla_rag", "bm25", "scripted", "3"]
    assert lines[3].split()[:5] == ["b", "no_retrieval", "-", "scripted", "4"]
    png = workspace / "plots" / "cmp.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, out, _ = run_cli(capsys, "compare", str(run_a), "--json")
    assert json.loads(out)[0]["f1"] == pytest.approx(2 / 3)


def test_config_yaml_is_resolved_and_redacted(workspace, capsys):
    code, _, err = run_cli(capsys, "run", "exp.yaml", "--limit", "1", "--run-id", "r", "--no-progress",
                           "--set", "experiment.description=key sk-abcdefghijklmnopqrstu")
    assert code == 0, err
    text = (workspace / "results" / "r" / "config.yaml").read_text()
    assert f"path: {workspace / 'questions.jsonl'}" in text and f"path: {workspace / 'cache.db'}" in text
    assert "sk-abcdefghijklmnopqrstu" not in text
    assert "sk-abcdefghijklmnopqrstu" not in (workspace / "results" / "r" / "summary.json").read_text()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run"], "give a config file"),
        (["run", "missing.yaml"], "config file not found: "),
        (["run", "exp.yaml", "--set", "data.subset_size=none-such"], "config key 'data.subset_size' (in --set)"),
        (["run", "exp.yaml", "--set", "retrieval.topk=3"], "unknown config key 'retrieval.topk'"),
        (["run", "exp.yaml", "--set", "data.path=nope.jsonl"], "data file not found"),
        (["run", "exp.yaml", "--limit", "0"], "--limit must be at least 1"),
        (["run", "--resume", "nowhere"], "run directory not found: nowhere"),
        (["analyze", "."], "is not a run directory"),
        (["compare", "nowhere"], "run directory not found"),
    ],
)
def test_one_line_errors(workspace, capsys, argv, message):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert err.startswith("selfrag: error: ") and message in err and err.count("\n") == 1


def test_run_id_clash_and_resume_with_a_different_config(workspace, capsys):
    assert run_cli(capsys, "run", "exp.yaml", "--limit", "2", "--run-id", "x", "--no-progress")[0] == 0
    code, _, err = run_cli(capsys, "run", "exp.yaml", "--run-id", "x")
    assert code == 2 and "already exists" in err
    code, _, err = run_cli(capsys, "run", "exp.yaml", "--resume", "results/x", "--set", "retrieval.top_k=2")
    assert code == 2 and "differs from the run's" in err and "retrieval.top_k" in err
    # The same config may continue with more questions.
    code, _, err = run_cli(capsys, "run", "exp.yaml", "--resume", "results/x", "--no-progress")
    assert code == 0, err
    lines = (workspace / "results" / "x" / "predictions.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["id"] for line in lines) == ["q1", "q2", "q3", "q4"]


@pytest.fixture
def unwritable_dir(tmp_path):
    """A folder nobody may create anything in (for root, whom permissions do not stop: sysfs)."""
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        yield locked
        locked.chmod(0o700)
    elif Path("/sys/kernel").is_dir():
        yield Path("/sys")
    else:  # pragma: no cover - root without sysfs
        pytest.skip("no folder that root cannot write to")


@pytest.mark.parametrize("where", ["a file", "under a file", "unwritable"])
def test_an_output_that_cannot_hold_runs_is_one_line(workspace, capsys, unwritable_dir, where):
    Path("taken").write_text("not a folder\n")
    output = {"a file": "taken", "under a file": "taken/runs", "unwritable": str(unwritable_dir / "runs")}[where]
    code, out, err = run_cli(capsys, "run", "exp.yaml", "--output", output, "--no-progress")
    assert code == 2, err
    assert err.startswith("selfrag: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and output.split("/")[0] in err
    expected = {"a file": "taken is a file", "under a file": "taken is a file", "unwritable": "cannot create"}[where]
    assert expected in err and "--output" in err


@pytest.mark.parametrize("how", ["read-only folder", "predictions.jsonl is a folder"])
def test_resuming_a_run_directory_that_cannot_be_written_is_one_line(workspace, capsys, how):
    if how == "read-only folder" and os.geteuid() == 0:
        pytest.skip("permissions do not stop root; the other case covers it")
    assert run_cli(capsys, "run", "exp.yaml", "--limit", "1", "--run-id", "ro", "--no-progress")[0] == 0
    run_dir = workspace / "results" / "ro"
    if how == "read-only folder":
        run_dir.chmod(0o500)
    else:
        (run_dir / "predictions.jsonl").unlink()
        (run_dir / "predictions.jsonl").mkdir()
    try:
        code, _, err = run_cli(capsys, "run", "--resume", str(run_dir), "--no-progress")
    finally:
        run_dir.chmod(0o700)
    assert code == 2 and err.startswith("selfrag: error: ") and err.count("\n") == 1, err
    assert str(run_dir) in err and "Traceback" not in err
