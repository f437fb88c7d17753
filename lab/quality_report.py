"""Rendering the quality benchmark: one report per model, and ``quality.md`` as their index."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lab.quality_carry import carried_note
from lab.quality_runs import BASELINE, DATASETS, PLAIN, VARIANT_LIST

METRIC_NAMES = {"em": "EM", "f1": "F1", "accuracy": "accuracy", "yesno": "yes/no acc.",
                "answered_yes": "answered yes", "gold_yes": "gold yes"}
# Columns per dataset: quality metrics shown, the compared metric comes from the Dataset.
SHOWN = {"hotpotqa": ("em", "f1"), "hotpotqa_yesno": ("yesno", "answered_yes", "gold_yes", "em", "f1"),
         "hotpotqa_mix": ("em", "f1"), "hotpotqa_mix_next": ("em", "f1"), "hotpotqa_next": ("em", "f1"),
         "pubmedqa": ("accuracy",), "mmlu_evidence": ("accuracy",)}


def _f(value: float | None, fmt: str = ".3f") -> str:
    return "–" if value is None else format(value, fmt)


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _n(row: dict[str, Any]) -> str:
    if row["partial"]:
        return f"{row['n']} of {row['target_n']} (partial)"
    return str(row["n"])


def _delta(cmp: dict[str, Any] | None, variant: str, baseline: str = BASELINE) -> str:
    if variant == baseline:
        return "(baseline)"
    if not cmp:
        return "–"
    return f"{cmp['diff']:+.3f} [{cmp['lo']:+.3f}, {cmp['hi']:+.3f}] (n={cmp['n']})"


def _malformed(row: dict[str, Any]) -> str:
    reasons = row.get("malformed_reasons") or {}
    if not reasons:
        return str(row["malformed"])
    return f"{row['malformed']} ({', '.join(f'{v} {k}' for k, v in sorted(reasons.items()))})"


def dataset_table(name: str, rows: list[dict[str, Any]]) -> list[str]:
    dataset = DATASETS[name]
    shown = SHOWN[name]
    metric = METRIC_NAMES[dataset.metric]
    header = ["method", "n", *(METRIC_NAMES[m] for m in shown), f"Δ {metric} vs {BASELINE} [95% CI]",
              f"Δ vs {PLAIN} [95% CI]",
              "retrieved", "kept no passage", "LLM calls/q", "tokens/q", "s/q", "malformed", "errors"]
    target = max((r["target_n"] for r in rows), default=0)
    lines = [f"## {name}", "", dataset.note.format(n=target) + ".", ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for r in rows:
        label = f"`{r['variant']}`" + (f" ({r['note']})" if r.get("note") else "")
        cells = [label, _n(r), *(_f(r["metrics"].get(m)) for m in shown), _delta(r.get("vs_baseline"), r["variant"]),
                 _delta(r.get("vs_plain"), r["variant"], PLAIN),
                 _pct(r["retrieval_rate"]), str(r.get("kept_none", "–")), _f(r["llm_calls_per_q"], ".1f"), _f(r["tokens_per_q"], ".0f"),
                 _f(r["seconds_per_q"], ".1f"), _malformed(r), str(r["errors"])]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    remarks = [f"- `{r['variant']}`: {'; '.join(filter(None, (r.get('remark'), carried_note(r))))}"
               for r in rows if r.get("remark") or r.get("carried")]
    return [*lines, *remarks, *([""] if remarks else [])]


def critics_section(tag: str, rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    lines = [
        "## Critique discrimination",
        "",
        "Read from the HotpotQA runs, no model call. Relevance: the gold supporting paragraphs (their titles "
        "are in the question's supporting facts) against the distractors among every retrieved passage of every "
        "answered question (10 per question: the configs retrieve all of a HotpotQA question's paragraphs), as "
        "the `rank_evidence` step of the `self_rag` and `self_rag_critic` runs scored them: the model's reading "
        "(`self_rag`: the combined mode's binary `[IsRel]` verdict, so ties count half; `self_rag_critic`: the "
        "mean of the label question and the question likelihood), the lexical prior of "
        "`selfrag.retrieval.links`, and their mean, which picks the joint candidate's passages. Support: "
        "candidate answers of the `self_rag_critic` and `self_rag` runs, correct (F1 >= 0.5 against the gold "
        "answer) against wrong (F1 = 0); candidates in between are left out. AUC 0.5 = no better than chance.",
        "",
        "| model | source | n questions | n pairs (pos x neg) | AUC | notes |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        notes = []
        if r.get("defaults"):
            notes.append(f"{r['defaults']} verdicts unparsed (read as the default, relevant)")
        if r.get("unscored"):
            notes.append(f"{r['unscored']} paragraphs without a probability")
        if r.get("notes"):
            notes.append(str(r["notes"]))
        if r.get("carried"):
            notes.append(carried_note(r))
        lines.append(
            f"| {tag} | {r['source']} | {r['n_questions']} | {r['n_pairs']} ({r['n_pos']} x {r['n_neg']}) | "
            f"{_f(r['auc'])} | {'; '.join(notes)} |"
        )
    return [*lines, ""]


def _withheld(g: dict[str, Any]) -> str:
    """``k of m``: abstentions that withheld a right answer, of those that record one."""
    n = g.get("withheld_correct_n") or 0
    return f"{round(g['withheld_correct'] * n)} of {n}" if n else "-"


def grounding_section(rows: list[dict[str, Any]]) -> list[str]:
    """Issue 17: citations and abstention, answerable and unanswerable questions apart."""
    rows = [r for r in rows if r.get("grounding")]
    if not rows:
        return []
    lines = [
        "## Grounding: citations and abstention",
        "",
        "Evidence F1: the cited paragraphs' titles against the gold supporting titles; joint F1: HotpotQA's "
        "answer x evidence F1 at paragraph level; in citations: the answer occurs in a cited passage; "
        "truthful: +1 right (F1 >= 0.5), 0 abstained, -1 wrong; withheld right: of the abstentions that "
        "record the answer they withheld, how many withheld a right one (the cost of abstaining). "
        "*hotpotqa_mix* (and *hotpotqa_mix_next*, on questions 300-399) removes the gold paragraphs "
        "from about half the questions (unanswerable: abstaining is right). Means over the questions where a "
        "metric is defined (docs/evaluation.md).",
        "",
        "| dataset | method | questions | n | F1 | abstained | answered acc. | truthful | withheld right | evidence F1 "
        "| joint F1 | in citations |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        for kind, g in r["grounding"].items():
            lines.append(
                f"| {r['dataset']} | `{r['variant']}` | {kind} | {g['n']} | {_f(g['f1'])} | {_f(g['abstention'])} | "
                f"{_f(g['answered_accuracy'])} | {_f(g['truthfulness'])} | {_withheld(g)} | {_f(g['evidence_f1'])} | "
                f"{_f(g['joint_f1'])} | {_f(g['answer_in_citations'])} |"
            )
    paired = [r for r in rows if r.get("truthful_vs_baseline")]
    if paired:
        lines += ["", "Truthfulness over the whole mix (answerable and unanswerable together), paired with "
                  "`vanilla_rag` on the same questions:", ""]
        lines += [f"- `{r['variant']}`: {_delta(r['truthful_vs_baseline'], r['variant'])}" for r in paired]
    return [*lines, ""]


def render(data: dict[str, Any]) -> str:
    env = data["environment"]
    tag = env["model_tag"]
    sha = f", sha256 `{env['model_sha256'][:16]}…`" if env.get("model_sha256") else ""
    lines = [
        f"# Quality and cost per method: {tag}",
        "",
        f"Report written {env['date']} on {env['platform']}, {env['cpus']} CPUs, Python {env['python']}, commit "
        f"{env['commit']}. Model: `{env['model']}` (`{env.get('model_path') or env['llm']}`{sha}), "
        "greedy decoding, cache off, BM25 retrieval, one question at a time. Every method answers the same "
        "questions; a run still going (or stopped) is reported with the questions it has answered, marked partial, "
        "and compared with the baseline only on the questions both answered.",
        "",
        "Columns: Δ is the method's mean difference to `vanilla_rag` on the same questions (joined by question "
        "id), with a paired bootstrap 95% interval (2000 resamples, seed 0); F1 on HotpotQA, the yes/no accuracy "
        "on the yes/no set, accuracy otherwise. *retrieved*: share of questions for which the method retrieved. "
        "*kept no passage*: questions where the separate mode's filter judged every retrieved passage "
        "irrelevant (over an open corpus the answer is then written without them; over a question's own "
        "passages, by the joint candidate over them, ranked by lexical evidence). "
        "*s/q*: the method's own time per question on this machine. *malformed*: final answers that are empty, a "
        "reflection label, JSON or prompt text (`selfrag.methods.answer_shape.malformed`).",
        "",
    ]
    for name in DATASETS:
        rows = [r for r in data["rows"] if r["dataset"] == name]
        if rows:
            lines += dataset_table(name, rows)
    lines += grounding_section(data["rows"])
    lines += critics_section(tag, data.get("critics") or [])
    llm = f" --llm {env['llm']}" if env["llm"] != "embedded" else ""
    lines += [
        "Regenerate (resumes every run directory; finished ones are read back): "
        f"`python -m lab.quality{llm}`; `--report-only` reads what is on disk and runs nothing; see "
        f"lab/README.md. Run directories: `lab/results/runs/quality/{tag}/<dataset>/<variant>/` (their "
        "`config.yaml`, `summary.json` and the per-question records, `predictions.slim.jsonl.gz`, are "
        "committed, so a fresh clone resumes them; the full traces and call ledgers are not).",
        "",
    ]
    return "\n".join(lines)


# The datasets of the at-a-glance matrix, with their column titles; hotpotqa_mix is left out (its
# point is abstention, which one F1 cell cannot say).
GLANCE = {"hotpotqa": "HotpotQA F1", "hotpotqa_yesno": "yes/no acc.", "hotpotqa_next": "HotpotQA 200-299 F1",
          "pubmedqa": "PubMedQA acc.", "mmlu_evidence": "MMLU-evidence acc."}


def _glance_cell(row: dict[str, Any] | None, metric: str) -> str:
    if row is None or not row.get("n"):
        return "–"
    value = _f(row["metrics"].get(metric))
    cmp = row.get("vs_baseline")
    n = f"n={row['n']}" if row["partial"] else ""
    if row["variant"] == BASELINE or not cmp:
        return f"{value} ({n})" if n else value
    # Judged on the interval as printed: a lower end of +0.0001 reads "+0.000", which is not above 0.
    mark = " ▲" if round(cmp["lo"], 3) > 0 else " ▼" if round(cmp["hi"], 3) < 0 else ""
    return f"{value} ({cmp['diff']:+.3f}{mark}{', ' + n if n else ''})"


def glance(data: dict[str, Any]) -> list[str]:
    """One model's methods x datasets: the headline metric and its paired difference to the baseline."""
    rows = {(r["dataset"], r["variant"]): r for r in data.get("rows", [])}
    names = [name for name in GLANCE if any(d == name for d, _ in rows)]
    variants = [v.name for v in VARIANT_LIST if any((name, v.name) in rows for name in names)]
    if not names:
        return []
    lines = ["| method | " + " | ".join(GLANCE[name] for name in names) + " |", "|---|" + "---|" * len(names)]
    for variant in variants:
        cells = [_glance_cell(rows.get((name, variant)), DATASETS[name].metric) for name in names]
        lines.append(f"| `{variant}` | " + " | ".join(cells) + " |")
    return lines


