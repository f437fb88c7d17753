"""BEIR-format retrieval evaluation: hand-checked metrics on a tiny folder, and BM25 on SciFact."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from selfrag.errors import DataError
from selfrag.eval.beir import (
    evaluate_rankings,
    evaluate_retriever,
    load_beir,
    ndcg_at_k,
    rank_queries,
    read_qrels,
    recall_at_k,
)
from selfrag.retrieval import BM25Retriever
from selfrag.types import Document, RetrievalResult

CORPUS = [
    {"_id": "d1", "title": "", "text": "apples are red fruit"},
    {"_id": "d2", "title": "", "text": "bananas are yellow fruit"},
    {"_id": "d3", "title": "", "text": "cherries are small red fruit"},
    {"_id": "d4", "title": "", "text": "grapes grow in bunches"},
]
QUERIES = [
    {"_id": "q1", "text": "bananas"},
    {"_id": "q2", "text": "cherries"},
    {"_id": "q3", "text": "grapes"},
    {"_id": "q4", "text": "an unjudged query"},
]
# BEIR's layout: a header row, CRLF line ends.
QRELS = "query-id\tcorpus-id\tscore\r\nq1\td2\t1\r\nq2\td3\t1\r\nq2\td4\t1\r\nq3\td1\t1\r\nq3\td9\t1\r\n"


@pytest.fixture
def beir_dir(tmp_path: Path) -> Path:
    root = tmp_path / "tiny"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in CORPUS))
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in QUERIES))
    (root / "qrels" / "test.tsv").write_bytes(QRELS.encode())
    (root / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\n")
    return root


def log2(x: float) -> float:
    return math.log(x, 2)


def test_ndcg_by_hand():
    judged = {"d1": 1, "d3": 1}
    # d1 at rank 1, d3 at rank 3: DCG = 1 + 1/log2(4); ideal: ranks 1 and 2.
    assert ndcg_at_k(["d1", "d2", "d3"], judged, 10) == pytest.approx((1 + 1 / 2) / (1 + 1 / log2(3)))
    assert ndcg_at_k(["d1", "d2", "d3"], judged, 2) == pytest.approx(1 / (1 + 1 / log2(3)))
    # Graded: gain is the relevance grade (trec_eval's linear gain).
    graded = {"d2": 2, "d4": 1, "d5": 0}
    assert ndcg_at_k(["d4", "d2"], graded, 10) == pytest.approx((1 + 2 / log2(3)) / (2 + 1 / log2(3)))
    assert ndcg_at_k(["d2", "d4"], graded, 10) == pytest.approx(1.0)
    assert ndcg_at_k(["x", "y"], graded, 10) == 0.0
    assert ndcg_at_k(["d5"], {"d5": 0}, 10) == 0.0  # nothing relevant


def test_recall_by_hand():
    judged = {"a": 1, "b": 2, "c": 0}
    assert recall_at_k(["a", "x", "b"], judged, 2) == 0.5
    assert recall_at_k(["a", "x", "b"], judged, 3) == 1.0
    assert recall_at_k(["c"], judged, 10) == 0.0
    assert recall_at_k([], {}, 10) == 0.0


def test_mean_over_judged_queries_missing_ranking_scores_zero():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    out = evaluate_rankings({"q1": ["a"]}, qrels)
    assert out == {"ndcg@10": 0.5, "recall@10": 0.5, "recall@100": 0.5}


def test_loading_a_beir_folder(beir_dir):
    ds = load_beir(beir_dir)
    assert ds.name == "tiny" and ds.split == "test"
    assert [d.id for d in ds.corpus] == ["d1", "d2", "d3", "d4"]
    assert ds.queries == {"q1": "bananas", "q2": "cherries", "q3": "grapes"}  # judged only
    assert ds.qrels == {"q1": {"d2": 1}, "q2": {"d3": 1, "d4": 1}, "q3": {"d1": 1, "d9": 1}}
    assert load_beir(beir_dir, "dev").queries == {"q1": "bananas"}


def test_trec_format_qrels(tmp_path):
    p = tmp_path / "qrels.txt"
    p.write_text("q1 0 d1 1\nq1 0 d2 0\n")
    assert read_qrels(p) == {"q1": {"d1": 1, "d2": 0}}


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: (r / "corpus.jsonl").unlink(), "not a BEIR folder"),
        (lambda r: (r / "qrels" / "test.tsv").unlink(), "no qrels for split 'test'.*available: dev"),
        (lambda r: (r / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\n"), r"test.tsv:2: expected"),
        (lambda r: (r / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n"), "no relevance judgments"),
        (lambda r: (r / "queries.jsonl").write_text('{"_id": "q1", "text": "x"}\n'), "not in queries.jsonl"),
        (lambda r: (r / "queries.jsonl").write_text("{oops\n"), r"queries.jsonl:1"),
    ],
)
def test_bad_folders_fail_with_one_line(beir_dir, mutate, message):
    mutate(beir_dir)
    with pytest.raises(DataError, match=message):
        load_beir(beir_dir)


def test_bm25_on_the_tiny_folder_by_hand(beir_dir):
    ds = load_beir(beir_dir)
    result = evaluate_retriever(ds, BM25Retriever)
    # BM25 rankings (zero scores keep corpus order):
    # q1 "bananas":  d2 d1 d3 d4 -> relevant d2 at 1            -> nDCG 1,   recall 1
    # q2 "cherries": d3 d1 d2 d4 -> relevant d3 at 1, d4 at 4   -> nDCG (1 + 1/log2 5)/(1 + 1/log2 3)
    # q3 "grapes":   d4 d1 d2 d3 -> relevant d1 at 2, d9 absent -> nDCG (1/log2 3)/(1 + 1/log2 3), recall 1/2
    ndcg = [1.0, (1 + 1 / log2(5)) / (1 + 1 / log2(3)), (1 / log2(3)) / (1 + 1 / log2(3))]
    assert result.metrics["ndcg@10"] == pytest.approx(sum(ndcg) / 3)
    assert result.metrics["recall@10"] == pytest.approx((1 + 1 + 0.5) / 3)
    assert result.metrics["recall@100"] == pytest.approx((1 + 1 + 0.5) / 3)
    assert result.num_queries == 3 and result.num_documents == 4 and result.retriever == "bm25"
    assert result.index_seconds > 0 and result.queries_per_second > 0
    data = result.as_dict()
    assert {"ndcg@10", "recall@10", "recall@100", "index_seconds", "queries_per_second"} <= set(data)
    assert evaluate_retriever(ds, BM25Retriever, limit=1).num_queries == 1


class _Fixed:
    name = "fixed"

    def __init__(self, ids):
        self.docs = [Document(id=i, text=i) for i in ids]

    async def retrieve(self, query, top_k):
        return RetrievalResult(documents=tuple(self.docs[:top_k]), scores=(1.0,) * min(top_k, len(self.docs)), query=query)


async def test_a_document_with_the_query_id_is_left_out_as_in_beir():
    fixed = _Fixed(["q1", "a", "b"])
    assert await rank_queries(fixed, {"q1": "text"}, depth=2) == {"q1": ["a", "b"]}
    assert await rank_queries(fixed, {"q1": "text"}, depth=2, ignore_identical_ids=False) == {"q1": ["q1", "a"]}


def test_bm25_on_scifact_reaches_the_beir_paper(shared_data):
    folder = shared_data / "scifact"
    if not (folder / "corpus.jsonl").is_file():
        pytest.skip("../shared/data/scifact is not present")
    ds = load_beir(folder, "test")
    assert len(ds.corpus) == 5183 and len(ds.queries) == 300
    result = evaluate_retriever(ds, BM25Retriever)
    # The BEIR paper's BM25 (Elasticsearch) is 0.665; bm25s with stemming and stop words reaches ~0.686.
    assert result.metrics["ndcg@10"] >= 0.665
    assert result.metrics["recall@100"] > result.metrics["recall@10"] > 0.7
