"""The quality benchmark's report: tables, critique rows read from runs, the glance matrix (no model)."""

from __future__ import annotations

import json

import pytest

from lab import quality_report, quality_runs
from lab import quality_stats as qs
from lab.quality_critique import evidence_rows
from tests.helpers.lab_records import pred


def test_every_dataset_has_report_columns():
    # A dataset without columns crashed the report after its first run (hotpotqa_mix did).
    assert set(quality_runs.DATASETS) <= set(quality_report.SHOWN)
    assert all(m in quality_report.METRIC_NAMES for cols in quality_report.SHOWN.values() for m in cols)


def _report_row(variant, rows, baseline, target_n):
    row = qs.summarize_rows(rows, target_n=target_n, metrics=("em", "f1"))
    row.update(dataset="hotpotqa", variant=variant, note="", remark="", model="m.gguf")
    row["vs_baseline"] = None if variant == "vanilla_rag_evidence" else qs.compare_to(rows, baseline, "f1")
    row["vs_plain"] = None if variant == "vanilla_rag" else qs.compare_to(rows, baseline, "f1")
    return row


def test_report_renders_a_partial_run_with_its_own_n(tmp_path):
    base = [pred(str(i), "Paris" if i % 2 else "Lyon") for i in range(4)]
    partial = [pred("0", "Paris"), pred("1", '{"answer": 1}')]
    rows = [_report_row("vanilla_rag_evidence", base, base, 4), _report_row("self_rag", partial, base, 4)]
    env = {"date": "2026-01-01 00:00 UTC", "platform": "Linux", "cpus": 2, "python": "3.11", "commit": "abc1234",
           "llm": "llamacpp:/m/x.gguf", "model_tag": "x", "model": "x.gguf", "model_path": "/m/x.gguf",
           "model_sha256": "ab" * 32}
    critics = [qs.auc_row("relevance: self_rag combined [IsRel] verdict (1 / 0), passages it judged", [1.0, 0.0],
                          [0.0, 0.0, 1.0], 2, defaults=1, notes="retrieved passages of the run"),
               {**qs.auc_row("support: x", [0.9], [0.1], 2), "carried": {"commit": "old1234", "date": "2026-11-20"}}]
    data = {"environment": env, "args": {}, "rows": rows, "critics": critics}
    text = quality_report.render(data)
    assert "(`/m/x.gguf`, sha256 `abababababababab…`)" in text
    assert "| `self_rag` | 2 of 4 (partial) |" in text
    assert "| `vanilla_rag_evidence` | 4 | 0.500 | 0.500 | (baseline) | +0.000 [+0.000, +0.000] (n=4) |" in text
    assert "Δ F1 vs vanilla_rag_evidence [95% CI] | Δ vs vanilla_rag [95% CI]" in text
    assert "1 (1 json)" in text  # malformed answers with their reason
    assert "(n=2)" in text  # compared on the 2 questions both answered
    assert ("| x | relevance: self_rag combined [IsRel] verdict (1 / 0), passages it judged | 2 | 6 (2 x 3) | 0.583 | "
            "1 verdicts unparsed (read as the default, relevant); retrieved passages of the run |") in text
    assert "| x | support: x | 2 | 1 (1 x 1) | 1.000 | carried over from the report of commit old1234" in text
    assert "python -m lab.quality --llm llamacpp:/m/x.gguf" in text and "benchmarks/" not in text
    (tmp_path / "quality_x.json").write_text(json.dumps(data))
    assert "| x | [quality_x.md](quality_x.md) | 2026-01-01 00:00 UTC | abc1234 | hotpotqa 4 (partial) |" in (
        quality_report.index(quality_report.load_reports(tmp_path)))


def _mix(qid, *, answerable, truthful, abstained=False):
    rec = pred(qid, "" if abstained else "x")
    rec["answerable"] = answerable
    rec["metrics"].update(truthfulness=truthful, abstention=float(abstained))
    return rec


