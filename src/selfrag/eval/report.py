"""Reading run directories back and showing them: summary, breakdowns, comparisons, a plot.

Aggregates are recomputed from ``predictions.jsonl`` (the source of truth, so
an interrupted run reads correctly too; each question counts once) and
sessions, wall time, cache counts and spending from ``ledger.jsonl``; run
facts (method, model) come from ``summary.json``. A run with unanswerable
questions (``data.remove_gold``) is shown answerable vs unanswerable side by
side (:func:`answerability_table`, :func:`grounding_rows`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..errors import require
from .evidence import ABSTENTION_METRICS, EVIDENCE_METRICS
from .ledger import LEDGER_FILE, account, read_ledger
from .results import (
    PREDICTIONS_FILE,
    SUMMARY_FILE,
    check_run_dir,
    check_within,
    read_json,
    read_predictions,
    unique_records,
)
from .summary import run_status, summarize

BREAKDOWNS = (("by_type", "question type"), ("by_level", "level"), ("by_subject", "subject"),
              ("by_retrieval", "retrieval decision"))


def load_run(
    run_dir: str | Path, warn: Callable[[str], None] | None = None, within: Path | None = None
) -> dict[str, Any]:
    """The run's summary, recomputed from its predictions and its ledger.

    A predictions file that repeats question ids (two processes once wrote to
    the run) is read with one record per id, the first answer (as ``--resume``
    keeps); ``warn`` gets one line saying so. With ``within`` (a resolved
    folder), a file of the run whose real path is outside it is refused
    (:class:`~selfrag.eval.results.OutsideRoot`), never read.
    """
    path = check_run_dir(Path(run_dir), within)
    summary_path = path / SUMMARY_FILE
    if summary_path.is_file():
        summary = read_json(summary_path, within)
    else:
        check_within(summary_path, within)
        summary = {"run_id": path.name}
    lines = read_predictions(path / PREDICTIONS_FILE, within)
    records, repeated = unique_records(lines)
    if repeated and warn is not None:
        warn(f"{path / PREDICTIONS_FILE} repeats {len(repeated)} question id(s) (e.g. {repeated[0]}); "
             "counting the first answer of each, as --resume keeps")
    n_questions = summary.get("n_questions") or len(records)
    summary.update(summarize(records, n_questions))
    events = read_ledger(path / LEDGER_FILE, within)
    if events:
        totals = account(events, records)
        cache = {**(summary.get("cache") or {}), **totals.pop("cache")}
        summary.update(totals, cache=cache)
    status, failure = run_status(records, n_questions, float(summary.get("max_error_rate", 1.0)))
    summary.update(status=status, complete=status == "complete", failure=failure)
    summary["repeated_records"] = len(lines) - len(records)
    summary["run_dir"] = str(path)
    return summary


# -- formatting ---------------------------------------------------------------------


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[int] = ()) -> str:
    """A plain-text table; numbers (and the columns ``right`` names) right-aligned."""
    cells = [[fmt(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    numeric = [i in right or all(isinstance(row[i], (int, float)) or row[i] is None for row in rows)
               for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)]
        return "  ".join(parts).rstrip()

    out = [line(list(headers)), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in cells]
    return "\n".join(out)


def _money(value: float | None) -> str:
    if value is None:
        return "-"
    if not value:
        return "$0"
    return f"${value:.6f}".rstrip("0").rstrip(".")


def summary_table(s: dict[str, Any]) -> str:
    method = s.get("method") or "?"
    if s.get("retriever"):
        method += f" ({s['retriever']}, top_k {s.get('top_k')})"
    lat = s.get("latency_ms") or {}
    cost = s.get("cost_usd") or {}
    tokens = s.get("tokens") or {}
    calls = s.get("llm_calls") or {}
    cache = s.get("cache") or {}
    rows = [
        ("run", s.get("run_id")),
        ("method", method),
        ("model", s.get("model") or "-"),
        ("dataset", f"{s.get('dataset', '?')} ({s.get('data_path') or 'shipped'})"),
        ("questions", f"{s.get('n_answered', 0)} answered, {s.get('n_errors', 0)} errors, "
                      f"of {s.get('n_questions', '?')}" + _status_note(s)),
    ]
    if s.get("by_answerable"):
        rows.append(("answerable", _answerable_note(s["by_answerable"])))
    for key, value in (s.get("metrics") or {}).items():
        count = (s.get("metric_counts") or {}).get(key)
        suffix = f"  (over {count})" if count is not None and count != s.get("n_answered") else ""
        rows.append((key, fmt(value) + suffix))
    rows += [
        ("cost", f"{_money(cost.get('total'))} total, {_money(cost.get('per_question'))} per question"),
        ("tokens", f"{tokens.get('total', 0)} total ({tokens.get('prompt', 0)} prompt, "
                   f"{tokens.get('completion', 0)} completion), {fmt(tokens.get('per_question'), 1)} per question"),
        ("latency", f"p50 {_seconds(lat.get('p50'))}, p95 {_seconds(lat.get('p95'))}, "
                    f"mean {_seconds(lat.get('mean'))}" + _cached_note(s)),
        ("LLM calls", f"{fmt(calls.get('per_question'), 2)} per question ({calls.get('total', 0)} total)"),
        ("retrieval rate", fmt(s.get("retrieval_rate"), 2)),
    ]
    if cache:
        rows.append(("cache", f"{cache.get('hits', 0)} hits, {cache.get('misses', 0)} misses"
                              + ("" if cache.get("enabled", True) else " (off)")))
    spent = s.get("spent")
    if spent:
        sessions = len(s.get("sessions") or [])
        rows.append(("spent", f"{_money(spent.get('cost_usd'))} for {spent.get('llm_calls', 0)} backend calls"
                              f" over {sessions} session(s)"))
    if s.get("wall_time_s") is not None:
        rows.append(("wall time", _seconds(s["wall_time_s"] * 1000)))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def cached_calls(s: dict[str, Any]) -> tuple[int, int]:
    """(calls answered from the cache, all calls) of a run's answered questions."""
    return int(s.get("cached_llm_calls") or 0), int((s.get("llm_calls") or {}).get("total") or 0)


