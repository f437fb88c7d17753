"""selfrag critic: fit a model's reflection heads (relevance, support, sufficiency, confidence), or show its fit."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

NAME = "critic"
HELP = "fit a model's critic on labelled questions (its reflection heads), or show the fit a model uses"
ORDER = 58
# Two kinds of corpus: two-hop questions over ten titled Wikipedia paragraphs, and one-hop questions
# over a single untitled abstract; fitted on one kind, the sufficiency floor misreads the other.
DEFAULT_DATA = ("sample:hotpotqa_fit", "sample:pubmedqa_fit")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ..options import OPTIONS

    sub = parser.add_subparsers(dest="action", required=True, metavar="{fit,show}")
    fit = sub.add_parser("fit", help="read labelled questions with self_rag, fit the heads, write the fit where "
                         "self_rag finds it (by the model file's SHA-256)")
    OPTIONS["llm"].add(fit, NAME)
    fit.add_argument("--data", action="append", metavar="FILE",
                     help="labelled questions: HotpotQA records (with supporting_facts), PubMedQA's "
                     "ori_pqal.json, or JSONL with answers, contexts and supporting_titles (docs/evaluation.md); "
                     "repeat to fit on several; default: the shipped fitting samples, " + " and ".join(DEFAULT_DATA))
    fit.add_argument("--limit", type=int, metavar="N", help="read only the first N questions of each --data")
    fit.add_argument("--remove-gold", type=float, default=0.5, metavar="SHARE",
                     help="drop the gold paragraphs of about this share of questions, so the sufficiency head "
                     "sees passages that do not hold the answer (default 0.5)")
    fit.add_argument("--out", metavar="FILE", help="where to write the fit (default: the critic folder, "
                     "$SELFRAG_CRITIC_DIR or ~/.cache/selfrag/critics, as <sha256>.json)")
    fit.add_argument("--no-progress", action="store_true", help="no progress bar")
    OPTIONS["set"].add(fit, NAME)
    show = sub.add_parser("show", help="which fit a model uses, and how it measured when it was fitted")
    OPTIONS["llm"].add(show, NAME)
    show.add_argument("--json", action="store_true", help="print the fit's report as JSON")


def _dataset(data: str) -> str:
    """The loader a --data value needs: a sample's own, HotpotQA records, PubMedQA's JSON object, else
    selfrag's JSONL."""
    from ...data.shipped import PREFIX, get_sample
    from ...errors import DataError

    if data.startswith(PREFIX):
        return get_sample(data[len(PREFIX):]).dataset
    path = Path(data).expanduser()
    if not path.is_file():
        raise DataError(f"--data {data}: no such file; give a JSONL file of labelled questions")
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if line.strip():
                try:
                    first = json.loads(line)
                except ValueError:
                    # one JSON document: an array (the official HotpotQA format) or PubMedQA's object
                    return "pubmedqa" if line.lstrip().startswith("{") else "hotpotqa"
                return "hotpotqa" if isinstance(first, dict) and "supporting_facts" in first else "jsonl"
    raise DataError(f"--data {data}: the file is empty")


def _configs(args: argparse.Namespace) -> list:
    """One reading config per --data."""
    from ...errors import DataError
    from ...eval.critic_read import reading_config

    if args.limit is not None and args.limit < 1:
        raise DataError(f"--limit {args.limit}: give at least 1 question")
    if not 0 <= args.remove_gold <= 1:
        raise DataError(f"--remove-gold {args.remove_gold}: give a share between 0 and 1")
    return [reading_config(args.llm, _dataset(data), data, args.remove_gold, args.overrides)
            for data in args.data or DEFAULT_DATA]


