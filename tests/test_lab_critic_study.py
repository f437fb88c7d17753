"""lab.critic_study without a model: the ECE a calibrated head shows by chance."""

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