def _uncached(s: dict[str, Any]) -> str:
    lat = s.get("latency_ms") or {}
    n = lat.get("uncached_questions") or 0
    if not n or lat.get("uncached_p50") is None:
        return "every question had a cached call"
    return f"p50 {_seconds(lat['uncached_p50'])} over the {n} question(s) with none"


def _cached_note(s: dict[str, Any]) -> str:
    """What part of the latency is the cache's: a cached call takes no model time."""
    cached, total = cached_calls(s)
    if not cached:
        return ""
    return f" ({cached} of {total} calls from the cache, which takes no model time; without them: {_uncached(s)})"


def _answerable_note(groups: dict[str, Any]) -> str:
    unanswerable = (groups.get("unanswerable") or {}).get("n", 0)
    total = sum(g.get("n", 0) for g in groups.values())
    return f"{total - unanswerable} answerable, {unanswerable} unanswerable (gold paragraphs removed)"


def _status_note(s: dict[str, Any]) -> str:
    status = s.get("status") or ("complete" if s.get("complete", True) else "incomplete")
    return "" if status == "complete" else f" ({status})"


def _seconds(ms: float | None) -> str:
    return "-" if ms is None else f"{ms / 1000:.2f} s"


def breakdown_tables(s: dict[str, Any]) -> str:
    blocks = []
    for key, label in BREAKDOWNS:
        groups = s.get(key) or {}
        if not groups:
            continue
        metrics = [m for m in dict.fromkeys(k for g in groups.values() for k in g if k != "n")]
        rows = [[name, g["n"], *[g.get(m) for m in metrics]] for name, g in groups.items()]
        blocks.append(f"By {label}:\n" + format_table([label, "n", *metrics], rows))
    return "\n\n".join(blocks)


SPLITS = ("answerable", "unanswerable")


def answerability_table(s: dict[str, Any]) -> str:
    """Answerable vs unanswerable questions side by side, one metric per row ("" unless the run has both)."""
    groups = s.get("by_answerable") or {}
    if not all(label in groups for label in SPLITS):
        return ""
    metrics = list(dict.fromkeys(k for label in SPLITS for k in groups[label] if k != "n"))
    rows = [["n", *[groups[label]["n"] for label in SPLITS]]]
    rows += [[m, *[groups[label].get(m) for label in SPLITS]] for m in metrics]
    return "Answerable vs unanswerable (gold paragraphs removed):\n" + format_table(["metric", *SPLITS], rows)


# -- comparing runs -------------------------------------------------------------------

COMPARE_HEADERS = ("run", "method", "retriever", "model", "n", "EM", "F1", "accuracy",
                   "$/question", "calls/question", "cached calls", "p50 latency s")


GROUNDING_HEADERS = ("run", "method", "questions", "n", "F1", "abstain", "answered acc", "truthful",
                     "withheld right", "said not in docs", "evidence F1", "joint F1", "answer cited")
GROUNDING_KEYS = ("f1", "abstention", "answered_accuracy", "truthfulness", "withheld_correct", "said_insufficient",
                  "evidence_f1", "joint_f1", "answer_in_citations")


def questions_label(s: dict[str, Any]) -> str:
    """``answerable``, ``unanswerable`` or ``mixed``: which questions a run asked."""
    present = [label for label in SPLITS if label in (s.get("by_answerable") or {})]
    return "mixed" if len(present) == 2 else (present[0] if present else "answerable")


def grounding_rows(s: dict[str, Any]) -> list[dict[str, Any]]:
    """A run's evidence and abstention numbers: one row, or one per split for a mixed run."""
    groups = s.get("by_answerable") or {}
    base = {"run": s.get("run_id"), "method": s.get("method")}
    if questions_label(s) == "mixed":
        return [{**base, "questions": label, "n": groups[label]["n"],
                 **{k: groups[label].get(k) for k in GROUNDING_KEYS}} for label in SPLITS]
    metrics = s.get("metrics") or {}
    return [{**base, "questions": questions_label(s), "n": s.get("n_answered", 0),
             **{k: metrics.get(k) for k in GROUNDING_KEYS}}]


