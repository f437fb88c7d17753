"""The quality benchmark's runs: variants, layout, reading run directories back, what git keeps, carry-over."""

from __future__ import annotations

import gzip
import json
import types

import pytest

from lab import quality_carry, quality_kept, quality_runs
from lab import quality_stats as qs
from lab.quality_critique import evidence_rows
from tests.helpers.lab_records import pred, traced, write

HOTPOTQA = quality_runs.DATASETS["hotpotqa"]


def test_model_tag_and_hand_command_layout():
    assert quality_runs.model_tag(None) == "embedded"
    assert quality_runs.model_tag("llamacpp:/m/qwen2.5-coder-0.5b-instruct.gguf") == "qwen2.5-coder-0.5b-instruct"
    out = quality_runs.ROOT / "lab" / "results"
    assert quality_runs.repo_path(out) == "lab/results"
    cmd = quality_runs.command_line(out, "tag", HOTPOTQA, quality_runs.VARIANTS["self_rag"], 100, "llamacpp:/m/x.gguf")
    assert cmd.startswith("selfrag run configs/self_rag.yaml --llm llamacpp:/m/x.gguf ")
    assert "--set data.subset_size=100 --set cache.enabled=false" in cmd
    assert cmd.endswith("--output lab/results/runs/quality/tag/hotpotqa --run-id self_rag")


def test_every_variant_config_exists():
    assert quality_runs.missing_configs() == []


@pytest.mark.parametrize("name", [v.name for v in quality_runs.VARIANT_LIST])
def test_every_variant_loads_with_its_overrides(name):
    """A misspelt override key or value stops here, not after a benchmark run has started."""
    cfg = quality_runs.load_cfg(HOTPOTQA, quality_runs.VARIANTS[name], 3, None)
    assert cfg.data.subset_size == 3


@pytest.mark.skipif(not HOTPOTQA.path.is_file(), reason="benchmark data not found")
def test_collect_reads_run_directories_restricted_to_the_selection(tmp_path):
    from lab import quality

    args = types.SimpleNamespace(out=tmp_path, tag="t", llm=None, n_hotpot=3, n_other=2, selections={}, remarks={},
                                 env={}, recorded={})
    ids = quality_runs.selection(quality_runs.load_cfg(HOTPOTQA, quality_runs.VARIANTS["vanilla_rag"], 5, None))
    write(quality_runs.run_dir(tmp_path, "t", HOTPOTQA, quality_runs.VARIANTS["vanilla_rag"]) / "predictions.jsonl",
          [pred(i, "x") for i in ids])  # made with a larger n: only the first 3 count
    write(quality_runs.run_dir(tmp_path, "t", HOTPOTQA, quality_runs.VARIANTS["self_rag"]) / "predictions.jsonl",
          [pred(ids[0], "x")])
    rows = {r["variant"]: r for r in quality.collect(args)["rows"]}
    assert (rows["vanilla_rag"]["n"], rows["vanilla_rag"]["partial"]) == (3, False)
    assert (rows["self_rag"]["n"], rows["self_rag"]["partial"]) == (1, True)
    assert rows["self_rag"]["vs_plain"]["n"] == 1 and rows["self_rag"]["vs_baseline"] is None  # no evidence run
    write(quality_runs.run_dir(tmp_path, "t", HOTPOTQA, quality_runs.VARIANTS["vanilla_rag_evidence"])
          / "predictions.jsonl", [pred(i, "x") for i in ids[:2]])
    rows = {r["variant"]: r for r in quality.collect(args)["rows"]}
    assert rows["self_rag"]["vs_baseline"]["n"] == 1 and rows["vanilla_rag"]["vs_baseline"]["n"] == 2
    assert rows["vanilla_rag_evidence"]["vs_baseline"] is None
    # Each run's slim copy was written beside its predictions as the report read them.
    kept = quality_runs.run_dir(tmp_path, "t", HOTPOTQA, quality_runs.VARIANTS["self_rag"]) / quality_kept.KEPT
    assert [json.loads(line)["id"] for line in quality_kept.read_kept(kept).splitlines()] == [ids[0]]


