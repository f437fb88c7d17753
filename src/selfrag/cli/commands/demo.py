"""selfrag demo: answer a few shipped questions over the shipped corpus, offline."""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from ...assemble import build_backend, build_method, build_retriever
from ...data import demo_corpus, demo_questions
from ...eval.metrics import best_over, f1_score, match
from ...serialize import to_jsonable
from ..options import add_answer_options, config_from_args

NAME = "demo"
HELP = "answer a few demo questions over the shipped Solar System corpus (embedded model, no key)"
ORDER = 20
DEFAULT_METHOD = "vanilla_rag"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=3, metavar="N", help="how many demo questions (default 3)")
    add_answer_options(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object per question")


def run(args: argparse.Namespace) -> int:
    if not args.method and not args.config:
        args.method = DEFAULT_METHOD
    cfg = config_from_args(args, cache_default=False)
    questions = demo_questions()[: max(1, args.limit)]
    docs = demo_corpus()
    llm = build_backend(cfg)
    method = build_method(cfg, llm, build_retriever(cfg, docs))

    async def answer_all():
        try:
            out = []
            for q in questions:
                out.append((q, await method.answer(q)))
            return out
        finally:
            await llm.aclose()

    if not args.json:
        print(f"selfrag demo · method {method.name} · model {llm.model} · {len(docs)} documents\n")
    start = time.perf_counter()
    results = asyncio.run(answer_all())
    wall = time.perf_counter() - start
    hits = 0.0
    for q, r in results:
        m = best_over(match, r.answer, q.answers)
        hits += m
        if args.json:
            row = {
                "id": q.id,
                "question": q.text,
                "gold": list(q.answers),
                "answer": r.answer,
                "match": m,
                "f1": best_over(f1_score, r.answer, q.answers),
                "num_llm_calls": r.num_llm_calls,
                "num_retrieval_calls": r.num_retrieval_calls,
                "latency_ms": round(r.latency_ms, 1),
                "sources": [d.id for d in r.sources],
            }
            print(json.dumps(to_jsonable(row), ensure_ascii=False))
            continue
        print(f"Q: {q.text}")
        print(f"A: {r.answer}")
        print(f"   gold: {' | '.join(q.answers)} · {'match' if m else 'no match'} · "
              f"{r.num_llm_calls} LLM calls · {r.latency_ms / 1000:.2f} s")
        print(f"   sources: {', '.join(d.title or d.id for d in r.sources) or '-'}\n")
    if not args.json:
        print(f"{int(hits)}/{len(results)} answers contain a gold answer · {wall:.1f} s in all")
    return 0