def test_grounding_section_splits_the_mix_and_pairs_truthfulness():
    # Hand-checked: vanilla is right, wrong, wrong, wrong (truthful 1, -1, -1, -1: mean -0.5); the abstaining
    # method matches it on the answerable two and abstains on both unanswerable ones (1, -1, 0, 0: mean 0).
    base = [_mix("a", answerable=True, truthful=1.0), _mix("b", answerable=True, truthful=-1.0),
            _mix("c", answerable=False, truthful=-1.0), _mix("d", answerable=False, truthful=-1.0)]
    abst = [_mix("a", answerable=True, truthful=1.0), _mix("b", answerable=True, truthful=-1.0),
            _mix("c", answerable=False, truthful=0.0, abstained=True),
            _mix("d", answerable=False, truthful=0.0, abstained=True)]
    rows = []
    for variant, recs in (("vanilla_rag", base), ("self_rag_abstain", abst)):
        row = {"dataset": "hotpotqa_mix", "variant": variant, "grounding": qs.grounding(recs)}
        if variant != "vanilla_rag":
            row["truthful_vs_baseline"] = qs.compare_to(recs, base, "truthfulness")
        rows.append(row)
    assert rows[1]["truthful_vs_baseline"]["diff"] == pytest.approx(0.5)
    text = "\n".join(quality_report.grounding_section(rows))
    # columns: n, F1, abstained, answered acc., truthful
    assert "| hotpotqa_mix | `self_rag_abstain` | unanswerable | 2 | 0.000 | 1.000 | – | 0.000 |" in text
    assert "| hotpotqa_mix | `vanilla_rag` | unanswerable | 2 | 0.000 | 0.000 | – | -1.000 |" in text
    assert "| hotpotqa_mix | `vanilla_rag` | answerable | 2 | 0.000 | 0.000 | – | 0.000 |" in text
    assert "- `self_rag_abstain`: +0.500 [+0.000, +1.000] (n=4)" in text
    assert "- `vanilla_rag`" not in text  # the baseline is not paired with itself


def test_evidence_rows_score_the_verdict_only_on_passages_it_judged():
    """Hand-checked: gold A (judged 1), distractor B (judged 0), distractor C not judged (imputed 0.5).
    Verdict over judged passages: 1 pair, A > B: AUC 1.0 (with C's imputed 0.5 it would still be 1.0,
    so C gets an imputed 1.0 here to show it is left out). Prior: A 0.2 < C 0.6, A 0.2 > B 0.1: 0.5."""
    step = {"action": "rank_evidence", "details": {"passages": [
        {"title": "A", "model": 1.0, "judged": True, "prior": 0.2, "fused": 0.6},
        {"title": "B", "model": 0.0, "judged": True, "prior": 0.1, "fused": 0.05},
        {"title": "C", "model": 1.0, "judged": False, "prior": 0.6, "fused": 0.8},
    ]}}
    rows = evidence_rows({"self_rag": [{"id": "q1", "reasoning_chain": [step]}]}, {"q1": {"A"}})
    by = {r["source"]: r for r in rows}
    verdict = by["relevance: self_rag combined [IsRel] verdict (1 / 0), passages it judged"]
    assert (verdict["auc"], verdict["n_pos"], verdict["n_neg"]) == (1.0, 1, 1)
    assert by["relevance: self_rag lexical prior (retrieval.links)"]["auc"] == 0.5
    assert by["relevance: self_rag fused (model + prior) / 2"]["auc"] == 0.5


def test_evidence_rows_read_the_verdicts_from_the_candidates_when_ranked_by_the_prior():
    """A run ranked by the prior alone has no verdict in its rank step: the [IsRel] verdicts come from
    the one-passage candidates (A relevant, B irrelevant, C never judged), and no fused row is made.
    Hand-checked: verdict A 1 > B 0: AUC 1.0 over 1 gold and 1 distractor; prior A 0.5 > B 0.1, A 0.5 < C 0.6: 0.5."""
    step = {"action": "rank_evidence", "details": {"passages": [
        {"title": "A", "model": None, "judged": False, "prior": 0.5, "fused": None},
        {"title": "B", "model": None, "judged": False, "prior": 0.1, "fused": None},
        {"title": "C", "model": None, "judged": False, "prior": 0.6, "fused": None},
    ]}}
    candidates = [
        {"passage_title": "A", "passage_indices": [1, 2, 3], "joint": True, "relevance": "relevant"},
        {"passage_title": "A", "passage_indices": [1], "joint": False, "relevance": "relevant"},
        {"passage_title": "B", "passage_indices": [2], "joint": False, "relevance": "irrelevant"},
    ]
    row = {"id": "q1", "reasoning_chain": [step], "details": {"all_candidates": candidates}}
    by = {r["source"]: r for r in evidence_rows({"self_rag": [row]}, {"q1": {"A"}})}
    verdict = by["relevance: self_rag combined [IsRel] verdict (1 / 0), passages it judged"]
    assert (verdict["auc"], verdict["n_pos"], verdict["n_neg"]) == (1.0, 1, 1)
    assert by["relevance: self_rag lexical prior (retrieval.links)"]["auc"] == 0.5
    assert "relevance: self_rag fused (model + prior) / 2" not in by


