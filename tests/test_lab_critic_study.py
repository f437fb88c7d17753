"""lab.critic_study and lab.critic_kinds without a model: the ECE of chance, held-out sets, the kinds compared."""

from __future__ import annotations

import numpy as np
import pytest

from lab.critic_study import ece_by_chance
from selfrag.reflection.heads import ece


def test_the_ece_of_chance_shrinks_with_n_and_a_miscalibrated_head_sits_above_it():
    assert ece_by_chance([]) is None
    small, large = ece_by_chance([0.5] * 100), ece_by_chance([0.5] * 2500)
    # One bin at 0.5: the ECE is |rate - 0.5|, whose mean is about 0.8 standard errors (0.04 at n = 100).
    assert small == pytest.approx(0.04, abs=0.01) and large == pytest.approx(0.008, abs=0.003)
    p = np.linspace(0.05, 0.95, 400)
    overconfident = ece(p.tolist(), (np.random.default_rng(1).random(400) < 0.5).tolist())
    assert overconfident > 3 * ece_by_chance(p.tolist())


def _record(qid: str, seq: float, answerable: bool) -> dict:
    return {"id": qid, "answerable": answerable, "passages": [], "answer": "x", "right": answerable,
            "sufficient": answerable, "readings": {"seq": seq}, "candidates": []}


def test_an_evaluation_set_never_holds_a_question_a_fit_saw(monkeypatch):
    import lab.critic_study as study

    sets = {"pubmedqa": [_record("1", 0, True), _record("2", 0, True)], "mmlu_evidence": [_record("3", 0, True)]}
    monkeypatch.setattr(study, "read", lambda model, name: sets.get(name, []))
    out = study.evaluation_sets("m", [_record("1", 0, True), _record("3", 0, True)])
    assert {k: [r["id"] for r in v] for k, v in out.items()} == {"pubmedqa": ["2"]}  # an emptied set is dropped


def test_the_second_kind_comparison_counts_what_each_fit_says():
    from lab.critic_kinds import flags, versus
    from selfrag.reflection.critic_fit import CriticFit
    from selfrag.reflection.heads import Head

    def fit(weight: float) -> CriticFit:  # sufficiency = sigmoid(weight * seq), floor 0.5
        return CriticFit({"sufficiency": Head("sufficiency", ("seq",), (0.0,), (1.0,), (weight,), 0.0)}, 0.5)

    records = [_record(f"a{i}", 1.0 + i, True) for i in range(6)] + [_record(f"g{i}", -1.0 - i, False)
                                                                     for i in range(6)]
    records[0]["readings"]["seq"] = -0.5  # one answerable question the sign reads as gold removed
    right, backwards = fit(1.0), fit(-1.0)
    assert flags(right, records, True) == [1.0] + [0.0] * 5 and flags(right, records, False) == [1.0] * 6
    out = versus(backwards, right, records)
    # -0.5 still ranks above every gold-removed question: the ranking is perfect, the floor is not.
    assert out["sufficiency"]["auroc"] == 1.0 and out["sufficiency"]["baseline_auroc"] == 0.0
    assert out["said"]["both"]["flagged_answerable"] == pytest.approx(1 / 6)
    assert out["said"]["pool"]["flagged_answerable"] == pytest.approx(5 / 6)
    assert out["flag_diff_answerable"]["diff"] == pytest.approx(-4 / 6)
    assert out["flag_diff_removed"]["diff"] == pytest.approx(1.0)