def grounding_table(rows: Sequence[dict[str, Any]]) -> str:
    keys = ("run", "method", "questions", "n", *GROUNDING_KEYS)
    return format_table(GROUNDING_HEADERS, [[r[k] for k in keys] for r in rows])


def compare_row(s: dict[str, Any]) -> dict[str, Any]:
    metrics = s.get("metrics") or {}
    p50 = (s.get("latency_ms") or {}).get("p50")
    return {
        "run": s.get("run_id"),
        "method": s.get("method"),
        "retriever": s.get("retriever"),
        "model": s.get("model"),
        "n": s.get("n_answered", 0),
        "em": metrics.get("em"),
        "f1": metrics.get("f1"),
        "accuracy": metrics.get("accuracy"),
        "cost_per_question": (s.get("cost_usd") or {}).get("per_question"),
        "calls_per_question": (s.get("llm_calls") or {}).get("per_question"),
        "p50_latency_s": p50 / 1000 if p50 is not None else None,
        # Calls answered from the cache take no model time: the latency of a run with some is not the model's.
        "cached_calls": cached_calls(s)[0],
        "llm_calls": cached_calls(s)[1],
        "p50_latency_uncached_s": _ms_to_s((s.get("latency_ms") or {}).get("uncached_p50")),
        "uncached_questions": (s.get("latency_ms") or {}).get("uncached_questions"),
        "questions": questions_label(s),
        **{k: metrics.get(k) for k in (*ABSTENTION_METRICS, *EVIDENCE_METRICS)},
        "by_answerable": s.get("by_answerable") or {},
    }


def _ms_to_s(ms: float | None) -> float | None:
    return ms / 1000 if ms is not None else None


def compare_table(rows: Sequence[dict[str, Any]]) -> str:
    """The runs side by side; a latency with calls from the cache is marked ``*`` and explained below."""
    keys = ("run", "method", "retriever", "model", "n", "em", "f1", "accuracy",
            "cost_per_question", "calls_per_question")
    cells = []
    for r in rows:
        marked = fmt(r["p50_latency_s"]) + ("*" if r.get("cached_calls") else " ")
        cells.append([*[r[k] for k in keys], f"{r.get('cached_calls', 0)}/{r.get('llm_calls', 0)}", marked])
    table = format_table(COMPARE_HEADERS, cells, right=(len(keys), len(keys) + 1))
    cached = [r for r in rows if r.get("cached_calls")]
    if not cached:
        return table
    each = "; ".join(
        f"{r['run']}: {r['cached_calls']} of {r['llm_calls']} calls"
        + (f" (p50 {fmt(r['p50_latency_uncached_s'])} s over the {r['uncached_questions']} question(s) with none)"
           if r.get("p50_latency_uncached_s") is not None else " (every question had one)")
        for r in cached)
    return (f"{table}\n* part of this latency is the cache's, not the model's: answered from the cache in {each}. "
            "A cached call takes no model time; to time the model, run with --no-cache or a cache.path of its own.")


def _label(row: dict[str, Any]) -> str:
    return row["method"] + (f"/{row['retriever']}" if row.get("retriever") else "")


def plot_compare(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """F1 against cost per question (LLM calls per question when every run cost $0) and against p50
    latency, one point per run (a PNG)."""
    matplotlib = require("matplotlib", "plot", "compare --plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), constrained_layout=True)
    costs = [r.get("cost_per_question") for r in rows if r.get("f1") is not None]
    # Runs that cost nothing (local models) are told apart by their LLM calls instead.
    first = (("calls_per_question", "LLM calls per question (every run cost $0)")
             if all(not c for c in costs) else ("cost_per_question", "cost per question (USD)"))
    panels = (first, ("p50_latency_s", "p50 latency per question (s)"))
    # One colour and marker per run, named once in a legend: labels written beside the points
    # overlapped whenever two runs landed close together.
    markers = "osD^vP*Xh<>p"
    for ax, (key, xlabel) in zip(axes, panels, strict=True):
        for i, row in enumerate(rows):
            x, y = row.get(key), row.get("f1")
            if x is None or y is None:
                continue
            ax.scatter([x], [y], s=50, color=f"C{i % 10}", marker=markers[i % len(markers)],
                       label=f"{i + 1}. {_label(row)}", alpha=0.85)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("F1")
        ax.margins(x=0.15)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlim(left=0)
        ax.grid(True, alpha=0.3)
    handles, labels = axes[1].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside right upper", fontsize=8, frameon=False)
    models = sorted({str(r.get("model")) for r in rows if r.get("model")})
    against = "LLM calls" if first[0] == "calls_per_question" else "cost"
    fig.suptitle(f"F1 vs {against} and latency ({', '.join(models) or 'unknown model'})", fontsize=10)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
