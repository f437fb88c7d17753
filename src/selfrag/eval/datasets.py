"""Benchmark loaders by name: ``load_dataset(cfg.data)`` -> :class:`Dataset`.

==================  ==========================================================
``hotpotqa``        official JSON list or Hugging Face JSONL; per-question
                    corpus = the question's 10 paragraphs
``pubmedqa``        ``ori_pqal.json``; per-question abstract; gold yes/no/maybe
``mmlu_evidence``   Self-BioRAG MMLU evidence files; options A-D; 10 passages
``jsonl``           generic ``{id, question, answers, contexts?, choices?}``;
                    or a shared collection from ``data.corpus``
``demo``            the shipped demo questions over the shipped demo corpus
==================  ==========================================================

``data.path: null`` with ``hotpotqa``, ``pubmedqa`` or ``mmlu_evidence`` reads
the sample of that benchmark shipped with selfrag, and ``sample:NAME`` names a
shipped sample (:mod:`selfrag.data.shipped`). Relative paths are resolved
against the working directory. A malformed record
fails with its file and line, unless ``data.skip_invalid`` is set, in which
case it is skipped and counted in ``Dataset.skipped``. ``data.remove_gold``
(the unanswerable control) is applied to the whole file before
``subset_size`` cuts it (:mod:`.unanswerable`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DataError
from ..types import Document, Question
from .records import RecordErrors


@dataclass
class Dataset:
    """Questions to run and, for a shared collection, the documents to retrieve from."""

    name: str
    questions: list[Question]
    corpus: list[Document] | None = None
    source: str = ""
    skipped: int = 0
    skipped_examples: list[str] = field(default_factory=list)
    sample: str | None = None  # the shipped sample read (selfrag.data.shipped), if one was

    @property
    def missing_contexts_hint(self) -> str:
        """What to do when a retrieving method meets this dataset's questions without contexts."""
        if self.sample == "mmlu_evidence":
            return ("; the shipped MMLU sample has no evidence passages (their licence is not stated): "
                    "fetch the full files with `selfrag data download mmlu_evidence`")
        return ""

    def __len__(self) -> int:
        return len(self.questions)


def _hotpotqa(path: Path | None, split: str | None, errors: RecordErrors) -> list[Question]:
    from . import hotpotqa

    _no_split("hotpotqa", split)
    return hotpotqa.load(_need(path, "hotpotqa"), errors)


def _pubmedqa(path: Path | None, split: str | None, errors: RecordErrors) -> list[Question]:
    from . import pubmedqa

    return pubmedqa.load(_need(path, "pubmedqa"), errors, split)


def _mmlu_evidence(path: Path | None, split: str | None, errors: RecordErrors) -> list[Question]:
    from . import mmlu_evidence

    return mmlu_evidence.load(_need(path, "mmlu_evidence", folder_ok=True), errors, split)


def _jsonl(path: Path | None, split: str | None, errors: RecordErrors) -> list[Question]:
    from . import generic

    _no_split("jsonl", split)
    return generic.load(_need(path, "jsonl"), errors)


def _demo(path: Path | None, split: str | None, errors: RecordErrors) -> list[Question]:
    from ..data import demo_questions

    if path is not None:
        raise DataError("the demo dataset is shipped with selfrag; remove data.path (or use dataset: jsonl)")
    _no_split("demo", split)
    return demo_questions()


# name -> loader(path, split, errors) -> questions; the names are config.DATASETS (a test checks).
LOADERS: dict[str, Callable[[Path | None, str | None, RecordErrors], list[Question]]] = {
    "hotpotqa": _hotpotqa,
    "pubmedqa": _pubmedqa,
    "mmlu_evidence": _mmlu_evidence,
    "jsonl": _jsonl,
    "demo": _demo,
}


def available_datasets() -> list[str]:
    return list(LOADERS)


def _need(path: Path | None, name: str, folder_ok: bool = False) -> Path:
    if path is None:
        raise DataError(f"dataset {name} needs a file: set data.path (e.g. --set data.path=FILE)")
    if path.is_dir() and not folder_ok:
        raise DataError(f"data.path is a folder; dataset {name} reads one file: {path}")
    if not path.exists():
        raise DataError(f"data file not found: {path} (relative paths start from the working directory)")
    return path


def _no_split(name: str, split: str | None) -> None:
    if split:
        raise DataError(f"dataset {name} has no splits; remove data.split={split!r}")


def _corpus(data) -> list[Document] | None:
    if data.dataset == "demo":
        from ..data import demo_corpus

        return demo_corpus()
    if data.corpus is None:
        return None
    from ..ingest import ChunkSettings, IngestLimits
    from ..retrieval.store import load_corpus

    return load_corpus(
        Path(data.corpus).expanduser(),
        include_hidden=data.include_hidden,
        follow_external_links=data.follow_external_links,
        chunks=ChunkSettings(data.chunk_size, data.chunk_overlap),
        limits=IngestLimits.of(data),
    )


def load_dataset(data, *, limit: int | None = None) -> Dataset:
    """Load the questions a :class:`~selfrag.config.DataSection` describes.

    ``data.skip`` leaves out the first questions; then ``limit`` (like
    ``data.subset_size``) keeps the first N of the rest; when both are set the
    smaller wins.
    """
    from ..data.shipped import resolve

    loader = LOADERS[data.dataset]  # config validation admits only DATASETS
    path, sample = resolve(data.dataset, data.path or None)
    errors = RecordErrors(skip_invalid=data.skip_invalid)
    questions = loader(path, data.split, errors)
    seen: set[str] = set()
    for q in questions:
        if q.id in seen:
            raise DataError(f"{path}: question id {q.id!r} occurs twice; ids must be unique to resume runs")
        seen.add(q.id)
    if data.remove_gold:
        from .unanswerable import remove_gold

        questions = remove_gold(questions, float(data.remove_gold), str(path or data.dataset))
    if data.skip:
        if data.skip >= len(questions):
            raise DataError(
                f"data.skip={data.skip} leaves no questions: {path or data.dataset} has {len(questions)}; "
                "use a smaller data.skip"
            )
        questions = questions[data.skip :]
    sizes = [n for n in (data.subset_size, limit) if n is not None]
    if sizes:
        questions = questions[: min(sizes)]
    if not questions:
        raise DataError(f"no questions in {path or data.dataset}")
    return Dataset(
        name=data.dataset,
        questions=questions,
        corpus=_corpus(data),
        source=f"sample:{sample.name}" if sample else str(path) if path else data.dataset,
        skipped=errors.skipped,
        skipped_examples=errors.examples,
        sample=sample.name if sample else None,
    )
