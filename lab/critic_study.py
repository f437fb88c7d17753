"""The fitted critic, measured (issue 68): fits on the pool, learning curves, each head on questions it never saw.

    python -m lab.critic_study --model qwen2.5-coder-1.5b-instruct [--model ...]

From the readings of ``lab.critic_reads`` (``results/runs/critic/<model>/``), no model call:

1. fits the critic on the fitting sets (:data:`FIT_SETS`: the HotpotQA pool and PubMedQA's training ids),
   as ``selfrag critic fit`` does, and writes it to ``results/critic_fits/<model>.json``;
2. a learning curve: fits on random subsets of them (100, 250, 500, all; five subsets each, all once)
   and measures each head on every evaluation set;
3. on each evaluation set, each head's AUROC and calibration error (ECE, 10 bins) beside what
   ``self_rag`` read before (relevance: the evidence prior; sufficiency and confidence: the packaged
   confidence rule and the sequence probability), with the 95% paired bootstrap interval of the
   difference (questions resampled);
4. sufficiency on the sets with gold removed: how often the answer's first line says the documents do
   not seem to hold it, on the gold-removed and the answerable questions, at the fitted floor;
   truthfulness (+1 right, 0 said so, -1 wrong) against always answering;
5. the answers' F1 against ``vanilla_rag_evidence``'s on the same questions (the quality benchmark's
   runs), and the risk-coverage curves (a plot).

Writes ``results/critic_<model>.md`` / ``.json`` / ``.png`` (a set with no readings here keeps the previous
report's row, marked). ``--package`` also writes the fits selfrag ships (``src/selfrag/reflection/fits/``):
the embedded model's (by its file's SHA-256) and ``default.json`` (the scalar heads over every model's
fitting readings: it serves any model without a fit).
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lab.critic_reads import models_read
from lab.critic_reads import readings as read
from lab.critic_report import RESAMPLES, carry, coverage, plot, render, write
from lab.machine import machine
from lab.quality_stats import paired_bootstrap, read_predictions
from selfrag.eval import critic_fit
from selfrag.eval.critic_fit import fit_critic, passage_rows, support_rows
from selfrag.eval.critic_read import LABELS
from selfrag.methods.critique.signals import support_values
from selfrag.reflection.confidence import ConfidenceModel, Signals
from selfrag.reflection.critic_fit import CriticFit
from selfrag.reflection.heads import auroc, ece

HERE = Path(__file__).resolve().parent
OUT = HERE / "results"
FITS = OUT / "critic_fits"
PACKAGE = HERE.parent / "src" / "selfrag" / "reflection" / "fits"
QUALITY = OUT / "runs" / "quality"
SETS = ("hotpotqa", "hotpotqa_next", "hotpotqa_mix", "hotpotqa_mix_next", "hotpotqa_yesno", "pubmedqa",
        "pubmedqa_test_mix", "mmlu_evidence")
# What a fit reads: the HotpotQA pool and the second kind of corpus (PubMedQA's training ids).
FIT_SETS = ("pool", "pubmedqa_pool")
# Each fitting set counts equally in the heads and the floor (False: each question once), as in the CLI.
BALANCE = True
CURVE, SUBSETS = (100, 250, 500), 5  # fitting sizes of the learning curve; random subsets of each

PACKAGED = ConfidenceModel.load(None)


def fitting(model: str, sets: Sequence[str] = FIT_SETS) -> list[dict[str, Any]]:
    """The fitting sets' readings, each record's ``kind`` its set (as ``selfrag critic fit`` tags each --data)."""
    return [{**r, "kind": name} for name in sets for r in read(model, name)]


def all_read(records: Sequence[dict[str, Any]], sets: Sequence[str] = FIT_SETS) -> bool:
    return {r["kind"] for r in records} == set(sets)  # records from fitting(): every one of sets read


def evaluation_sets(model: str, fitted: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Every evaluation set read for ``model``, less the questions a fit saw (the first PubMedQA ids mix
    the official training ids, which the second fitting set reads, with the test ids)."""
    seen = {r["id"] for r in fitted}
    return {name: recs for name in SETS if (recs := [r for r in read(model, name) if r["id"] not in seen])}


