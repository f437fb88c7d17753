"""The relatives users pick instead: IRCoT and an Adaptive-RAG router beside Self-RAG (issue 69).

    python -m lab.relatives --llm llamacpp:/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
    python -m lab.relatives --llm llamacpp:M.gguf --settings hotpotqa open_bm25 --only ircot adaptive_rag
    python -m lab.relatives --llm llamacpp:M.gguf --router lab/results/relatives_router_M.json   # no pool runs
    python -m lab.relatives --llm llamacpp:M.gguf --print-commands    # the same runs by hand
    python -m lab.relatives --llm llamacpp:M.gguf --report-only       # report what is on disk

First the router: ``no_retrieval``, ``vanilla_rag`` and ``ircot`` answer the
fitting pool (``../shared/data/hotpotqa/hotpotqa_dev_pool_980.jsonl``, in no
evaluation sample; ``--n-pool``), and ``selfrag router fit`` fits
``adaptive_rag``'s router on their answers (``results/relatives_router_<model>.json``).
Then every method (``vanilla_rag``, ``vanilla_rag_evidence``, the default
``self_rag``, ``self_corrective``, ``ircot``, ``adaptive_rag`` with that router)
answers four settings:

* ``hotpotqa`` and ``hotpotqa_next``: HotpotQA dev questions 0-99 and 200-299,
  each over its own 10 paragraphs (the quality benchmark's own sets: runs it
  already made for this model are read back, not made again);
* ``open_bm25`` and ``open_hybrid``: questions 0-99 over one open corpus,
  every paragraph of the 500 shared HotpotQA questions once (id = title;
  ``runs/relatives/open/corpus.jsonl``), read through ``data.corpus`` with
  BM25 or hybrid retrieval (the hybrid setting needs the dense extra).

Each row: F1 with its paired bootstrap interval against
``vanilla_rag_evidence``, recall of the gold paragraphs among everything
retrieved, calls, tokens and seconds per question, and for ``adaptive_rag``
the share of questions routed to each strategy. Every run is a normal,
resumable run directory under ``results/runs/quality/<model>/<setting>/<method>/``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from lab.machine import machine
from lab.quality import Backend
from lab.quality_kept import has_predictions, predictions
from lab.quality_runs import (
    BASELINE,
    DATA,
    DATASETS,
    VARIANTS,
    Dataset,
    Variant,
    command_line,
    discard,
    ensure_run,
    load_cfg,
    measure_then_report,
    model_tag,
    repo_path,
    run_dir,
    say,
    selection,
    target_n,
)
from lab.quality_stats import compare_to, read_predictions, summarize_rows
from lab.relatives_report import against_strategies, recall, recall_vs, render, routed

HERE = Path(__file__).resolve().parent
HOTPOT = DATA / "hotpotqa" / "hotpotqa_dev_distractor_500.jsonl"
POOL = Dataset("hotpotqa_pool", "hotpotqa", DATA / "hotpotqa" / "hotpotqa_dev_pool_980.jsonl", "f1", "other",
               "the fitting pool: 980 HotpotQA dev questions in no evaluation sample, each over its own 10 paragraphs")
STRATEGY_VARIANTS = ("no_retrieval", "vanilla_rag", "ircot")  # the strategies adaptive_rag routes to
METHODS = ("no_retrieval", "vanilla_rag", "vanilla_rag_evidence", "self_rag", "self_corrective", "ircot", "adaptive_rag")
IRCOT = Variant("ircot", "ircot.yaml", note="one reasoning sentence per step as the next query; the passages reader")
SETTINGS = ("hotpotqa", "hotpotqa_next", "open_bm25", "open_hybrid")


def open_dir(out: Path) -> Path:
    return out / "runs" / "relatives" / "open"


def open_setting(name: str, retriever: str, out: Path) -> Dataset:
    folder = open_dir(out)
    return Dataset(name, "jsonl", folder / "questions.jsonl", "f1", "hotpot",
                   f"HotpotQA dev questions (first {{n}}) over one {retriever} index of every paragraph of the "
                   "500 shared questions (data.corpus)",
                   (f"data.corpus={folder / 'corpus.jsonl'}", f"retrieval.method={retriever}"))


def settings(out: Path) -> dict[str, Dataset]:
    return {"hotpotqa": DATASETS["hotpotqa"], "hotpotqa_next": DATASETS["hotpotqa_next"],
            "open_bm25": open_setting("open_bm25", "bm25", out),
            "open_hybrid": open_setting("open_hybrid", "hybrid", out)}


def variants(router: Path) -> dict[str, Variant]:
    adaptive = Variant("adaptive_rag", "adaptive_rag.yaml", (f"adaptive_rag.router={router}",),
                       "routed by the router fitted on the pool's no_retrieval, vanilla_rag and ircot answers")
    return {**{v: VARIANTS[v] for v in METHODS if v in VARIANTS}, "ircot": IRCOT, "adaptive_rag": adaptive}


# -- the open corpus ------------------------------------------------------------------------


def paragraphs(record: dict[str, Any]) -> list[tuple[str, str]]:
    """(title, text) of each paragraph of a HotpotQA record (the shared file's dict form, or the official lists)."""
    context = record.get("context") or {}
    if isinstance(context, dict):
        pairs = zip(context.get("title") or [], context.get("sentences") or [], strict=False)
    else:
        pairs = ((c[0], c[1]) for c in context if isinstance(c, list) and len(c) == 2)
    return [(str(title), "".join(sentences).strip()) for title, sentences in pairs]


def gold(record: dict[str, Any]) -> list[str]:
    facts = record.get("supporting_facts") or {}
    titles = facts.get("title") if isinstance(facts, dict) else [f[0] for f in facts]
    return list(dict.fromkeys(str(t) for t in titles or []))


def build_open_corpus(out: Path, source: Path = HOTPOT) -> tuple[int, int]:
    """Write the open corpus (every paragraph once, id = title) and the questions without their contexts;
    (paragraphs, questions). Written once: a file already there is kept, so runs keep their corpus."""
    folder = open_dir(out)
    corpus, questions = folder / "corpus.jsonl", folder / "questions.jsonl"
    records = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    if corpus.is_file() and questions.is_file():
        return sum(1 for _ in corpus.open(encoding="utf-8")), len(records)
    folder.mkdir(parents=True, exist_ok=True)
    seen: dict[str, str] = {}
    for record in records:
        for title, text in paragraphs(record):
            if text:
                seen.setdefault(title, text)  # a title's paragraph is the same in every question that has it
    corpus.write_text("".join(json.dumps({"id": t, "title": t, "text": x}) + "\n" for t, x in seen.items()),
                      encoding="utf-8")
    questions.write_text("".join(json.dumps({
        "id": r.get("id") or r.get("_id"), "question": r["question"], "answers": [r["answer"]],
        "type": r.get("type"), "level": r.get("level"), "supporting_titles": gold(r)}) + "\n" for r in records),
        encoding="utf-8")
    return len(seen), len(records)


# -- the router -----------------------------------------------------------------------------


async def fit_router(args: Any, backend: Backend) -> dict[str, Any] | None:
    """Answer the pool with the three strategies, then fit the router; its report (None: nothing to fit on)."""
    from selfrag.eval.router_fit import fit_runs

    if not POOL.path.is_file():
        say(f"the fitting pool {POOL.path} is missing: no router fitted")
        return None
    dirs = []
    for name in STRATEGY_VARIANTS:
        variant = IRCOT if name == "ircot" else VARIANTS[name]
        if not args.report_only:
            say(f"pool / {name} ...")
            await ensure_run(POOL, variant, args, backend)
        dest = run_dir(args.out, args.tag, POOL, variant)
        if has_predictions(dest):
            predictions(dest)
            dirs.append(dest)
    if len(dirs) < 2:
        return None
    _, report = fit_runs(dirs, args.router)
    say(f"router: {report.get('questions', report['n'])} pool questions ({report['n']} told the strategies apart), labels {report['labels']}, out-of-fold accuracy "
        f"{report['cv_accuracy']:.3f}, routed F1 {report['routed_out_of_fold']['f1']:.3f}")
    return report


def package_router(router_file: Path) -> Path:
    """Ship the embedded model's router fit in the package (``reflection/routers/<sha256>.json``), its run
    directories named relative to the repository."""
    from selfrag.llm.model_files import default_model_path, file_sha256
    from selfrag.reflection.router import Router

    router = Router.read(router_file)
    runs = router.meta.get("fitted_on", {}).get("runs", [])
    for run in runs:
        run["run_dir"] = repo_path(Path(run["run_dir"]))
    dest = HERE.parent / "src" / "selfrag" / "reflection" / "routers" / f"{file_sha256(default_model_path())}.json"
    router.write(dest)
    return dest


# -- reading back ---------------------------------------------------------------------------


def collect(args: Any) -> dict[str, Any]:
    rows, verdicts = [], {}
    for name in args.settings:
        dataset = settings(args.out)[name]
        if not dataset.path.is_file():
            continue
        wanted = selection(load_cfg(dataset, VARIANTS[BASELINE], target_n(dataset, args), args.llm))
        runs = {}
        for v in args.variants.values():
            dest = run_dir(args.out, args.tag, dataset, v)
            if has_predictions(dest):
                runs[v.name] = read_predictions(predictions(dest), wanted)
        for name_v, recs in runs.items():
            row = summarize_rows(recs, target_n=len(wanted), metrics=("em", "f1"))
            baseline = runs.get(BASELINE) if name_v != BASELINE else None
            row.update(setting=name, method=name_v, note=args.variants[name_v].note, recall=recall(recs),
                       vs_baseline=compare_to(recs, baseline, "f1") if baseline else None,
                       recall_vs_vanilla=recall_vs(recs, runs["vanilla_rag"])
                       if name_v != "vanilla_rag" and "vanilla_rag" in runs else None,
                       routed=routed(recs) if name_v == "adaptive_rag" else None,
                       run_dir=repo_path(run_dir(args.out, args.tag, dataset, args.variants[name_v])))
            rows.append(row)
        verdicts[name] = against_strategies(runs)
    report = args.router_report
    if report is None and args.router.is_file():  # a router given as it is: its own fitting report
        from selfrag.reflection.router import Router

        report = Router.read(args.router).meta.get("report")
    return {"environment": args.env, "router": report, "router_file": repo_path(args.router),
            "settings": {n: settings(args.out)[n].note.format(n=args.n_hotpot) for n in args.settings}, "rows": rows,
            "adaptive": verdicts}


def write_reports(args: Any) -> Path:
    data = collect(args)
    # Named by string, not with_suffix: a model tag such as qwen2.5-coder-1.5b has dots of its own.
    (args.out / f"relatives_{args.tag}.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    report = args.out / f"relatives_{args.tag}.md"
    report.write_text(render(data), encoding="utf-8")
    return report


# -- running --------------------------------------------------------------------------------


def selected(args: Any) -> list[tuple[Dataset, Variant]]:
    from selfrag.extras import missing

    pairs = []
    for name in args.settings:
        if name == "open_hybrid" and missing("dense"):
            say("open_hybrid: needs the dense extra (pip install 'selfrag[dense]'), skipped")
            continue
        pairs += [(settings(args.out)[name], v) for v in args.variants.values() if v.name in args.only]
    return pairs


async def measure(args: Any) -> None:
    backend = Backend()
    try:
        if args.fit:
            args.router_report = await fit_router(args, backend)
        if args.report_only:
            return
        if not args.router.is_file() and "adaptive_rag" in args.only:
            say(f"no router at {args.router}: adaptive_rag is left out (fit one on the pool, or give --router)")
            args.only = [m for m in args.only if m != "adaptive_rag"]
        for dataset, variant in selected(args):
            say(f"{dataset.name} / {variant.name} ...")
            await ensure_run(dataset, variant, args, backend)
            write_reports(args)
    finally:
        await backend.aclose()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llm", default=None, help="backend spec, e.g. llamacpp:PATH.gguf (default: the embedded model)")
    parser.add_argument("--n-hotpot", type=int, default=100, help="questions per setting (default 100)")
    parser.add_argument("--n-pool", type=int, default=980, help="fitting-pool questions the router is fitted on")
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument("--only", nargs="+", default=list(METHODS), choices=METHODS, help="run only these methods")
    parser.add_argument("--router", type=Path, default=None,
                        help="a router fit to use as it is (default: fit one on the pool, "
                             "results/relatives_router_<model>.json)")
    parser.add_argument("--fresh", action="store_true", help="discard the selected runs first (never the pool's)")
    parser.add_argument("--report-only", action="store_true", help="run nothing; report what is on disk")
    parser.add_argument("--package", action="store_true",
                        help="ship the embedded model's router (fitted on the pool) in the package, then report")
    parser.add_argument("--print-commands", action="store_true", help="print every selected `selfrag run` and exit")
    parser.add_argument("--progress", action="store_true", help="per-question progress bars")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    for flag in ("n_hotpot", "n_pool"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not HOTPOT.is_file():
        print(f"relatives: skipped, benchmark data not found at {HOTPOT}")
        return 0
    args.tag = model_tag(args.llm)
    args.out = args.out.resolve()
    args.n_other = args.n_pool  # the pool's size, as the quality runs' helpers read it
    args.fit = args.router is None
    args.router = (args.router or args.out / f"relatives_router_{args.tag}.json").resolve()
    args.variants = variants(args.router)
    args.router_report = None
    build_open_corpus(args.out)
    if args.print_commands:
        pool = [(POOL, IRCOT if v == "ircot" else VARIANTS[v]) for v in STRATEGY_VARIANTS] if args.fit else []
        for dataset, variant in pool + selected(args):
            print(command_line(args.out, args.tag, dataset, variant, target_n(dataset, args), args.llm))
        if args.fit:
            dirs = " ".join(repo_path(run_dir(args.out, args.tag, POOL, VARIANTS.get(v, IRCOT)))
                            for v in STRATEGY_VARIANTS)
            print(f"selfrag router fit {dirs} --out {repo_path(args.router)}")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    if args.fresh and not args.report_only:
        for dataset, variant in selected(args):
            discard(run_dir(args.out, args.tag, dataset, variant))
    env = machine()
    args.env = {"date": env["date"], "platform": env["platform"], "cpus": env["cpu_count"], "commit": env["commit"],
                "python": env["python"], "llm": args.llm or "embedded", "model": args.tag}
    if args.package and args.tag != "embedded":
        print("relatives: --package ships the embedded model's router only (leave out --llm)", file=sys.stderr)
        return 2
    code, report = measure_then_report(lambda: measure(args), lambda: write_reports(args))
    print(f"wrote {report}")
    if args.package:
        if not args.router.is_file():
            print(f"relatives: no router at {repo_path(args.router)} to package: fit it on the pool first",
                  file=sys.stderr)
            return 2
        print(f"packaged {repo_path(package_router(args.router))}")
    return code


if __name__ == "__main__":
    sys.exit(main())
