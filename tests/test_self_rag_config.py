"""self_rag's config: the factory, nested sections, strict keys, and the shipped YAML variants."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from selfrag.errors import ConfigError
from selfrag.llm import ScriptedBackend
from selfrag.methods import create_method
from selfrag.methods.catalog.self_rag.method import SelfRAG
from selfrag.methods.factory import create_architecture, get_method_class

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
VARIANTS = {  # retriever, subset, critic, top_k
    "self_rag.yaml": ("bm25", 100, "auto", 10),
    "self_rag_always.yaml": ("bm25", 100, "auto", 10),
    "self_rag_dense.yaml": ("dense", 100, "auto", 10),
    "self_rag_hybrid.yaml": ("hybrid", 100, "auto", 10),
    "self_rag_bm25_full.yaml": ("bm25", None, "auto", 10),
    "self_rag_dense_full.yaml": ("dense", None, "auto", 10),
    "self_rag_hybrid_full.yaml": ("hybrid", None, "auto", 10),
    "self_rag_separate.yaml": ("bm25", 100, "json", 10),
}


@pytest.fixture
def llm():
    return ScriptedBackend([])


def test_create_architecture_self_rag(llm, france_retriever):
    rag = create_architecture(
        "self_rag", llm, france_retriever, {"self_rag": {"num_candidates": 2}}
    )
    assert rag.get_name() == "self_rag"
    assert isinstance(rag, SelfRAG) and get_method_class("self_rag") is SelfRAG


def test_self_rag_config_merging(llm, france_retriever):
    rag = create_architecture(
        "self_rag", llm, france_retriever, {"self_rag": {"num_candidates": 5}, "top_k": 10}
    )
    assert rag.config["num_candidates"] == 5
    assert rag.config["top_k"] == 10


def test_the_section_wins_over_top_level_keys(llm):
    rag = create_method(
        "self_rag", llm, None, {"top_k": 10, "self_rag": {"top_k": 2}, "vanilla": {"top_k": 7}}
    )
    assert rag.config["top_k"] == 2


@pytest.mark.parametrize(
    "config, message",
    [
        ({"self_rag": {"num_candidate": 2}}, "unknown config key 'self_rag.num_candidate'"),
        ({"beam_width": 2}, "unknown config key 'beam_width' for method self_rag"),
        ({"self_rag": {"critic": "both"}}, "config key 'self_rag.critic'"),
        ({"self_rag": {"critique": "combined"}}, "config key 'self_rag.critique' was retired: critic: prompted"),
        ({"self_rag": {"abstain": ["relevance < 2"]}}, "abstain rule 'relevance < 2' is not one of"),
        ({"self_rag": {"joint_passages": 1}}, "config key 'self_rag.joint_passages'"),
        ({"self_rag": {"num_candidates": 0}}, "config key 'self_rag.num_candidates'"),
        ({"self_rag": {"top_k": "many"}}, "config key 'self_rag.top_k'"),
    ],
)
def test_bad_config_is_a_one_line_error_naming_the_key(llm, config, message):
    with pytest.raises(ConfigError, match=message) as info:
        create_method("self_rag", llm, None, config)
    assert "\n" not in str(info.value)


def test_config_schema_lists_keys_and_defaults():
    schema = SelfRAG.get_config_schema()
    assert {k: v[2] for k, v in schema.items()} == {
        "critic": "auto",
        "retrieval_mode": "look_first",
        "top_k": None,  # inherits retrieval.top_k
        "num_candidates": 3,
        "joint_passages": 5,
        "selection": "joint_first",
        "abstain": (),
        "confidence": "reflection",
        "max_context_tokens": 4000,
        "sufficiency_floor": "fitted",
    }
    # The user's settings only: every study knob is a preset, a lab setting, or retired with a message.
    assert len(schema) <= 10
    assert not any(required for _, required, _ in schema.values())


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_yaml_variant_shape(name):
    data = yaml.safe_load((CONFIGS / name).read_text())
    # One source for what the variants share: each inherits self_rag.yaml and sets only its difference.
    assert data["inherits"] == ("base.yaml" if name == "self_rag.yaml" else "self_rag.yaml")
    assert data["experiment"]["name"] == name.removesuffix(".yaml")
    SelfRAG(ScriptedBackend([]), None, data.get("self_rag") or {})  # the section is valid on its own


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_yaml_variant_loads_through_its_parents(name):
    # base.yaml ships with the repo: without it every variant is broken, so that is a failure.
    assert (CONFIGS / "base.yaml").is_file(), f"{CONFIGS / 'base.yaml'} is missing"
    from selfrag.config import load_config

    cfg = load_config(CONFIGS / name)
    method, subset, critique, top_k = VARIANTS[name]
    assert cfg.architecture.name == "self_rag" and cfg.experiment.name == name.removesuffix(".yaml")
    assert cfg.retrieval.method == method and cfg.data.subset_size == subset
    config = SelfRAG(ScriptedBackend([]), None, cfg.method_section("self_rag")).config
    assert (config.critic, config.top_k, config.num_candidates) == (critique, top_k, 3)
    # Every mode's joint candidate chooses its passages from the same pool (the fused mode once read 5 of 5).
    assert config.joint_passages == 5
    assert config.retrieval_mode == ("always" if name == "self_rag_always.yaml" else "look_first")


def test_set_overrides_reach_the_method():
    from selfrag.config import load_config

    cfg = load_config(
        None, ["architecture.name=self_rag", "self_rag.critic=json", "retrieval.top_k=4"]
    )
    section = cfg.method_section()
    assert section == {"critic": "json", "top_k": 4}
    with pytest.raises(ConfigError, match="'self_rag.critique' was retired"):
        load_config(None, ["architecture.name=self_rag", "self_rag.critique=separate"])
    with pytest.raises(ConfigError, match="self_rag.num_candidatez"):
        load_config(None, ["architecture.name=self_rag", "self_rag.num_candidatez=2"])


@pytest.mark.parametrize("key", ["confidence"])
def test_a_bare_yaml_off_means_off(key, tmp_path):
    """YAML 1.1 reads an unquoted ``off`` as False; a setting whose modes include off takes it back."""
    from selfrag.config import load_config

    path = tmp_path / "c.yaml"
    path.write_text(f"architecture:\n  name: self_rag\nself_rag:\n  {key}: off\n", encoding="utf-8")
    section = load_config(path).method_section("self_rag")
    assert SelfRAG(ScriptedBackend([]), None, section).config.model_dump(mode="json")[key] == "off"
