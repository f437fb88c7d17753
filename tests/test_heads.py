"""Reflection heads: fitting, calibration, hidden-state directions, the measures and the stored form."""

from __future__ import annotations

import json

import numpy as np
import pytest

from selfrag.reflection.heads import Head, HiddenPart, auroc, ece, fit_head


def test_a_fitted_probability_matches_the_rate_it_was_fitted_on():
    """Half the examples have x = 1 and are right 80% of the time, the rest x = 0 and 20%: the calibrated
    head must say about 0.8 and 0.2."""
    rng = np.random.default_rng(3)
    x = np.repeat([0.0, 1.0], 1000)
    y = rng.random(2000) < np.where(x == 1, 0.8, 0.2)
    head = fit_head("confidence", [{"x": v} for v in x], y.tolist(), ["x"])
    assert head.probability({"x": 1.0}) == pytest.approx(0.8, abs=0.04)
    assert head.probability({"x": 0.0}) == pytest.approx(0.2, abs=0.04)
    assert head.probability({"x": None}) == pytest.approx(0.5, abs=0.05)  # a missing reading moves nothing
    assert head.report["n"] == 2000 and head.report["cv_auroc"] == pytest.approx(0.8, abs=0.04)
    assert head.report["cv_ece"] < 0.05


def test_auroc_and_ece_by_hand():
    assert auroc([0.1, 0.4, 0.35, 0.8], [False, False, True, True]) == 0.75
    assert auroc([0.5, 0.5], [True, False]) == 0.5  # ties count half
    assert auroc([1.0, 2.0], [True, True]) is None
    # Two bins used: 0.15 (label 0, 1) -> |0.5 - 0.15|; 0.95 (1, 1) -> |1 - 0.95|; weighted by size.
    assert ece([0.15, 0.15, 0.95, 0.95], [False, True, True, True]) == pytest.approx((0.35 * 2 + 0.05 * 2) / 4)


def test_a_hidden_state_direction_carries_what_the_scalars_miss():
    rng = np.random.default_rng(0)
    n, d = 400, 32
    y = rng.random(n) < 0.5
    states = rng.normal(size=(n, d))
    states[:, 5] += np.where(y, 2.0, -2.0)  # the label lives in one direction of the state, with noise
    rows = [{"noise": float(v)} for v in rng.normal(size=n)]
    without = fit_head("sufficiency", rows, y.tolist(), ["noise"])
    with_state = fit_head("sufficiency", rows, y.tolist(), ["noise"], states=list(states), where="prompt",
                          layer=7, k=8)
    assert without.report["cv_auroc"] < 0.6 < 0.9 < with_state.report["cv_auroc"]
    assert with_state.reads_hidden and len(with_state.hidden_weights) == 8
    right = with_state.probability({"noise": 0.0}, {"prompt": {7: states[y][0].tolist()}})
    wrong = with_state.probability({"noise": 0.0}, {"prompt": {7: states[~y][0].tolist()}})
    assert right > 0.7 > 0.3 > wrong
    # No state at all: the mean state, so the scalars alone decide.
    assert 0.2 < with_state.probability({"noise": 0.0}, None) < 0.8


def test_a_head_survives_its_json_form():
    rng = np.random.default_rng(1)
    states = rng.normal(size=(50, 16))
    y = (states[:, 0] > 0).tolist()
    head = fit_head("confidence", [{"seq": float(v)} for v in states[:, 1]], y, ["seq"], states=list(states),
                    where="answer", layer=-1, k=4)
    back = Head.from_dict(json.loads(json.dumps(head.as_dict())))
    probe = {"answer": {-1: states[3].tolist()}}
    # Directions are stored as float16: the same probability to about three decimals.
    assert back.probability({"seq": 0.2}, probe) == pytest.approx(head.probability({"seq": 0.2}, probe), abs=5e-3)
    assert isinstance(back.hidden, HiddenPart) and back.hidden.directions.shape == (4, 16)


def test_fitting_refuses_one_label_only():
    with pytest.raises(ValueError, match="needs both labels"):
        fit_head("relevance", [{"x": 1.0}] * 10, [True] * 10, ["x"])


def _quiet_direction(seed: int, n: int = 600, d: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """States whose label lives in one quiet dimension (small spread) under twenty loud ones: the first
    principal directions are the loud ones and miss it."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.5
    states = rng.normal(scale=0.3, size=(n, d))
    states[:, :20] += rng.normal(scale=10.0, size=(n, 20))
    states[:, 40] += np.where(y, 0.4, -0.4)
    return states, y


def test_a_probe_finds_the_direction_principal_directions_miss():
    states, y = _quiet_direction(4)
    rows = [{"noise": 0.0}] * len(y)
    directions = fit_head("confidence", rows, y.tolist(), ["noise"], states=list(states), where="answer",
                          layer=21, k=8)
    probe = fit_head("confidence", rows, y.tolist(), ["noise"], states=list(states), where="answer", layer=21,
                     probe=True)
    assert directions.report["cv_auroc"] < 0.6 < 0.85 < probe.report["cv_auroc"]
    assert probe.hidden.fitted == "probe" and probe.hidden.directions.shape == (1, 64)
    # On new states it reads the label, and keeps doing so from its stored (float16) form.
    fresh, truth = _quiet_direction(5, n=200)
    back = Head.from_dict(json.loads(json.dumps(probe.as_dict())))
    said = [back.probability({}, {"answer": {21: s.tolist()}}) for s in fresh]
    assert back.hidden.fitted == "probe" and auroc(said, truth.tolist()) > 0.85
    # Calibrated: among the new states it calls likely, about as many are right as it says.
    sure = [(p, t) for p, t in zip(said, truth, strict=True) if p > 0.5]
    assert np.mean([t for _, t in sure]) == pytest.approx(np.mean([p for p, _ in sure]), abs=0.1)


def test_a_head_that_learned_nothing_says_the_base_rate_instead_of_turning_its_scores_around():
    """Labels that nothing read tells: out of fold, a fit's scores anti-correlate with the labels left out
    (each fold is scored by the rate of the others); calibration must not read that as a signal."""
    rng = np.random.default_rng(7)
    y = (rng.random(60) < 0.4).tolist()
    rows = [{"x": float(v)} for v in rng.normal(size=60)]
    head = fit_head("confidence", rows, y, ["x"])
    assert head.calibration[0] >= 0
    values = [head.probability({"x": float(v)}) for v in np.linspace(-3, 3, 7)]
    assert max(values) - min(values) < 0.2 and all(abs(v - np.mean(y)) < 0.2 for v in values)
