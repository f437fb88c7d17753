"""The fitted critic's report (``lab.critic_study``): its tables and its risk-coverage plot."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lab.machine import machine_lines
from selfrag.eval.critic_fit import FLAGGED
from selfrag.reflection.confidence import area_under, risk_coverage

OUT = Path(__file__).resolve().parent / "results"
RESAMPLES = 1000  # lab.critic_study's bootstrap resamples, named in the report


def write(stem: str, report: dict[str, Any], text: str, env: dict[str, Any]) -> None:
    """``results/<stem>.json`` (the report and the machine) and ``.md`` (``text``)."""
    (OUT / f"{stem}.json").write_text(json.dumps({"env": env, **report}, indent=1), encoding="utf-8")
    (OUT / f"{stem}.md").write_text(text, encoding="utf-8")
    print(f"[critic] wrote results/{stem}.md")


def fmt(value: Any, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def interval(value: Any) -> str:
    return "–" if not value else f"[{value[0]:+.3f}, {value[1]:+.3f}]"


BASELINES = {"relevance": ("evidence prior", "evidence prior"), "support": ("likelihood", "likelihood"),
             "sufficiency": ("packaged confidence", "sequence prob."),
             "answerable": ("packaged confidence", "sequence prob."),
             "confidence": ("packaged confidence", "sequence prob.")}


def coverage(groups: Sequence[Sequence[tuple]]) -> dict[str, Any]:
    """Risk-coverage curves of the confidence head and its two baselines (``(head, base, base2, right)``)."""
    out = {}
    for col, name in ((0, "confidence head"), (1, "packaged confidence"), (2, "sequence probability")):
        pairs = [(t[col], 1.0 if t[3] else 0.0) for g in groups for t in g if t[col] is not None]
        if pairs:
            curve = risk_coverage([p for p, _ in pairs], [q for _, q in pairs])
            out[name] = {"area": area_under(curve), "curve": [[round(c, 4), round(q, 4)] for c, q in curve]}
    return out


def carry(previous: Path, sets: dict[str, Any]) -> dict[str, Any]:
    """The previous report's rows for the sets not measured now, each stamped with the report that measured
    them (its commit, date, fitting questions and label rule): re-reading some sets never drops the others."""
    if not previous.is_file():
        return {}
    old = json.loads(previous.read_text(encoding="utf-8"))
    env = old.get("env") or {}
    stamp = {"commit": env.get("commit"), "date": env.get("date"), "pool": old.get("pool"),
             "labels": ((old.get("fit") or {}).get("meta") or {}).get("labels", 1)}
    return {name: {**s, "carried": s.get("carried") or stamp} for name, s in (old.get("sets") or {}).items()
            if name not in sets}


def shown(name: str, s: dict[str, Any]) -> str:
    """A set's name as the tables print it: marked when its row was carried over from an earlier report."""
    return f"{name} †" if s.get("carried") else name


def fit_sets(rep: dict[str, Any]) -> str:
    return ", ".join(f"{name} {n}" for name, n in (rep.get("fit_sets") or {"pool": rep["pool"]}).items())