GLANCE_START = "<!-- quality at a glance: start (lab/quality.py writes this block) -->"
GLANCE_OPEN = "<!-- quality at a glance: start"  # a start marker whatever its note says
GLANCE_END = "<!-- quality at a glance: end -->"


Report = tuple[str, str, dict[str, Any]]  # (file stem, model tag, the report's JSON)


def load_reports(out: Path) -> list[Report]:
    """Every readable ``quality_<model_tag>.json`` in ``out``, read once for the index and the README."""
    found = []
    for path in sorted(out.glob("quality_*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            tag = data["environment"].get("model_tag") or path.stem.removeprefix("quality_")
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        found.append((path.stem, tag, data))
    return found


def glance_text(reports: list[Report]) -> str:
    """Every model's at-a-glance matrix with its legend ("" when no report has one)."""
    matrices: list[str] = []
    for _, tag, data in reports:
        if table := glance(data):
            env = data["environment"]
            matrices += ["", f"**{tag}** (report of {env.get('date')}, commit {env.get('commit')}):", "", *table]
    if not matrices:
        return ""
    legend = (f"Each method's headline metric on the questions it answered and, in brackets, its paired "
              f"difference to `{BASELINE}` on the same questions: ▲ when the bootstrap 95% interval of that "
              f"difference lies above 0, ▼ when it lies below 0 (as printed, to 3 decimals), no mark when it "
              f"includes 0; n is given where a run is partial. Intervals and per-question counts are in each "
              f"model's report.")
    return "\n".join([legend, *matrices]) + "\n"


def with_glance(text: str, block: str) -> str | None:
    """``text`` with the part between the glance markers replaced by ``block`` (None: no markers)."""
    i = text.find(GLANCE_OPEN)
    k = text.find("-->", i) if i >= 0 else -1
    j = text.find(GLANCE_END, k) if k >= 0 else -1
    if j < 0:
        return None
    return text[:i] + GLANCE_START + "\n" + block + text[j:]


def index(reports: list[Report]) -> str:
    """``quality.md``: every per-model report with its date, commit and n, then the glance matrices."""
    lines = [
        "# Quality and cost per method",
        "",
        "One report per model, written by `python -m lab.quality [--llm llamacpp:PATH]`.",
        "",
        "| model | report | date | commit | n per dataset |",
        "|---|---|---|---|---|",
    ]
    for stem, tag, data in reports:
        env = data["environment"]
        ns = []
        for name in DATASETS:
            rows = [r for r in data.get("rows", []) if r.get("dataset") == name]
            if rows:
                top = max(int(r.get("n") or 0) for r in rows)
                partial = any(r.get("partial") for r in rows)
                ns.append(f"{name} {top}" + (" (partial)" if partial else ""))
        lines.append(
            f"| {tag} | [{stem}.md]({stem}.md) | {env.get('date')} | "
            f"{env.get('commit')} | {', '.join(ns) or '–'} |"
        )
    if block := glance_text(reports):
        lines += ["", "## At a glance", "", block.rstrip("\n")]
    return "\n".join([*lines, ""])


def plot(rows: list[dict[str, Any]], path: Path, tag: str) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    subset = [r for r in rows if r["dataset"] == "hotpotqa" and r["n"] and r["tokens_per_q"]]
    if not subset:
        return False
    fig, ax = plt.subplots(figsize=(8, 5))
    for r in subset:
        x, y = r["tokens_per_q"], r["metrics"].get("f1") or 0.0
        ax.scatter([x], [y])
        ax.annotate(r["variant"], (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("tokens per question (log)")
    ax.set_ylabel("F1")
    ax.set_title(f"HotpotQA, n={max(r['n'] for r in subset)}, {tag}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True