def _fit(args: argparse.Namespace) -> int:
    from ...assemble import build_backend, build_method
    from ...errors import ConfigError
    from ...eval.critic_fit import fit_critic, summary_lines
    from ...eval.critic_read import LABELS, Reader, hidden_layers, load_readings, read_all
    from ...eval.datasets import load_dataset
    from ...methods.critique.fits import fit_path, forget, model_sha256
    from ...version import __version__

    configs = _configs(args)
    datasets = [load_dataset(cfg.data, limit=args.limit) for cfg in configs]  # every --data checked first
    llm = build_backend(configs[0])
    sha = model_sha256(llm)
    if sha is None:
        raise ConfigError(f"{llm.spec}: a critic is fitted for a local model file (llamacpp:PATH); an API model "
                          "uses the prompted critic")
    out = Path(args.out).expanduser() if args.out else fit_path(sha)
    layers = hidden_layers(llm)
    records: list[dict] = []

    async def read() -> None:
        try:
            for data, cfg, dataset in zip(args.data or DEFAULT_DATA, configs, datasets, strict=True):
                readings = out.with_name(f"{out.stem}.{_data_key(cfg.data)}.readings.jsonl")
                reader = Reader(build_method(cfg, llm, None), layers)
                bar = _progress(args.no_progress, len(dataset.questions))
                now = await read_all(reader, dataset.questions, readings, bar)
                bar(None, None, None)
                print(f"read {now} questions now ({len(dataset.questions) - now} read before, kept in {readings})")
                ids = {q.id for q in dataset.questions}
                records.extend({**r, "kind": str(data)} for r in load_readings(readings) if r["id"] in ids)
        finally:
            await llm.aclose()

    asyncio.run(read())
    # Each --data counts as much as any other, however many questions it holds (a few questions of a second
    # kind beside many of the first would otherwise barely move the heads or the sufficiency floor).
    fit = fit_critic(records, model=str(llm.model), sha256=sha, layers=layers, balance=True,
                     meta={"data": [str(d) for d in args.data or DEFAULT_DATA], "remove_gold": args.remove_gold,
                           "balanced": True, "labels": LABELS, "selfrag": __version__,
                           "recorded_layers": list(layers)})
    fit.write(out)
    forget()
    print(f"wrote {out} ({len(records)} questions)")
    for line in summary_lines(fit):
        print(f"  {line}")
    return 0


def _data_key(data) -> str:
    """What the readings file is named by: the data file's SHA-256 and the share of gold removed."""
    from ...data.shipped import resolve
    from ...llm.model_files import file_sha256

    path, _ = resolve(data.dataset, data.path)
    return f"{file_sha256(path)[:12]}-g{float(data.remove_gold):g}"


def _progress(off: bool, total: int):
    """A callback for read_all: a tqdm bar on stderr with the share of right answers so far."""
    from tqdm import tqdm

    state: dict = {"bar": None, "right": 0, "seen": 0}

    def tick(done: int | None, n: int | None, record: dict | None) -> None:
        if done is None:
            if state["bar"] is not None:
                state["bar"].close()
            return
        if state["bar"] is None:
            state["bar"] = tqdm(total=n, initial=done, desc="reading", unit="q", file=sys.stderr, disable=off,
                                dynamic_ncols=True)
            return
        state["bar"].update(1)
        if record is not None and record.get("right") is not None:
            state["seen"] += 1
            state["right"] += bool(record["right"])
            state["bar"].set_postfix_str(f"right {state['right'] / state['seen']:.0%}")

    return tick


def _show(args: argparse.Namespace) -> int:
    from ...assemble import build_backend
    from ...config import load_config
    from ...eval.critic_fit import summary_lines
    from ...methods.critique.fits import load_fit

    cfg = load_config(None, [("llm.spec", args.llm, "--llm")] if args.llm else [], base={"cache": {"enabled": False}})
    llm = build_backend(cfg)
    fit, origin = load_fit(llm)
    if args.json:
        print(json.dumps({"origin": origin, "model": fit.model, "sha256": fit.sha256, "threshold": fit.threshold,
                          "layers": list(fit.layers), "meta": fit.meta,
                          "heads": {k: h.report for k, h in fit.heads.items()}}, indent=2))
        return 0
    print(f"{llm.spec}: {origin} (fitted on {fit.model or 'several models'}, {fit.meta.get('questions', '?')} "
          "questions)")
    for line in summary_lines(fit):
        print(f"  {line}")
    return 0


def run(args: argparse.Namespace) -> int:
    return _fit(args) if args.action == "fit" else _show(args)
