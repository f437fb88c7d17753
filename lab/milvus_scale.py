"""Milvus Lite against the in-process dense retriever at 10k, 100k and 1M passages.

Embedding a million passages on two cores would take a day, so the corpus is
synthetic but shaped like real data: the all-MiniLM-L6-v2 embeddings of BEIR
SciFact passages (``../shared/data/scifact``), each repeated with Gaussian noise
(per dimension ``--noise``, then normalised) until there are N vectors. The
queries are the real embeddings of SciFact queries. Both engines are driven
through selfrag's own retrievers (``DenseRetriever`` and ``MilvusRetriever``,
a lookup-table encoder handing them the vectors), so the figures include
selfrag's code: batching, inserts, result assembly.

Per engine and size, in a fresh child process: build time (``index()`` until
the retriever answers), peak memory (the process's maximum resident set, and
the same before the engine was built: the vectors themselves), p50 / p95 query
latency at top 10 over the queries, recall@10 against exact search
(numpy, float32), and for Milvus the size of its files.

Writes ``lab/results/milvus_scale.md`` and ``.json``.

    python -m lab.milvus_scale                    # 10k, 100k, 1M (about an hour on 2 cores)
    python -m lab.milvus_scale --sizes 10000      # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from lab.machine import machine, machine_lines

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

SCIFACT = ROOT.parent / "shared" / "data" / "scifact"
BASE = Path(tempfile.gettempdir()) / "selfrag-scale" / "scifact_minilm.npz"
DIM = 384
K = 10


def log(msg: str) -> None:
    print(f"milvus_scale: {msg}", file=sys.stderr, flush=True)


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def peak_mb() -> float:
    """This process's peak resident set since it started (VmHWM; ru_maxrss would count the
    parent's memory at fork)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# -- the real embeddings the corpus is made from -------------------------------------------------


def base_vectors(passages: int, queries: int) -> tuple[np.ndarray, np.ndarray]:
    """Embeddings of the first SciFact passages and queries (made once, kept in a temporary folder)."""
    if BASE.is_file():
        data = np.load(BASE)
        if len(data["passages"]) >= passages and len(data["queries"]) >= queries:
            return data["passages"][:passages], data["queries"][:queries]
    from selfrag.retrieval.encoders import get_encoder

    def texts(path: Path, n: int, key) -> list[str]:
        out = []
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                out.append(key(json.loads(line)))
                if len(out) == n:
                    break
        return out

    encoder = get_encoder(None)
    log(f"embedding {passages} SciFact passages and {queries} queries with {encoder.name}")
    p = encoder.encode(texts(SCIFACT / "corpus.jsonl", passages, lambda r: f"{r.get('title', '')}\n{r['text']}"))
    q = encoder.encode(texts(SCIFACT / "queries.jsonl", queries, lambda r: r["text"]), query=True)
    BASE.parent.mkdir(parents=True, exist_ok=True)
    np.savez(BASE, passages=p, queries=q)
    return p, q