def test_report_marks_a_carried_row():
    row = _report_row("vanilla_rag", [pred("0", "Paris")], [pred("0", "Paris")], 1)
    row["carried"] = {"commit": "abc", "date": "2026-11-20"}
    text = "\n".join(quality_report.dataset_table("hotpotqa", [row]))
    assert "- `vanilla_rag`: carried over from the report of commit abc (2026-11-20)" in text


def test_glance_matrix_marks_intervals_and_partial_runs():
    def row(dataset, variant, value, metric, n=100, target=100, cmp=None):
        return {"dataset": dataset, "variant": variant, "n": n, "target_n": target, "partial": n < target,
                "metrics": {metric: value}, "vs_baseline": cmp}
    rows = [row("hotpotqa", "vanilla_rag", 0.5, "f1"),
            row("hotpotqa", "self_rag", 0.6, "f1", cmp={"diff": 0.1, "lo": 0.02, "hi": 0.18, "n": 100}),
            row("hotpotqa", "self_corrective", 0.45, "f1", cmp={"diff": -0.05, "lo": -0.1, "hi": 0.01, "n": 100}),
            row("pubmedqa", "self_rag", 0.4, "accuracy", n=20, target=50,
                cmp={"diff": -0.1, "lo": -0.2, "hi": -0.05, "n": 20}),
            row("hotpotqa_mix", "self_rag", 0.3, "f1")]
    lines = quality_report.glance({"rows": rows})
    assert lines[0] == "| method | HotpotQA F1 | PubMedQA acc. |"  # hotpotqa_mix is not a column
    assert "| `vanilla_rag` | 0.500 | – |" in lines
    assert "| `self_rag` | 0.600 (+0.100 ▲) | 0.400 (-0.100 ▼, n=20) |" in lines
    assert "| `self_corrective` | 0.450 (-0.050) | – |" in lines  # the interval includes 0: no mark
    assert quality_report.glance({"rows": [row("hotpotqa_mix", "self_rag", 0.3, "f1")]}) == []
    # A lower end that prints as +0.000 is not marked as above 0.
    edge = row("hotpotqa", "self_rag", 0.6, "f1", cmp={"diff": 0.03, "lo": 0.0001, "hi": 0.07, "n": 100})
    assert "| `self_rag` | 0.600 (+0.030) |" in quality_report.glance({"rows": [edge]})


def test_with_glance_replaces_only_the_marked_block():
    start, end = quality_report.GLANCE_START, quality_report.GLANCE_END
    text = f"intro\n{start}\nold table\n{end}\nrest\n"
    assert quality_report.with_glance(text, "new table\n") == f"intro\n{start}\nnew table\n{end}\nrest\n"
    assert quality_report.with_glance("no markers here\n", "new table\n") is None
    # A start marker whose note names an older path is found, and rewritten with today's note.
    older = f"a\n<!-- quality at a glance: start (benchmarks/quality.py writes this block) -->\nold\n{end}\n"
    assert quality_report.with_glance(older, "new\n") == f"a\n{start}\nnew\n{end}\n"


def test_every_glance_block_is_the_committed_reports_matrix():
    """The results-at-a-glance blocks (README.md, docs/results.md: whichever has the markers) must say
    what the committed reports say: a report rewritten without them (say, by a run from another
    checkout) fails here until `python -m lab.quality --report-only --llm ...` is run in this one."""
    from lab.quality import GLANCE_FILES, HERE

    block = quality_report.glance_text(quality_report.load_reports(HERE / "results"))
    if not block:
        pytest.skip("no quality report is committed")
    texts = {p.name: p.read_text(encoding="utf-8") for p in GLANCE_FILES if p.is_file()}
    marked = {name: text for name, text in texts.items() if quality_report.with_glance(text, "") is not None}
    assert marked, "no file holds the glance markers"
    for name, text in marked.items():
        assert quality_report.with_glance(text, block) == text, f"{name}: its glance block is not the reports' matrix"
