"""Project-wide defaults, each written once, and how a method inherits them.

Where each default lives (docs/architecture.md, "Where each default lives"):

* the default method (``METHOD``) is written here once: every command, the
  config's ``architecture.name`` and ``create_method`` read it;
* a setting shared by every method (passages per retrieval, the LLM call's
  token cap and temperature) has one value here; ``configs/base.yaml``
  documents the same numbers (``retrieval.top_k``, ``llm.max_tokens``,
  ``llm.temperature``; tests/test_defaults.py checks they agree);
* a method's own options leave such a key ``None`` ("inherit"): the value
  comes from the experiment (``retrieval.top_k`` ...) or, with no experiment
  config (the Python API), from :class:`Inherited`'s defaults below;
* a key that means something different per method (``max_context_tokens``,
  ``step_max_tokens`` ...) has its default in that method's ``Config`` alone.

:func:`inherit` is the one resolver: the config layer
(``ExperimentConfig.method_section``) and ``Method.__init__`` both call it,
so every way of starting a method gives the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

# The method `ask`, `demo`, `serve`, configs (architecture.name) and create_method() use when
# none is named; `--method vanilla_rag` is the plain retrieve-then-answer baseline.
METHOD = "self_rag"
TOP_K = 5  # passages per retrieval (retrieval.top_k)
MAX_TOKENS = 256  # token cap of an LLM call (llm.max_tokens)
TEMPERATURE = 0.0  # sampling temperature of an LLM call (llm.temperature)

# Method config keys that, left None, take the experiment's value of the same name.
INHERITED_KEYS = ("top_k",)


@dataclass(frozen=True)
class Inherited:
    """The experiment-wide values a method takes when its own options leave them unset.

    ``Inherited()`` is the project defaults (the Python API with no experiment
    config); ``ExperimentConfig.inherited()`` gives an experiment's values.
    """

    top_k: int = TOP_K
    max_tokens: int = MAX_TOKENS
    temperature: float = TEMPERATURE

    def __post_init__(self) -> None:
        if self.top_k < 1 or self.max_tokens < 1:
            raise ValueError(f"top_k and max_tokens must be at least 1, got {self.top_k} and {self.max_tokens}")


def inherit(fields: Iterable[str], values: Any, inherited: Inherited) -> dict[str, Any]:
    """The inherited keys among ``fields`` that ``values`` leaves unset (absent or None), with their values.

    ``values`` is a mapping or a config model (anything with ``.get``); merge
    the result over it. An explicit value in ``values`` always wins.
    """
    get: Callable[[str], Any] = values.get if values is not None else (lambda _key: None)
    names = set(fields)
    return {key: getattr(inherited, key) for key in INHERITED_KEYS if key in names and get(key) is None}
