"""The quality benchmark's pure parts: statistics, reading runs, the report (no model runs)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import quality_report  # noqa: E402
import quality_runs  # noqa: E402
import quality_stats as qs  # noqa: E402


def pred(qid, answer, *, gold=("Paris",), f1=None, error=False, retrieved=True, calls=2, tokens=100,
         latency_ms=1000.0, candidates=()):
    if error:
        return {"id": qid, "prediction": None, "error": {"type": "BackendError", "message": "x"},
                "metrics": {}, "accounting": {"latency_ms": 5.0}}
    f1 = qs.best_over(qs.f1_score, answer, gold) if f1 is None else f1
    return {
        "id": qid, "question": f"q {qid}", "gold": list(gold), "prediction": answer,
        "metrics": {"em": float(answer == gold[0]), "f1": f1},
        "accounting": {"llm_calls": calls, "total_tokens": tokens, "latency_ms": latency_ms, "retrieved": retrieved},
        "model": "m.gguf", "candidates": list(candidates),
    }


def write(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# -- statistics ------------------------------------------------------------------------------


def test_auc_known_values_and_ties():
    assert qs.auc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert qs.auc([0.1], [0.9]) == 0.0
    # Binary verdicts: every tie counts one half.
    assert qs.auc([1, 1, 0], [1, 0, 0, 0]) == pytest.approx((2 * 3 + 2 * 0.5 + 0.5 * 3) / 12)
    assert qs.auc([0.5, 0.5], [0.5]) == 0.5
    assert qs.auc([], [0.1]) is None and qs.auc([0.1], []) is None


def test_auc_matches_the_pairwise_definition():
    pos = [0.3, 0.7, 0.7, 0.2, 0.9]
    neg = [0.7, 0.1, 0.3, 0.3]
    pairs = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    assert qs.auc(pos, neg) == pytest.approx(pairs / (len(pos) * len(neg)))


def test_paired_bootstrap_known_data():
    out = qs.paired_bootstrap([1.0] * 10, [0.0] * 10)
    assert out == {"diff": 1.0, "lo": 1.0, "hi": 1.0, "n": 10}
    a = [1, 0, 1, 1, 0, 1, 0, 1, 1, 1]
    b = [0, 0, 1, 0, 0, 1, 0, 0, 1, 0]
    first = qs.paired_bootstrap(a, b)
    assert first["diff"] == pytest.approx(0.4)
    assert first["lo"] < 0.4 < first["hi"]
    assert first["lo"] >= 0.0 and first["hi"] <= 0.8  # differences are 0 or 1: the mean stays in [0, 0.8]
    assert qs.paired_bootstrap(a, b) == first  # fixed seed: the same interval every time
    assert qs.paired_bootstrap([], []) is None
    with pytest.raises(ValueError):
        qs.paired_bootstrap([1.0], [1.0, 0.0])


# -- reading and joining -----------------------------------------------------------------------


def test_read_predictions_keeps_one_record_per_id_in_wanted_order(tmp_path):
    path = write(tmp_path / "p.jsonl", [pred("b", "x", error=True), pred("a", "Paris"), pred("b", "Lyon")])
    with path.open("a") as fh:
        fh.write('{"id": "c", "predic')  # a torn last line
    rows = qs.read_predictions(path, ["a", "b", "c"])
    assert [r["id"] for r in rows] == ["a", "b"]
    assert rows[1]["prediction"] == "Lyon"  # the answer wins over the earlier error
    assert qs.read_predictions(tmp_path / "missing.jsonl") == []


def test_join_by_id_pairs_only_questions_both_answered():
    a = [pred("1", "Paris"), pred("2", "x"), pred("3", "y", error=True)]
    b = [pred("2", "Paris"), pred("1", "Lyon"), pred("3", "Paris")]
    joined = qs.join_by_id(a, b)
    assert [(i, x["prediction"], y["prediction"]) for i, x, y in joined] == [("1", "Paris", "Lyon"), ("2", "x", "Paris")]
    cmp = qs.compare_to(a, b, "f1")
    assert cmp["n"] == 2 and cmp["diff"] == pytest.approx(0.0) and cmp["metric"] == "f1"


def test_malformed_answers_are_counted_by_reason():
    rows = [pred("1", ""), pred("2", '{"answer": "Paris"}'), pred("3", "[Relevant]"),
            pred("4", "Question: what is"), pred("5", "Paris"), pred("6", "", error=True)]
    assert qs.malformed_reasons(rows) == {"empty": 1, "json": 1, "reflection label": 1, "prompt text": 1}
    s = qs.summarize_rows(rows, target_n=6, metrics=("f1",))
    assert s["malformed"] == 4 and s["errors"] == 1 and s["n"] == 5


def test_yes_no_accuracy_is_the_normalised_answer_against_the_gold():
    assert qs.yes_no_correct("Yes.", ["yes"]) == 1.0
    assert qs.yes_no_correct("yes, they were", ["yes"]) == 0.0
    assert qs.yes_no_correct(None, ["no"]) == 0.0
    s = qs.summarize_rows([pred("1", "No", gold=("no",)), pred("2", "yes", gold=("no",))], target_n=2,
                          metrics=("em",), yes_no=True)
    assert s["metrics"]["yesno"] == 0.5
    # One "yes" answer of two, where the gold says "no" both times.
    assert s["metrics"]["answered_yes"] == 0.5 and s["metrics"]["gold_yes"] == 0.0


def test_an_answer_written_after_every_passage_was_filtered_out_is_counted():
    unread = pred("1", "yes", gold=("no",)) | {"reasoning_chain": [
        {"action": "retrieve"}, {"action": "evaluate_relevance"}, {"action": "no_relevant_documents"}]}
    read = pred("2", "no", gold=("no",)) | {"reasoning_chain": [{"action": "retrieve"}, {"action": "generate"}]}
    s = qs.summarize_rows([unread, read, pred("3", "Paris")], target_n=3, metrics=("em",))
    assert s["retrieval_rate"] == 1.0 and s["kept_none"] == 1


def test_support_pairs_split_correct_and_wrong_candidates():
    cands = [
        {"text": "Paris", "support": "no support", "details": {"sup": 0.9}},  # the probability wins
        {"text": "Lyon", "support": "fully supported", "details": {}},  # label: 1.0
        {"text": "Paris France city", "support": "partially supported", "details": {}},  # F1 0.5: correct
        {"text": "the city of Paris", "support": None, "details": {}},  # no score: left out
    ]
    correct, wrong, questions = qs.support_pairs([pred("1", "Paris", candidates=cands)])
    assert correct == [0.9, 0.5] and wrong == [1.0] and questions == 1


# -- runs and the report ------------------------------------------------------------------


def test_model_tag_and_hand_command_layout():
    assert quality_runs.model_tag(None) == "embedded"
    assert quality_runs.model_tag("llamacpp:/m/qwen2.5-coder-0.5b-instruct.gguf") == "qwen2.5-coder-0.5b-instruct"
    out = quality_runs.ROOT / "benchmarks" / "results"
    cmd = quality_runs.command_line(out, "tag", quality_runs.DATASETS["hotpotqa"], quality_runs.VARIANTS["self_rag"],
                                    100, "llamacpp:/m/x.gguf")
    assert cmd.startswith("selfrag run configs/self_rag.yaml --llm llamacpp:/m/x.gguf ")
    assert "--set data.subset_size=100 --set cache.enabled=false" in cmd
    assert cmd.endswith("--output benchmarks/results/runs/quality/tag/hotpotqa --run-id self_rag")


def test_every_variant_config_exists():
    assert quality_runs.missing_configs() == []


@pytest.mark.parametrize("name", [v.name for v in quality_runs.VARIANT_LIST])
def test_every_variant_loads_with_its_overrides(name):
    """A misspelt override key or value stops here, not after a benchmark run has started."""
    cfg = quality_runs.load_cfg(quality_runs.DATASETS["hotpotqa"], quality_runs.VARIANTS[name], 3, None)
    assert cfg.data.subset_size == 3


def test_every_dataset_has_report_columns():
    # A dataset without columns crashed the report after its first run (hotpotqa_mix did).
    assert set(quality_runs.DATASETS) <= set(quality_report.SHOWN)
    assert all(m in quality_report.METRIC_NAMES for cols in quality_report.SHOWN.values() for m in cols)


def _report_row(variant, rows, baseline, target_n):
    row = qs.summarize_rows(rows, target_n=target_n, metrics=("em", "f1"))
    row.update(dataset="hotpotqa", variant=variant, note="", remark="", model="m.gguf")
    row["vs_baseline"] = None if variant == "vanilla_rag" else qs.compare_to(rows, baseline, "f1")
    return row


def test_report_renders_a_partial_run_with_its_own_n(tmp_path):
    base = [pred(str(i), "Paris" if i % 2 else "Lyon") for i in range(4)]
    partial = [pred("0", "Paris"), pred("1", '{"answer": 1}')]
    rows = [_report_row("vanilla_rag", base, base, 4), _report_row("self_rag", partial, base, 4)]
    env = {"date": "2026-01-01 00:00 UTC", "platform": "Linux", "cpus": 2, "python": "3.11", "commit": "abc1234",
           "llm": "llamacpp:/m/x.gguf", "model_tag": "x", "model": "x.gguf", "model_path": "/m/x.gguf"}
    decisions = {"hotpotqa_n": 2, "hotpotqa_retrieval_rate": 0.5, "no_docs_n": 30, "no_docs_total": 40,
                 "no_docs_skip_rate": 0.9, "no_docs_skip_by_category": {"arithmetic": 1.0}, "sources": ["label_probs"],
                 "thresholds": [0.05], "p_yes_auc": 0.75, "p_yes_n": [2, 30]}
    critics = [qs.auc_row("relevance: combined [IsRel] verdict (binary)", [1.0, 0.0], [0.0, 0.0, 1.0], 2, defaults=1, target=3),
               qs.auc_row("relevance: mean", [0.9], [0.1], 2, vs_likelihood={"diff": 0.03, "lo": 0.01, "hi": 0.05, "n": 2})]
    data = {"environment": env, "args": {"n_critics": 2}, "rows": rows, "decisions": decisions, "critics": critics}
    text = quality_report.render(data)
    assert "| `self_rag` | 2 of 4 (partial) |" in text
    assert "| `vanilla_rag` | 4 | 0.500 | 0.500 | (baseline) |" in text
    assert "1 (1 json)" in text  # malformed answers with their reason
    assert "(n=2)" in text  # compared on the 2 questions both answered
    assert "| x | 2 | 50% | 30 of 40 (partial) | 90% | 0.750 | label_probs |" in text
    assert "| x | relevance: combined [IsRel] verdict (binary) | 2 of 3 (partial) | 6 (2 x 3) | 0.583 | 1 verdicts unparsed (read as the default, relevant)" in text
    assert "| 1.000 | vs question likelihood alone on the same paragraphs +0.030 [+0.010, +0.050] (questions resampled) |" in text
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


@pytest.mark.skipif(not quality_runs.DATASETS["hotpotqa"].path.is_file(), reason="benchmark data not found")
def test_collect_reads_run_directories_restricted_to_the_selection(tmp_path):
    import quality

    args = types.SimpleNamespace(
        out=tmp_path, tag="t", llm=None, n_hotpot=3, n_other=2, n_critics=3, selections={}, remarks={},
        env={}, recorded={},
    )
    ids = quality_runs.selection(quality_runs.load_cfg(quality_runs.DATASETS["hotpotqa"],
                                                        quality_runs.VARIANTS["vanilla_rag"], 5, None))
    ds = quality_runs.DATASETS["hotpotqa"]
    write(quality_runs.run_dir(tmp_path, "t", ds, quality_runs.VARIANTS["vanilla_rag"]) / "predictions.jsonl",
          [pred(i, "x") for i in ids])  # made with a larger n: only the first 3 count
    write(quality_runs.run_dir(tmp_path, "t", ds, quality_runs.VARIANTS["self_rag"]) / "predictions.jsonl",
          [pred(ids[0], "x")])
    rows = {r["variant"]: r for r in quality.collect(args)["rows"]}
    assert (rows["vanilla_rag"]["n"], rows["vanilla_rag"]["partial"]) == (3, False)
    assert (rows["self_rag"]["n"], rows["self_rag"]["partial"]) == (1, True)
    assert rows["self_rag"]["vs_baseline"]["n"] == 1


def test_a_run_measured_with_settings_the_config_no_longer_has_is_remarked(tmp_path):
    import yaml

    from selfrag.config import dump_yaml, with_absolute_paths

    ds, variant = quality_runs.DATASETS["hotpotqa"], quality_runs.VARIANTS["self_rag_separate"]
    dest = quality_runs.run_dir(tmp_path, "t", ds, variant)
    dest.mkdir(parents=True)
    cfg = with_absolute_paths(quality_runs.load_cfg(ds, variant, 100, None))
    (dest / "config.yaml").write_text(dump_yaml(cfg), encoding="utf-8")
    # The same settings (a smaller n may differ: data.subset_size is allowed to) give no remark.
    assert quality_runs.settings_remark(ds, variant, 100, None, dest) == ""
    assert quality_runs.settings_remark(ds, variant, 30, None, dest) == ""
    stored = yaml.safe_load(dump_yaml(cfg))
    stored["self_rag"]["top_k"] = 3  # the config the 0.5B run was first measured with
    (dest / "config.yaml").write_text(yaml.safe_dump(stored), encoding="utf-8")
    assert quality_runs.settings_remark(ds, variant, 100, None, dest) == (
        "measured with other settings than configs/self_rag_separate.yaml has now (self_rag.top_k)")
    # A directory without a stored config (written before configs were stored) is not judged.
    (dest / "config.yaml").unlink()
    assert quality_runs.settings_remark(ds, variant, 100, None, dest) == ""


def test_settings_remark_survives_a_config_that_no_longer_loads(tmp_path, monkeypatch):
    """A YAML edited while a long run went on (a key the running code does not know) once crashed
    the report at the run's end; the row now says the config was not compared."""
    from selfrag.errors import ConfigError

    def broken(*_args):
        raise ConfigError("unknown config key 'self_rag_segment.facts_first'")

    monkeypatch.setattr(quality_runs, "load_cfg", broken)
    ds, variant = quality_runs.DATASETS["hotpotqa"], quality_runs.VARIANTS["self_rag_segment"]
    remark = quality_runs.settings_remark(ds, variant, 100, None, tmp_path)
    assert remark.startswith("not compared with configs/self_rag_segment.yaml") and "facts_first" in remark


