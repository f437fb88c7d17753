"""Adaptive-RAG (Jeong et al., NAACL 2024): route each question to no, one-step or multi-step retrieval.

A router (:mod:`selfrag.reflection.router`) reads features of the question's
text and picks one strategy, cheapest first: ``no_retrieval`` (the model
alone), ``vanilla_rag`` (one retrieval, one answer) or ``ircot`` (retrieval
interleaved with reasoning). The chosen strategy then answers with the same
run, so its steps follow the routing step in one trace.

Which router: ``adaptive_rag.router`` names a fit file (``selfrag router fit``
writes one); left unset, the fit for the model file (by its SHA-256, in the
router folder, ``$SELFRAG_ROUTER_DIR`` or ``~/.cache/selfrag/routers``, then
among the fits shipped in the package), else the packaged default: a rule
written by hand, not fitted, which the log says once per model.
"""

from __future__ import annotations

import logging
import os
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from ...defaults import Inherited
from ...errors import ConfigError
from ...llm.model_files import cache_dir, file_sha256
from ...reflection.router import DEFAULT_ROUTER, STRATEGIES, Router, features, packaged
from ...types import ArchitectureType, Question
from ..core.base import Method, MethodConfig, Outcome
from ..core.registry import register
from ..core.trace import Run
from .ircot import IRCoT, IRCoTConfig
from .no_retrieval import NoRetrieval
from .vanilla import VanillaRAG

log = logging.getLogger("selfrag")
ROUTER_DIR_ENV = "SELFRAG_ROUTER_DIR"
# What each strategy does, as the routing step says it ("retrieval needed: ...").
SAYS = {"no_retrieval": ("no", "the model answers alone"), "vanilla_rag": ("yes", "one retrieval"),
        "ircot": ("yes", "retrieval interleaved with reasoning")}


class Strategy(StrEnum):
    NO_RETRIEVAL = "no_retrieval"
    VANILLA_RAG = "vanilla_rag"
    IRCOT = "ircot"


class AdaptiveRAGConfig(MethodConfig):
    top_k: int | None = Field(None, ge=1)  # passages per retrieval of vanilla_rag and ircot; None: retrieval.top_k
    # A router fit file (`selfrag router fit`); None: the model's fit, else the packaged rule.
    router: str | None = None
    # The strategies the router may choose (a question its router sends elsewhere goes to the best of these).
    strategies: list[Strategy] = Field(default_factory=lambda: list(Strategy))
    # The multi-step strategy's settings (the ircot section's keys; its top_k inherits this top_k).
    ircot: IRCoTConfig = Field(default_factory=IRCoTConfig)

    @field_validator("strategies")
    @classmethod
    def _some_strategy(cls, value: list[Strategy]) -> list[Strategy]:
        if not value:
            raise ValueError("name at least one of no_retrieval, vanilla_rag, ircot")
        return list(dict.fromkeys(value))


def router_dir() -> Path:
    return Path(os.environ[ROUTER_DIR_ENV]) if os.environ.get(ROUTER_DIR_ENV) else cache_dir() / "routers"


def model_sha256(llm: Any) -> str | None:
    """The SHA-256 of the backend's model file (None: a backend without one, an API model)."""
    path = getattr(llm, "model_path", None)
    return file_sha256(path) if path is not None else None


@cache
def find_router(spec: str, sha256: str | None) -> tuple[Router, str]:
    """The router for a model and where it came from, looked up once per model per process."""
    if sha256 is not None:
        path = router_dir() / f"{sha256}.json"
        if path.is_file():
            try:
                return Router.read(path), str(path)
            except ConfigError as exc:
                log.warning("%s; adaptive_rag uses the packaged rule instead", exc)
                return _default(), "packaged rule"
        shipped = packaged(f"{sha256}.json")
        if shipped is not None:
            return shipped, "packaged fit"
    log.warning("no fitted router for %s; adaptive_rag uses the packaged rule (not fitted: ircot for questions that "
                "look multi-hop, else vanilla_rag): fit one with `selfrag router fit` and name it in "
                "adaptive_rag.router", spec)
    return _default(), "packaged rule"


def _default() -> Router:
    router = packaged(DEFAULT_ROUTER)
    if router is None:
        raise ConfigError(f"the packaged router {DEFAULT_ROUTER} is missing; reinstall selfrag")
    return router


def forget() -> None:
    """Look the routers up again (after a fit was written)."""
    find_router.cache_clear()


@register
class AdaptiveRAG(Method):
    name = "adaptive_rag"
    description = (
        "Adaptive-RAG: a router reads the question and sends it to no retrieval, one-step retrieval (vanilla_rag) "
        "or multi-step retrieval (ircot)."
    )
    type = ArchitectureType.AGENTIC
    config_section = "adaptive_rag"
    Config = AdaptiveRAGConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cfg = self.config
        # A router file named in the config is read now, so a wrong path fails before any question.
        self._router = (Router.read(cfg.router), str(Path(cfg.router).expanduser())) if cfg.router else None
        shared = Inherited(top_k=cfg.top_k, max_tokens=int(self.llm_params["max_tokens"]),
                           temperature=float(self.llm_params["temperature"]))
        own = {"ircot": cfg.ircot.model_dump(mode="json")}
        kinds = {"no_retrieval": NoRetrieval, "vanilla_rag": VanillaRAG, "ircot": IRCoT}
        self.strategies: dict[str, Method] = {
            name: kinds[name](self.llm, self.retriever, own.get(name), retriever_factory=self.retriever_factory,
                              inherited=shared)
            for name in STRATEGIES if name in cfg.strategies
        }

    def router(self) -> tuple[Router, str]:
        """The router and where it came from (see the module docstring)."""
        return self._router or find_router(str(self.llm.spec), model_sha256(self.llm))

    async def _answer(self, question: Question, run: Run) -> Outcome:
        router, origin = self.router()
        values = features(question.text)
        allowed = list(self.strategies)
        chosen = router.choose(values, allowed)
        why = ""
        if chosen is None:  # the router knows none of the allowed strategies: the cheapest allowed one
            chosen, why = allowed[0], f"; the router knows none of {', '.join(allowed)}: the cheapest"
        route = {"strategy": chosen, "shares": router.shares(values), "router": origin, "fitted": router.fitted,
                 "features": {k: v for k, v in values.items() if k in router.features}, "allowed": allowed}
        needed = chosen != "no_retrieval"
        run.note(
            "retrieval_decision",
            thought="Route the question by the complexity its text suggests.",
            action_input=question.text,
            observation=f"retrieval needed: {SAYS[chosen][0]} (router: {chosen}, {SAYS[chosen][1]}{why}; from the "
                        f"{origin})",
            details={"retrieval_needed": needed, "decision_source": "router" if router.fitted else "router rule",
                     "route": route},
        )
        outcome = await self.strategies[chosen]._answer(question, run)
        outcome.details = {"route": route, **outcome.details}
        return outcome
