"""`compare` and `analyze` say when a run's latency came from the cache, and how many calls did.

Two real `selfrag run` processes share one cache file (as configs do by
default): every call of the model takes 0.3 s (the scripted backend behind the
delay wrapper), a cached call takes none. The second run asks five questions,
three of which the first run asked, so its p50 latency is the cache's, not the
model's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.cli_process import SRC, selfrag, write_experiment

HELPER = Path(__file__).parent / "helpers" / "gated_cli.py"
DELAY = 0.3


def gated_run(cwd: Path, *args: str) -> None:
    env = {**os.environ, "PYTHONPATH": SRC, "GATE_DELAY": str(DELAY)}
    proc = subprocess.run([sys.executable, str(HELPER), "run", *args, "--no-progress"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("compare_cached")
    write_experiment(tmp, 5)
    gated_run(tmp, "exp.yaml", "--run-id", "first", "--limit", "3")
    gated_run(tmp, "exp.yaml", "--run-id", "second")
    return tmp


def test_compare_marks_latency_from_the_cache_and_counts_the_cached_calls(runs):
    proc = selfrag("compare", "results/first", "results/second", cwd=runs)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    header = lines[0]
    assert "cached calls" in header
    first = next(line for line in lines if line.startswith("first"))
    second = next(line for line in lines if line.startswith("second"))
    assert "0/3" in first and "*" not in first
    assert "3/5" in second and "*" in second
    note = next(line for line in lines if line.startswith("*"))
    assert "second: 3 of 5 calls" in note and "cache" in note and "not the model" in note


def test_compare_json_gives_the_cached_calls_and_the_uncached_latency(runs):
    proc = selfrag("compare", "results/first", "results/second", "--json", cwd=runs)
    rows = {r["run"]: r for r in json.loads(proc.stdout)}
    assert (rows["second"]["cached_calls"], rows["second"]["llm_calls"]) == (3, 5)
    assert (rows["first"]["cached_calls"], rows["first"]["llm_calls"]) == (0, 3)
    # The median is a cached question's; over the questions that called the model it is the model's.
    assert rows["second"]["p50_latency_s"] < DELAY
    assert rows["second"]["p50_latency_uncached_s"] >= DELAY
    assert rows["second"]["uncached_questions"] == 2


def test_analyze_says_how_many_calls_came_from_the_cache(runs):
    proc = selfrag("analyze", "results/second", "--no-definitions", cwd=runs)
    assert proc.returncode == 0, proc.stderr
    latency = next(line for line in proc.stdout.splitlines() if line.startswith("latency"))
    assert "3 of 5 calls from the cache" in latency, latency
    assert "without them: p50" in latency, latency
    plain = selfrag("analyze", "results/first", "--no-definitions", cwd=runs)
    latency = next(line for line in plain.stdout.splitlines() if line.startswith("latency"))
    assert "cache" not in latency, latency