def test_evidence_rows_score_the_verdict_only_on_passages_it_judged():
    """Hand-checked: gold A (judged 1), distractor B (judged 0), distractor C not judged (imputed 0.5).
    Verdict over judged passages: 1 pair, A > B: AUC 1.0 (with C's imputed 0.5 it would still be 1.0,
    so C gets an imputed 1.0 here to show it is left out). Prior: A 0.2 < C 0.6, A 0.2 > B 0.1: 0.5."""
    import quality_critics

    step = {"action": "rank_evidence", "details": {"passages": [
        {"title": "A", "model": 1.0, "judged": True, "prior": 0.2, "fused": 0.6},
        {"title": "B", "model": 0.0, "judged": True, "prior": 0.1, "fused": 0.05},
        {"title": "C", "model": 1.0, "judged": False, "prior": 0.6, "fused": 0.8},
    ]}}
    rows = quality_critics.evidence_rows({"self_rag": [{"id": "q1", "reasoning_chain": [step]}]}, {"q1": {"A"}})
    by = {r["source"]: r for r in rows}
    verdict = by["relevance: self_rag combined [IsRel] verdict (1 / 0), passages it judged"]
    assert (verdict["auc"], verdict["n_pos"], verdict["n_neg"]) == (1.0, 1, 1)
    assert by["relevance: self_rag lexical prior (retrieval.links)"]["auc"] == 0.5
    assert by["relevance: self_rag fused (model + prior) / 2"]["auc"] == 0.5


