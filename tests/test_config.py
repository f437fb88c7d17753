"""Experiment configs: every shipped config loads; inherits, --set, validation errors, redaction, paths."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from selfrag.config import ExperimentConfig, dump_yaml, load_config, with_absolute_paths
from selfrag.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
CONFIGS = sorted((REPO / "configs").glob("*.yaml"))
BASELINES = [
    "vanilla_rag", "vanilla_rag_dense", "vanilla_rag_hybrid", "vanilla_rag_bm25_full",
    "vanilla_rag_dense_full", "vanilla_rag_hybrid_full", "no_retrieval", "no_retrieval_full",
]


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_shipped_config_loads(path):
    cfg = load_config(path)
    assert isinstance(cfg, ExperimentConfig)
    if path.stem != "base":
        # Every variant names itself and inherits the shared defaults.
        assert cfg.experiment.name == path.stem
        assert cfg.cache.enabled is True
    cfg.method_section()  # the method exists and its section validates
    assert yaml.safe_load(dump_yaml(cfg))["architecture"]["name"] == cfg.architecture.name


def test_baseline_variants_exist_with_the_expected_settings():
    for name in BASELINES:
        cfg = load_config(REPO / "configs" / f"{name}.yaml")
        assert cfg.architecture.name == ("vanilla_rag" if name.startswith("vanilla") else "no_retrieval")
        retriever = next((r for r in ("dense", "hybrid") if r in name), "bm25")
        assert cfg.retrieval.method == retriever
        assert cfg.data.subset_size == (None if name.endswith("_full") else 100)


VARIANT_SUFFIXES = ("_dense_full", "_hybrid_full", "_bm25_full", "_full", "_dense", "_hybrid")


def _parent(stem: str) -> str | None:
    return next((stem.removesuffix(s) for s in VARIANT_SUFFIXES if stem.endswith(s)), None)


@pytest.mark.parametrize("path", [p for p in CONFIGS if _parent(p.stem)], ids=lambda p: p.stem)
def test_a_retriever_or_full_variant_is_its_method_config_with_one_change(path):
    """A variant inherits its method's config, so a setting changed there reaches it (they once drifted)."""
    parent = _parent(path.stem)
    assert yaml.safe_load(path.read_text())["inherits"] == f"{parent}.yaml"
    child, base = load_config(path), load_config(REPO / "configs" / f"{parent}.yaml")
    assert child.architecture.name == base.architecture.name
    assert child.method_section() == base.method_section()
    retriever = next((r for r in ("dense", "hybrid") if f"_{r}" in path.stem), "bm25")
    assert child.retrieval.method == retriever
    assert child.data.subset_size == (None if path.stem.endswith("_full") else base.data.subset_size)


def test_base_defaults():
    cfg = load_config(REPO / "configs" / "base.yaml")
    assert cfg.llm.spec is None and cfg.retrieval.method == "bm25" and cfg.retrieval.top_k == 5
    assert cfg.data.dataset == "hotpotqa"
    assert cfg.data.path is None  # the HotpotQA sample shipped with selfrag (tests/test_samples.py)
    assert cfg.cache.enabled and cfg.run.concurrency >= 1


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_multi_level_inherits_deep_merges_relative_to_each_file(tmp_path):
    write(tmp_path / "a" / "root.yaml", "llm: {max_tokens: 99, temperature: 0.5}\nretrieval: {top_k: 7}\n")
    write(tmp_path / "a" / "b" / "mid.yaml", "inherits: ../root.yaml\nllm: {max_tokens: 50}\n")
    leaf = write(tmp_path / "leaf.yaml", "inherits: a/b/mid.yaml\nvanilla: {top_k: 2}\n")
    cfg = load_config(leaf)
    assert (cfg.llm.max_tokens, cfg.llm.temperature, cfg.retrieval.top_k) == (50, 0.5, 7)
    assert cfg["vanilla"] == {"top_k": 2} and cfg["llm"]["max_tokens"] == 50  # seed-style access
    assert cfg.get("vanilla") == {"top_k": 2} and cfg.get("self_rag") is None
    assert cfg.method_section("vanilla_rag")["top_k"] == 2


def test_inheritance_cycle_reports_the_chain(tmp_path):
    write(tmp_path / "x.yaml", "inherits: y.yaml\n")
    write(tmp_path / "y.yaml", "inherits: x.yaml\n")
    with pytest.raises(ConfigError, match="cycle: x.yaml -> y.yaml -> x.yaml"):
        load_config(tmp_path / "x.yaml")


def test_unknown_key_names_dotted_path_and_file(tmp_path):
    base = write(tmp_path / "base.yaml", "retrieval: {top_kk: 3}\n")
    child = write(tmp_path / "child.yaml", "inherits: base.yaml\n")
    with pytest.raises(ConfigError, match=rf"unknown config key 'retrieval.top_kk' \(in {base}\)"):
        load_config(child)
    with pytest.raises(ConfigError, match=r"unknown config key 'vanilla.depth'.*allowed: top_k, max_context_tokens"):
        load_config(overrides=["vanilla.depth=3"])


def test_wrong_type_names_key_file_and_expectation(tmp_path):
    path = write(tmp_path / "c.yaml", "data: {subset_size: many}\n")
    with pytest.raises(ConfigError, match=rf"config key 'data.subset_size' \(in {path}\): .*integer.*'many'"):
        load_config(path)


def test_set_overrides_are_validated_the_same_way():
    cfg = load_config(REPO / "configs" / "vanilla_rag.yaml", ["data.subset_size=3", "run.concurrency=8", "llm.spec=openai:gpt-4o-mini"])
    assert (cfg.data.subset_size, cfg.run.concurrency, cfg.llm.spec) == (3, 8, "openai:gpt-4o-mini")
    with pytest.raises(ConfigError, match=r"config key 'run.concurrency' \(in --set\)"):
        load_config(REPO / "configs" / "vanilla_rag.yaml", ["run.concurrency=0"])
    with pytest.raises(ConfigError, match="--set needs dotted.key=value"):
        load_config(overrides=["run.concurrency"])


def test_secrets_are_redacted_in_dumped_yaml():
    cfg = load_config(overrides=["llm.spec=openai:m@https://user:hunter2@example.com/v1"])
    text = dump_yaml(cfg)
    assert "hunter2" not in text and "***" in text


def test_with_absolute_paths_resolves_against_the_working_directory(tmp_path):
    cfg = load_config(overrides=["data.dataset=jsonl", "data.path=q.jsonl", "cache.path=c/cache.db"])
    out = with_absolute_paths(cfg, tmp_path)
    assert out.data.path == str(tmp_path / "q.jsonl")
    assert out.cache.path == str(tmp_path / "c" / "cache.db")
    assert out.experiment.output_dir == str(tmp_path / "results")
    assert cfg.data.path == "q.jsonl"  # the original is untouched
