"""`selfrag analyze` defines each metric in one line (footer and --help), so side-by-side numbers read right."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selfrag.cli.main import main
from selfrag.eval.metric_notes import DEFINITIONS, KNOWN, definition, footer

REPO = Path(__file__).resolve().parents[1]


def test_every_metric_a_summary_can_hold_is_defined():
    for metric in KNOWN:
        assert definition(metric), metric
    assert definition("retrieval_recall@10") == DEFINITIONS["retrieval_recall@k"]
    assert definition("not_a_metric") is None
    for text in DEFINITIONS.values():
        assert "\n" not in text


def test_match_truthfulness_and_citations_say_how_they_differ():
    assert "anywhere in the answer" in DEFINITIONS["match"]
    assert "-1 wrong" in DEFINITIONS["truthfulness"] and "stricter than match" in DEFINITIONS["truthfulness"]
    assert "passage it cites" in DEFINITIONS["answer_in_citations"]


def test_footer_has_one_line_per_metric_in_order():
    text = footer({"f1": 0.4, "match": 0.33, "retrieval_recall@5": 1.0, "mystery": 1})
    lines = text.splitlines()
    assert lines[0] == "Metrics:" and len(lines) == 4
    assert [line.split()[0] for line in lines[1:]] == ["f1", "match", "retrieval_recall@5"]
    assert footer({}) == ""


@pytest.fixture
def run_dir(tmp_path, capsys) -> Path:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({" ": "yes"}))
    assert main(["run", str(REPO / "configs" / "vanilla_rag.yaml"), "--limit", "2", "--llm", f"scripted:{script}",
                 "--no-cache", "--output", str(tmp_path / "runs"), "--no-progress", "--json"]) == 0
    return tmp_path / "runs" / json.loads(capsys.readouterr().out)["run_id"]


def test_analyze_prints_the_definitions_of_its_metrics(run_dir, capsys):
    assert main(["analyze", str(run_dir)]) == 0
    out = capsys.readouterr().out
    table, _, notes = out.partition("\nMetrics:\n")
    summary = json.loads((run_dir / "summary.json").read_text())
    defined = [line.split()[0] for line in notes.splitlines() if line.strip()]
    assert defined == [m for m in summary["metrics"] if definition(m)]
    assert {"match", "truthfulness", "f1", "evidence_f1"} <= set(defined)
    assert main(["analyze", str(run_dir), "--no-definitions"]) == 0
    assert "Metrics:" not in capsys.readouterr().out
    assert main(["analyze", str(run_dir), "--json"]) == 0
    json.loads(capsys.readouterr().out)  # --json stays one JSON document


def test_analyze_help_lists_every_definition(capsys):
    with pytest.raises(SystemExit):
        main(["analyze", "--help"])
    out = capsys.readouterr().out
    for metric, text in DEFINITIONS.items():
        assert f"  {metric}" in out and text.split(",")[0] in " ".join(out.split())
