"""The fits selfrag ships, measured on every model's held-out readings (issue 68).

    python -m lab.critic_packaged [--model TAG ...]

A model without a fit of its own reads the packaged defaults
(``src/selfrag/reflection/fits/default.json``: scalar heads, no hidden
state, fitted by ``python -m lab.critic_study --package`` over every model's
fitting readings). This report says what that costs: on each model's
evaluation sets (those ``lab.critic_reads`` wrote; never the fitting ones),
the defaults' sufficiency AUROC and, at their floor, how often the answer's
first line says the documents do not seem to hold it, on gold-removed and
on answerable questions, beside the model's own fit (the lab's
``results/critic_fits/<model>.json``, or the packaged one for the embedded
model). No model call.

Writes ``results/critic_packaged.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
from typing import Any

from lab.critic_reads import models_read
from lab.critic_report import fmt, write
from lab.critic_study import FITS, evaluation_sets, fitting, items, measure, said
from lab.machine import machine, machine_lines
from selfrag.llm.model_files import default_model_path, file_sha256
from selfrag.reflection.critic_fit import DEFAULT_FIT, CriticFit, packaged


def own_fit(model: str) -> CriticFit | None:
    if model == "embedded":
        return packaged(f"{file_sha256(default_model_path())}.json")
    path = FITS / f"{model}.json"
    return CriticFit.read(path) if path.is_file() else None


def rows(model: str, fits: dict[str, CriticFit]) -> list[dict[str, Any]]:
    out = []
    for name, records in evaluation_sets(model, fitting(model)).items():
        for label, fit in fits.items():
            groups = items(fit, records)["sufficiency"]
            auroc = measure(groups)["auroc"] if groups and len({g[0][3] for g in groups}) == 2 else None
            out.append({"model": model, "set": name, "fit": label, "sufficiency_auroc": auroc,
                        **{k: v for k, v in (said(fit, records) or {}).items() if k != "truthful_diff"}})
    return out


def render(report: dict[str, Any], env: dict[str, Any]) -> str:
    lines = ["# The packaged fits, measured", "", (__doc__ or "").split("\n\n")[1].replace("\n", " "), "",
             *machine_lines(env), "",
             "| model | set | fit | sufficiency AUROC | said so: gold removed | said so: answerable | truthful |",
             "|---|---|---|---|---|---|---|"]
    for r in report["rows"]:
        lines.append(f"| {r['model']} | {r['set']} | {r['fit']} | {fmt(r['sufficiency_auroc'])} | "
                     f"{_pct(r.get('flagged_gold_removed'))} | {_pct(r.get('flagged_answerable'))} | "
                     f"{fmt(r.get('truthful'))} |")
    return "\n".join(lines) + "\n"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.1%}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", action="append", default=None, help="a model tag under results/runs/critic/")
    args = parser.parse_args(argv)
    default = packaged(DEFAULT_FIT)
    out = []
    for model in models_read(args.model):
        fits = {"own": fit} if (fit := own_fit(model)) is not None else {}
        out += rows(model, {**fits, "packaged defaults": default})
    env = machine()
    write("critic_packaged", {"rows": out}, render({"rows": out}, env), env)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