def fit_on(records: Sequence[dict[str, Any]], model: str, balance: bool = BALANCE) -> Any:
    return fit_critic(records, model=model, sha256="", layers=_layers(records), balance=balance)


# -- per-question items: what a head said, what self_rag read before, the label --------------------


def packaged_confidence(r: dict[str, Any]) -> float | None:
    x = r.get("readings") or {}
    if x.get("seq") is None:
        return None
    return PACKAGED.score(Signals(seq=x.get("seq"), p_true=x.get("p_true"), lift=x.get("lift"),
                                  contained=x.get("contained"), relevance=x.get("read_prior")))


def items(fit: Any, records: Sequence[dict[str, Any]]) -> dict[str, list[list[tuple]]]:
    """Per head, per question: ``(head probability, baseline 1, baseline 2, label)`` tuples."""
    out: dict[str, list[list[tuple]]] = {k: [] for k in ("relevance", "support", "sufficiency", "answerable",
                                                         "confidence")}
    rel, sup, suff, conf = (fit.head(n) for n in ("relevance", "support", "sufficiency", "confidence"))
    for r in records:
        rows, labels = passage_rows([r])
        if rel is not None:
            out["relevance"].append([(rel.probability(x), x["prior"], x["prior"], y)
                                     for x, y in zip(rows, labels, strict=True)])
        rows, labels = support_rows([r])
        if sup is not None:
            out["support"].append([(sup.probability(x), x["likelihood"], x["likelihood"], y)
                                   for x, y in zip(rows, labels, strict=True)])
        if r.get("answer") is None:
            continue
        readings, states = r.get("readings") or {}, _states(r)
        base = packaged_confidence(r)
        seq = (r.get("readings") or {}).get("seq")
        if suff is not None:
            p = suff.probability(readings, states)
            if r.get("sufficient") is not None:
                out["sufficiency"].append([(p, base, seq, bool(r["sufficient"]))])
            out["answerable"].append([(p, base, seq, bool(r["answerable"]))])
        if conf is not None and r.get("right") is not None:
            out["confidence"].append([(conf.probability(readings, states), base, seq, bool(r["right"]))])
    return out


def _states(r: dict[str, Any]) -> dict[str, dict[int, list[float]]]:
    from selfrag.reflection.heads import unpack_f16

    return {where: {int(k): unpack_f16(v, (-1,)).tolist() for k, v in layers.items()}
            for where, layers in (r.get("states") or {}).items()}


def _flat(groups: Sequence[Sequence[tuple]], col: int) -> tuple[list[float], list[bool]]:
    pairs = [(t[col], t[3]) for g in groups for t in g if t[col] is not None]
    return [p for p, _ in pairs], [y for _, y in pairs]


def ece_by_chance(probs: Sequence[float], draws: int = 1000, seed: int = 0) -> float | None:
    """The mean ECE a perfectly calibrated head would show with these probabilities on this many items:
    labels drawn from the probabilities themselves. An ECE near it is what chance leaves at this n."""
    if not probs:
        return None
    rng, p = np.random.default_rng(seed), np.asarray(probs, dtype=float)
    return float(np.mean([ece(p.tolist(), (rng.random(len(p)) < p).tolist()) for _ in range(draws)]))


def measure(groups: Sequence[Sequence[tuple]]) -> dict[str, Any]:
    probs, labels = _flat(groups, 0)  # the head's AUROC and ECE, the baselines' AUROC and paired intervals
    out = {"questions": len(groups), "n": len(probs), "positives": int(sum(labels)),
           "auroc": auroc(probs, labels), "ece": ece(probs, labels), "ece_if_calibrated": ece_by_chance(probs)}
    for col, name in ((1, "baseline"), (2, "baseline2")):
        out[f"{name}_auroc"] = auroc(*_flat(groups, col))
        out[f"{name}_interval"] = cluster_interval(groups, lambda g, c=col: _diff(g, c))
    return out


