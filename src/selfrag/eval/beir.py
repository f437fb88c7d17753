"""Retrieval evaluation on BEIR-format folders: nDCG@10, recall@10, recall@100, throughput.

A BEIR folder holds ``corpus.jsonl`` (``_id, title, text``), ``queries.jsonl``
(``_id, text``) and ``qrels/<split>.tsv`` (``query-id, corpus-id, score``, with
a header row). The metrics follow trec_eval (as BEIR computes them through
pytrec_eval):

- ``nDCG@k = DCG@k / IDCG@k`` with ``DCG@k = sum_{i<=k} rel_i / log2(i + 1)``
  (linear gain, 1-based rank ``i``) and ``IDCG@k`` the DCG of the judged
  documents in the best order;
- ``recall@k = |relevant in the top k| / |relevant|`` (relevant: score > 0);

averaged over every judged query (a query with no relevant document scores 0).
As in BEIR, a document whose id equals the query id is left out of its ranking.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..retrieval.base import Retriever
from ..retrieval.store import read_documents
from ..types import Document
from ..validation import load_json

Qrels = dict[str, dict[str, int]]
CUTOFFS = {"ndcg@10": ("ndcg", 10), "recall@10": ("recall", 10), "recall@100": ("recall", 100)}
DEPTH = 100  # documents retrieved per query: enough for recall@100


@dataclass(frozen=True)
class BeirDataset:
    name: str
    split: str
    corpus: list[Document]
    queries: dict[str, str]  # only the judged queries of the split, in qrels order
    qrels: Qrels


# -- loading ------------------------------------------------------------------------


def read_qrels(path: str | Path) -> Qrels:
    """``query-id  corpus-id  score`` rows (BEIR, header optional) or TREC ``qid 0 docid rel`` rows."""
    p = Path(path)
    qrels: Qrels = {}
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            parts = line.split()
            if not parts:
                continue
            if lineno == 1 and not parts[-1].lstrip("-").isdigit():
                continue  # the header row
            if len(parts) == 4:
                parts = [parts[0], parts[2], parts[3]]
            if len(parts) != 3 or not parts[2].lstrip("-").isdigit():
                raise DataError(f"{p}:{lineno}: expected 'query-id<TAB>corpus-id<TAB>score'")
            qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    if not qrels:
        raise DataError(f"{p}: no relevance judgments")
    return qrels


def read_queries(path: str | Path) -> dict[str, str]:
    p = Path(path)
    if not p.is_file():
        raise DataError(f"queries file not found: {p}")
    out: dict[str, str] = {}
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = load_json(line)
                out[str(row["_id"])] = str(row["text"])
            except (json.JSONDecodeError, KeyError, TypeError):
                raise DataError(f"{p}:{lineno}: expected a JSON object with '_id' and 'text'") from None
    return out


def load_beir(folder: str | Path, split: str = "test") -> BeirDataset:
    root = Path(folder).expanduser()
    if not (root / "corpus.jsonl").is_file():
        raise DataError(f"{root} is not a BEIR folder: no corpus.jsonl (expected corpus.jsonl, queries.jsonl, qrels/{split}.tsv)")
    qrels_file = root / "qrels" / f"{split}.tsv"
    if not qrels_file.is_file():
        splits = sorted(f.stem for f in (root / "qrels").glob("*.tsv")) if (root / "qrels").is_dir() else []
        raise DataError(f"no qrels for split '{split}' in {root}/qrels; available: {', '.join(splits) or 'none'}")
    qrels = read_qrels(qrels_file)
    all_queries = read_queries(root / "queries.jsonl")
    missing = [q for q in qrels if q not in all_queries]
    if missing:
        raise DataError(f"{qrels_file}: {len(missing)} judged queries are not in queries.jsonl (first: {missing[0]})")
    corpus = read_documents(root / "corpus.jsonl")
    if not corpus:
        raise DataError(f"{root}/corpus.jsonl holds no documents")
    return BeirDataset(root.name, split, corpus, {q: all_queries[q] for q in qrels}, qrels)


# -- metrics ------------------------------------------------------------------------


def ndcg_at_k(ranking: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    gains = [max(judged.get(doc, 0), 0) for doc in ranking[:k]]
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at_k(ranking: Sequence[str], judged: Mapping[str, int], k: int) -> float:
    relevant = {doc for doc, rel in judged.items() if rel > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranking[:k])) / len(relevant)


def evaluate_rankings(rankings: Mapping[str, Sequence[str]], qrels: Qrels) -> dict[str, float]:
    """Mean nDCG@10, recall@10 and recall@100 over the judged queries (unranked queries score 0)."""
    fns = {"ndcg": ndcg_at_k, "recall": recall_at_k}
    totals = dict.fromkeys(CUTOFFS, 0.0)
    for qid, judged in qrels.items():
        ranking = list(rankings.get(qid, ()))
        for key, (metric, k) in CUTOFFS.items():
            totals[key] += fns[metric](ranking, judged, k)
    n = max(len(qrels), 1)
    return {key: value / n for key, value in totals.items()}


# -- running a retriever ----------------------------------------------------------


@dataclass(frozen=True)
class RetrievalEvaluation:
    dataset: str
    split: str
    retriever: str
    num_documents: int
    num_queries: int
    metrics: dict[str, float]
    index_seconds: float
    query_seconds: float
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def queries_per_second(self) -> float:
        return self.num_queries / self.query_seconds if self.query_seconds > 0 else float("inf")

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        metrics = data.pop("metrics")
        return {
            **metrics,
            "index_seconds": round(self.index_seconds, 3),
            "queries_per_second": round(self.queries_per_second, 2),
            **{k: v for k, v in data.items() if k != "index_seconds"},
        }


async def rank_queries(
    retriever: Retriever, queries: Mapping[str, str], depth: int = DEPTH, *, ignore_identical_ids: bool = True
) -> dict[str, list[str]]:
    """Document ids ranked for each query, one retrieval call at a time."""
    rankings: dict[str, list[str]] = {}
    for qid, text in queries.items():
        result = await retriever.retrieve(text, depth + 1 if ignore_identical_ids else depth)
        ids = [d.id for d in result.documents if not (ignore_identical_ids and d.id == qid)]
        rankings[qid] = ids[:depth]
    return rankings


def evaluate_retriever(
    dataset: BeirDataset,
    build: Callable[[list[Document]], Retriever],
    *,
    limit: int | None = None,
    depth: int = DEPTH,
) -> RetrievalEvaluation:
    """Index the corpus with ``build`` (timed), rank every judged query (timed), score the rankings.

    ``index_seconds`` is the wall time of ``build`` (encoding included);
    ``queries_per_second`` counts sequential ``retrieve`` calls of ``depth`` documents.
    """
    qids = list(dataset.queries)[: limit or None]
    queries = {q: dataset.queries[q] for q in qids}
    start = time.perf_counter()
    retriever = build(dataset.corpus)
    index_seconds = time.perf_counter() - start
    start = time.perf_counter()
    rankings = asyncio.run(rank_queries(retriever, queries, depth))
    query_seconds = time.perf_counter() - start
    metrics = evaluate_rankings(rankings, {q: dataset.qrels[q] for q in qids})
    params = retriever.params() if hasattr(retriever, "params") else {}
    return RetrievalEvaluation(
        dataset=dataset.name,
        split=dataset.split,
        retriever=retriever.name,
        num_documents=len(retriever.documents),
        num_queries=len(qids),
        metrics=metrics,
        index_seconds=index_seconds,
        query_seconds=query_seconds,
        params=params,
    )
