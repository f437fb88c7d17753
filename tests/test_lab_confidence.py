"""lab.confidence: the abstention arithmetic, checked by hand."""

from __future__ import annotations

from lab import confidence as lc


def test_truthfulness_counts_right_plus_wrong_minus_and_abstentions_zero():
    scores, right = [0.9, 0.8, 0.3, 0.2], [True, False, True, False]
    assert lc.truthfulness(scores, right, 0.5) == (0.5, 0.0)  # +1 -1 over 4
    assert lc.truthfulness(scores, right, 0.0) == (1.0, 0.0)
    assert lc.truthfulness(scores, right, 0.85) == (0.25, 0.25)


def test_the_best_threshold_maximises_truthfulness_and_prefers_fewer_abstentions():
    scores, right = [0.9, 0.8, 0.3, 0.2], [True, True, False, False]
    assert lc.best_threshold(scores, right) == 0.8  # keep the two right ones only: +2/4
    assert lc.best_threshold([0.5, 0.4], [True, True]) == 0.4  # answer everything


def test_keeping_the_top_n_by_another_score():
    assert lc.keep_top([0.1, 0.9, 0.5], [False, True, False], 2) == 0.0  # keeps 0.9 (+1) and 0.5 (-1)


def test_the_bootstrap_interval_of_an_auroc_difference_brackets_it():
    right = [True, False] * 20
    good = [1.0 if r else 0.0 for r in right]
    noise = [0.5] * 40
    lo, hi = lc.bootstrap_diff(good, noise, right)
    assert 0.0 < lo <= 0.5 <= hi


def _record(qid: str, answer: str, gold: str, seq: float | None = None, p_true: float | None = None) -> dict:
    from selfrag.eval.metrics import best_over, f1_score

    f1 = best_over(f1_score, answer, [gold])
    signals = {"seq": seq, "p_true": p_true}
    return {"id": qid, "prediction": answer, "gold": [gold], "metrics": {"f1": f1},
            "details": {"confidence": {"signals": signals}}}


def test_joint_drafts_choose_by_each_reading_and_find_the_oracle_by_hand():
    from lab.confidence_drafts import joint_drafts_report

    answers = [_record("a", "Paris", "Paris", seq=-0.1, p_true=0.9),
               _record("b", "Lyon", "Nice", seq=-0.2, p_true=0.4),
               _record("c", "Rome", "Rome", seq=-0.5, p_true=0.8)]
    others = {"one": [_record("a", "Paris", "Paris", seq=-0.3), _record("b", "Nice", "Nice", seq=-0.1),
                      _record("c", "Milan", "Rome", seq=-0.1)],
              "two": [_record("a", "Paris", "Paris", p_true=0.2), _record("b", "Nice", "Nice", p_true=0.95),
                      _record("c", "Rome", "Rome", p_true=0.1),
                      _record("d", "extra", "x")]}  # a question the method did not answer is left out
    rep = joint_drafts_report(answers, others)
    assert rep["n"] == 3 and rep["right"] == 2
    assert rep["drafts"]["one"]["same"] == 1 and rep["drafts"]["two"]["same"] == 2
    # agreement with "one": right answers a (1.0) and c (0.0), wrong b (0.0): (1 + 0.5) / 2
    assert rep["drafts"]["one"]["agreement_auroc"] == 0.75
    sel = rep["selection"]
    assert sel["answer"] == 2 / 3
    assert sel["medoid"] == 1.0  # a: Paris; b: Nice twice; c: Rome twice
    assert sel["by sequence probability"] == 2 / 3  # a Paris (-0.1), b Nice (-0.1), c Milan (-0.1)
    assert sel["by P(True)"] == 1.0  # a Paris 0.9, b Nice 0.95, c Rome 0.8
    assert sel["oracle"] == 1.0
    assert joint_drafts_report(answers, {"none": []}) is None