def test_evidence_rows_read_the_verdicts_from_the_candidates_when_ranked_by_the_prior():
    """A run ranked by the prior alone has no verdict in its rank step: the [IsRel] verdicts come from
    the one-passage candidates (A relevant, B irrelevant, C never judged), and no fused row is made.
    Hand-checked: verdict A 1 > B 0: AUC 1.0 over 1 gold and 1 distractor; prior A 0.5 > B 0.1, A 0.5 < C 0.6: 0.5."""
    import quality_critics

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
    by = {r["source"]: r for r in quality_critics.evidence_rows({"self_rag": [row]}, {"q1": {"A"}})}
    verdict = by["relevance: self_rag combined [IsRel] verdict (1 / 0), passages it judged"]
    assert (verdict["auc"], verdict["n_pos"], verdict["n_neg"]) == (1.0, 1, 1)
    assert by["relevance: self_rag lexical prior (retrieval.links)"]["auc"] == 0.5
    assert "relevance: self_rag fused (model + prior) / 2" not in by


def test_carry_over_keeps_rows_whose_run_directory_is_not_here():
    """A fresh clone that measures one run must not erase what the committed report measured elsewhere."""
    import quality_carry

    old_env = {"commit": "old1234", "date": "2026-11-20 10:00 UTC"}
    previous = {
        "environment": old_env,
        "rows": [{"dataset": "hotpotqa", "variant": "self_rag", "n": 100},
                 {"dataset": "hotpotqa", "variant": "vanilla_rag", "n": 100},
                 {"dataset": "hotpotqa", "variant": "no_retrieval", "n": 100},
                 {"dataset": "pubmedqa", "variant": "vanilla_rag", "n": 50,
                  "carried": {"commit": "older99", "date": "2026-11-01"}}],
        "critics": [{"source": "relevance: prior", "auc": 0.9}, {"source": "support: x", "auc": 0.6}],
        "decisions": {"hotpotqa_n": 20, "no_docs_n": 40},
    }
    fresh = {"environment": {"commit": "new5678"}, "rows": [
        {"dataset": "mmlu_evidence", "variant": "self_rag", "n": 50},
        {"dataset": "hotpotqa", "variant": "vanilla_rag", "n": 100},
        {"dataset": "hotpotqa", "variant": "no_retrieval", "n": 10}],
        "critics": [{"source": "support: x", "auc": 0.7}], "decisions": {"hotpotqa_n": 0, "no_docs_n": 0}}
    merged = quality_carry.carry_over(fresh, previous)
    keys = [(r["dataset"], r["variant"], r["n"], (r.get("carried") or {}).get("commit")) for r in merged["rows"]]
    assert keys == [("hotpotqa", "no_retrieval", 100, "old1234"),  # a shorter rerun: the committed row stands
                    ("hotpotqa", "vanilla_rag", 100, None),  # re-measured here as fully: the new row wins
                    ("hotpotqa", "self_rag", 100, "old1234"),
                    ("pubmedqa", "vanilla_rag", 50, "older99"),  # carried twice keeps its first origin
                    ("mmlu_evidence", "self_rag", 50, None)]
    assert [(c["source"], c["auc"], "carried" in c) for c in merged["critics"]] == [
        ("support: x", 0.7, False), ("relevance: prior", 0.9, True)]
    assert merged["decisions"]["carried"]["commit"] == "old1234"
    assert quality_carry.carry_over(fresh, None) is fresh
    assert "has 10 question(s) so far" in quality_carry.carried_note(merged["rows"][0])
    note = quality_carry.carried_note(merged["rows"][2])
    assert "commit old1234" in note and "not on this machine" in note