def render(reports: list[dict[str, Any]], env: dict[str, Any]) -> str:
    lines = ["# The fitted critic (reflection heads), measured", "",
             "Written by `python -m lab.critic_study` from the readings of `lab.critic_reads` (no model call "
             "here). Fitted on the fitting sets only (the HotpotQA pool: dev questions in no evaluation sample; "
             "PubMedQA's official training ids; gold removed from about half of each); measured on the evaluation "
             "sets below, which no fit saw. Labels: a passage "
             "is relevant when its title is a supporting title; an answer is right by the readings' label rule "
             "(rule 2: F1 >= 0.5, or at most 40 words containing a gold answer; a choice question by its "
             "choice; readings without a rule: F1 >= 0.5 alone); the passages "
             "read are sufficient when the question kept its gold and the answer read a gold paragraph; "
             "*answerable* scores the sufficiency head against whether the gold was removed at all. Intervals: "
             f"95% paired bootstrap over questions ({RESAMPLES} resamples) of head AUROC minus the baseline's.", "",
             *machine_lines(env), ""]
    for rep in reports:
        fit = rep["fit"]
        lines += [f"## {rep['model']}", "",
                  f"Fitted on {rep['pool']} questions ({fit_sets(rep)}); sufficiency floor {fit['threshold']:.3f} (at most "
                  f"{FLAGGED:.0%} of answerable fitting questions below it, out of fold); hidden layers read: "
                  f"{fit['layers'] or 'none'}.", "", *carried_lines(rep),
                  "| head | examples | positives | CV AUROC | CV ECE | hidden state |", "|---|---|---|---|---|---|"]
        for name, h in fit["heads"].items():
            lines.append(f"| {name} | {h['n']} | {h['positives']} | {fmt(h.get('cv_auroc'))} | "
                         f"{fmt(h.get('cv_ece'))} | {h['hidden'] or 'none'} |")
        lines += ["", "ECE by chance: the mean ECE a perfectly calibrated head would show with the same "
                  "probabilities on as many items (labels drawn from them); an ECE near it is within chance.", "",
                  "| set | head | questions | items | AUROC | ECE | ECE by chance | baseline | its AUROC | Δ [95% CI] | "
                  "baseline 2 | its AUROC | Δ [95% CI] |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for name, s in rep["sets"].items():
            for head, m in s["heads"].items():
                b1, b2 = BASELINES[head]
                lines.append(f"| {shown(name, s)} | {head} | {m['questions']} | {m['n']} | {fmt(m['auroc'])} | {fmt(m['ece'])} | "
                             f"{fmt(m.get('ece_if_calibrated'))} | {b1} | {fmt(m['baseline_auroc'])} | {interval(m['baseline_interval'])} | {b2} | "
                             f"{fmt(m['baseline2_auroc'])} | {interval(m['baseline2_interval'])} |")
        lines += ["", "Sufficiency at the fitted floor: the answer's first line says the documents do not seem "
                  "to hold it. Truthful: +1 right, 0 said so, -1 wrong; against always answering.", "",
                  "| set | n | gold removed | said so: gold removed | said so: answerable | truthful | always "
                  "answering | Δ [95% CI] |", "|---|---|---|---|---|---|---|---|"]
        for name, s in rep["sets"].items():
            x = s["said"] or s["said_answerable"]
            if x is None:
                continue
            d = x["truthful_diff"]
            lines.append(f"| {shown(name, s)} | {x['n']} | {x['gold_removed']} | {fmt(x['flagged_gold_removed'])} | "
                         f"{fmt(x['flagged_answerable'])} | {x['truthful']:+.3f} | {x['truthful_always']:+.3f} | "
                         f"{d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}] |")
        lines += ["", "Answers (the default `self_rag`'s, the joint over the evidence-ranked passages) against "
                  "`vanilla_rag_evidence`'s recorded answers to the same questions; seconds per question of the "
                  "default's calls as read here (the reading less the study's one-passage candidates).", "",
                  "| set | n | F1 | vanilla_rag_evidence F1 | Δ [95% CI] | s/q (default) | s/q (reading) |",
                  "|---|---|---|---|---|---|---|"]
        for name, s in rep["sets"].items():
            v, t = s["vanilla"], s["seconds"] or {}
            if v is None:
                continue
            d = v["diff"]
            lines.append(f"| {shown(name, s)} | {v['n']} | {v['f1']:.3f} | {v['vanilla_f1']:.3f} | {d['diff']:+.3f} "
                         f"[{d['lo']:+.3f}, {d['hi']:+.3f}] | {fmt(t.get('default'), 1)} | {fmt(t.get('reading'), 1)} |")
        lines += ["", "The readings that cost a call: AUROC of sufficiency (gold read / gold removed) and confidence "
                  "when the fit lacks them.", "", "| fit without | set | sufficiency | answerable | confidence |",
                  "|---|---|---|---|---|"]
        for name, per in (rep.get("ablation") or {}).items():
            for s_name, heads in per.items():
                lines.append(f"| {name} | {s_name} | {fmt(heads.get('sufficiency'))} | {fmt(heads.get('answerable'))} "
                             f"| {fmt(heads.get('confidence'))} |")
        sel = rep.get("selection") or {}
        if sel.get("sets"):
            lines += ["", "One-passage candidates when the joint is doubtful: the candidate the support head rates "
                      f"highest whenever the joint's support is below {sel['chosen']:.2f} (the floor with the most "
                      "right answers on the pool's questions with candidates), against always the joint.", "",
                      "| set | questions | share right | joint always | Δ [95% CI] |", "|---|---|---|---|---|"]
            for name, x in sel["sets"].items():
                d = x["diff"]
                lines.append(f"| {name} | {x['n']} | {x['right']:.3f} | {x['joint_right']:.3f} | {d['diff']:+.3f} "
                             f"[{d['lo']:+.3f}, {d['hi']:+.3f}] |")
        lines += ["", "Learning curve: AUROC on each set (mean ± sd over random pool subsets; the whole pool "
                  "once).", "", "| fitted on | set | " + " | ".join(BASELINES) + " |",
                  "|---|---|" + "---|" * len(BASELINES)]
        for n, per in rep["curve"].items():
            for name, heads in per.items():
                cells = [f"{v[0]:.3f} ± {v[1]:.3f}" if (v := heads.get(h)) else "–" for h in BASELINES]
                lines.append(f"| {n} | {name} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def carried_lines(rep: dict[str, Any]) -> list[str]:
    marks = [f"{name} (commit {c['commit']}, {c['date']}, fitted on {c['pool']} questions, label rule {c['labels']})"
             for name, s in rep["sets"].items() if (c := s.get("carried"))]
    if not marks:
        return []
    return ["Sets marked † have no readings under the current label rule on the machine that wrote this report: "
            "their rows are carried over from the report that measured them, with that report's own fit, and "
            "describe that fit, not this one: " + "; ".join(marks) + ". The learning curve, the ablation and the "
            "candidates' selection cover the other sets.", ""]


def plot(reports: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(rep["model"], name, s["coverage"], bool(s.get("carried"))) for rep in reports for name, s in rep["sets"].items()
              if name in ("hotpotqa_next", "hotpotqa_mix_next") and s["coverage"]]
    if not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    for ax, (model, name, cov, carried) in zip(axes[0], panels, strict=True):
        for label, c in cov.items():
            xs, ys = zip(*c["curve"], strict=True)
            ax.plot(xs, ys, label=f"{label} (area {c['area']:.3f})")
        ax.set_title(f"{model}\n{name}" + (" (an earlier fit)" if carried else ""), fontsize=9)
        ax.set_xlabel("coverage (most confident answers kept)")
        ax.set_ylabel("share right among those kept")
        ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