def corpus(base: np.ndarray, n: int, noise: float, seed: int) -> np.ndarray:
    """``n`` unit vectors: the base vectors in turn, each with its own Gaussian noise."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, base.shape[1]), dtype=np.float32)
    for lo in range(0, n, 100_000):
        hi = min(lo + 100_000, n)
        block = base[np.arange(lo, hi) % len(base)] + rng.normal(0, noise, (hi - lo, base.shape[1])).astype(np.float32)
        out[lo:hi] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def exact_top(vectors: np.ndarray, queries: np.ndarray) -> np.ndarray:
    scores = queries @ vectors.T
    return np.argsort(-scores, axis=1, kind="stable")[:, :K]


class TableEncoder:
    """An encoder that hands out precomputed vectors: passage ``p<i>`` and query ``q<j>``."""

    def __init__(self, name: str, passages: np.ndarray, queries: np.ndarray) -> None:
        self.name = name
        self.passages, self.queries = passages, queries

    def encode(self, texts, *, query: bool = False) -> np.ndarray:
        table = self.queries if query else self.passages
        return table[[int(t[1:]) for t in texts]]

    async def aencode(self, texts, *, query: bool = False) -> np.ndarray:
        return self.encode(texts, query=query)


# -- one measurement (in its own process, so peak memory is this engine's) --------------------------------


def measure(engine: str, n: int, noise: float, index_type: str, ef: int) -> dict:
    from selfrag.types import Document

    passages, queries = base_vectors(3000, 200)
    vectors = corpus(passages, n, noise, seed=n)
    truth = exact_top(vectors, queries)
    docs = [Document(id=f"p{i}", title="", text=f"p{i}") for i in range(n)]
    encoder = TableEncoder(f"synthetic-{n}", vectors, queries)
    before = rss_mb()
    workdir = Path(tempfile.mkdtemp(prefix="milvus-scale-"))
    extra: dict = {}
    try:
        start = time.perf_counter()
        if engine == "milvus":
            from selfrag.retrieval.milvus import MilvusRetriever

            params = {"index_type": index_type}
            if index_type == "HNSW":
                params["search_params"] = {"ef": ef}
            retriever = MilvusRetriever(docs, encoder=encoder, uri=str(workdir / "bench.db"), cache=False,
                                        batch_size=5000, show_progress=False, **params)
            extra = {"index_type": retriever.index_type, "index_params": retriever.index_params,
                     "search_params": retriever.search_params}
        else:
            from selfrag.retrieval.dense import DenseRetriever

            retriever = DenseRetriever(docs, encoder=encoder, cache=False, show_progress=False)
            extra = {"store": "faiss IndexFlatIP (exact)" if retriever.store == "faiss" else "numpy (exact)"}
        build_s = time.perf_counter() - start
        for j in range(5):  # warm-up
            retriever.retrieve_sync(f"q{j}", K)
        times, hits = [], []
        for j in range(len(queries)):
            t = time.perf_counter()
            result = retriever.retrieve_sync(f"q{j}", K)
            times.append((time.perf_counter() - t) * 1000)
            found = {int(d.id[1:]) for d in result.documents}
            hits.append(len(found & set(truth[j].tolist())) / K)
        if engine == "milvus":
            extra["disk_mb"] = round(sum(f.stat().st_size for f in workdir.rglob("*") if f.is_file()) / 2**20, 1)
            retriever.close()
        q = statistics.quantiles(times, n=20)
        return {
            "engine": engine, "n": n, "queries": len(queries), "build_s": round(build_s, 2),
            "rss_before_mb": round(before, 1), "peak_rss_mb": round(peak_mb(), 1),
            "p50_ms": round(statistics.median(times), 2), "p95_ms": round(q[18], 2),
            "recall_at_10": round(float(np.mean(hits)), 4), **extra,
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# -- the report ------------------------------------------------------------------------------------


def report(rows: list[dict], info: dict, args: argparse.Namespace) -> str:
    lines = [
        "# Milvus Lite against the in-process dense retriever",
        "",
        f"Written by `python -m lab.milvus_scale` (sizes {', '.join(map(str, args.sizes))}; noise {args.noise} per "
        f"dimension; {rows[0]['queries'] if rows else 0} real SciFact queries per size; top {K}).",
        "",
        *machine_lines(info),
        "",
        "Vectors: all-MiniLM-L6-v2 embeddings of 3,000 SciFact passages, repeated with Gaussian noise and "
        "normalised (synthetic, so the figures are about the engines, not about retrieval quality). "
        "Recall@10 is against exact search over the same vectors. Peak memory is the measuring "
        "process's maximum resident set; 'before' is the same process once the vectors were made, "
        "before the engine was built.",
        "",
        "| engine | n | index | build s | memory before MB | peak MB | p50 ms | p95 ms | recall@10 | disk MB |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if r.get("failed"):
            lines.append(f"| {r['engine']} | {r['n']:,} | did not finish within a {r['memory_cap_gb']} GB "
                         f"address-space cap: {r['failed']} | | | | | | | |")
            continue
        index = r.get("store") or f"{r['index_type']} {json.dumps(r['index_params'])} {json.dumps(r['search_params'])}"
        lines.append(f"| {r['engine']} | {r['n']:,} | {index} | {r['build_s']} | {r['rss_before_mb']} | "
                     f"{r['peak_rss_mb']} | {r['p50_ms']} | {r['p95_ms']} | {r['recall_at_10']} | {r.get('disk_mb', '-')} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--engines", nargs="+", default=["dense", "milvus"], choices=("dense", "milvus"))
    parser.add_argument("--noise", type=float, default=0.03)
    parser.add_argument("--index-type", default="HNSW")
    parser.add_argument("--ef", type=int, default=128)
    parser.add_argument("--memory-gb", type=float, default=12.0,
                        help="address-space cap of each measuring process, so a run that outgrows the "
                        "shared machine fails alone (default 12)")
    parser.add_argument("--resume", action="store_true", help="keep the rows already in the report's JSON")
    parser.add_argument("--one", nargs=2, metavar=("ENGINE", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--out", default=str(HERE / "results" / "milvus_scale"))
    args = parser.parse_args()
    if args.one:
        cap = int(args.memory_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        print(json.dumps(measure(args.one[0], int(args.one[1]), args.noise, args.index_type, args.ef)))
        return 0
    info = machine()
    base_vectors(3000, 200)
    rows = json.loads(Path(args.out + ".json").read_text())["rows"] if args.resume else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    for n in args.sizes:
        for engine in args.engines:
            if any(r["engine"] == engine and r["n"] == n for r in rows):
                continue
            log(f"{engine} at {n:,}")
            cmd = [sys.executable, "-m", "lab.milvus_scale", "--one", engine, str(n), "--noise", str(args.noise),
                   "--index-type", args.index_type, "--ef", str(args.ef), "--memory-gb", str(args.memory_gb)]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
            if done.returncode != 0:
                why = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
                log(f"{engine} at {n} failed: {done.stderr[-3000:]}")
                rows.append({"engine": engine, "n": n, "failed": why, "memory_cap_gb": args.memory_gb})
            else:
                rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            log(json.dumps(rows[-1]))
            Path(args.out + ".json").write_text(json.dumps({"machine": info, "rows": rows}, indent=2) + "\n")
            Path(args.out + ".md").write_text(report(rows, info, args))
    info["load_average_at_end"] = Path("/proc/loadavg").read_text().split()[:3]
    Path(args.out + ".json").write_text(json.dumps({"machine": info, "rows": rows}, indent=2) + "\n")
    Path(args.out + ".md").write_text(report(rows, info, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
