"""Prompt tokens the in-process llama.cpp model actually evaluates, by prompt layout.

Self-RAG writes one candidate per passage. When every candidate prompt starts
with the same instructions and question and puts the passage last, the
llama.cpp backend keeps the shared prefix in its KV cache and evaluates only
the rest. This script answers the same questions with ``self_rag`` (critique
``combined`` and ``fused``) twice: once with the shipped question-first
templates and once with passage-first templates (``lab/prompts/
passage_first/``, the layout the combined prompt had before), and reports
prompt tokens sent vs. evaluated per question, with quality alongside.

    python -m lab.prefix_sharing [--n 10] [--modes prompted]
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

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
HOTPOTQA = ROOT.parent / "shared" / "data" / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl"
LAYOUTS = {
    "passage first (before)": HERE / "prompts" / "passage_first",
    "question first (shipped)": None,
}


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def question_stats(record: dict) -> dict:
    """Prompt tokens sent and evaluated for one answered question, from its trace."""
    sent = evaluated = cand_sent = cand_eval = 0
    for step in record.get("reasoning_chain") or []:
        details = step.get("details") or {}
        prompt = int(step.get("prompt_tokens") or 0)
        done = details.get("evaluated_prompt_tokens")
        done = prompt if done is None else int(done)
        sent += prompt
        evaluated += done
        if step.get("action") == "generate_and_critique":
            cand_sent += prompt
            cand_eval += done
    metrics = record.get("metrics") or {}
    return {
        "sent": sent,
        "evaluated": evaluated,
        "candidate_sent": cand_sent,
        "candidate_evaluated": cand_eval,
        "retrieved": bool((record.get("accounting") or {}).get("retrieved")),
        "f1": float(metrics.get("f1", 0.0)),
        "em": float(metrics.get("em", 0.0)),
        "latency_ms": float((record.get("accounting") or {}).get("latency_ms") or 0.0),
    }


async def measure(args: argparse.Namespace, out_dir: Path) -> list[dict]:
    from selfrag.assemble import build_backend
    from selfrag.config import load_config
    from selfrag.eval.runner import run_experiment_async

    if HOTPOTQA.is_file():
        data = [f"data.path={HOTPOTQA}", f"data.subset_size={args.n}"]
        dataset = f"HotpotQA dev distractor, first {args.n} questions"
    else:
        data = ["data.dataset=demo", "data.path=null", f"data.subset_size={args.n}"]
        dataset = f"shipped demo questions, first {args.n} (../shared/data absent)"
    rows = []
    llm = None
    try:
        for mode in args.modes:
            for layout, prompt_dir in LAYOUTS.items():
                cfg = load_config(
                    ROOT / "configs" / "self_rag.yaml",
                    [*data, f"self_rag.critic={mode}", "self_rag.selection=critique", "self_rag.retrieval_mode=always",
                     "cache.enabled=false"],
                )
                if llm is None:
                    llm = build_backend(cfg, use_cache=False)
                if prompt_dir is None:
                    os.environ.pop("SELFRAG_PROMPT_DIR", None)
                else:
                    os.environ["SELFRAG_PROMPT_DIR"] = str(prompt_dir)
                print(f"[prefix] {mode} / {layout} ...", file=sys.stderr, flush=True)
                start = time.perf_counter()
                result = await run_experiment_async(
                    cfg, output_root=out_dir, run_id=f"{mode}-{layout.split()[0]}-{int(time.time())}",
                    progress=False, llm=llm,
                )
                wall = time.perf_counter() - start
                records = [
                    json.loads(line)
                    for line in (result.run_dir / "predictions.jsonl").read_text().splitlines()
                    if line.strip()
                ]
                stats = [question_stats(r) for r in records if r.get("error") is None]
                retrieved = [s for s in stats if s["retrieved"]]
                rows.append(
                    {
                        "mode": mode,
                        "layout": layout,
                        "n": len(stats),
                        "errors": len(records) - len(stats),
                        "retrieved": len(retrieved),
                        "sent": _mean([s["sent"] for s in stats]),
                        "evaluated": _mean([s["evaluated"] for s in stats]),
                        "cand_sent": _mean([s["candidate_sent"] for s in retrieved]),
                        "cand_eval": _mean([s["candidate_evaluated"] for s in retrieved]),
                        "f1": _mean([s["f1"] for s in stats]),
                        "em": _mean([s["em"] for s in stats]),
                        "p50_s": statistics.median([s["latency_ms"] for s in stats]) / 1000 if stats else 0.0,
                        "wall_s": wall,
                        "dataset": dataset,
                        "model": result.summary.get("model", ""),
                    }
                )
    finally:
        os.environ.pop("SELFRAG_PROMPT_DIR", None)
        if llm is not None:
            await llm.aclose()
    return rows


def report(rows: list[dict], args: argparse.Namespace) -> str:
    first = rows[0]
    lines = [
        "# Prompt layout and KV-cache prefix reuse (in-process llama.cpp)",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.platform()}, "
        f"{os.cpu_count()} CPUs (shared with other jobs, so wall times are noisy; token counts are exact).",
        f"Model: `{first['model']}` (the embedded default). Data: {first['dataset']}. "
        "Method: `self_rag` with `retrieval_mode: always` (the embedded model answers \"no\" to the retrieval question), num_candidates 3, BM25 top 5 over each question's own paragraphs, cache off.",
        "",
        "*Sent* = prompt tokens of every call (after the chat template); *evaluated* = the tokens the "
        "model actually had to run after reusing the KV cache of the previous call's prompt prefix. "
        "Candidate columns count only the `generate_and_critique` calls of questions that retrieved.",
        "",
        "| critique | layout | n | retrieved | sent / q | evaluated / q | candidate sent / q | "
        "candidate evaluated / q | saved on candidates | EM | F1 | p50 latency s | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        saved = 1 - r["cand_eval"] / r["cand_sent"] if r["cand_sent"] else 0.0
        lines.append(
            f"| {r['mode']} | {r['layout']} | {r['n']} | {r['retrieved']} | {r['sent']:.0f} | "
            f"{r['evaluated']:.0f} | {r['cand_sent']:.0f} | {r['cand_eval']:.0f} | {saved:.0%} | "
            f"{r['em']:.3f} | {r['f1']:.3f} | {r['p50_s']:.2f} | {r['wall_s']:.0f} |"
        )
    lines += ["", "## Per mode: evaluated prompt tokens per question, before -> after", ""]
    for mode in args.modes:
        pair = [r for r in rows if r["mode"] == mode]
        if len(pair) == 2 and pair[0]["evaluated"]:
            before, after = pair
            lines.append(
                f"- `{mode}`: {before['evaluated']:.0f} -> {after['evaluated']:.0f} "
                f"({1 - after['evaluated'] / before['evaluated']:.0%} fewer); on candidate calls "
                f"{before['cand_eval']:.0f} -> {after['cand_eval']:.0f}; "
                f"F1 {before['f1']:.3f} -> {after['f1']:.3f} (n={after['n']})."
            )
    lines += [
        "",
        "Regenerate: `python -m lab.prefix_sharing` (options: `--n`, `--modes`).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10, help="questions (default 10)")
    parser.add_argument("--modes", nargs="+", default=["prompted"], choices=["prompted"])
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = asyncio.run(measure(args, args.out / "runs" / "prefix_sharing"))
    path = args.out / "prefix_sharing.md"
    path.write_text(report(rows, args), encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
