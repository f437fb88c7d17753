"""Critical-path latency: how many LLM round trips each method waits for.

Every registered method answers the same questions with a scripted backend
wrapped in :class:`selfrag.llm.DelayedBackend`, which adds a fixed delay to
every call (200 ms by default, like an API round trip). The scripted model
answers every prompt sensibly (retrieval wanted, passages relevant and
supporting, ReAct searches once and finishes), so each method takes its full
retrieval path. Wall time divided by the delay is then the number of call
latencies on the critical path; LLM calls per question is what a method would
wait for if nothing overlapped.

    python -m lab.critical_path [--delay 0.2] [--questions 3]

Exits non-zero unless ``self_rag`` needs at most 3 call latencies with
``critique: combined`` and at most 2 with ``fused``, for num_candidates 3 and 5.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from lab.france import DOCS, QUESTION
from lab.machine import machine

HERE = Path(__file__).resolve().parent

# (method, label, config) in report order.
CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("no_retrieval", "", {}),
    ("vanilla_rag", "", {}),
    ("self_rag", "the default (joint first, one-passage candidates on demand)", {"self_rag": {"top_k": 5}}),
    *[
        ("self_rag", f"critic prompted, num_candidates {n}, selection critique",
         {"self_rag": {"critic": "prompted", "num_candidates": n, "top_k": 5, "selection": "critique"}})
        for n in (3, 5)
    ],
    ("self_rag", "critic prompted, num_candidates 3, no joint candidate (seed 000)",
     {"self_rag": {"critic": "prompted", "num_candidates": 3, "top_k": 5, "joint_passages": 0, "selection": "critique"}}),
    ("self_rag", "critic json, num_candidates 3, selection critique",
     {"self_rag": {"critic": "json", "num_candidates": 3, "top_k": 5, "selection": "critique"}}),
    ("self_rag", "critic json, num_candidates 5, no joint candidate (seed 003)",
     {"self_rag": {"critic": "json", "num_candidates": 5, "top_k": 5, "joint_passages": 0, "selection": "critique"}}),
    ("self_rag_critic", "label probabilities, top_k 5", {"self_rag_critic": {"top_k": 5}}),
    ("self_rag_critic", "label probabilities, top_k 5, passage_candidates always, rerank 3",
     {"self_rag_critic": {"top_k": 5, "passage_candidates": "always"}}),
    ("self_rag_segment", "label probabilities, top_k 3, beam 2", {}),
    ("self_corrective", "documents accepted at once", {}),
    ("react_rag", "one search, then finish", {}),
]
# Call latencies allowed for self_rag with prompted labels, by whether the joint candidate is written:
# each one-passage candidate's answer-and-labels call, then its rating; with the joint, its support
# and utility after every candidate is written (selection: critique reads them).
LIMITS = {("prompted", True): 4, ("prompted", False): 3}



def _probs(*pairs: tuple[str, float]) -> dict[str, float]:
    return dict(pairs)


def respond(prompt: str, request: Any) -> Any:
    """What the scripted model says to one prompt: the full-path answer for every method."""
    p = prompt
    if request.forced is not None:  # self_rag_critic's question likelihood: a scored reply
        return {"forced_logprobs": [-1.0]}
    if '"needs_retrieval"' in p:
        return '{"needs_retrieval": true}'
    if '{"relevance": "relevant"}' in p:
        return '{"relevance": "relevant"}'
    if '{"support": "fully_supported"}' in p:
        return '{"support": "fully_supported"}'
    if '{"utility": N}' in p:
        return '{"utility": 5}'
    if "Reply with JSON only, in this form" in p:
        return '{"answer": "Paris", "relevance": "relevant", "support": "fully_supported", "utility": 5}'
    if "[IsUse]" in p:
        return "Paris\n[IsRel] relevant\n[IsSup] fully supported\n[IsUse] 5"
    if "[IsRel]" in p:
        return "Paris\n[IsRel] relevant\n[IsSup] fully supported"
    if "checked in reference documents" in p:
        return "yes"
    if "Rating:" in p:
        return "5"
    if "Start your reply with YES or NO" in p:
        return "YES. The documents say Paris is the capital of France."
    if "Write one new search query" in p:
        return "capital city of France"
    if "yes, no or continue" in p:
        return {"text": "yes", "top_logprobs": _probs(("yes", -0.1), ("no", -2.5), ("continue", -4.0))}
    if "answer the question completely? yes" in p:
        return {"text": "yes", "top_logprobs": _probs(("yes", -0.1), ("no", -2.5))}
    if "Does answering this question need facts" in p:
        return {"text": "yes", "top_logprobs": _probs(("yes", -0.2), ("no", -1.8))}
    if "relevant or irrelevant" in p:
        return {"text": "relevant", "top_logprobs": _probs(("relevant", -0.1), ("irrelevant", -2.5))}
    if "fully, partially or no" in p:
        return {"text": "fully", "top_logprobs": _probs(("fully", -0.1), ("partially", -2.5), ("no", -4.0))}
    if "Reply with one digit: 1, 2, 3, 4 or 5" in p:
        return {"text": "5", "top_logprobs": _probs(("5", -0.1), ("4", -2.5), ("3", -4.0))}
    if "Write the next sentence" in p:
        return {"text": "Paris is the capital of France.", "top_logprobs": _probs(("Paris", -0.1))}
    if "Reply with your next two lines" in p:
        if "Observation:" in p:
            return "Thought: The documents say Paris.\nAction: finish[Paris]"
        return "Thought: I should look it up.\nAction: search[capital of France]"
    if request.top_logprobs:
        return {"text": "Paris", "top_logprobs": _probs(("Paris", -0.1))}
    return "Paris"


def make_backend(delay: float):
    from selfrag.llm import DelayedBackend, ScriptedBackend

    scripted = ScriptedBackend(respond=lambda request: respond(request.prompt_text(), request), model="critical-path")
    return DelayedBackend(scripted, delay)


async def measure_case(method: str, config: dict, delay: float, questions: int) -> dict:
    from selfrag.methods import create_method
    from selfrag.retrieval.bm25 import BM25Retriever
    from selfrag.types import Document, Question

    docs = [Document(id=str(i), title=t, text=x) for i, (t, x) in enumerate(DOCS)]
    llm = make_backend(delay)
    retriever = BM25Retriever(docs)
    walls, calls, retrievals, peaks, answers = [], [], [], [], []
    for i in range(questions):
        m = create_method(method, llm, retriever, config)
        llm.reset_counts()
        start = time.perf_counter()
        response = await m.answer(Question(id=f"q{i}", text=QUESTION, answers=("Paris",)))
        walls.append(time.perf_counter() - start)
        calls.append(response.num_llm_calls)
        retrievals.append(response.num_retrieval_calls)
        peaks.append(llm.max_in_flight)
        answers.append(response.answer)
    wall = statistics.median(walls)
    return {
        "method": method,
        "config": config,
        "llm_calls_per_q": statistics.fmean(calls),
        "retrievals_per_q": statistics.fmean(retrievals),
        "wall_ms_per_q": wall * 1000,
        "wall_ms_all": [w * 1000 for w in walls],
        "call_latencies": wall / delay,
        "max_in_flight": max(peaks),
        "answers": answers,
    }


def check(rows: list[dict]) -> list[str]:
    problems = []
    for r in rows:
        section = r["config"].get("self_rag") or {}
        limit = LIMITS.get((section.get("critic", ""), section.get("joint_passages", 5) > 0))
        if r["method"] == "self_rag" and limit is not None and r["call_latencies"] >= limit + 0.5:
            problems.append(
                f"self_rag {r['label']}: {r['call_latencies']:.2f} call latencies, limit {limit}"
            )
    return problems


EXPLAIN = """\
## Why each method takes what it takes

