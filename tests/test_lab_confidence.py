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
