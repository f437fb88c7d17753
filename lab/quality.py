"""Quality and cost of every method on one model, the same questions for every method.

One command runs every method variant on HotpotQA (n=100), the HotpotQA
yes/no questions (all 17), PubMedQA and MMLU-evidence (n=50 each) through the
experiment runner, with the model loaded once and the cache off, and writes
``results/quality_<model_tag>.md`` (+ ``.json``, ``.png``) and
``results/quality.md``, the index of every model's report.

    python -m lab.quality                                       # the embedded SmolLM2-135M
    python -m lab.quality --llm llamacpp:/models/qwen2.5-coder-0.5b-instruct.gguf
    python -m lab.quality --llm llamacpp:M.gguf --datasets hotpotqa --only vanilla_rag self_rag
    python -m lab.quality --llm llamacpp:M.gguf --print-commands   # the same runs by hand
    python -m lab.quality --llm llamacpp:M.gguf --report-only      # report what is on disk

Every (dataset, variant) run is a normal run directory,
``results/runs/quality/<model_tag>/<dataset>/<variant>/``: an interrupted
benchmark resumes question by question, a finished run is read back, and a
run directory made by hand with the command ``--print-commands`` shows is
picked up the same way. ``--fresh`` discards the selected runs first. Run it
on an otherwise idle machine: times are per question.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from lab.machine import machine
from lab.quality_carry import carry_over, read_previous
from lab.quality_critique import evidence_rows, gold_titles, support_rows
from lab.quality_kept import has_predictions, predictions
from lab.quality_report import glance_text, index, load_reports, plot, render, with_glance
from lab.quality_runs import (
    BASELINE,
    DATA,
    DATASET_LIST,
    DATASETS,
    DEFAULT_VARIANTS,
    PLAIN,
    ROOT,
    VARIANT_LIST,
    VARIANTS,
    command_line,
    discard,
    ensure_run,
    file_sha256,
    load_cfg,
    measure_then_report,
    missing_configs,
    model_file,
    model_tag,
    repo_path,
    run_dir,
    say,
    selection,
    settings_remark,
    target_n,
)
from lab.quality_stats import compare_to, grounding, read_predictions, summarize_rows

HERE = Path(__file__).resolve().parent
METRICS = {"hotpotqa": ("em", "f1", "match"), "hotpotqa_yesno": ("em", "f1"), "hotpotqa_mix": ("em", "f1"),
           "hotpotqa_mix_next": ("em", "f1"),
           "hotpotqa_next": ("em", "f1", "match"), "pubmedqa": ("em", "f1", "accuracy"), "mmlu_evidence": ("em", "f1", "accuracy")}
# Files whose results-at-a-glance block (between the glance markers) is these reports' own matrix.
GLANCE_FILES = (ROOT / "README.md", ROOT / "docs" / "results.md")


class Backend:
    """The one LLM backend every run shares, built on first use."""

    def __init__(self) -> None:
        self.llm: Any = None

    def __call__(self, cfg: Any) -> Any:
        if self.llm is None:
            from selfrag.assemble import build_backend

            self.llm = build_backend(cfg, use_cache=False)
        return self.llm

    async def aclose(self) -> None:
        if self.llm is not None:
            await self.llm.aclose()


# -- reading everything back ---------------------------------------------------------------


def _wanted(args: Any, name: str, n: int | None) -> list[str]:
    key = (name, n)
    if key not in args.selections:
        args.selections[key] = selection(load_cfg(DATASETS[name], VARIANTS[BASELINE], n, args.llm))
    return args.selections[key]


def collect(args: Any) -> dict[str, Any]:
    """Every row of this model's report, read from the run directories on disk."""
    rows: list[dict[str, Any]] = []
    hotpot: dict[str, list[dict[str, Any]]] = {}
    for dataset in DATASET_LIST:
        if not dataset.path.exists():
            continue
        present = [v for v in VARIANT_LIST if has_predictions(run_dir(args.out, args.tag, dataset, v))]
        if not present:
            continue
        wanted = _wanted(args, dataset.name, target_n(dataset, args))
        runs = {v.name: read_predictions(predictions(run_dir(args.out, args.tag, dataset, v)), wanted)
                for v in present}
        if dataset.name == "hotpotqa":
            hotpot = runs
        for v in present:
            recs, dest = runs[v.name], run_dir(args.out, args.tag, dataset, v)
            row = summarize_rows(recs, target_n=len(wanted), metrics=METRICS[dataset.name],
                                 yes_no=dataset.name == "hotpotqa_yesno")
            row.update(dataset=dataset.name, variant=v.name, note=v.note, headline=dataset.metric,
                       model=next((r.get("model") for r in recs if r.get("model")), ""),
                       remark=args.remarks.get((dataset.name, v.name))
                       or settings_remark(dataset, v, target_n(dataset, args), args.llm, dest),
                       run_dir=repo_path(dest))
            if dataset.name in ("hotpotqa", "hotpotqa_next", "hotpotqa_mix", "hotpotqa_mix_next"):
                row["grounding"] = grounding(recs)
            baseline = runs.get(BASELINE) if v.name != BASELINE else None
            row["vs_baseline"] = compare_to(recs, baseline, dataset.metric) if baseline else None
            plain = runs.get(PLAIN) if v.name != PLAIN else None
            row["vs_plain"] = compare_to(recs, plain, dataset.metric) if plain else None
            if dataset.name.startswith("hotpotqa_mix") and baseline:
                row["truthful_vs_baseline"] = compare_to(recs, baseline, "truthfulness")
            rows.append(row)
    critics = evidence_rows(hotpot, gold_titles(DATASETS["hotpotqa"].path)) + support_rows(hotpot)
    data = {"environment": args.env, "args": args.recorded, "rows": rows, "critics": critics}
    return carry_over(data, read_previous(args.out / f"quality_{args.tag}.json"))