def _diff(groups: Sequence[Sequence[tuple]], col: int) -> float | None:
    a = auroc(*_flat(groups, 0))
    b = auroc(*_flat([[t for t in g if t[col] is not None] for g in groups], col))
    return None if a is None or b is None else a - b


def cluster_interval(groups: Sequence[Sequence[tuple]], stat: Callable, seed: int = 0) -> list[float] | None:
    """95% percentile interval of ``stat`` over questions resampled with replacement."""
    if len(groups) < 5:
        return None
    rng = random.Random(seed)
    values = []
    for _ in range(RESAMPLES):
        value = stat([groups[rng.randrange(len(groups))] for _ in groups])
        if value is not None:
            values.append(value)
    values.sort()
    return [round(values[int(0.025 * len(values))], 4), round(values[int(0.975 * len(values)) - 1], 4)] \
        if values else None


# -- the answer's first line on the sets with gold removed -----------------------------------------


def said(fit: Any, records: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Flag rates at the fitted floor and truthfulness against always answering."""
    head = fit.head("sufficiency")
    rows = [r for r in records if r.get("answer") is not None and r.get("right") is not None]
    if head is None or not rows:
        return None
    flagged = [head.probability(r.get("readings") or {}, _states(r)) < fit.threshold for r in rows]
    gone = [f for f, r in zip(flagged, rows, strict=True) if not r["answerable"]]
    kept = [f for f, r in zip(flagged, rows, strict=True) if r["answerable"]]
    answered = [1.0 if r["right"] else -1.0 for r in rows]
    truthful = [0.0 if f else a for f, a in zip(flagged, answered, strict=True)]
    return {"n": len(rows), "gold_removed": len(gone), "floor": fit.threshold,
            "flagged_gold_removed": _share(gone), "flagged_answerable": _share(kept),
            "truthful": float(np.mean(truthful)), "truthful_always": float(np.mean(answered)),
            "truthful_diff": paired_bootstrap(truthful, answered)}


def _share(flags: Sequence[bool]) -> float | None:
    return None if not flags else sum(flags) / len(flags)

# -- F1 against vanilla_rag_evidence -------------------------------------------------------------


def against_vanilla(model: str, name: str, records: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    path = QUALITY / model / name / "vanilla_rag_evidence"
    if not path.is_dir():
        return None
    try:
        from lab.quality_kept import predictions

        base = {r["id"]: r for r in read_predictions(predictions(path))}
    except (OSError, ValueError, KeyError):
        return None
    pairs = [(r["f1"], (base[r["id"]].get("metrics") or {}).get("f1")) for r in records
             if r.get("f1") is not None and r["id"] in base]
    pairs = [(a, b) for a, b in pairs if b is not None]
    if not pairs:
        return None
    mine, theirs = [a for a, _ in pairs], [b for _, b in pairs]
    return {"n": len(pairs), "f1": float(np.mean(mine)), "vanilla_f1": float(np.mean(theirs)),
            "diff": paired_bootstrap(list(mine), list(theirs))}


def seconds(records: Sequence[dict[str, Any]]) -> dict[str, float] | None:
    """Seconds per question of what the default does: the reading's time less the one-passage candidates
    it wrote for the study (their writing, which ran before the answer, and their scoring)."""
    own = []
    for r in records:
        steps = r.get("steps") or []
        writes = [s[1] for s in steps if s[0] == "generate"]
        scored = sum(s[1] for s in steps if s[0] == "select_likelihood")
        extra = (max(writes[:-1]) if len(writes) > 1 else 0.0) + scored if len(r.get("candidates") or []) > 1 else 0
        own.append(r["seconds"] - extra)
    return {"default": float(np.mean(own)), "reading": float(np.mean([r["seconds"] for r in records]))} if own else None


# -- the report --------------------------------------------------------------------------------


def model_report(model: str, fit_sets: Sequence[str] = FIT_SETS) -> dict[str, Any] | None:
    pool = fitting(model, fit_sets)
    if len(pool) < 20 or not all_read(pool, fit_sets):
        return None
    fit = fit_on(pool, model)
    FITS.mkdir(parents=True, exist_ok=True)
    fit.write(FITS / f"{model}.json")
    sets = evaluation_sets(model, pool)
    report: dict[str, Any] = {"model": model, "pool": len(pool), "fit_sets": {
        name: len(read(model, name)) for name in fit_sets}, "fit": {
        "threshold": fit.threshold, "layers": list(fit.layers), "meta": fit.meta,
        "heads": {k: h.report | {"hidden": None if h.hidden is None else h.hidden.label}
                  for k, h in fit.heads.items()}}, "sets": {}}
    for name, recs in sets.items():
        groups = items(fit, recs)
        report["sets"][name] = {
            "questions": len(recs),
            "heads": {head: measure(g) for head, g in groups.items() if g},
            "said": said(fit, recs) if any(not r["answerable"] for r in recs) else None,
            "said_answerable": said(fit, recs),
            "vanilla": against_vanilla(model, name, recs),
            "seconds": seconds(recs),
            "coverage": coverage(groups.get("confidence") or []),
        }
    report["sets"].update(carry(OUT / f"critic_{model}.json", report["sets"]))  # sets not read here: as measured
    report |= {"curve": learning_curve(pool, sets, model), "ablation": ablation(pool, sets, model),
               "selection": selection(fit, pool, sets)}
    return report


def without(records: Sequence[dict[str, Any]], drop: Sequence[str]) -> list[dict[str, Any]]:
    """The records with some answer readings removed (what a fit without their calls would see)."""
    return [{**r, "readings": {k: v for k, v in (r.get("readings") or {}).items() if k not in drop}} for r in records]


ABLATIONS = {"no P(True)": ("p_true",), "no lift": ("lift",), "neither (no extra call)": ("p_true", "lift")}


def ablation(pool: Sequence[dict[str, Any]], sets: dict[str, list], model: str) -> dict[str, Any]:
    """Sufficiency and confidence AUROC on each set when the fit lacks the readings that cost a call."""
    out: dict[str, Any] = {}
    for name, drop in ABLATIONS.items():
        fit = fit_on(without(pool, drop), model)
        out[name] = {s: {head: auroc(*_flat(g, 0)) for head, g in items(fit, without(recs, drop)).items()
                         if head in ("sufficiency", "answerable", "confidence") and g}
                     for s, recs in sets.items()}
    return out


def doubt_policy(fit: Any, records: Sequence[dict[str, Any]], floor: float) -> list[float]:
    """Per question with candidates: 1 if the chosen answer is right, choosing the candidate the support head
    rates highest whenever the joint's support is below ``floor`` (0: always the joint)."""
    head = fit.head("support")
    out = []
    for r in records:
        cands = [c for c in critic_fit.candidates_of(r) if c.get("likelihood") is not None and c.get("right") is not None]
        joint = next((c for c in cands if c["joint"]), None)
        if head is None or joint is None or len(cands) < 2:
            continue
        p = {id(c): head.probability(support_values(c["likelihood"], c["joint"], c["closed"])) for c in cands}
        chosen = max(cands, key=lambda c: p[id(c)]) if p[id(joint)] < floor else joint
        out.append(1.0 if chosen["right"] else 0.0)
    return out


def selection(fit: Any, pool: Sequence[dict[str, Any]], sets: dict[str, list]) -> dict[str, Any]:
    """One-passage candidates when the joint is doubtful: the support floor chosen on the pool's questions
    with candidates (share right), then the share right on each set against always the joint."""
    grid = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 1.01]
    on_pool = {t: float(np.mean(v)) if (v := doubt_policy(fit, pool, t)) else 0.0 for t in grid}
    best = max(grid, key=lambda t: (on_pool[t], -t))
    out = {"pool": on_pool, "chosen": best, "sets": {}}
    for name, recs in sets.items():
        mine, joint = doubt_policy(fit, recs, best), doubt_policy(fit, recs, 0.0)
        if mine:
            out["sets"][name] = {"n": len(mine), "right": float(np.mean(mine)), "joint_right": float(np.mean(joint)),
                                 "diff": paired_bootstrap(mine, joint)}
    return out