def test_carry_over_drops_renamed_critique_pass_rows_and_duplicates():
    """The top-5 critique pass is read from one directory: with it here, an old row it no longer yields is stale."""
    import quality_carry

    previous = {"environment": {"commit": "old1234"}, "rows": [], "critics": [
        {"source": "relevance: old name", "auc": 0.75, "target": 100},
        {"source": "support: from a run", "auc": 0.6},
        {"source": "support: from a run", "auc": 0.6}]}
    with_pass = {"rows": [], "critics": [{"source": "relevance: new name", "auc": 0.75, "target": 100}]}
    merged = quality_carry.carry_over(with_pass, previous)
    assert [(c["source"], "carried" in c) for c in merged["critics"]] == [
        ("relevance: new name", False), ("support: from a run", True)]
    # Without the pass on this machine its rows are carried, each once.
    merged = quality_carry.carry_over({"rows": [], "critics": []}, previous)
    assert [c["source"] for c in merged["critics"]] == ["relevance: old name", "support: from a run"]


def test_report_marks_a_carried_row():
    row = _report_row("vanilla_rag", [pred("0", "Paris")], [pred("0", "Paris")], 1)
    row["carried"] = {"commit": "abc", "date": "2026-11-20"}
    text = "\n".join(quality_report.dataset_table("hotpotqa", [row]))
    assert "- `vanilla_rag`: carried over from the report of commit abc (2026-11-20)" in text


