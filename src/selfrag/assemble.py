"""Turn an :class:`~selfrag.config.ExperimentConfig` into working parts.

The CLI's ``ask`` and ``run`` both build their backend, retriever and method
here, so a config means the same thing everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .config import ExperimentConfig
from .llm.base import RetryPolicy
from .llm.factory import create_backend
from .llm.pricing import Pricing
from .methods.core.base import Method
from .methods.critique.augmentations import load_augmentations
from .methods.factory import get_method_class
from .retrieval.base import Retriever, RetrieverFactory
from .retrieval.registry import create_retriever, options_for, retriever_factory
from .retrieval.rerank import reranked, reranked_factory
from .types import Document


def build_backend(cfg: ExperimentConfig, *, use_cache: bool | None = None) -> Any:
    llm = cfg.llm
    pricing = Pricing(**llm.pricing.model_dump()) if llm.pricing is not None else None
    cache = cfg.cache.enabled if use_cache is None else use_cache
    return create_backend(
        llm.spec,
        pricing=pricing,
        retry=RetryPolicy(max_attempts=llm.max_attempts),
        cache_path=Path(cfg.cache.path) if cache else None,
        timeout=llm.timeout,
        api_key_env=llm.api_key_env,
        n_ctx=llm.n_ctx,
        n_threads=llm.n_threads,
        seed=llm.seed,
    )


def retriever_options(cfg: ExperimentConfig) -> dict[str, Any]:
    """Options for the configured retriever: those its registry entry takes, left out when not set."""
    return options_for(cfg.retrieval.method, cfg.retrieval)


def build_retriever_factory(cfg: ExperimentConfig) -> RetrieverFactory:
    """Per-question retrievers (a dataset's own contexts), behind the configured rerank stage."""
    factory = retriever_factory(cfg.retrieval.method, **retriever_options(cfg))
    return reranked_factory(factory, cfg.retrieval.rerank, cfg.retrieval.rerank_from)


def build_retriever(cfg: ExperimentConfig, documents: Sequence[Document] | None) -> Retriever | None:
    """A retriever over a shared collection (a saved index, or ``documents`` indexed now), behind the
    configured rerank stage."""
    retriever = _shared_retriever(cfg, documents)
    if retriever is None:
        return None
    return reranked(retriever, cfg.retrieval.rerank, cfg.retrieval.rerank_from)


def _shared_retriever(cfg: ExperimentConfig, documents: Sequence[Document] | None) -> Retriever | None:
    if cfg.retrieval.index:
        from .retrieval.persist import load_index

        return load_index(
            cfg.retrieval.index,
            documents=documents,
            expected_method=cfg.retrieval.method,
            options=retriever_options(cfg),
        )
    if documents is None:
        return None
    return create_retriever(cfg.retrieval.method, documents, **retriever_options(cfg))


def build_method(
    cfg: ExperimentConfig,
    llm: Any,
    retriever: Retriever | None = None,
    name: str | None = None,
) -> Method:
    """The configured method; the keys its section leaves unset inherit the experiment's values."""
    cls = get_method_class(name or cfg.architecture.name)
    return cls(
        llm,
        retriever,
        cfg.methods.get(cls.section()),
        retriever_factory=build_retriever_factory(cfg),
        inherited=cfg.inherited(),
        augmentations=load_augmentations(cfg),
    )