def learning_curve(pool: Sequence[dict[str, Any]], sets: dict[str, list], model: str) -> dict[str, Any]:
    """Per fitting size: each head's AUROC (mean and spread over the subsets) on every evaluation set."""
    sizes = [n for n in CURVE if n < len(pool)] + [len(pool)]
    out: dict[str, Any] = {}
    for n in sizes:
        draws = 1 if n == len(pool) else SUBSETS
        per: dict[str, dict[str, list[float]]] = {}
        for seed in range(draws):
            subset = pool if n == len(pool) else random.Random(seed).sample(list(pool), n)
            try:
                fit = fit_on(subset, model)
            except Exception:  # a small subset without both labels of some head
                continue
            for name, recs in sets.items():
                for head, groups in items(fit, recs).items():
                    value = auroc(*_flat(groups, 0)) if groups else None
                    if value is not None:
                        per.setdefault(name, {}).setdefault(head, []).append(value)
        out[str(n)] = {name: {head: [float(np.mean(v)), float(np.std(v)), len(v)] for head, v in heads.items()}
                       for name, heads in per.items()}
    return out


def package(models: Sequence[str], fit_sets: Sequence[str] = FIT_SETS, folder: Path = PACKAGE) -> None:
    """The packaged fits: the embedded model's own, and the defaults over every model's fitting readings
    (kept as they are unless ``models`` holds every model they were fitted on, with all fitting sets read)."""
    from selfrag.llm.model_files import default_model_path, file_sha256

    folder.mkdir(parents=True, exist_ok=True)
    pooled, complete = [], set()
    meta = {"data": " + ".join(fit_sets), "remove_gold": 0.5, "balanced": BALANCE, "labels": LABELS}
    for model in models:
        pool = fitting(model, fit_sets)
        pooled += [{**r, "states": {}} for r in pool]
        complete |= {model} if all_read(pool, fit_sets) else set()
        if model == "embedded" and pool:
            path = default_model_path()
            fit = fit_critic(pool, model=path.name, sha256=file_sha256(path), layers=_layers(pool),
                             balance=BALANCE, meta=meta)
            fit.write(folder / f"{fit.sha256}.json")
            print(f"[critic] packaged the embedded model's fit ({len(pool)} questions)")
    had = CriticFit.read(folder / "default.json").meta.get("models", []) if (folder / "default.json").is_file() else []
    if missing := [m for m in had if m not in complete]:  # each model's readings read once
        print(f"[critic] kept default.json: not every fitting set of {', '.join(missing)} is read or asked for")
    elif pooled:
        fit = fit_critic(pooled, model="", sha256="", layers=(), balance=BALANCE, meta=meta | {"models": [*models]})
        fit.write(folder / "default.json")
        print(f"[critic] packaged the default fit ({len(pooled)} questions of {len(models)} models)")


def _layers(records: Sequence[dict[str, Any]]) -> list[int]:
    return sorted({int(k) for r in records[:1] for part in (r.get("states") or {}).values() for k in part},
                  key=lambda x: (x < 0, x))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", default=None,
                        help="a model tag under results/runs/critic/ (default: every one there)")
    parser.add_argument("--package", action="store_true",
                        help="also write the fits selfrag ships (the embedded model's and the defaults)")
    parser.add_argument("--package-only", action="store_true", help="write the packaged fits and nothing else")
    args = parser.parse_args(argv)
    models = models_read(args.model)
    if args.package or args.package_only:
        package(models)
        if args.package_only:
            return 0
    env = machine()
    for model in models:
        report = model_report(model)
        if report is None:
            print(f"[critic] {model}: not every fitting set read (or under 20 questions); nothing to fit")
            continue
        plot([report], OUT / f"critic_{model}.png")
        write(f"critic_{model}", report, render([report], env), env)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