def test_relevance_rows_fuse_the_critic_with_the_prior_hand_checked(tmp_path):
    """Critic P: gold 0.9, 0.3 vs distractors 0.8, 0.6 -> 2 of 4 pairs = 0.5. Prior: gold 1.0, 0.9 vs
    0.5, 0.1 -> 1.0. Fused (P + prior) / 2: gold 0.95, 0.6 vs 0.65, 0.35 -> 3 of 4 = 0.75. No verdict was
    asked (--no-relevance-verdict), so no [IsRel] row."""
    import quality_critics

    def para(gold, p, prior):
        return {"title": "t", "gold": gold, "p_relevant": p, "critic_source": "label_probs", "prior": prior}

    write(quality_critics.relevance_path(tmp_path, "m"), [
        {"id": "a", "paragraphs": [para(True, 0.9, 1.0), para(False, 0.8, 0.5)]},
        {"id": "b", "paragraphs": [para(True, 0.3, 0.9), para(False, 0.6, 0.1)]},
        {"id": "c", "paragraphs": [para(True, 0.0, 0.0)]},  # not among the wanted questions
    ])
    rows = {r["source"]: r for r in quality_critics.relevance_rows(tmp_path, "m", ["a", "b"])}
    assert rows["relevance: critic P(relevant) (label_probs)"]["auc"] == 0.5
    assert rows["relevance: lexical prior (retrieval.links), same paragraphs"]["auc"] == 1.0
    fused = rows["relevance: critic fused with the prior, (P + prior) / 2"]
    assert (fused["auc"], fused["n_questions"], fused["n_pairs"]) == (0.75, 2, 4)
    assert not any("IsRel" in s for s in rows)


def test_linked_relevance_rows_join_by_question_and_title_hand_checked(tmp_path):
    """Plain P: gold g1 0.3, g2 0.9 vs distractors d1 0.8, d2 0.6 -> 2 of 4 pairs = 0.5. Linked P,
    joined by question id and title: g1 0.9, g2 0.7 vs d1 0.2 (d2 has no linked reading, so it is
    left out) -> 2 of 2 = 1.0; plain on the same paragraphs: 0.3, 0.9 vs 0.8 -> 1 of 2 = 0.5."""
    import quality_critics

    def para(title, gold, p, prior=0.5):
        return {"title": title, "gold": gold, "p_relevant": p, "critic_source": "label_probs", "prior": prior}

    write(quality_critics.relevance_path(tmp_path, "m"), [
        {"id": "a", "paragraphs": [para("g1", True, 0.3), para("d1", False, 0.8)]},
        {"id": "b", "paragraphs": [para("g2", True, 0.9), para("d2", False, 0.6)]},
    ])
    write(quality_critics.linked_path(tmp_path, "m"), [
        {"id": "a", "paragraphs": [{"title": "d1", "p_linked": 0.2}, {"title": "g1", "p_linked": 0.9}]},
        {"id": "b", "paragraphs": [{"title": "g2", "p_linked": 0.7}, {"title": "d2", "p_linked": None}]},
    ])
    rows = {r["source"]: r for r in quality_critics.relevance_rows(tmp_path, "m", ["a", "b"])}
    assert rows["relevance: critic P(relevant) (label_probs)"]["auc"] == 0.5
    linked = rows["relevance: critic P(relevant) beside its anchor (linked), same paragraphs"]
    assert (linked["auc"], linked["n_pairs"]) == (1.0, 2)
    assert rows["relevance: critic P(relevant), plain, on the paragraphs linked critic scored"]["auc"] == 0.5