- `no_retrieval`, `vanilla_rag`: one call, nothing to overlap (retrieval is local BM25, well under a millisecond here).
- `self_rag` `combined`: the retrieval decision (1), then every candidate at once; each candidate's utility call starts as soon as its own answer is written, so the question waits for decision + answer + utility = **3** whatever `num_candidates` is, instead of `1 + 2n` one after another; the joint candidate's answer is written beside the others (its passages are ranked by lexical evidence, no verdict awaited) and its support and utility calls beside theirs.
- `self_rag` `fused`: decision + one call per candidate that writes the answer and all three labels, all candidates at once = 2 without the joint candidate (`joint_candidate: false`); with it (the default) the joint's answer is written beside them and its support and utility calls come after it, one round trip more = **3**. The target is 2 without the joint candidate and 3 with it (until 2026-11-28 the check held the default to 2 and reported it as missed).
- `self_rag` `separate`: decision, then a relevance verdict on each of the first `num_candidates` documents, then the kept documents' answers and the joint candidate's (its passages are ranked by those verdicts), then every support and utility call at once = **4**. Until 2026-11-26 the joint waited for the other candidates' critiques: 6.
- `self_rag_critic`: retrieval probability (1); with the default relevance on a backend that scores a given reply (the scripted one here, llama.cpp in use) the question likelihood after every passage (1), then every passage's label question (1); then the joint draft, whose passages are ranked by those relevance readings (1), and its support and utility at once (1) = **5**, 1 + 2k + 3 calls (14 at k = 5). The per-passage candidates and seed 002's reranker wait for a joint draft with no usable answer (`passage_candidates: fallback`, the default since 2026-11-28; the scripted joint here has one); with `passage_candidates: always` each passage's label question, answer and support and utility questions come before the joint, 6 round trips and 24 calls at k = 5 (7 until 2026-11-28 04:00, when the label questions had a round of their own).
- `self_rag_segment`: per sentence a retrieve decision, then candidates with their critiques and a "final?" check; the scripted answer is final after one sentence; then one call writes the short answer from the segments.
- Calls/q of `self_rag_critic` and `self_rag_segment`: the scripted model gives every passage the same answer, so its utility (and "final?") prompt is the same for every candidate; the critic asks a prompt once per question and reuses the reading (since 2026-11-26: 24 -> 19 and 27 -> 19 calls here, the critical path unchanged; `self_rag_critic` with `passage_candidates: always` is back at 24 since 2026-11-28, its 5 question-likelihood calls).
- `self_corrective`: retrieve, reflect, answer: 2 calls in sequence (each rejected round adds reflect + reformulate).
- `react_rag`: each Thought/Action step waits for the previous observation: search step + finish step = 2.
"""


def report(rows: list[dict], args: argparse.Namespace, problems: list[str]) -> str:
    lines = [
        "# Critical path: LLM round trips per question",
        "",
        "Measured {date} on {platform}, {cpu_count} CPUs, Python {python}, commit {commit}.".format(**machine()),
        f"Every call goes through `DelayedBackend` (+{args.delay * 1000:.0f} ms per call) around a scripted "
        f"model that makes every method take its full retrieval path; BM25 over 5 passages; "
        f"{args.questions} questions per row, the median wall time reported. "
        "*Call latencies* = wall time / delay: the number of LLM round trips on the critical path. "
        "*Calls/q* is what a question would wait for if no call overlapped another; *peak in flight* "
        "is the most calls the backend saw at once.",
        "",
        "| method | setting | LLM calls/q | retrievals/q | wall ms/q | call latencies | peak in flight |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| `{r['method']}` | {r['label'] or '-'} | {r['llm_calls_per_q']:.1f} | "
            f"{r['retrievals_per_q']:.1f} | {r['wall_ms_per_q']:.0f} | {r['call_latencies']:.2f} | "
            f"{r['max_in_flight']} |"
        )
    verdict = (
        "**Targets met**: `self_rag` combined <= 3 call latencies, fused <= 3 with the joint candidate and <= 2 without it."
        if not problems
        else "**Targets missed**: " + "; ".join(problems)
    )
    lines += ["", verdict, "", EXPLAIN, "Regenerate: `python -m lab.critical_path` "
              "(options: `--delay`, `--questions`).", ""]
    return "\n".join(lines)


async def measure(args: argparse.Namespace) -> list[dict]:
    rows = []
    for method, label, config in CASES:
        row = await measure_case(method, config, args.delay, args.questions)
        row["label"] = label
        print(f"[critical_path] {method} {label}: {row['call_latencies']:.2f} call latencies, "
              f"{row['llm_calls_per_q']:.0f} calls", file=sys.stderr, flush=True)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay", type=float, default=0.2, help="seconds added to every call (default 0.2)")
    parser.add_argument("--questions", type=int, default=3, help="questions per row (default 3)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    if args.delay <= 0 or args.questions < 1:
        parser.error("--delay must be > 0 and --questions >= 1")
    rows = asyncio.run(measure(args))
    problems = check(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "critical_path.md").write_text(report(rows, args, problems), encoding="utf-8")
    (args.out / "critical_path.json").write_text(
        json.dumps({"delay_s": args.delay, "questions": args.questions, "rows": rows}, indent=2), encoding="utf-8"
    )
    print(f"wrote {args.out / 'critical_path.md'}")
    if problems:
        print("critical path targets missed: " + "; ".join(problems))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
