"""selfrag router: fit adaptive_rag's router on runs of its strategies, or show the router a model uses."""

from __future__ import annotations

import argparse
import json

NAME = "router"
HELP = "fit adaptive_rag's router on runs of no_retrieval, vanilla_rag and ircot, or show the router a model uses"
ORDER = 59


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..options import OPTIONS

    sub = parser.add_subparsers(dest="action", required=True, metavar="{fit,show}")
    fit = sub.add_parser("fit", help="label each question with the cheapest strategy that answered it right, fit "
                         "the router on the question's text features, write it as JSON")
    fit.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                     help="one run directory of `selfrag run` per strategy, over the same questions")
    fit.add_argument("--out", required=True, metavar="FILE",
                     help="the JSON file to write (name it in adaptive_rag.router, or write it to the router "
                          "folder as <sha256>.json: `selfrag router show --llm SPEC` prints where)")
    fit.add_argument("--json", action="store_true", help="print the fit's report as JSON")
    show = sub.add_parser("show", help="which router adaptive_rag uses for a model, its rule or how it measured")
    OPTIONS["llm"].add(show, NAME)
    show.add_argument("--router", metavar="FILE", help="show this router fit file instead")
    show.add_argument("--json", action="store_true", help="print the router as JSON")


def _fit(args: argparse.Namespace) -> int:
    from ...eval.router_fit import fit_runs

    router, report = fit_runs(args.run_dirs, args.out)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    alone = ", ".join(f"{s} F1 {r['f1']:.3f} at {r['calls']:.1f} calls" for s, r in report["alone"].items())
    oof, oracle = report["routed_out_of_fold"], report["oracle"]
    shares = ", ".join(f"{s} {v:.0%}" for s, v in oof["shares"].items())
    total = report.get("questions", report["n"])
    print(f"wrote {args.out}: {total} questions, {report['n']} of them fitted on (the rest every strategy got "
          f"wrong alike), labels {report['labels']}, L2 {report['l2']}")
    print(f"alone: {alone}")
    print(f"routed (out of fold): F1 {oof['f1']:.3f} at {oof['calls']:.1f} calls, sent to {shares}; "
          f"accuracy {report['cv_accuracy']:.3f} (the most common label alone: {report['majority_accuracy']:.3f})")
    print(f"oracle (always the label): F1 {oracle['f1']:.3f} at {oracle['calls']:.1f} calls")
    return 0


def _show(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ...assemble import build_backend
    from ...config import load_config
    from ...methods.catalog.adaptive_rag import find_router, model_sha256, router_dir
    from ...reflection.router import Router

    if args.router:
        router, origin, where = Router.read(args.router), str(Path(args.router).expanduser()), None
    else:
        cfg = load_config(None, [("llm.spec", args.llm, "--llm")] if args.llm else [],
                          base={"cache": {"enabled": False}})
        llm = build_backend(cfg)
        sha = model_sha256(llm)
        router, origin = find_router(str(llm.spec), sha)
        where = None if sha is None else str(router_dir() / f"{sha}.json")
    if args.json:
        print(json.dumps({"origin": origin, "fit_path": where, **router.as_dict()}, indent=2))
        return 0
    kind = "fitted" if router.fitted else "not fitted"
    print(f"{origin} ({kind}{', on ' + router.model if router.model else ''}): strategies {', '.join(router.classes)}")
    if router.rule:
        print(f"  rule: {router.rule}")
    report = router.meta.get("report") or {}
    if "routed_out_of_fold" in report:
        oof = report["routed_out_of_fold"]
        print(f"  routed out of fold: F1 {oof['f1']:.3f} at {oof['calls']:.1f} calls over {report.get('questions', report['n'])} questions")
    if where is not None:
        print(f"  a fit written to {where} is this model's router")
    return 0


def run(args: argparse.Namespace) -> int:
    return _fit(args) if args.action == "fit" else _show(args)