async def test_the_linked_pass_reads_each_paragraph_beside_its_anchor(tmp_path, france_docs):
    """The benchmark's linked pass asks linked prompts (its critic was once built without
    relevance=linked, so the pass found no readings and crashed) and writes one row per paragraph."""
    import quality_critics

    from selfrag.llm import ScriptedBackend
    from selfrag.methods.critique import Critic, CriticConfig
    from selfrag.retrieval.registry import retriever_factory
    from selfrag.types import Question
    from tests.test_linked_relevance import linked_script

    llm = ScriptedBackend(linked_script())
    critic = Critic(llm, CriticConfig(source="label_probs", relevance="linked"))
    q = Question(id="q1", text="What is the capital of France?", contexts=tuple(france_docs))
    path = tmp_path / "linked.jsonl"
    await quality_critics._run_linked(critic, types.SimpleNamespace(llm_params={}), retriever_factory("bm25"), [q], path)
    (row,) = [json.loads(line) for line in path.read_text().splitlines()]
    assert row["id"] == "q1" and len(row["paragraphs"]) == 3
    assert all(p["anchor"] and p["anchor"] != p["title"] for p in row["paragraphs"])
    assert sorted(round(p["p_linked"], 1) for p in row["paragraphs"]) == [0.1, 0.5, 0.9]

    plain = Critic(llm, CriticConfig(source="label_probs"))
    with pytest.raises(ValueError, match="relevance=linked"):
        await quality_critics._run_linked(plain, types.SimpleNamespace(llm_params={}), retriever_factory("bm25"), [q], path)


# -- what git keeps of a run -------------------------------------------------------------------


def _traced(qid: str, gold_title: str = "A") -> dict:
    """A self_rag-like record whose trace has both what the report reads and the bulk it does not."""
    rank = {"action": "rank_evidence", "thought": "t" * 500, "observation": "o" * 500, "action_input": "i",
            "llm_calls": 0, "details": {"passages": [
                {"title": gold_title, "model": 1.0, "judged": True, "prior": 0.7, "fused": 0.85},
                {"title": "B", "model": 0.0, "judged": True, "prior": 0.2, "fused": 0.1}]}}
    decision = {"action": "retrieval_decision", "thought": "t" * 300, "details": {"p_yes": 0.9}}
    generate = {"action": "generate_and_critique", "thought": "x" * 2000, "observation": "y" * 2000, "details": {}}
    candidates = [
        {"text": "Paris", "passage": "p" * 3000, "support": "fully supported", "details": {"sup": 0.9}},
        {"text": "Lyon", "passage": "q" * 3000, "support": "no support", "details": {"sup": 0.2}},
    ]
    row = pred(qid, "Paris", candidates=candidates)
    row.update(reasoning_chain=[decision, rank, generate], details={
        "context_used": "c" * 5000, "retrieval_needed": True,
        "all_candidates": [{"passage_title": gold_title, "passage_indices": [1], "joint": False, "relevance": "relevant"}]})
    return row


def test_the_slim_copy_drops_the_bulk_and_reads_back_the_same_report_numbers():
    import quality_critics
    import quality_kept

    full = [_traced("q1"), _traced("q2", gold_title="B")]
    kept = [quality_kept.slim(r) for r in full]
    assert len(json.dumps(kept)) < len(json.dumps(full)) / 5
    assert [s["action"] for s in kept[0]["reasoning_chain"]] == ["retrieval_decision", "rank_evidence"]
    assert "thought" not in kept[0]["reasoning_chain"][1] and "passage" not in kept[0]["candidates"][0]
    assert "context_used" not in kept[0]["details"] and kept[0]["trace_trimmed"] is True
    assert quality_kept.slim(kept[0]) == kept[0]  # slimming a slim record changes nothing
    gold = {"q1": {"A"}, "q2": {"B"}}
    for variant in ("self_rag", "self_rag_critic"):
        assert (quality_critics.evidence_rows({variant: kept}, gold)
                == quality_critics.evidence_rows({variant: full}, gold) != [])
    assert qs.support_pairs(kept) == qs.support_pairs(full)
    assert qs.summarize_rows(kept, target_n=2, metrics=("f1",)) == qs.summarize_rows(full, target_n=2, metrics=("f1",))
    assert [quality_critics._decision_p_yes(r) for r in kept] == [0.9, 0.9]


def test_a_fresh_clone_restores_predictions_from_the_slim_copy(tmp_path):
    import quality_kept

    dest = tmp_path / "run"
    write(dest / "predictions.jsonl", [_traced("q1"), pred("q2", "x")])
    assert quality_kept.refresh(dest) is True
    assert quality_kept.refresh(dest) is False  # unchanged: not rewritten
    slim_text = (dest / "predictions.slim.jsonl").read_text(encoding="utf-8")
    (dest / "predictions.jsonl").unlink()  # what a clone has: only the committed slim copy
    assert quality_kept.has_predictions(dest)
    path = quality_kept.predictions(dest)
    assert [r["id"] for r in qs.read_predictions(path)] == ["q1", "q2"]
    assert (dest / "predictions.slim.jsonl").read_text(encoding="utf-8") == slim_text
    with path.open("a", encoding="utf-8") as f:  # the resumed run answers one more question
        f.write(json.dumps(_traced("q3")) + "\n")
    quality_kept.predictions(dest)
    assert [r["id"] for r in qs.read_jsonl(dest / "predictions.slim.jsonl")] == ["q1", "q2", "q3"]
    assert not quality_kept.has_predictions(tmp_path / "absent")


