"""Every file in configs/ runs on a fresh clone: no ../shared/data, only what selfrag ships.

Each config runs with ``--limit 2`` from an empty working directory (whose
parent has no ``shared/`` folder) on a scripted model that answers every
call; dense and hybrid configs need the dense extra and skip cleanly without
it (``bash scripts/setup.sh --dev`` installs it). The model-marked test runs
two on the embedded model.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from selfrag.cli.main import main
from selfrag.config import load_config
from selfrag.extras import missing

REPO = Path(__file__).resolve().parents[1]
CONFIGS = sorted((REPO / "configs").glob("*.yaml"))
# One reply for every call: a written "yes", and a score for a call that scores a given reply.
ANSWER_ALL = {" ": {"text": "yes", "forced_logprobs": [-0.5]}}


def needs_dense(path: Path) -> bool:
    return load_config(path).retrieval.method in ("dense", "hybrid")


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch) -> Path:
    """An empty working directory two levels down, so ``../shared`` does not exist."""
    work = tmp_path / "clone" / "selfrag"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    assert not (work.parent / "shared").exists()
    return work


def run_config(config: Path, fresh: Path, capsys, *extra: str) -> dict:
    code = main(["run", str(config), "--limit", "2", "--no-progress", "--no-cache", "--json", *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads(out)
    assert summary["status"] == "complete" and summary["n_answered"] == 2 and summary["n_errors"] == 0, summary
    assert summary["data_path"] == "sample:hotpotqa"
    run_dir = Path(fresh / "results" / summary["run_id"])
    assert (run_dir / "predictions.jsonl").is_file()
    return summary


def test_there_are_configs_to_run():
    assert len(CONFIGS) >= 30 and (REPO / "configs" / "base.yaml") in CONFIGS


@pytest.mark.parametrize("config", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_config_runs_on_a_fresh_clone(config, fresh, capsys):
    if needs_dense(config) and missing("dense"):
        pytest.skip(f"{config.name} needs the dense extra: pip install 'selfrag[dense]'")
    script = fresh / "replies.json"
    script.write_text(json.dumps(ANSWER_ALL))
    summary = run_config(config, fresh, capsys, "--llm", f"scripted:{script}")
    assert summary["method"] == load_config(config).architecture.name


@pytest.mark.model
def test_vanilla_runs_on_the_embedded_model(fresh, capsys):
    # Fewer passages and short replies keep two questions on the 135M model to seconds each.
    summary = run_config(REPO / "configs" / "vanilla_rag.yaml", fresh, capsys,
                         "--set", "llm.max_tokens=24", "--set", "retrieval.top_k=3")
    assert summary["model"].startswith("SmolLM2-135M")


@pytest.mark.model
def test_the_seed_000_preset_runs_five_questions_on_the_embedded_model(fresh, capsys):
    """`selfrag run configs/self_rag_seed000.yaml --limit 5` as it ships, on the default model."""
    code = main(["run", str(REPO / "configs" / "self_rag_seed000.yaml"), "--limit", "5", "--no-progress",
                 "--no-cache", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    summary = json.loads(out)
    assert summary["status"] == "complete" and summary["n_answered"] == 5 and summary["n_errors"] == 0, summary
    assert summary["model"].startswith("SmolLM2-135M") and summary["method"] == "self_rag"
    records = [json.loads(line) for line in (fresh / "results" / summary["run_id"] / "predictions.jsonl").open()]
    for record in records:  # seed 000's budget: 1 + 2n with retrieval, 2 without
        n = sum(s["action"] == "generate_and_critique" for s in record["reasoning_chain"])
        calibration = sum(s["llm_calls"] for s in record["reasoning_chain"] if s["action"] == "calibrate_decision")
        assert record["accounting"]["llm_calls"] - calibration == (1 + 2 * n if record["accounting"]["retrieval_needed"] else 2)
