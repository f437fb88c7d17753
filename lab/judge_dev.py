"""``self_corrective``'s judge on HotpotQA questions outside the quality benchmark's samples.

The judge asks whether a search's documents can answer the question completely.
On HotpotQA that has a checkable answer: a search suffices when its paragraphs
hold every gold supporting paragraph. For each question of a dev range
(default 400-459: the quality benchmark reads 0-99 and 200-299, earlier
choices were made on 100-129 and 300-359) two searches are judged, each once,
as ``self_corrective``'s first iteration judges a search
(:func:`selfrag.methods.sufficiency.judge_documents`):

* ``top5``: the question's own top-5 BM25 paragraphs (sufficient for most
  questions: BM25 over ten paragraphs usually ranks both gold ones in the top 5);
* ``no_gold``: the top 5 once the gold paragraphs are taken out (insufficient
  by construction, like ``data.remove_gold``), so that a judge that accepts
  everything is seen to.

Both readings are kept: the written verdict and P(YES) at the reply's first
token. Printed: how often each reading accepts a sufficient and an
insufficient search, the AUC of P(YES), and the threshold that best separates
the two (Youden's J, ties to the lower threshold), the one to try as
``self_corrective.judge_threshold``. One JSON line per search, resumable.
``--label NAME`` keeps a variant's lines apart (e.g. a judge prompt tried
through ``SELFRAG_PROMPT_DIR``)::

    python benchmarks/judge_dev.py --llm llamacpp:PATH.gguf [--skip 400 --n 60]
    SELFRAG_PROMPT_DIR=benchmarks/prompts/judge_contains python benchmarks/judge_dev.py --llm ... --label contains
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import dev_range
from quality_runs import model_tag, say
from quality_stats import auc, read_jsonl

TOP_K = 5
MAX_CONTEXT_TOKENS = 1500  # self_corrective's default
REPLY_TOKENS = 64  # self_corrective.reflect_max_tokens


SEARCHES = ("top5", "no_gold")


def out_path(tag: str, skip: int, label: str = "") -> Path:
    return dev_range.out_path(tag, f"judge_dev_{label}" if label else "judge_dev", skip)


def search_of(record: dict) -> str:
    return record.get("search", "top5")  # lines written before no_gold searches were added are top5 ones


def documents(ranked, search: str, gold: set[str]) -> list:
    """The paragraphs a search shows: the top 5, or the top 5 of the non-gold paragraphs."""
    kept = ranked if search == "top5" else [doc for doc in ranked if doc.title not in gold]
    return list(kept[:TOP_K])


async def measure(spec: str, skip: int, n: int, path: Path) -> None:
    from selfrag.llm.factory import create_backend
    from selfrag.methods.sufficiency import judge_documents
    from selfrag.methods.trace import Run
    from selfrag.retrieval.registry import retriever_factory

    done: dict[str, set[str]] = {}
    for record in read_jsonl(path):
        done.setdefault(record["id"], set()).add(search_of(record))
    pending = dev_range.pending(skip, n, path, {i for i, searches in done.items() if searches >= set(SEARCHES)})
    if not pending:
        return
    llm = create_backend(spec)
    bm25 = retriever_factory("bm25")
    say(f"judge readings: {len(pending)} question(s) from #{skip} -> {path}")
    for count, q in enumerate(pending, start=1):
        ranked = (await bm25(list(q.contexts)).retrieve(q.text, len(q.contexts))).documents
        gold = set(q.metadata.get("supporting_titles") or [])
        for search in SEARCHES:
            if search in done.get(q.id, set()):
                continue
            docs = documents(ranked, search, gold)
            found = gold & {doc.title for doc in docs}
            step, judgement = await judge_documents(
                Run(llm, None, {"temperature": 0.0}), q, docs, max_context_tokens=MAX_CONTEXT_TOKENS,
                max_tokens=REPLY_TOKENS, reading="label_probs",
            )
            dev_range.append(path, {
                "id": q.id, "search": search, "gold": len(gold), "gold_found": len(found),
                "suffices": bool(gold) and found == gold, "p_yes": judgement.p_yes,
                "label_mass": judgement.label_mass, "written": judgement.written.verdict,
                "written_parsed": judgement.written.parsed, "shown": step.details.get("documents_shown"),
                "reply": step.text[:300]})
        if count % 10 == 0 or count == len(pending):
            say(f"judge readings: {count} of {len(pending)}")
    await llm.aclose()


def best_threshold(pos: list[float], neg: list[float]) -> tuple[float, float] | None:
    """The cut with the largest true-positive rate minus false-positive rate (Youden's J), and J."""
    if not pos or not neg:
        return None
    best: tuple[float, float] | None = None
    for cut in sorted(set(pos) | set(neg)):
        j = sum(p >= cut for p in pos) / len(pos) - sum(q >= cut for q in neg) / len(neg)
        if best is None or j > best[1] + 1e-12:
            best = (cut, j)
    return best


def accept_rates(records: list[dict], accepts) -> dict:
    good = [r for r in records if r["suffices"]]
    bad = [r for r in records if not r["suffices"]]
    return {"accepts sufficient": f"{sum(map(accepts, good))} of {len(good)}",
            "accepts insufficient": f"{sum(map(accepts, bad))} of {len(bad)}"}


def summary(records: list[dict], thresholds: list[float]) -> dict:
    from selfrag.methods.choice_reading import MIN_MASS

    read = [r for r in records if r.get("p_yes") is not None and (r.get("label_mass") or 0) >= MIN_MASS]
    out: dict = {"questions": len({r["id"] for r in records}),
                 "searches": {s: sum(search_of(r) == s for r in records) for s in SEARCHES},
                 "sufficient searches": sum(r["suffices"] for r in records), "P(YES) readable": len(read),
                 "written verdict": accept_rates(records, lambda r: r["written"] == "YES")}
    for name, subset in (("", read), (", top5 searches only", [r for r in read if search_of(r) == "top5"])):
        pos = [r["p_yes"] for r in subset if r["suffices"]]
        neg = [r["p_yes"] for r in subset if not r["suffices"]]
        out[f"P(YES) AUC, sufficient vs not{name}"] = None if not pos or not neg else round(auc(pos, neg), 3)
    cut = best_threshold([r["p_yes"] for r in read if r["suffices"]], [r["p_yes"] for r in read if not r["suffices"]])
    if cut is not None:
        out["best threshold (Youden)"] = {"threshold": round(cut[0], 4), "J": round(cut[1], 3),
                                          **accept_rates(read, lambda r: r["p_yes"] >= cut[0])}
    for t in thresholds:
        out[f"threshold {t}"] = accept_rates(read, lambda r, t=t: r["p_yes"] >= t)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = dev_range.arguments(__doc__, "backend spec with log-probabilities, e.g. llamacpp:PATH.gguf", 400, 60)
    ap.add_argument("--threshold", type=float, action="append", default=[],
                    help="also report the accept rates at this P(YES) threshold (repeatable)")
    ap.add_argument("--label", default="", help="a name for a variant's lines (default: none, the shipped judge)")
    args = ap.parse_args(argv)
    path = out_path(model_tag(args.llm), args.skip, args.label)
    if not args.report_only:
        asyncio.run(measure(args.llm, args.skip, args.n, path))
    print(json.dumps(summary(read_jsonl(path), args.threshold), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