@pytest.mark.skipif(not quality_runs.DATASETS["hotpotqa"].path.is_file(), reason="benchmark data not found")
async def test_a_complete_run_on_a_fresh_clone_is_read_back_not_answered_again(tmp_path):
    import quality_kept

    args = types.SimpleNamespace(out=tmp_path, tag="t", llm=None, n_hotpot=3, n_other=2, report_only=False)
    ds, variant = quality_runs.DATASETS["hotpotqa"], quality_runs.VARIANTS["vanilla_rag"]
    ids = quality_runs.selection(quality_runs.load_cfg(ds, variant, 3, None))
    dest = quality_runs.run_dir(tmp_path, "t", ds, variant)
    write(dest / "predictions.jsonl", [_traced(i) for i in ids])
    quality_kept.refresh(dest)
    (dest / "predictions.jsonl").unlink()

    def no_backend(cfg):
        raise AssertionError("a complete run must not build a model")

    state = await quality_runs.ensure_run(ds, variant, args, no_backend)
    assert [r["id"] for r in state.rows] == ids and all(r["trace_trimmed"] for r in state.rows)
    assert (dest / "predictions.jsonl").is_file()


def test_likelihood_relevance_rows_join_by_question_and_title_hand_checked(tmp_path):
    """Question likelihood joined by question id and title: gold g1 0.6, g2 0.9 vs distractors d1 0.7,
    d2 0.4 -> pairs (g1>d1 no, g1>d2 yes, g2>d1 yes, g2>d2 yes) = 3 of 4 = 0.75. Fused with the prior
    (g 0.5, d 0.5, all equal): the same order, 0.75."""
    import quality_critics

    def para(title, gold, p):
        return {"title": title, "gold": gold, "p_relevant": p, "critic_source": "label_probs", "prior": 0.5}

    write(quality_critics.relevance_path(tmp_path, "m"), [
        {"id": "a", "paragraphs": [para("g1", True, 0.3), para("d1", False, 0.8)]},
        {"id": "b", "paragraphs": [para("g2", True, 0.9), para("d2", False, 0.6)]},
    ])
    write(quality_critics.likelihood_path(tmp_path, "m"), [
        {"id": "a", "paragraphs": [{"title": "d1", "p_likelihood": 0.7}, {"title": "g1", "p_likelihood": 0.6}]},
        {"id": "b", "paragraphs": [{"title": "g2", "p_likelihood": 0.9}, {"title": "d2", "p_likelihood": 0.4}]},
    ])
    rows = {r["source"]: r for r in quality_critics.relevance_rows(tmp_path, "m", ["a", "b"])}
    likely = rows["relevance: critic question likelihood (question_likelihood), same paragraphs"]
    assert (likely["auc"], likely["n_pairs"]) == (0.75, 4)
    assert rows["relevance: question likelihood fused with the prior, (P + prior) / 2"]["auc"] == 0.75
    # Means: a g1 0.45, d1 0.75; b g2 0.9, d2 0.5 -> gold wins 2 of 4 pairs = 0.5, 0.25 below the likelihood.
    both = rows["relevance: mean of P(relevant) and question likelihood (label_and_likelihood), same paragraphs"]
    assert (both["auc"], both["vs_likelihood"]["n"]) == (0.5, 2)
    assert round(both["vs_likelihood"]["diff"], 4) == -0.25


async def test_the_likelihood_pass_scores_the_question_after_each_paragraph(tmp_path, france_docs):
    import quality_critics

    from selfrag.llm import ScriptedBackend
    from selfrag.methods.critique import Critic, CriticConfig
    from selfrag.retrieval.registry import retriever_factory
    from selfrag.types import Question
    from tests.test_question_likelihood import likelihood_script

    llm = ScriptedBackend(likelihood_script())
    critic = Critic(llm, CriticConfig(source="label_probs", relevance="question_likelihood"))
    q = Question(id="q1", text="What is the capital of France?", contexts=tuple(france_docs))
    path = tmp_path / "likely.jsonl"
    await quality_critics._run_likelihood(critic, types.SimpleNamespace(llm_params={}), retriever_factory("bm25"), [q], path)
    (row,) = [json.loads(line) for line in path.read_text().splitlines()]
    by_title = {p["title"]: (round(p["p_likelihood"], 4), p["mean_logprob"]) for p in row["paragraphs"]}
    assert by_title == {"Doc A": (0.8808, -1.0), "Doc B": (0.5, -2.0), "Doc C": (0.1192, -3.0)}
    assert all(c.forced == q.text for c in llm.calls)


