"""Time to the first streamed token against the whole answer's time, for vanilla_rag and self_rag.

    python -m lab.streaming_latency --llm llamacpp:PATH.gguf            # the first 10 HotpotQA questions
    python -m lab.streaming_latency --llm llamacpp:PATH.gguf --n 5 --methods vanilla_rag

Each question is answered over its own ten paragraphs (BM25, as in the quality
benchmark), in process, with a listener on the answer's token stream
(``selfrag.llm.streaming``): the time from the start of ``answer()`` to the
first streamed piece, and to the response. Without streaming, the first
word of the answer is seen only at the end. The LLM call cache is off, so
every call is decoded. Writes ``streaming_latency.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from selfrag.assemble import build_backend, build_method
from selfrag.config import load_config
from selfrag.eval.datasets import load_dataset
from selfrag.llm import streaming

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
HOTPOT = ROOT.parent / "shared" / "data" / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl"


async def measure(method, questions) -> list[dict[str, Any]]:
    rows = []
    for question in questions:
        first: list[float] = []
        pieces: list[str] = []
        start = time.perf_counter()

        def heard(piece: str, first=first, pieces=pieces, start=start) -> None:
            if not first:
                first.append(time.perf_counter() - start)
            pieces.append(piece)

        with streaming.listening(heard):
            response = await method.answer(question)
        total = time.perf_counter() - start
        rows.append({
            "id": question.id, "first_token_s": round(first[0], 3) if first else None, "total_s": round(total, 3),
            "streamed": "".join(pieces), "answer": response.answer, "llm_calls": response.num_llm_calls,
            "streamed_is_answer": " ".join("".join(pieces).split()) == " ".join(response.answer.split()),
        })
        print(f"  {question.id}: first token {rows[-1]['first_token_s']} s of {total:.2f} s", flush=True)
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    firsts = [r["first_token_s"] for r in rows if r["first_token_s"] is not None]
    totals = [r["total_s"] for r in rows]
    return {
        "n": len(rows), "streamed": len(firsts),
        "first_token_median_s": statistics.median(firsts) if firsts else None,
        "total_median_s": statistics.median(totals),
        "first_token_mean_s": statistics.fmean(firsts) if firsts else None, "total_mean_s": statistics.fmean(totals),
        "streamed_is_answer": sum(r["streamed_is_answer"] for r in rows),
        "llm_calls_mean": statistics.fmean(r["llm_calls"] for r in rows),
    }


def report(results: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = [
        "# Time to the first streamed token, against the whole answer",
        "",
        f"Measured {meta['when']} by `lab/streaming_latency.py` on {meta['machine']}; model `{meta['model']}`; "
        f"the first {meta['n']} HotpotQA dev questions, each over its own ten paragraphs (BM25), the LLM call "
        f"cache off. Load average at the start {meta['load_start']}, at the end {meta['load_end']}. "
        f"{meta['note']}",
        "",
        "| method | n | streamed | first token, median (s) | answer, median (s) | first token, mean (s) | "
        "answer, mean (s) | streamed = answer | LLM calls |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in results.items():
        def f(v):
            return "-" if v is None else f"{v:.2f}"
        lines.append(f"| `{name}` | {s['n']} | {s['streamed']} | {f(s['first_token_median_s'])} | "
                     f"{f(s['total_median_s'])} | {f(s['first_token_mean_s'])} | {f(s['total_mean_s'])} | "
                     f"{s['streamed_is_answer']} | {s['llm_calls_mean']:.1f} |")
    lines += ["", "Without streaming the answer's first word appears with the whole answer (the answer "
              "column). \"streamed = answer\": questions whose streamed text was the final answer as shown."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Time to the first streamed token vs the whole answer.")
    parser.add_argument("--llm", required=True, help="the backend spec, e.g. llamacpp:/path/model.gguf")
    parser.add_argument("--n", type=int, default=10, help="questions (default 10)")
    parser.add_argument("--methods", nargs="+", default=["vanilla_rag", "self_rag"])
    parser.add_argument("--note", default="", help="what else ran on the machine meanwhile")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    if not HOTPOT.is_file():
        print(f"the HotpotQA file is missing: {HOTPOT}", file=sys.stderr)
        return 1
    load_start = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    questions = []
    results: dict[str, Any] = {}
    rows: dict[str, Any] = {}
    for name in args.methods:
        cfg = load_config(None, base={"architecture": {"name": name}, "cache": {"enabled": False},
                                      "llm": {"spec": args.llm},
                                      "data": {"dataset": "hotpotqa", "path": str(HOTPOT), "subset_size": args.n}})
        questions = questions or load_dataset(cfg.data).questions
        llm = build_backend(cfg, use_cache=False)
        method = build_method(cfg, llm)
        print(f"== {name}", flush=True)
        rows[name] = asyncio.run(measure(method, questions))
        results[name] = summary(rows[name])
    meta = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "model": Path(args.llm.split(":", 1)[-1]).name,
            "machine": f"{platform.platform()}, {os.cpu_count()} CPUs", "n": len(questions),
            "load_start": load_start, "load_end": ", ".join(f"{x:.2f}" for x in os.getloadavg()), "note": args.note}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "streaming_latency.json").write_text(json.dumps({"meta": meta, "summary": results, "rows": rows},
                                                               indent=1) + "\n", encoding="utf-8")
    (args.out / "streaming_latency.md").write_text(report(results, meta), encoding="utf-8")
    print(f"-> {args.out / 'streaming_latency.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
