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
The sections are :mod:`.sections`; reading files and overrides, :mod:`.files`.
"""

from ..redaction import redact
from .files import (
    PATH_KEYS,
    Override,
    apply_overrides,
    deep_merge,
    dump_yaml,
    load_config,
    load_raw,
    parse_override,
    validate,
    with_absolute_paths,
)
from .sections import (
    DATASETS,
    GOLD_DATASETS,
    ArchitectureSection,
    CacheSection,
    DataSection,
    ExperimentConfig,
    ExperimentSection,
    LLMSection,
    PricingSection,
    RetrievalSection,
    RunSection,
)

__all__ = [
    "DATASETS", "GOLD_DATASETS", "PATH_KEYS", "ArchitectureSection", "CacheSection", "DataSection",
    "ExperimentConfig", "ExperimentSection", "LLMSection", "Override", "PricingSection", "RetrievalSection",
    "RunSection", "apply_overrides", "deep_merge", "dump_yaml", "load_config", "load_raw", "parse_override",
    "redact", "validate", "with_absolute_paths",
]
