"""One home per default: a config file, the CLI's flags and the Python API give every method the same numbers.

For each registered method, top_k, the LLM call's max_tokens and temperature,
and max_context_tokens (where the method has them) are read off the built
method three ways: from a config file, from the functions the CLI uses to
turn flags into a config, and from ``Method(llm, retriever, config)``.
"""

from __future__ import annotations

import argparse
import types
from pathlib import Path

import pytest
import yaml

from selfrag import defaults
from selfrag.assemble import build_method
from selfrag.cli.options import add_answer_options, config_from_args
from selfrag.config import ExperimentConfig, load_config, validate
from selfrag.defaults import Inherited, inherit
from selfrag.eval.runner import Experiment
from selfrag.llm.scripted import ScriptedBackend
from selfrag.methods import Method, available_methods, create_method

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "configs" / "base.yaml"
METHODS = sorted(available_methods())


def llm() -> ScriptedBackend:
    return ScriptedBackend([])


def settings(method: Method) -> dict[str, object]:
    """What a built method will use: its resolved config keys and its LLM call defaults."""
    return {
        "top_k": method.config.get("top_k"),
        "max_context_tokens": method.config.get("max_context_tokens"),
        "max_tokens": method.llm_params["max_tokens"],
        "temperature": method.llm_params["temperature"],
    }


def from_config(path: Path, *overrides) -> Method:
    return build_method(load_config(path, list(overrides)), llm())


def cli_config(*argv: str) -> ExperimentConfig:
    parser = argparse.ArgumentParser()
    add_answer_options(parser)
    return config_from_args(parser.parse_args(list(argv)), cache_default=False)


def from_cli(*argv: str) -> Method:
    return build_method(cli_config(*argv), llm())


def shipped_config(name: str) -> Path | None:
    path = REPO / "configs" / f"{name}.yaml"
    return path if path.is_file() else None


def test_every_method_is_covered():
    assert {"vanilla_rag", "self_rag", "self_rag_critic", "self_rag_segment", "react_rag",
            "self_corrective", "no_retrieval"} <= set(METHODS)


def test_base_yaml_documents_the_project_defaults():
    base = yaml.safe_load(BASE.read_text(encoding="utf-8"))
    assert base["retrieval"]["top_k"] == defaults.TOP_K
    assert base["llm"]["max_tokens"] == defaults.MAX_TOKENS
    assert base["llm"]["temperature"] == defaults.TEMPERATURE
    # The model defaults are the same constants, so a config without base.yaml agrees too.
    cfg = ExperimentConfig()
    assert (cfg.retrieval.top_k, cfg.llm.max_tokens, cfg.llm.temperature) == (
        defaults.TOP_K, defaults.MAX_TOKENS, defaults.TEMPERATURE)
    # No method section in base.yaml: nothing there overrides a method's inherited keys.
    assert not set(base) & {cls.section() for cls in available_methods().values()}


@pytest.mark.parametrize("name", METHODS)
def test_no_settings_give_the_same_numbers_every_way(name):
    cls = available_methods()[name]
    ways = {
        "config: base.yaml + architecture": from_config(BASE, f"architecture.name={name}"),
        "cli: --method": from_cli("--method", name),
        "cli: --config base.yaml --method": from_cli("--config", str(BASE), "--method", name),
        "python: Method(llm, retriever)": cls(llm(), None),
        "python: create_method": create_method(name, llm()),
    }
    seen = {way: settings(method) for way, method in ways.items()}
    first = next(iter(seen.values()))
    assert all(s == first for s in seen.values()), seen
    expected_top_k = defaults.TOP_K if "top_k" in cls.Config.model_fields else None
    assert first["top_k"] == expected_top_k
    assert (first["max_tokens"], first["temperature"]) == (defaults.MAX_TOKENS, defaults.TEMPERATURE)
    if "max_context_tokens" in cls.Config.model_fields:  # the method's own default, its only home
        assert first["max_context_tokens"] == cls.Config.model_fields["max_context_tokens"].default