def test_a_run_measured_with_settings_the_config_no_longer_has_is_remarked(tmp_path):
    import yaml

    from selfrag.config import dump_yaml, with_absolute_paths

    variant = quality_runs.VARIANTS["self_rag_separate"]
    dest = quality_runs.run_dir(tmp_path, "t", HOTPOTQA, variant)
    dest.mkdir(parents=True)
    cfg = with_absolute_paths(quality_runs.load_cfg(HOTPOTQA, variant, 100, None))
    (dest / "config.yaml").write_text(dump_yaml(cfg), encoding="utf-8")
    # The same settings (a smaller n may differ: data.subset_size is allowed to) give no remark.
    assert quality_runs.settings_remark(HOTPOTQA, variant, 100, None, dest) == ""
    assert quality_runs.settings_remark(HOTPOTQA, variant, 30, None, dest) == ""
    stored = yaml.safe_load(dump_yaml(cfg))
    stored["self_rag"]["top_k"] = 3  # the config the 0.5B run was first measured with
    (dest / "config.yaml").write_text(yaml.safe_dump(stored), encoding="utf-8")
    assert quality_runs.settings_remark(HOTPOTQA, variant, 100, None, dest) == (
        "measured with other settings than configs/self_rag_separate.yaml has now (self_rag.top_k)")
    # A directory without a stored config (written before configs were stored) is not judged.
    (dest / "config.yaml").unlink()
    assert quality_runs.settings_remark(HOTPOTQA, variant, 100, None, dest) == ""


def test_settings_remark_survives_a_config_that_no_longer_loads(tmp_path, monkeypatch):
    """A YAML edited while a long run went on (a key the running code does not know) once crashed
    the report at the run's end; the row now says the config was not compared."""
    from selfrag.errors import ConfigError

    def broken(*_args):
        raise ConfigError("unknown config key 'self_rag_segment.facts_first'")

    monkeypatch.setattr(quality_runs, "load_cfg", broken)
    remark = quality_runs.settings_remark(HOTPOTQA, quality_runs.VARIANTS["self_rag_segment"], 100, None, tmp_path)
    assert remark.startswith("not compared with configs/self_rag_segment.yaml") and "facts_first" in remark


# -- what git keeps of a run -------------------------------------------------------------------


def test_the_slim_copy_drops_the_bulk_and_reads_back_the_same_report_numbers():
    full = [traced("q1"), traced("q2", gold_title="B")]
    kept = [quality_kept.slim(r) for r in full]
    assert len(json.dumps(kept)) < len(json.dumps(full)) / 5
    steps = kept[0]["reasoning_chain"]
    assert [s["action"] for s in steps] == ["retrieval_decision", "rank_evidence"]
    assert all(set(s) == {"action", "details"} for s in steps) and steps[0]["details"]["p_yes"] == 0.9
    assert steps[1]["details"]["passages"][0] == {"index": 1, "title": "A", "model": 1.0, "judged": True,
                                                  "prior": 0.7, "fused": 0.85, "kept": True}
    # Every candidate keeps its answer, readings, the passages it read and whether it was selected.
    assert kept[0]["candidates"] == [{k: v for k, v in c.items() if k != "passage"} for c in full[0]["candidates"]]
    assert kept[0]["candidates"][0]["details"] == {"sup": 0.9, "passage_indices": [1, 2], "selected": True}
    assert kept[0]["sources"] == [{"id": "A", "title": "A"}] and kept[0]["question"] == "q q1"
    details = kept[0]["details"]
    assert "context_used" not in details and details["all_candidates"] == full[0]["details"]["all_candidates"]
    assert details["iterations"] == [{"iteration": 1, "decision": "NO", "documents": [{"id": "B", "title": "B"}]}]
    assert kept[0]["trace_trimmed"] is True
    assert quality_kept.slim(kept[0]) == kept[0]  # slimming a slim record changes nothing
    gold = {"q1": {"A"}, "q2": {"B"}}
    for variant in ("self_rag", "self_rag_critic"):
        assert evidence_rows({variant: kept}, gold) == evidence_rows({variant: full}, gold) != []
    assert qs.support_pairs(kept) == qs.support_pairs(full)
    assert qs.summarize_rows(kept, target_n=2, metrics=("f1",)) == qs.summarize_rows(full, target_n=2, metrics=("f1",))


def test_a_fresh_clone_restores_predictions_from_the_slim_copy(tmp_path):
    dest = tmp_path / "run"
    write(dest / "predictions.jsonl", [traced("q1"), pred("q2", "x")])
    assert quality_kept.refresh(dest) is True
    assert quality_kept.refresh(dest) is False  # unchanged: not rewritten
    packed = (dest / quality_kept.KEPT).read_bytes()
    slim_text = gzip.decompress(packed).decode("utf-8")
    assert [json.loads(line)["id"] for line in slim_text.splitlines()] == ["q1", "q2"]
    (dest / "predictions.jsonl").unlink()  # what a clone has: only the committed slim copy
    assert quality_kept.has_predictions(dest)
    path = quality_kept.predictions(dest)
    assert [r["id"] for r in qs.read_predictions(path)] == ["q1", "q2"]
    assert path.read_text(encoding="utf-8") == slim_text
    assert (dest / quality_kept.KEPT).read_bytes() == packed  # the same records: the same bytes
    with path.open("a", encoding="utf-8") as f:  # the resumed run answers one more question
        f.write(json.dumps(traced("q3")) + "\n")
    quality_kept.predictions(dest)
    assert [json.loads(line)["id"] for line in quality_kept.read_kept(dest / quality_kept.KEPT).splitlines()] == [
        "q1", "q2", "q3"]
    assert not quality_kept.has_predictions(tmp_path / "absent")


