"""Retrieval quality and speed on BEIR SciFact, and selfrag's BM25 against rank_bm25.

1. The three retrievers (``bm25``, ``dense``, ``hybrid``) through
   ``selfrag eval-retrieval --json`` itself (the CLI's ``main`` is called in
   process): nDCG@10, recall@10, recall@100, index time, queries/s.
2. selfrag's BM25 against ``rank_bm25.BM25Okapi`` on the same corpus and
   queries. The corpus and queries are tokenized once with selfrag's analyser
   and the same token lists go to both, so the timings compare indexing and
   scoring only; selfrag's end-to-end path (its own tokenization included) is
   timed too. Agreement: overlap of the top 10 and nDCG@10 of both, k1 = 1.5
   and b = 0.75 on both sides, plus rank_bm25 with selfrag's (Lucene) IDF.

Writes ``lab/results/retrieval.md`` (by :mod:`lab.retrieval_report`),
``retrieval.json`` and ``retrieval.png``. Every number in them is measured in
the run that writes them.

    python -m lab.retrieval               # everything (dense encoding takes ~5 min per model run)
    python -m lab.retrieval --skip-dense  # BM25 only, about a minute
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from itertools import chain
from pathlib import Path
from typing import Any

from lab.machine import machine
from lab.retrieval_report import make_plot, report

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCIFACT = ROOT.parent / "shared" / "data" / "scifact"
K1, B = 1.5, 0.75  # BM25 parameters on both sides of the comparison
DEPTH = 100  # documents ranked per query for recall@100, as in eval-retrieval


# -- helpers ------------------------------------------------------------------------------


def log(msg: str) -> None:
    print(f"retrieval: {msg}", flush=True)


def best_of(fn: Callable[[], Any], repeats: int) -> dict[str, float]:
    """Wall time of ``fn`` over ``repeats`` runs: best, median and worst (seconds)."""
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return {"best": min(times), "median": statistics.median(times), "worst": max(times), "runs": repeats}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def version_of(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def environment() -> dict[str, Any]:
    return {
        **machine(),
        "cpu": cpu_model(),
        "versions": {d: version_of(d) for d in ("numpy", "rank-bm25", "bm25s", "PyStemmer", "torch", "sentence-transformers", "faiss-cpu")},
    }


def load_average() -> str:
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


# -- part 1: eval-retrieval ------------------------------------------------------------------


def eval_retrieval(data: Path, retriever: str) -> dict[str, Any]:
    """One ``selfrag eval-retrieval --json`` run, in process; its JSON object."""
    from selfrag.cli.main import main as cli_main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli_main(["eval-retrieval", "--beir", str(data), "--retriever", retriever, "--json"])
    if code != 0:
        raise RuntimeError(f"selfrag eval-retrieval --retriever {retriever} exited with {code}")
    return json.loads(out.getvalue())


def measure_retrievers(data: Path, names: Sequence[str], bm25_repeats: int) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    for name in names:
        repeats = bm25_repeats if name == "bm25" else 1  # dense runs take minutes each
        runs = []
        for i in range(repeats):
            log(f"eval-retrieval --retriever {name} (run {i + 1} of {repeats}, load {load_average()})")
            runs.append(eval_retrieval(data, name))
        first = runs[0]
        for other in runs[1:]:  # the metrics are deterministic; a difference would be a bug
            for key in ("ndcg@10", "recall@10", "recall@100"):
                if abs(other[key] - first[key]) > 1e-12:
                    raise RuntimeError(f"{name}: {key} differs between runs ({first[key]} vs {other[key]})")
        results[name] = {
            **first,
            "index_seconds": min(r["index_seconds"] for r in runs),
            "queries_per_second": max(r["queries_per_second"] for r in runs),
            "runs": repeats,
        }
    return results


# -- part 2: selfrag BM25 against rank_bm25 ----------------------------------------------------


def make_lucene_okapi():
    """rank_bm25's BM25Okapi with the IDF replaced by Lucene's (the one selfrag uses)."""
    from rank_bm25 import BM25Okapi

    class LuceneIdfOkapi(BM25Okapi):
        def _calc_idf(self, nd):
            n = self.corpus_size
            for word, df in nd.items():
                self.idf[word] = math.log(1 + (n - df + 0.5) / (df + 0.5))
            self.average_idf = sum(self.idf.values()) / max(len(self.idf), 1)

    return LuceneIdfOkapi


def ranked_ids(scores, doc_ids: list[str], qid: str, depth: int) -> list[str]:
    """Top ``depth`` document ids, dropping a document whose id is the query id (as eval-retrieval does)."""
    from selfrag.retrieval.bm25 import top_k_indices

    ids = [doc_ids[i] for i in top_k_indices(scores, depth + 1)]
    return [d for d in ids if d != qid][:depth]


def compare_bm25(dataset, all_queries: dict[str, str], repeats: int) -> dict[str, Any]:
    import numpy as np
    from rank_bm25 import BM25Okapi

    from selfrag.eval.beir import evaluate_rankings
    from selfrag.retrieval.bm25 import BM25Retriever, document_text, top_k_indices

    docs = dataset.corpus
    doc_ids = [d.id for d in docs]
    texts = [document_text(d) for d in docs]
    test_q = dataset.queries  # the 300 judged test queries
    BM25Retriever(docs[:2])  # imports and stemmer set up before any clock starts

    log(f"BM25 comparison: tokenizing {len(docs)} documents and {len(all_queries)} queries once (load {load_average()})")
    analyser = BM25Retriever(k1=K1, b=B)
    corpus_tokens = analyser.tokenize(texts)
    query_tokens = dict(zip(all_queries, analyser.tokenize(list(all_queries.values())), strict=True))
    n_tokens = sum(map(len, corpus_tokens))

    timings: dict[str, dict[str, float]] = {}
    log("timing indexing")
    timings["tokenize_corpus"] = best_of(lambda: analyser.tokenize(texts), repeats)
    timings["index_selfrag_tokens"] = best_of(lambda: BM25Retriever(k1=K1, b=B).index_tokens(docs, corpus_tokens), repeats)
    timings["index_rank_bm25"] = best_of(lambda: BM25Okapi(corpus_tokens, k1=K1, b=B), repeats)
    timings["index_selfrag_e2e"] = best_of(lambda: BM25Retriever(docs, k1=K1, b=B), repeats)

    ours = BM25Retriever(k1=K1, b=B)
    ours.index_tokens(docs, corpus_tokens)
    okapi = BM25Okapi(corpus_tokens, k1=K1, b=B)

    query_sets = {"test": list(test_q), "all": list(all_queries)}
    for label, qids in query_sets.items():
        toks = [query_tokens[q] for q in qids]
        raw = [all_queries[q] for q in qids]
        log(f"timing top-10 retrieval over {len(qids)} queries")
        timings[f"query_selfrag_tokens_{label}"] = best_of(
            lambda toks=toks: [top_k_indices(ours.scores_for_tokens(t), 10) for t in toks], repeats
        )
        timings[f"query_rank_bm25_{label}"] = best_of(
            lambda toks=toks: [top_k_indices(okapi.get_scores(t), 10) for t in toks], repeats
        )
        timings[f"query_selfrag_e2e_{label}"] = best_of(lambda raw=raw: [ours.retrieve_sync(q, 10) for q in raw], repeats)

    log("agreement (untimed): rankings of every query under each scorer")
    lucene_okapi = make_lucene_okapi()(corpus_tokens, k1=K1, b=B)
    rankings: dict[str, dict[str, list[str]]] = {"selfrag": {}, "rank_bm25": {}, "rank_bm25_lucene_idf": {}}
    max_rel_diff = 0.0
    for qid, toks in query_tokens.items():
        s_ours = ours.scores_for_tokens(toks)
        s_okapi = okapi.get_scores(toks)
        s_lucene = lucene_okapi.get_scores(toks)
        # rank_bm25 multiplies every term by (k1 + 1); selfrag (like Lucene) does not.
        expected = s_ours.astype(np.float64) * (K1 + 1)
        nz = expected > 0
        if nz.any():
            max_rel_diff = max(max_rel_diff, float(np.max(np.abs(s_lucene[nz] - expected[nz]) / expected[nz])))
        if np.any(s_lucene[~nz] != 0):
            max_rel_diff = math.inf
        for name, s in (("selfrag", s_ours), ("rank_bm25", s_okapi), ("rank_bm25_lucene_idf", s_lucene)):
            rankings[name][qid] = ranked_ids(s, doc_ids, qid, DEPTH)

    def agreement(other: str, qids: list[str]) -> dict[str, float]:
        a, b = rankings["selfrag"], rankings[other]
        overlap = [len(set(a[q][:10]) & set(b[q][:10])) / 10 for q in qids]
        return {
            "top10_overlap": statistics.fmean(overlap),
            "identical_top10": sum(a[q][:10] == b[q][:10] for q in qids) / len(qids),
            "identical_top1": sum(a[q][:1] == b[q][:1] for q in qids) / len(qids),
        }

    quality = {name: evaluate_rankings({q: r[q] for q in test_q}, dataset.qrels) for name, r in rankings.items()}
    return {
        "num_documents": len(docs),
        "num_tokens": n_tokens,
        "vocabulary": len(set(chain.from_iterable(corpus_tokens))),
        "num_queries": {label: len(q) for label, q in query_sets.items()},
        "timings": timings,
        "quality_test": quality,
        "agreement": {
            other: {label: agreement(other, qids) for label, qids in query_sets.items()}
            for other in ("rank_bm25", "rank_bm25_lucene_idf")
        },
        "lucene_idf_max_relative_score_difference": max_rel_diff,
    }


# -- entry point ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=SCIFACT, help=f"a BEIR SciFact folder (default {SCIFACT})")
    parser.add_argument("--skip-dense", action="store_true", help="measure BM25 only (no dense or hybrid runs)")
    parser.add_argument("--repeats", type=int, default=3, help="timing repeats; the best is reported (default 3)")
    parser.add_argument("--out", type=Path, default=HERE / "results", help="report directory (default lab/results)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")

    try:
        import rank_bm25  # noqa: F401
    except ImportError:
        print('retrieval: rank_bm25 is not installed; install the benchmark extra: pip install -e ".[bench]"', file=sys.stderr)
        return 1
    data = args.data.expanduser()
    needed = [data / "corpus.jsonl", data / "queries.jsonl", data / "qrels" / "test.tsv"]
    if not all(p.is_file() for p in needed):
        log(f"skipped: BEIR SciFact not found at {data} (needs corpus.jsonl, queries.jsonl, qrels/test.tsv)")
        return 0
    if not args.skip_dense:
        try:
            import sentence_transformers  # noqa: F401
        except ImportError:
            print('retrieval: dense retrieval needs pip install -e ".[dense]" (or run with --skip-dense)', file=sys.stderr)
            return 1

    from selfrag.eval.beir import load_beir, read_queries

    started = load_average()
    env = environment()
    dataset = load_beir(data, "test")
    all_queries = read_queries(data / "queries.jsonl")
    cmp = compare_bm25(dataset, all_queries, args.repeats)
    names = ["bm25"] if args.skip_dense else ["bm25", "dense", "hybrid"]
    evals = measure_retrievers(data, names, args.repeats)
    if abs(evals["bm25"]["ndcg@10"] - cmp["quality_test"]["selfrag"]["ndcg@10"]) > 1e-9:
        raise RuntimeError("eval-retrieval and the shared-token BM25 disagree on nDCG@10; the comparison is not like for like")
    ended = load_average()

    args.out.mkdir(parents=True, exist_ok=True)
    params = {"k1": K1, "b": B, "depth": DEPTH, "repeats": args.repeats}
    plot = make_plot(args.out / "retrieval.png", evals, cmp)
    (args.out / "retrieval.md").write_text(report(env, data, evals, cmp, params, started, ended, plot), encoding="utf-8")
    raw = {"environment": env, "parameters": params, "load_average": {"start": started, "end": ended},
           "eval_retrieval": evals, "bm25_vs_rank_bm25": cmp}
    (args.out / "retrieval.json").write_text(json.dumps(raw, indent=2, default=str) + "\n", encoding="utf-8")
    log(f"wrote {args.out / 'retrieval.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