def write_reports(args: Any) -> Path:
    data = collect(args)
    base = args.out / f"quality_{args.tag}"
    base.with_name(base.name + ".json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    text = render(data)
    png = base.with_name(base.name + ".png")
    if plot(data["rows"], png, args.tag):
        text = text.rstrip("\n") + f"\n\n![HotpotQA F1 against tokens per question]({png.name})\n"
    base.with_name(base.name + ".md").write_text(text, encoding="utf-8")
    reports = load_reports(args.out)
    (args.out / "quality.md").write_text(index(reports), encoding="utf-8")
    if args.out.resolve() == (HERE / "results").resolve():
        # The results-at-a-glance blocks are these reports' own matrix, never typed by hand.
        block = glance_text(reports)
        for path in GLANCE_FILES:
            text = with_glance(path.read_text(encoding="utf-8"), block) if path.is_file() else None
            if text is not None:
                path.write_text(text, encoding="utf-8")
    return base.with_name(base.name + ".md")


# -- running --------------------------------------------------------------------------------


def selected(args: Any) -> list[tuple[Any, Any]]:
    pairs = []
    for name in args.datasets:
        dataset = DATASETS[name]
        if not dataset.path.exists():
            say(f"{name}: {dataset.path} not found, skipped")
            continue
        pairs += [(dataset, VARIANTS[v]) for v in (args.only or DEFAULT_VARIANTS)]
    return pairs


def _line(dataset: Any, variant: Any, rows: list[dict[str, Any]], wanted: list[str]) -> str:
    s = summarize_rows(rows, target_n=len(wanted), metrics=(dataset.metric,),
                       yes_no=dataset.name == "hotpotqa_yesno")
    value = s["metrics"].get(dataset.metric)
    return (f"{dataset.name} / {variant.name}: n={s['n']}/{len(wanted)} {dataset.metric}="
            f"{'-' if value is None else f'{value:.3f}'} calls/q={s['llm_calls_per_q'] or 0:.1f} "
            f"tokens/q={s['tokens_per_q'] or 0:.0f} s/q={s['seconds_per_q'] or 0:.1f} malformed={s['malformed']}")


async def measure(args: Any) -> None:
    if args.report_only:
        return
    backend = Backend()
    try:
        for dataset, variant in selected(args):
            say(f"{dataset.name} / {variant.name} ...")
            state = await ensure_run(dataset, variant, args, backend)
            if state.note:
                args.remarks[(dataset.name, variant.name)] = state.note
            say(_line(dataset, variant, state.rows, state.wanted))
            write_reports(args)
    finally:
        await backend.aclose()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llm", default=None, help="backend spec, e.g. llamacpp:PATH.gguf (default: the embedded model)")
    parser.add_argument("--n-hotpot", type=int, default=100, help="HotpotQA questions (default 100)")
    parser.add_argument("--n-other", type=int, default=50, help="PubMedQA and MMLU-evidence questions (default 50)")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--only", nargs="+", choices=list(VARIANTS),
                        help=f"run only these variants (default: {' '.join(DEFAULT_VARIANTS)})")
    parser.add_argument("--fresh", action="store_true", help="discard the selected runs first")
    parser.add_argument("--report-only", action="store_true", help="run nothing; report what is on disk")
    parser.add_argument("--print-commands", action="store_true",
                        help="print the `selfrag run` command of every selected run and exit")
    parser.add_argument("--progress", action="store_true", help="per-question progress bars")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    for flag in ("n_hotpot", "n_other"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1")
    return args


def environment(args: Any) -> dict[str, Any]:
    env = machine()
    path = model_file(args.llm)
    sha = file_sha256(path)
    if sha is None and path is not None:
        # The model file is not on this machine (a report-only run elsewhere): the committed
        # report's checksum still names the model its runs were measured with.
        old = (read_previous(args.out / f"quality_{args.tag}.json") or {}).get("environment") or {}
        sha = old.get("model_sha256") if old.get("model_path") == str(path) else None
    return {
        "date": env["date"], "platform": env["platform"], "cpus": env["cpu_count"],
        "usable_cpus": env["usable_cpus"], "python": env["python"], "commit": env["commit"],
        "llm": args.llm or "embedded", "model_tag": args.tag,
        "model": path.name if path else args.tag,
        "model_path": str(path) if path else None,
        "model_sha256": sha,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not DATA.is_dir():
        print(f"quality: skipped, benchmark data not found at {DATA}")
        return 0
    missing = missing_configs()
    if missing:
        print(f"quality: missing configs: {', '.join(missing)}", file=sys.stderr)
        return 1
    args.tag = model_tag(args.llm)
    args.out = args.out.resolve()
    if args.print_commands:
        for dataset, variant in selected(args):
            print(command_line(args.out, args.tag, dataset, variant, target_n(dataset, args), args.llm))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    args.selections, args.remarks = {}, {}
    args.recorded = {k: getattr(args, k) for k in ("n_hotpot", "n_other", "datasets", "only")}
    if args.fresh and not args.report_only:
        for dataset, variant in selected(args):
            discard(run_dir(args.out, args.tag, dataset, variant))
    args.env = environment(args)
    code, report = measure_then_report(lambda: measure(args), lambda: write_reports(args))
    print(f"wrote {report} and {args.out / 'quality.md'}")
    return code


if __name__ == "__main__":
    sys.exit(main())