@pytest.mark.skipif(not HOTPOTQA.path.is_file(), reason="benchmark data not found")
async def test_a_complete_run_on_a_fresh_clone_is_read_back_not_answered_again(tmp_path):
    args = types.SimpleNamespace(out=tmp_path, tag="t", llm=None, n_hotpot=3, n_other=2, report_only=False)
    variant = quality_runs.VARIANTS["vanilla_rag"]
    ids = quality_runs.selection(quality_runs.load_cfg(HOTPOTQA, variant, 3, None))
    dest = quality_runs.run_dir(tmp_path, "t", HOTPOTQA, variant)
    write(dest / "predictions.jsonl", [traced(i) for i in ids])
    quality_kept.refresh(dest)
    (dest / "predictions.jsonl").unlink()

    def no_backend(cfg):
        raise AssertionError("a complete run must not build a model")

    state = await quality_runs.ensure_run(HOTPOTQA, variant, args, no_backend)
    assert [r["id"] for r in state.rows] == ids and all(r["trace_trimmed"] for r in state.rows)
    assert (dest / "predictions.jsonl").is_file()


# -- rows carried over from the committed report -----------------------------------------------


def test_carry_over_keeps_rows_whose_run_directory_is_not_here():
    """A fresh clone that measures one run must not erase what the committed report measured elsewhere."""
    previous = {
        "environment": {"commit": "old1234", "date": "2026-11-20 10:00 UTC"},
        "rows": [{"dataset": "hotpotqa", "variant": "self_rag", "n": 100},
                 {"dataset": "hotpotqa", "variant": "vanilla_rag", "n": 100},
                 {"dataset": "hotpotqa", "variant": "no_retrieval", "n": 100},
                 {"dataset": "pubmedqa", "variant": "vanilla_rag", "n": 50,
                  "carried": {"commit": "older99", "date": "2026-11-01"}}],
        "critics": [{"source": "relevance: prior", "auc": 0.9}, {"source": "support: x", "auc": 0.6}],
    }
    fresh = {"environment": {"commit": "new5678"}, "rows": [
        {"dataset": "mmlu_evidence", "variant": "self_rag", "n": 50},
        {"dataset": "hotpotqa", "variant": "vanilla_rag", "n": 100},
        {"dataset": "hotpotqa", "variant": "no_retrieval", "n": 10}],
        "critics": [{"source": "support: x", "auc": 0.7}]}
    merged = quality_carry.carry_over(fresh, previous)
    keys = [(r["dataset"], r["variant"], r["n"], (r.get("carried") or {}).get("commit")) for r in merged["rows"]]
    assert keys == [("hotpotqa", "no_retrieval", 100, "old1234"),  # a shorter rerun: the committed row stands
                    ("hotpotqa", "vanilla_rag", 100, None),  # re-measured here as fully: the new row wins
                    ("hotpotqa", "self_rag", 100, "old1234"),
                    ("pubmedqa", "vanilla_rag", 50, "older99"),  # carried twice keeps its first origin
                    ("mmlu_evidence", "self_rag", 50, None)]
    assert [(c["source"], c["auc"], "carried" in c) for c in merged["critics"]] == [
        ("support: x", 0.7, False), ("relevance: prior", 0.9, True)]
    assert quality_carry.carry_over(fresh, None) is fresh
    assert "has 10 question(s) so far" in quality_carry.carried_note(merged["rows"][0])
    note = quality_carry.carried_note(merged["rows"][2])
    assert "commit old1234" in note and "not on this machine" in note


def test_carry_over_drops_retired_variants_and_duplicate_critique_rows():
    """A variant the benchmark no longer defines was retired (docs/results.md keeps its numbers)."""
    previous = {"environment": {"commit": "old1234"}, "rows": [
        {"dataset": "hotpotqa", "variant": "self_rag_critic_label", "n": 100},
        {"dataset": "retired_set", "variant": "self_rag", "n": 100},
        {"dataset": "hotpotqa", "variant": "self_rag_abstain", "n": 30}],
        "critics": [{"source": "support: from a run", "auc": 0.6}, {"source": "support: from a run", "auc": 0.6}]}
    merged = quality_carry.carry_over({"rows": [], "critics": []}, previous)
    assert [(r["dataset"], r["variant"]) for r in merged["rows"]] == [("hotpotqa", "self_rag_abstain")]
    assert [c["source"] for c in merged["critics"]] == ["support: from a run"]