def test_the_packaged_fits_report_measures_the_defaults_beside_a_model_s_own_fit(monkeypatch):
    import lab.critic_packaged as packaged_report
    import lab.critic_study as study
    from selfrag.reflection.critic_fit import CriticFit
    from selfrag.reflection.heads import Head

    sets = {"hotpotqa_mix_next": [_record("a", 2.0, True), _record("b", 1.0, True), _record("g", -2.0, False)]}
    monkeypatch.setattr(study, "read", lambda model, name: sets.get(name, []))
    good = CriticFit({"sufficiency": Head("sufficiency", ("seq",), (0.0,), (1.0,), (1.0,), 0.0)}, 0.5)
    flat = CriticFit({"sufficiency": Head("sufficiency", ("seq",), (0.0,), (1.0,), (0.0,), 0.0)}, 0.6)
    rows = packaged_report.rows("m", {"own": good, "packaged defaults": flat})
    own, default = rows
    assert own["fit"] == "own" and own["sufficiency_auroc"] == 1.0
    assert own["flagged_gold_removed"] == 1.0 and own["flagged_answerable"] == 0.0
    assert default["sufficiency_auroc"] == 0.5 and default["flagged_answerable"] == 1.0  # 0.5 < its floor 0.6
    assert "| m | hotpotqa_mix_next | own | 1.000 | 100.0% | 0.0% |" in packaged_report.render(
        {"rows": rows}, {"date": "today"})


def test_calibration_p_is_small_only_for_a_head_miscalibrated_beyond_chance():
    from lab.critic_labels import calibration_p

    rng = np.random.default_rng(3)
    probs = rng.uniform(0.05, 0.95, 100).tolist()
    calibrated = (rng.random(100) < np.array(probs)).tolist()
    assert calibration_p([], []) is None
    assert calibration_p(probs, calibrated) > 0.05
    assert calibration_p(probs, [p < 0.5 for p in probs]) == 0.0  # reads every answer backwards


def test_the_labels_report_sets_f1_alone_against_rule_2_on_the_same_answers():
    from lab.critic_labels import COMMITTED, RULES, measure_set, render
    from selfrag.reflection.critic_fit import CriticFit
    from selfrag.reflection.heads import Head

    def answered(qid, f1, right, seq, candidates):
        return {**_record(qid, seq, True), "f1": f1, "right": right, "candidates": candidates}

    def cand(likelihood, right):
        return {"joint": True, "likelihood": likelihood, "right": right, "closed": False}

    # a short right answer, a right sentence (F1 0.29 but it names the gold), a wrong one
    records = [answered("a", 1.0, True, 2.0, [cand(-0.1, True)]), answered("b", 0.29, True, 1.0, [cand(-0.5, True)]),
               answered("c", 0.0, False, -2.0, [cand(-1.0, False)])]

    def fit(sign: float, support: float) -> CriticFit:
        return CriticFit({"confidence": Head("confidence", ("seq",), (0.0,), (1.0,), (sign,), 0.0),
                          "support": Head("support", ("likelihood",), (0.0,), (1.0,), (support,), 0.0)}, 0.5)

    rising, falling = fit(1.0, 1.0), fit(-1.0, -1.0)
    out = measure_set({RULES[0]: falling, RULES[1]: rising, COMMITTED: falling}, records)
    assert out["answers"] == 3 and out["right"] == {RULES[0]: 1 / 3, RULES[1]: 2 / 3}
    assert out[f"{RULES[1]} | {RULES[1]}"]["auroc"] == 1.0 and out[f"{RULES[0]} | {RULES[1]}"]["auroc"] == 0.0
    assert out[f"{RULES[1]} | seen"]["low_on_right"] == 0.0 and out[f"{RULES[0]} | seen"]["low_on_right"] == 1.0
    assert out[f"{RULES[1]} | seen"]["mean_on_right"] == pytest.approx((0.8808 + 0.7311) / 2, abs=1e-3)
    # support: right candidates at likelihoods -0.1 and -0.5, the wrong one at -1.0; one head reads it backwards
    assert out[f"{RULES[1]} | seen"]["support_auroc"] == 1.0 and out[f"{COMMITTED} | seen"]["support_auroc"] == 0.0
    for pair in (f"{RULES[1]} - {RULES[0]}", f"{RULES[1]} - {COMMITTED}"):  # rule 2's fit minus the other
        versus = out["versus"][pair]
        assert versus["auroc_diff"] == 1.0 and versus["low_on_right_diff"]["diff"] == -1.0
        assert versus["support_diff"] == 1.0
    report = {"model": "m", "fitting": 3, "fit_sets": {"pool": 3}, "fitting_right": out["right"], "sets": {"s": out},
              "curve": {"3": {f"s | {RULES[0]}": [0.0, 0.0], f"s | {RULES[1]}": [1.0, 0.0]}}}
    text = render(report, {"date": "today"})
    assert "Fitting questions: 3 (pool 3)" in text
    assert "| s | 3 | 0.333 | 0.667 | learned rule 2 | 1.000 | 1.000 |" in text
    assert f"| s | 3 | 0.333 | 0.667 | {COMMITTED} | " in text
    assert "| 3 | s | 0.000 ± 0.000 | 1.000 ± 0.000 |" in text and f"| s | {COMMITTED} | +1.000 " in text