@pytest.mark.parametrize("name", [n for n in METHODS if shipped_config(n)])
def test_a_shipped_config_gives_the_same_numbers_every_way(name):
    path = shipped_config(name)
    cfg = load_config(path)
    cls = available_methods()[name]
    section = cfg.methods.get(cls.section())  # what a Python user would copy from the file
    ways = {
        "config file": from_config(path),
        "cli: --config": from_cli("--config", str(path)),
        "python: Method(llm, retriever, section)": cls(llm(), None, section),
        "python: create_method": create_method(name, llm(), None, {cls.section(): section or {}}),
    }
    seen = {way: settings(method) for way, method in ways.items()}
    first = next(iter(seen.values()))
    assert all(s == first for s in seen.values()), seen
    assert cfg.method_section(name).get("top_k") == first["top_k"]


@pytest.mark.parametrize("name", [n for n in METHODS if "top_k" in available_methods()[n].Config.model_fields])
def test_an_explicit_method_value_overrides_the_inherited_one(name):
    cls = available_methods()[name]
    section = cls.section()
    ways = {
        "config": from_config(BASE, f"architecture.name={name}", "retrieval.top_k=7", f"{section}.top_k=2"),
        "cli: --set": from_cli("--method", name, "--set", "retrieval.top_k=7", "--set", f"{section}.top_k=2"),
        "python: Method": cls(llm(), None, {"top_k": 2}, inherited=Inherited(top_k=7)),
        "python: create_method": create_method(name, llm(), None, {section: {"top_k": 2}}),
    }
    assert {way: m.config.top_k for way, m in ways.items()} == dict.fromkeys(ways, 2)
    # Left unset, the experiment's value is inherited.
    assert from_config(BASE, f"architecture.name={name}", "retrieval.top_k=7").config.top_k == 7
    assert cls(llm(), None, inherited=Inherited(top_k=7)).config.top_k == 7


@pytest.mark.parametrize("name", [n for n in METHODS if "top_k" in available_methods()[n].Config.model_fields])
def test_the_top_k_flag_is_written_once_and_wins(name):
    section = available_methods()[name].section()
    # No method key: --top-k only sets retrieval.top_k, and the method inherits it.
    cfg = cli_config("--method", name, "--top-k", "4")
    assert cfg.retrieval.top_k == 4 and section not in cfg.methods
    assert build_method(cfg, llm()).config.top_k == 4
    # A method key from the config (here --set): the flag wins; the key is cleared to inherit.
    cfg = cli_config("--method", name, "--set", f"{section}.top_k=2", "--top-k", "4")
    assert cfg.retrieval.top_k == 4 and cfg.methods[section]["top_k"] is None
    assert build_method(cfg, llm()).config.top_k == 4
    assert validate(cfg.to_dict()).method_section(name)["top_k"] == 4  # as a run's config.yaml reloads


def test_the_top_k_flag_wins_over_a_shipped_method_value():
    path = REPO / "configs" / "react_rag.yaml"
    assert load_config(path).methods["react"]["top_k"] == 3  # an experiment's explicit choice
    assert from_cli("--config", str(path)).config.top_k == 3
    assert from_cli("--config", str(path), "--top-k", "1").config.top_k == 1


@pytest.mark.parametrize("name", METHODS)
def test_recall_at_k_uses_the_method_resolved_top_k(name, tmp_path):
    cls = available_methods()[name]
    overrides = [f"architecture.name={name}", "retrieval.top_k=6"]
    if "top_k" in cls.Config.model_fields:
        overrides.append(f"{cls.section()}.top_k=2")
    cfg = load_config(BASE, overrides)
    method = build_method(cfg, llm())
    experiment = Experiment(cfg, types.SimpleNamespace(questions=[]), tmp_path, llm(), method, ledger=None)
    assert experiment.top_k == method.config.get("top_k")
    assert experiment.top_k == (2 if "top_k" in cls.Config.model_fields else None)


def test_the_resolver_fills_only_unset_inherited_keys():
    fields = ("top_k", "max_context_tokens")
    assert inherit(fields, {}, Inherited()) == {"top_k": defaults.TOP_K}
    assert inherit(fields, {"top_k": None}, Inherited(top_k=9)) == {"top_k": 9}
    assert inherit(fields, {"top_k": 1}, Inherited(top_k=9)) == {}
    assert inherit(("max_steps",), {}, Inherited()) == {}  # a method without top_k gets none
    with pytest.raises(ValueError):
        Inherited(top_k=0)
