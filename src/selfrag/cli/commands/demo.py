"""selfrag demo: answer a few shipped questions over the shipped corpus, offline, and show what the method did.

The method is the default one (``self_rag``) unless ``--method`` or
``--config`` names another. Under each answer one line says what the method
did (retrieved or not, which passages it judged or ranked, its candidates,
the one it chose and why, how sure it is), so the machinery shows even when
a small model answers wrongly. ``--compare`` answers the same questions with
``vanilla_rag`` too and ends with a line comparing the two.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass
from typing import Any

from ...assemble import build_backend, build_method, build_retriever
from ...data import demo_corpus, demo_questions
from ...errors import ConfigError
from ...eval.metrics import best_over, f1_score, match
from ...extras import check_config
from ...serialize import to_jsonable
from ...types import Question, RAGResponse
from ..explain import explain
from ..options import add_answer_options, config_from_args

NAME = "demo"
HELP = "answer a few demo questions over the shipped Solar System corpus with self_rag (embedded model, no key)"
DESCRIPTION = (
    "Answer a few shipped questions over the shipped Solar System corpus (offline, the embedded model unless "
    "--llm says otherwise) with the default method, self_rag, and print under each answer one line of what "
    "the method did. --compare also answers them with vanilla_rag and compares the two."
)
ORDER = 20
BASELINE = "vanilla_rag"


@dataclass
class Answered:
    question: Question
    response: RAGResponse
    match: float


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=3, metavar="N", help="how many demo questions (default 3)")
    parser.add_argument("--compare", action="store_true",
                        help=f"also answer the same questions with {BASELINE} and end with a line comparing the two")
    add_answer_options(parser, NAME)


def run(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {args.limit}")
    cfg = config_from_args(args, cache_default=False)
    check_config(cfg)
    questions = demo_questions()[: args.limit]
    docs = demo_corpus()
    llm = build_backend(cfg)
    retriever = build_retriever(cfg, docs)
    method = build_method(cfg, llm, retriever)
    baseline = build_method(cfg, llm, retriever, name=BASELINE) if args.compare else None
    if baseline is not None and baseline.name == method.name:
        raise ConfigError(f"--compare compares with {BASELINE}; choose another --method to compare it with")
    if not args.json:
        print(f"selfrag demo · method {method.name} · model {llm.model} · {len(docs)} documents\n", flush=True)

    async def answer_all() -> tuple[list[Answered], list[Answered], float, float]:
        try:
            start = time.perf_counter()
            ours = [await _answer(method, q, args) for q in questions]
            wall = time.perf_counter() - start
            theirs: list[Answered] = []
            if baseline is not None:
                start = time.perf_counter()
                theirs = [await _answer(baseline, q, args, show=False) for q in questions]
            return ours, theirs, wall, time.perf_counter() - start
        finally:
            await llm.aclose()

    ours, theirs, wall, wall_baseline = asyncio.run(answer_all())
    if args.json:
        if theirs:
            print(json.dumps({"compare": [_totals(method.name, ours, wall), _totals(BASELINE, theirs, wall_baseline)]}))
        return 0
    print(f"{_hits(ours)}/{len(ours)} answers contain a gold answer · {wall:.1f} s in all")
    if theirs:
        print(_compare_line(method.name, ours, wall, theirs, wall_baseline))
    return 0


async def _answer(method: Any, q: Question, args: argparse.Namespace, show: bool = True) -> Answered:
    r = await method.answer(q)
    m = best_over(match, r.answer, q.answers)
    if not show:
        return Answered(q, r, m)
    if args.json:
        print(json.dumps(to_jsonable(_row(q, r, m, method.name)), ensure_ascii=False), flush=True)
        return Answered(q, r, m)
    print(f"Q: {q.text}")
    print(f"A: {r.answer}")
    print(f"   gold: {' | '.join(q.answers)} · {'match' if m else 'no match'} · "
          f"{r.num_llm_calls} LLM call{'' if r.num_llm_calls == 1 else 's'} · {r.latency_ms / 1000:.2f} s")
    print(f"   {method.name}: {explain(r)}")
    print(f"   sources: {', '.join(d.title or d.id for d in r.sources) or '-'}")
    if args.trace:
        from ..output import print_step

        print("   every step:")
        for step in r.reasoning_chain:
            print_step(step, sys.stdout)
    print(flush=True)
    return Answered(q, r, m)


def _row(q: Question, r: RAGResponse, m: float, method: str) -> dict[str, Any]:
    return {
        "id": q.id,
        "question": q.text,
        "gold": list(q.answers),
        "method": method,
        "answer": r.answer,
        "match": m,
        "f1": best_over(f1_score, r.answer, q.answers),
        "what_it_did": explain(r),
        "confidence": r.confidence,
        "num_llm_calls": r.num_llm_calls,
        "num_retrieval_calls": r.num_retrieval_calls,
        "latency_ms": round(r.latency_ms, 1),
        "sources": [d.id for d in r.sources],
    }


def _hits(rows: list[Answered]) -> int:
    return int(sum(a.match for a in rows))


def _totals(name: str, rows: list[Answered], wall: float) -> dict[str, Any]:
    n = len(rows) or 1
    return {"method": name, "questions": len(rows), "matches": _hits(rows),
            "llm_calls_per_question": round(sum(a.response.num_llm_calls for a in rows) / n, 2),
            "seconds": round(wall, 2)}


def _compare_line(name: str, ours: list[Answered], wall: float, theirs: list[Answered], wall_theirs: float) -> str:
    a, b = _totals(name, ours, wall), _totals(BASELINE, theirs, wall_theirs)
    same = sum(x.response.answer.strip() == y.response.answer.strip() for x, y in zip(ours, theirs, strict=True))
    return (f"compare on the same {len(ours)} questions: {name} {a['matches']}/{len(ours)} match, "
            f"{_calls(a['llm_calls_per_question'])} per question, {a['seconds']:.1f} s · "
            f"{BASELINE} {b['matches']}/{len(theirs)} match, {_calls(b['llm_calls_per_question'])} per question, "
            f"{b['seconds']:.1f} s · the same answer on {same} of {len(ours)}")


def _calls(n: float) -> str:
    return f"{n:g} LLM call{'' if n == 1 else 's'}"