def test_a_slim_copy_of_the_readings_serves_when_the_full_file_is_gone(tmp_path, monkeypatch):
    """The full readings (hidden states) stay local; the committed slim copy lets a fresh clone refit."""
    import json

    import lab.critic_reads as reads

    monkeypatch.setattr(reads, "RUNS", tmp_path)
    full = reads.readings_path("m", "pool")
    full.parent.mkdir(parents=True)
    records = [{**_record(str(i), 0.5, True), "labels": 2, "states": {"answer": {"15": "AAAA"}}} for i in range(3)]
    full.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"id": "torn', encoding="utf-8")
    reads.write_slim(full, reads.slim_path("m", "pool"))  # a torn last line (a killed reader) is left out
    full.write_text("".join(json.dumps(r) + "\n" for r in records[:1]), encoding="utf-8")
    assert len(reads.readings("m", "pool")) == 1  # the full file first
    full.unlink()
    slim = reads.readings("m", "pool")
    assert [r["id"] for r in slim] == ["0", "1", "2"] and all(r["states"] == {} and r["labels"] == 2 for r in slim)
    assert reads.readings("m", "other") == []


def test_packaging_keeps_the_defaults_unless_every_model_they_were_fitted_on_is_read_in_full(
        tmp_path, monkeypatch, capsys):
    import lab.critic_study as study
    from selfrag.reflection.critic_fit import CriticFit

    default = CriticFit({}, 0.3, meta={"models": ["small", "big"]})
    default.write(tmp_path / "default.json")
    records = [_record(str(i), float(i % 2), bool(i % 2)) for i in range(40)]
    read = {("other", "pool"), ("other", "pubmedqa_pool"), ("big", "pool"), ("big", "pubmedqa_pool"),
            ("small", "pubmedqa_pool")}
    monkeypatch.setattr(study, "read", lambda model, name: records if (model, name) in read else [])
    study.package(["other"], folder=tmp_path)  # neither model the defaults were fitted on is asked for
    assert "kept default.json: not every fitting set of small, big is read" in capsys.readouterr().out
    study.package(["big", "small"], folder=tmp_path)  # the small model's pool is not read
    assert "kept default.json: not every fitting set of small is read" in capsys.readouterr().out
    assert CriticFit.read(tmp_path / "default.json").meta == {"models": ["small", "big"]}


