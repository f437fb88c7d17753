"""selfrag eval-retrieval: nDCG@10, recall@10, recall@100 and throughput on a BEIR folder."""

from __future__ import annotations

import argparse
import json

from .index import add_retriever_options, retrieval_config

NAME = "eval-retrieval"
HELP = "measure a retriever on a BEIR-format folder (nDCG@10, recall@10, recall@100, speed)"
DESCRIPTION = (
    "Index a BEIR folder's corpus.jsonl (timed), retrieve 100 documents for every judged query "
    "of a split one query at a time (timed), and print nDCG@10, recall@10 and recall@100. "
    "Document embeddings are computed fresh unless --embedding-cache is given, so the index "
    "time measures encoding."
)
ORDER = 45


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--beir", required=True, metavar="DIR", help="a folder with corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv")
    parser.add_argument("--split", default="test", help="the qrels split (default test)")
    add_retriever_options(parser)
    parser.add_argument("--index", metavar="DIR", help="evaluate a saved index of the same corpus instead of indexing now")
    parser.add_argument("--limit", type=int, metavar="N", help="only the first N judged queries")
    parser.add_argument("--embedding-cache", action="store_true", help="reuse cached document embeddings (.selfrag/embeddings.db)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from ...assemble import retriever_options
    from ...errors import ConfigError
    from ...eval.beir import evaluate_retriever, load_beir
    from ...retrieval.persist import load_index
    from ...retrieval.registry import create_retriever, get_kind

    if args.limit is not None and args.limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {args.limit}")
    cfg = retrieval_config(args)
    dataset = load_beir(args.beir, args.split)
    options = retriever_options(cfg)
    method = cfg.retrieval.method
    if args.index:

        def build(documents):
            return load_index(args.index, documents=documents, expected_method=method, options=options)

    else:
        kind = get_kind(method)  # an unknown name fails here, before any work
        if kind.takes("cache"):
            options["cache"] = bool(args.embedding_cache)
        if kind.takes("show_progress"):
            options["show_progress"] = False if args.json else None
        if kind.takes("embedding_model"):
            _warm_up(options)

        def build(documents):
            return create_retriever(method, documents, **options)

    result = evaluate_retriever(dataset, build, limit=args.limit)
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
        return 0
    m = result.metrics
    model = result.params.get("embedding_model")
    print(
        f"{result.dataset} ({result.split}) · retriever {result.retriever}"
        + (f" · model {model}" if model else "")
        + f" · {result.num_documents} documents · {result.num_queries} queries"
    )
    print(f"  nDCG@10     {m['ndcg@10']:.4f}")
    print(f"  recall@10   {m['recall@10']:.4f}")
    print(f"  recall@100  {m['recall@100']:.4f}")
    print(f"  index       {result.index_seconds:.1f} s")
    print(f"  queries     {result.queries_per_second:.1f} /s ({result.query_seconds:.1f} s for {result.num_queries})")
    return 0


def _warm_up(options: dict) -> None:
    """Load the encoder before the clock starts: index time measures indexing, not imports."""
    from ...retrieval.encoders import get_encoder

    encoder = get_encoder(options.get("embedding_model"))
    warm = getattr(encoder, "warm_up", None)
    if warm is not None:
        warm()