def test_the_paired_auc_interval_resamples_whole_questions_hand_checked():
    """Two questions, scores a then b per item. All of a: gold 0.9, 0.8 vs distractors 0.1, 0.2 -> 1.0.
    All of b: gold 0.9 (q1), 0.1 (q2) vs 0.5 (q1), 0.2 (q2) -> pairs 0.9>0.5, 0.9>0.2, 0.1<0.5, 0.1<0.2 = 0.5.
    Difference +0.5; a resample of q1 twice gives 1.0 - 1.0 = 0, of q2 twice 1.0 - 0.0 = +1."""
    from quality_stats import paired_auc_bootstrap

    q1 = [(0.9, 0.9, True), (0.1, 0.5, False)]
    q2 = [(0.8, 0.1, True), (0.2, 0.2, False)]
    out = paired_auc_bootstrap([q1, q2], resamples=400)
    assert out["diff"] == 0.5 and out["n"] == 2
    assert out["lo"] == 0.0 and out["hi"] == 1.0
    assert paired_auc_bootstrap([[(0.5, 0.5, True)]]) is None  # no distractor: no AUC


def test_the_dev_relevance_summary_hand_checked():
    """Gold g (label 0.9, likelihood 0.6, prior 0.5), distractors d1 (0.2, 0.7, 0.3), d2 (0.95, 0.1,
    0.5): label 1 of 2 pairs = 0.5; likelihood 1 of 2 = 0.5; mean of the two g 0.75 vs 0.45, 0.525 =
    1.0; prior 1 of 2 plus a tie = 0.75; likelihood fused with the prior g 0.55 vs 0.5, 0.3 = 1.0."""
    import relevance_dev

    rec = {"id": "a", "paragraphs": [
        {"title": "g", "gold": True, "p_relevant": 0.9, "p_likelihood": 0.6, "prior": 0.5},
        {"title": "d1", "gold": False, "p_relevant": 0.2, "p_likelihood": 0.7, "prior": 0.3},
        {"title": "d2", "gold": False, "p_relevant": 0.95, "p_likelihood": 0.1, "prior": 0.5}]}
    out = relevance_dev.summary([rec])
    assert (out["questions"], out["gold"], out["distractors"]) == (1, 1, 2)
    assert (out["label question P(relevant)"], out["question likelihood"], out["mean of the two"]) == (0.5, 0.5, 1.0)
    assert out["mean of the two - likelihood"]["diff"] == 0.5
    assert (out["lexical prior"], out["question likelihood fused with the prior"]) == (0.75, 1.0)


@pytest.mark.skipif(not quality_runs.DATASETS["hotpotqa"].path.is_file(), reason="benchmark data not found")
def test_the_dev_relevance_run_reads_a_later_range_and_resumes(tmp_path, monkeypatch, capsys):
    import relevance_dev

    script = tmp_path / "replies.json"
    script.write_text(json.dumps({
        "Write one question": {"forced_logprobs": [-1.0]},
        "Does the document above": {"text": "relevant", "top_logprobs": {"relevant": -0.1, "irrelevant": -2.4}},
    }))
    monkeypatch.setattr(relevance_dev, "out_path", lambda tag, skip: tmp_path / f"dev_{skip}.jsonl")
    assert relevance_dev.main(["--llm", f"scripted:{script}", "--skip", "300", "--n", "2"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "dev_300.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(len(r["paragraphs"]) == 5 for r in rows)
    assert all(p["p_likelihood"] == 0.5 for r in rows for p in r["paragraphs"])  # equal scores: all average
    ids = {json.loads(line)["id"] for line in (quality_runs.DATASETS["hotpotqa"].path.read_text().splitlines()[300:302])}
    assert {r["id"] for r in rows} == ids
    assert relevance_dev.main(["--llm", f"scripted:{script}", "--skip", "300", "--n", "2"]) == 0  # resumes: no new line
    assert len((tmp_path / "dev_300.jsonl").read_text().splitlines()) == 2
    assert '"questions": 2' in capsys.readouterr().out


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
    readme = f"intro\n{quality_report.GLANCE_START}\nold table\n{quality_report.GLANCE_END}\nrest\n"
    assert quality_report.with_glance(readme, "new table\n") == (
        f"intro\n{quality_report.GLANCE_START}\nnew table\n{quality_report.GLANCE_END}\nrest\n")
    assert quality_report.with_glance("no markers here\n", "new table\n") is None


def test_results_glance_is_the_committed_reports_matrix():
    # The results-at-a-glance block of docs/results.md must say what the committed reports say: a
    # report rewritten without docs/results.md (say, by a run from another checkout) fails here
    # until `python benchmarks/quality.py --report-only --llm ...` is run in this one.
    readme = (BENCH.parent / "docs" / "results.md").read_text(encoding="utf-8")
    block = quality_report.glance_text(quality_report.load_reports(BENCH / "results"))
    if not block:
        pytest.skip("no quality report is committed")
    assert quality_report.with_glance(readme, block) == readme