def test_a_study_keeps_the_rows_of_sets_it_could_not_read_marked_with_the_report_that_measured_them(
        tmp_path, monkeypatch):
    import json

    import lab.critic_study as study
    from lab.critic_report import render
    from selfrag.reflection.critic_fit import CriticFit

    head = {"questions": 100, "n": 100, "auroc": 0.9, "ece": 0.05, "baseline_auroc": 0.8, "baseline_interval": None,
            "baseline2_auroc": 0.6, "baseline2_interval": None}
    row = {"questions": 100, "heads": {"sufficiency": head}, "said": None, "said_answerable": None,
           "vanilla": None, "seconds": None, "coverage": {}}
    older = {"commit": "0ld", "date": "2026-12-01", "pool": 500, "labels": 1}
    previous = {"env": {"commit": "abc1234", "date": "2026-12-06 10:00 UTC"}, "pool": 1140,
                "fit": {"meta": {}}, "sets": {"mix_next": row, "gone_twice": {**row, "carried": older},
                                              "hotpotqa_next": row}}
    (tmp_path / "critic_m.json").write_text(json.dumps(previous), encoding="utf-8")
    monkeypatch.setattr(study, "OUT", tmp_path)
    monkeypatch.setattr(study, "FITS", tmp_path / "fits")
    pool = [{**_record(str(i), float(i % 2), bool(i % 2)), "kind": study.FIT_SETS[i % 2]} for i in range(40)]
    monkeypatch.setattr(study, "fitting", lambda model, sets=(): pool)
    monkeypatch.setattr(study, "fit_on", lambda records, model: CriticFit({}, 0.3, meta={"labels": 2}))
    assert study.model_report("m", fit_sets=("pool", "another")) is None  # not every fitting set read
    fresh = {"hotpotqa_next": [{**_record("x", 1.0, True), "seconds": 3.0}]}
    monkeypatch.setattr(study, "evaluation_sets", lambda model, fitted: fresh)
    monkeypatch.setattr(study, "items", lambda fit, recs: {})
    for name in ("learning_curve", "ablation"):
        monkeypatch.setattr(study, name, lambda *a: {})
    monkeypatch.setattr(study, "selection", lambda *a: {})
    report = study.model_report("m")
    sets = report["sets"]
    assert "carried" not in sets["hotpotqa_next"] and sets["hotpotqa_next"]["heads"] == {}  # measured now
    assert sets["mix_next"]["carried"] == {"commit": "abc1234", "date": "2026-12-06 10:00 UTC", "pool": 1140,
                                           "labels": 1}
    assert sets["gone_twice"]["carried"] == older  # a row carried twice keeps the report that measured it
    text = render([report], {"date": "today"})
    assert "| mix_next † | sufficiency | 100 | 100 | 0.900 | 0.050 |" in text
    assert "mix_next (commit abc1234, 2026-12-06 10:00 UTC, fitted on 1140 questions, label rule 1)" in text
    assert "| hotpotqa_next † |" not in text


def test_the_confidence_probes_study_finds_a_quiet_direction_held_out(tmp_path, monkeypatch):
    """Right answers differ from wrong ones along one quiet dimension of the answer state: on held-out
    answers the probe ranks them, the readings-only head and the principal directions do not, and the
    fitting questions' cross-validation picks the probe."""
    import lab.confidence_probes as probes
    import lab.critic_study as study
    from selfrag.reflection.heads import pack_f16

    rng = np.random.default_rng(2)

    def records(prefix: str, n: int) -> list[dict]:
        out = []
        for i in range(n):
            right = bool(rng.random() < 0.5)
            states = {}
            for where in ("prompt", "answer"):
                s = rng.normal(scale=0.3, size=24)
                s[:8] += rng.normal(scale=10.0, size=8)
                if where == "answer":
                    s[20] += 0.5 if right else -0.5
                states[where] = {"14": pack_f16(s)}
            out.append({**_record(f"{prefix}{i}", -1.0, True), "right": right, "states": states})
        return out

    sets = {"pool": records("p", 300), "pubmedqa_pool": [], "hotpotqa_next": records("h", 120)}
    monkeypatch.setattr(study, "read", lambda model, name: sets.get(name, []))
    full = tmp_path / "pool.jsonl"
    full.write_text("{}\n", encoding="utf-8")
    monkeypatch.setattr(probes, "readings_path", lambda model, name: full)
    monkeypatch.setattr(probes, "FITS", tmp_path)  # no lab fit: no reference
    rep = probes.model_report("m", None)
    assert rep["chosen"] == "probe answer@14" and rep["choices"]["probe answer@14"] > 0.85
    held = rep["sets"]["hotpotqa_next"]
    assert held["n"] == 120 and held["readings"]["auroc"] == 0.5 and held["answer@14"]["auroc"] < 0.65
    assert held["probe answer@14"]["auroc"] > 0.85 and held["probe answer@14"]["vs"][0] > 0.2
    assert set(rep["curve"]) == {"100", "250", "300"} and rep["curve"]["300"]["hotpotqa_next"] > 0.85
    assert "| probe answer@14 | " in probes.render([rep], {"date": "now"})
