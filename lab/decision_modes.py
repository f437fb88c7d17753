"""self_rag's retrieval decision: looking at the documents first (look_first) against the question alone
(adaptive, the paper's), side by side.

    python -m lab.decision_modes                                  # the embedded model
    python -m lab.decision_modes --llm llamacpp:PATH.gguf --n 50

A shared corpus is built from the ten paragraphs of each of the first ``n``
HotpotQA dev questions (so no question brings its own documents, as with
``--docs``). Each decision is taken alone (no answer is written), for:

* the HotpotQA questions as asked, and the same questions in lower case (a
  lower-case question names nothing to the adaptive fallback's lexical rule);
* questions about nothing in the corpus (arithmetic, words, greetings,
  writing tasks; none of them an anchor of the calibration).

Reported per mode: the share of each group for which the documents are read,
the model calls per decision (the adaptive mode's one-off calibration is
counted apart) and the time per decision. The LLM call cache is off.
Writes ``decision_modes.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from selfrag.assemble import build_backend
from selfrag.config import load_config
from selfrag.eval.datasets import load_dataset
from selfrag.methods.core.trace import Run
from selfrag.methods.critique.decision import Calibration, decide_retrieval, decision_template
from selfrag.methods.critique.look_first import look_first
from selfrag.retrieval import BM25Retriever
from selfrag.types import Question

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
HOTPOT = ROOT.parent / "shared" / "data" / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl"
OFF_TOPIC = (
    "What is 12 times 12?", "What does the word 'ephemeral' mean?", "Good morning!", "Write a haiku about rain.",
    "How do I say thank you in French?", "What is the square root of 81?", "Tell me a joke.",
    "Convert 5 kilometres to miles.", "What rhymes with orange?", "Thanks for the help!",
    "Spell 'necessary' backwards.", "Is 17 a prime number?",
)
TOP_K = 5


async def decide(mode: str, llm: Any, retriever: Any, question: Question, calibration: Calibration,
                 template: str) -> dict[str, Any]:
    run = Run(llm, retriever, {"max_tokens": 32, "temperature": 0.0})
    start = time.perf_counter()
    if mode == "look_first":
        needed = (await look_first(run, question, TOP_K, 32)).needed
    else:
        needed = (await decide_retrieval(run, template, question, threshold="auto", max_tokens=32,
                                         calibration=calibration)).needed
    steps = run.steps()
    calibrating = sum(s.llm_calls for s in steps if s.action == "calibrate_decision")
    return {"needed": needed, "calls": sum(s.llm_calls for s in steps) - calibrating, "calibration_calls": calibrating,
            "seconds": time.perf_counter() - start}


async def measure(llm: Any, retriever: Any, groups: dict[str, list[Question]]) -> dict[str, Any]:
    template = decision_template(None)
    out: dict[str, Any] = {}
    for mode in ("adaptive", "look_first"):
        calibration = Calibration()
        out[mode] = {}
        for group, questions in groups.items():
            rows = [await decide(mode, llm, retriever, q, calibration, template) for q in questions]
            out[mode][group] = {
                "n": len(rows), "read": sum(r["needed"] for r in rows) / len(rows),
                "calls_per_decision": statistics.fmean(r["calls"] for r in rows),
                "calibration_calls": sum(r["calibration_calls"] for r in rows),
                "seconds_per_decision": statistics.fmean(r["seconds"] for r in rows),
            }
            print(f"  {mode} / {group}: read {out[mode][group]['read']:.2f}", flush=True)
    return out


def report(results: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = [
        "# The retrieval decision: look at the documents first, or decide from the question alone",
        "",
        f"Measured {meta['when']} by `lab/decision_modes.py`; model `{meta['model']}`; a shared BM25 corpus of "
        f"{meta['corpus']} paragraphs (the ten of each of the first {meta['n']} HotpotQA dev questions); each "
        f"decision taken alone, top {TOP_K}. Load average at the start {meta['load_start']}. {meta['note']}",
        "",
        "| questions | mode | n | documents read | model calls per decision | calibration calls (once) | "
        "ms per decision |",
        "|---|---|---|---|---|---|---|",
    ]
    for group in results["adaptive"]:
        for mode in ("adaptive", "look_first"):
            r = results[mode][group]
            lines.append(f"| {group} | `{mode}` | {r['n']} | {r['read']:.0%} | {r['calls_per_decision']:.2f} | "
                         f"{r['calibration_calls']} | {r['seconds_per_decision'] * 1000:.0f} |")
    lines += ["", "Reading the documents is right for the HotpotQA questions (each is about paragraphs of the "
              "corpus) and not needed for the others; look_first's calls are those of the questions whose best "
              "passage covers some but not half of their words."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="look_first against adaptive retrieval decisions.")
    parser.add_argument("--llm", default="llamacpp", help="the backend spec (default: the embedded model)")
    parser.add_argument("--n", type=int, default=50, help="HotpotQA questions (default 50)")
    parser.add_argument("--note", default="", help="what else ran on the machine meanwhile")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    if not HOTPOT.is_file():
        print(f"the HotpotQA file is missing: {HOTPOT}", file=sys.stderr)
        return 1
    cfg = load_config(None, base={"cache": {"enabled": False}, "llm": {"spec": args.llm},
                                  "data": {"dataset": "hotpotqa", "path": str(HOTPOT), "subset_size": args.n}})
    hotpot = load_dataset(cfg.data).questions
    corpus = {d.id: d for q in hotpot for d in q.contexts}
    retriever = BM25Retriever(list(corpus.values()))
    plain = [Question(id=q.id, text=q.text) for q in hotpot]
    groups = {"HotpotQA, as asked": plain,
              "HotpotQA, lower case": [Question(id=q.id, text=q.text.lower()) for q in plain],
              "about nothing in the corpus": [Question(id=f"off{i}", text=t) for i, t in enumerate(OFF_TOPIC)]}
    load_start = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    llm = build_backend(cfg, use_cache=False)
    results = asyncio.run(measure(llm, retriever, groups))
    meta = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "model": str(llm.model), "n": len(hotpot),
            "corpus": len(corpus), "load_start": load_start, "note": args.note}
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "decision_modes" + ("" if args.llm == "llamacpp" else "_" + Path(str(llm.model)).stem)
    (args.out / f"{stem}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n",
                                          encoding="utf-8")
    (args.out / f"{stem}.md").write_text(report(results, meta), encoding="utf-8")
    print(f"-> {args.out / (stem + '.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
