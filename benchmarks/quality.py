"""Quality and cost per method, the same questions for every method.

Runs every registered method (and the Self-RAG variants worth comparing) on
samples of HotpotQA, PubMedQA and MMLU-evidence through the experiment runner,
with one model loaded once and the cache off, and writes
``results/quality.md`` (+ ``quality.json``, ``quality.png``).

    python benchmarks/quality.py                      # embedded SmolLM2, HotpotQA n=20, others n=10
    python benchmarks/quality.py --llm llamacpp:/models/qwen2.5-1.5b.gguf --n-hotpot 40
    python benchmarks/quality.py --datasets hotpotqa --only self_rag_fused self_rag_combined

Each (dataset, variant) run is a normal run directory under
``results/runs/quality/``; an interrupted benchmark picks up where it stopped
(answered questions are kept, unfinished ones answered), ``--fresh`` starts
over. Run it on an otherwise idle machine: wall times are per question.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from _env import machine

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = ROOT.parent / "shared" / "data"


@dataclass(frozen=True)
class Variant:
    name: str
    config: str
    overrides: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class Dataset:
    name: str
    path: Path
    metric: str  # the headline quality metric in the summary
    variants: tuple[str, ...] = field(default=())


VARIANTS = {
    v.name: v
    for v in [
        Variant("no_retrieval", "no_retrieval.yaml"),
        Variant("vanilla_rag", "vanilla_rag.yaml"),
        Variant("self_rag_combined", "self_rag.yaml", note="adaptive retrieval (the model decides)"),
        Variant(
            "self_rag_combined_always", "self_rag.yaml", ("self_rag.retrieval_mode=always",),
            "always retrieves",
        ),
        Variant(
            "self_rag_fused_always", "self_rag.yaml",
            ("self_rag.critique=fused", "self_rag.retrieval_mode=always"), "always retrieves",
        ),
        Variant(
            "self_rag_separate_always", "self_rag_separate.yaml", ("self_rag.retrieval_mode=always",),
            "JSON critics, always retrieves",
        ),
        Variant("self_rag_critic", "self_rag_critic.yaml", ("self_rag_critic.critic.source=label_probs",),
                "critiques read from label-word probabilities (max_tokens=1)"),
        Variant(
            "self_rag_critic_always", "self_rag_critic.yaml",
            ("self_rag_critic.critic.source=label_probs", "self_rag_critic.adaptive.mode=always"),
            "label-word probabilities, always retrieves",
        ),
        Variant(
            "self_rag_critic_text_always", "self_rag_critic.yaml",
            ("self_rag_critic.critic.source=text", "self_rag_critic.adaptive.mode=always"),
            "the same critic reading generated text labels, always retrieves",
        ),
        Variant("self_rag_segment", "self_rag_segment.yaml"),
        Variant("self_corrective", "self_corrective.yaml"),
        Variant("react_rag", "react_rag.yaml"),
    ]
}

ALL = tuple(VARIANTS)
SHORT = (
    "no_retrieval", "vanilla_rag", "self_rag_combined", "self_rag_fused_always",
    "self_rag_critic", "self_corrective", "react_rag",
)
DATASETS = {
    "hotpotqa": Dataset("hotpotqa", DATA / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl", "f1", ALL),
    "pubmedqa": Dataset("pubmedqa", DATA / "pubmedqa" / "ori_pqal.json", "accuracy", SHORT),
    "mmlu_evidence": Dataset("mmlu_evidence", DATA / "medical" / "evidence", "accuracy", SHORT),
}


def _row(dataset: Dataset, variant: Variant, summary: dict, wall_s: float, n: int) -> dict:
    metrics = summary.get("metrics") or {}
    tokens = summary.get("tokens") or {}
    answered = max(int(summary.get("n_answered") or 0), 1)
    return {
        "dataset": dataset.name,
        "variant": variant.name,
        "note": variant.note,
        "n": int(summary.get("n_questions") or n),
        "errors": int(summary.get("n_errors") or 0),
        "metrics": metrics,
        "headline": dataset.metric,
        "tokens_per_q": float(tokens.get("per_question") or 0.0),
        "prompt_tokens_per_q": float(tokens.get("prompt") or 0) / answered,
        "completion_tokens_per_q": float(tokens.get("completion") or 0) / answered,
        "llm_calls_per_q": float((summary.get("llm_calls") or {}).get("per_question") or 0.0),
        "retrievals_per_q": float((summary.get("retrieval_calls") or {}).get("per_question") or 0.0),
        "retrieval_rate": float(summary.get("retrieval_rate") or 0.0),
        "latency_p50_s": float((summary.get("latency_ms") or {}).get("p50") or 0.0) / 1000,
        "latency_mean_s": float((summary.get("latency_ms") or {}).get("mean") or 0.0) / 1000,
        "wall_s": wall_s,
        "model": summary.get("model", ""),
    }


async def run_one(dataset: Dataset, variant: Variant, n: int, args, llm_box: list) -> dict:
    from selfrag.assemble import build_backend
    from selfrag.config import load_config
    from selfrag.eval.runner import run_experiment_async

    overrides = [
        f"data.dataset={dataset.name}", f"data.path={dataset.path}", "data.split=null",
        f"data.subset_size={n}", "cache.enabled=false", *variant.overrides,
    ]
    if args.llm:
        overrides.append(f"llm.spec={args.llm}")
    cfg = load_config(ROOT / "configs" / variant.config, overrides)
    if not llm_box:
        llm_box.append(build_backend(cfg, use_cache=False))
    run_dir = args.out / "runs" / "quality" / f"{dataset.name}-{variant.name}"
    resume = run_dir if (run_dir / "summary.json").is_file() or (run_dir / "predictions.jsonl").is_file() else None
    if resume is None and run_dir.exists():
        shutil.rmtree(run_dir)
    start = time.perf_counter()
    result = await run_experiment_async(
        cfg, output_root=run_dir.parent, run_id=run_dir.name, resume_dir=resume,
        progress=args.progress, llm=llm_box[0],
    )
    wall = time.perf_counter() - start
    # A resumed run only timed the rest: use the answered questions' own latencies instead.
    if resume is not None:
        wall = float((result.summary.get("latency_ms") or {}).get("mean") or 0.0) / 1000 * n
    return _row(dataset, variant, result.summary, wall, n)


async def measure(args) -> list[dict]:
    rows: list[dict] = []
    llm_box: list = []
    try:
        for name in args.datasets:
            dataset = DATASETS[name]
            if not dataset.path.exists():
                print(f"[quality] {name}: {dataset.path} not found, skipped", file=sys.stderr)
                continue
            n = args.n_hotpot if name == "hotpotqa" else args.n_other
            for vname in dataset.variants:
                if args.only and vname not in args.only:
                    continue
                print(f"[quality] {name} / {vname} (n={n}) ...", file=sys.stderr, flush=True)
                row = await run_one(dataset, VARIANTS[vname], n, args, llm_box)
                print(
                    f"[quality]   {dataset.metric}={row['metrics'].get(dataset.metric, 0):.3f} "
                    f"calls/q={row['llm_calls_per_q']:.1f} tokens/q={row['tokens_per_q']:.0f} "
                    f"wall={row['wall_s']:.0f}s",
                    file=sys.stderr, flush=True,
                )
                rows.append(row)
                save_json(args.out / "quality.json", rows, args)
    finally:
        if llm_box:
            await llm_box[0].aclose()
    return rows


def environment(args) -> dict:
    env = machine()
    return {
        "date": env["date"],
        "platform": env["platform"],
        "cpus": env["cpu_count"],
        "python": env["python"],
        "commit": env["commit"],
        "llm": args.llm or "llamacpp (embedded SmolLM2-135M-Instruct Q4_1)",
    }


def save_json(path: Path, rows: list[dict], args) -> None:
    path.write_text(json.dumps({"environment": environment(args), "rows": rows}, indent=2), encoding="utf-8")


def _fmt_metric(row: dict, key: str) -> str:
    value = row["metrics"].get(key)
    return "–" if value is None else f"{value:.3f}"


DATASET_NOTES = {
    "hotpotqa": "HotpotQA dev distractor (first {n}); retrieval over each question's own 10 paragraphs",
    "pubmedqa": "PubMedQA PQA-L (first {n}); retrieval over each question's own abstract contexts",
    "mmlu_evidence": "MMLU medical with Self-BioRAG evidence (first {n} in file order: anatomy); "
    "retrieval over each question's 10 evidence passages",
}


def report(rows: list[dict], args) -> str:
    env = environment(args)
    model = next((r["model"] for r in rows if r["model"]), env["llm"])
    lines = [
        "# Quality and cost per method",
        "",
        f"Measured {env['date']} on {env['platform']}, {env['cpus']} CPUs, Python {env['python']}, "
        f"commit {env['commit']}. Model: `{model}` through the in-process llama.cpp backend "
        "(one call at a time, concurrency 1), greedy decoding, cache off, BM25 retrieval. "
        "Every method answers the same questions.",
        "",
        "Latency and wall time are per question on 2 CPU cores; the embedded 135M model is a demo "
        "model (near chance at judging relevance), so read the quality columns as a smoke check of "
        "each pipeline, and the cost columns (calls, tokens, retrievals, time) as what each method "
        "spends. For a quality comparison pass a stronger GGUF with `--llm llamacpp:PATH`.",
        "",
    ]
    for name in args.datasets:
        subset = [r for r in rows if r["dataset"] == name]
        if not subset:
            continue
        metric_keys = [k for k in ("em", "f1", "match", "accuracy") if any(k in r["metrics"] for r in subset)]
        lines += [f"## {name}", "", DATASET_NOTES[name].format(n=subset[0]["n"]) + ".", ""]
        header = ["method", "n", *metric_keys, "LLM calls/q", "retrievals/q", "retrieved",
                  "prompt tok/q", "completion tok/q", "p50 s/q", "mean s/q", "errors"]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        for r in subset:
            label = f"`{r['variant']}`" + (f" ({r['note']})" if r["note"] else "")
            cells = [label, str(r["n"]), *[_fmt_metric(r, k) for k in metric_keys],
                     f"{r['llm_calls_per_q']:.1f}", f"{r['retrievals_per_q']:.2f}", f"{r['retrieval_rate']:.0%}",
                     f"{r['prompt_tokens_per_q']:.0f}", f"{r['completion_tokens_per_q']:.1f}",
                     f"{r['latency_p50_s']:.2f}", f"{r['latency_mean_s']:.2f}", str(r["errors"])]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        lines += comparisons(subset)
    lines += [
        "Regenerate: `python benchmarks/quality.py` (options: `--llm`, `--n-hotpot`, `--n-other`, "
        "`--datasets`, `--only`, `--fresh`). Run directories with every prediction and trace: "
        "`benchmarks/results/runs/quality/` (not committed).",
        "",
    ]
    return "\n".join(lines)


def comparisons(subset: list[dict]) -> list[str]:
    by = {r["variant"]: r for r in subset}
    out: list[str] = []
    comb, fused = by.get("self_rag_combined_always"), by.get("self_rag_fused_always")
    if comb and fused:
        key = comb["headline"]
        out.append(
            f"- **fused vs combined** (both always retrieve, same passages): {key} "
            f"{_fmt_metric(comb, key)} -> {_fmt_metric(fused, key)}, LLM calls/q "
            f"{comb['llm_calls_per_q']:.1f} -> {fused['llm_calls_per_q']:.1f}, tokens/q "
            f"{comb['tokens_per_q']:.0f} -> {fused['tokens_per_q']:.0f}, mean s/q "
            f"{comb['latency_mean_s']:.2f} -> {fused['latency_mean_s']:.2f} (n={fused['n']})."
        )
    probs, text = by.get("self_rag_critic_always"), by.get("self_rag_critic_text_always")
    if probs and text:
        key = probs["headline"]
        saved = text["completion_tokens_per_q"] - probs["completion_tokens_per_q"]
        out.append(
            f"- **critic from label probabilities vs text labels** (both always retrieve): completion tokens/q "
            f"{text['completion_tokens_per_q']:.1f} -> {probs['completion_tokens_per_q']:.1f} "
            f"({saved:.1f} saved per question), total tokens/q {text['tokens_per_q']:.0f} -> "
            f"{probs['tokens_per_q']:.0f}, mean s/q {text['latency_mean_s']:.2f} -> "
            f"{probs['latency_mean_s']:.2f}, {key} {_fmt_metric(text, key)} -> {_fmt_metric(probs, key)} "
            f"(n={probs['n']})."
        )
    return [*out, ""] if out else []


def plot(rows: list[dict], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    subset = [r for r in rows if r["dataset"] == "hotpotqa"]
    if not subset:
        return False
    fig, ax = plt.subplots(figsize=(8, 5))
    for r in subset:
        x, y = r["tokens_per_q"], r["metrics"].get("f1", 0.0)
        ax.scatter([x], [y])
        ax.annotate(r["variant"], (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("tokens per question (log)")
    ax.set_ylabel("F1")
    ax.set_title(f"HotpotQA, n={subset[0]['n']}, {subset[0]['model']}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llm", default=None, help="backend spec (default: the embedded model)")
    parser.add_argument("--n-hotpot", type=int, default=20)
    parser.add_argument("--n-other", type=int, default=10)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--only", nargs="+", choices=list(VARIANTS), help="run only these variants")
    parser.add_argument("--fresh", action="store_true", help="discard earlier run directories")
    parser.add_argument("--progress", action="store_true", help="per-question progress bars")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    if not DATA.is_dir():
        print(f"quality: skipped, benchmark data not found at {DATA}")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    if args.fresh:
        shutil.rmtree(args.out / "runs" / "quality", ignore_errors=True)
    rows = asyncio.run(measure(args))
    save_json(args.out / "quality.json", rows, args)
    (args.out / "quality.md").write_text(report(rows, args), encoding="utf-8")
    plotted = plot(rows, args.out / "quality.png")
    print(f"wrote {args.out / 'quality.md'}" + (" and quality.png" if plotted else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
