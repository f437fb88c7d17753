"""lab.relatives' reading of run records and its report: recall, routing shares, adaptive_rag against the
strategies it routes to, and the Markdown tables."""

from __future__ import annotations

from typing import Any

from lab.quality_runs import BASELINE
from lab.quality_stats import paired_bootstrap
from selfrag.reflection.router import STRATEGIES as STRATEGY_VARIANTS


def _answered(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("error") is None and r.get("prediction") is not None]


def _recall_of(record: dict[str, Any]) -> float:
    """The gold paragraphs' recall among everything the question retrieved (nothing retrieved: 0)."""
    return next((float(v) for k, v in (record.get("metrics") or {}).items() if k.startswith("retrieval_recall@")),
                0.0)


def recall(rows: list[dict[str, Any]]) -> float | None:
    """Mean recall of the gold paragraphs among everything retrieved (a question that retrieved nothing: 0)."""
    ok = _answered(rows)
    return round(sum(map(_recall_of, ok)) / len(ok), 4) if ok else None


def recall_vs(rows: list[dict[str, Any]], base: list[dict[str, Any]]) -> dict[str, float] | None:
    """The paired recall difference to ``base`` on the questions both answered, with its bootstrap interval."""
    theirs = {r["id"]: _recall_of(r) for r in _answered(base)}
    ours = {r["id"]: _recall_of(r) for r in _answered(rows) if r["id"] in theirs}
    found = paired_bootstrap(list(ours.values()), [theirs[i] for i in ours])
    return None if found is None else {**found, "n": len(ours)}


def routed(rows: list[dict[str, Any]]) -> dict[str, float] | None:
    """The share of questions ``adaptive_rag`` sent to each strategy."""
    routes = [((r.get("details") or {}).get("route") or {}).get("strategy") for r in rows if r.get("error") is None]
    routes = [s for s in routes if s]
    if not routes:
        return None
    return {s: round(routes.count(s) / len(routes), 4) for s in STRATEGY_VARIANTS}


def against_strategies(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any] | None:
    """``adaptive_rag`` against the strategies it routes to, on the questions all of them answered: its F1
    minus the best strategy's (with the paired interval) and its calls beside ``ircot``'s."""
    ran = [s for s in STRATEGY_VARIANTS if s in runs]
    if "adaptive_rag" not in runs or not ran:
        return None
    by_id = {name: {r["id"]: r for r in _answered(runs[name])} for name in ["adaptive_rag", *ran]}
    shared = sorted(set.intersection(*(set(v) for v in by_id.values())))
    if not shared:
        return None

    def f1(name: str) -> list[float]:
        return [float((by_id[name][i].get("metrics") or {}).get("f1") or 0.0) for i in shared]

    def calls(name: str) -> float:
        return sum(float((by_id[name][i].get("accounting") or {}).get("llm_calls") or 0) for i in shared) / len(shared)

    best = max(ran, key=lambda s: sum(f1(s)))
    return {"n": len(shared), "best": best, "best_f1": sum(f1(best)) / len(shared),
            "f1": sum(f1("adaptive_rag")) / len(shared), "vs_best": paired_bootstrap(f1("adaptive_rag"), f1(best)),
            "calls": calls("adaptive_rag"), "calls_alone": {s: calls(s) for s in ran}}


def _num(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def render(data: dict[str, Any]) -> str:
    env = data["environment"]
    lines = [f"# The relatives: IRCoT and Adaptive-RAG beside Self-RAG ({env['model']})", "",
             f"{env['date']}, commit {env['commit']}, {env['platform']}, {env['cpus']} CPUs; `python -m lab.relatives "
             f"--llm {env['llm']}`. Δ: the paired F1 difference to `{BASELINE}` with its bootstrap 95% interval; "
             "recall: the gold paragraphs among everything the method retrieved; Δ recall: the paired difference "
             "to `vanilla_rag`'s, with its interval.", ""]
    router = data.get("router")
    if router:
        oof = router["routed_out_of_fold"]
        lines += [f"Router (`{data['router_file']}`): {router.get('questions', router['n'])} pool questions, fitted on "
                  f"the {router['n']} that told the strategies apart (the rest every strategy got wrong alike), "
                  f"labels {router['labels']}; "
                  f"out-of-fold accuracy {router['cv_accuracy']:.3f} (most common label {router['majority_accuracy']:.3f}); "
                  f"routed F1 {oof['f1']:.3f} at {oof['calls']:.1f} calls against "
                  + ", ".join(f"{s} {r['f1']:.3f} at {r['calls']:.1f}" for s, r in router["alone"].items())
                  + f"; the oracle {router['oracle']['f1']:.3f}.", ""]
    for setting, note in data["settings"].items():
        rows = [r for r in data["rows"] if r["setting"] == setting]
        if not rows:
            continue
        lines += [f"## {setting}", "", note + ".", "",
                  "| method | n | F1 | Δ F1 [95% CI] | recall | Δ recall [95% CI] | calls/q | tokens/q | s/q | routed |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            d = r["vs_baseline"]
            delta = "–" if d is None else f"{d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]"
            rv = r.get("recall_vs_vanilla")
            recall_delta = "–" if rv is None else f"{rv['diff']:+.3f} [{rv['lo']:+.3f}, {rv['hi']:+.3f}]"
            share = "" if not r["routed"] else ", ".join(f"{s} {v:.0%}" for s, v in r["routed"].items())
            n = f"{r['n']}" + (f" of {r['target_n']}" if r["partial"] else "")
            lines.append(f"| `{r['method']}` | {n} | {_num(r['metrics']['f1'])} | {delta} | {_num(r['recall'])} | {recall_delta} | "
                         f"{_num(r['llm_calls_per_q'], 1)} | {_num(r['tokens_per_q'], 0)} | "
                         f"{_num(r['seconds_per_q'], 1)} | {share} |")
        lines.append("")
        v = (data.get("adaptive") or {}).get(setting)
        if v:
            d = v["vs_best"]
            alone = ", ".join(f"`{s}` {c:.1f}" for s, c in v["calls_alone"].items())
            lines += [f"`adaptive_rag` on the {v['n']} questions every strategy answered: F1 {v['f1']:.3f} against "
                      f"the best strategy alone (`{v['best']}`) {v['best_f1']:.3f}, {d['diff']:+.3f} "
                      f"[{d['lo']:+.3f}, {d['hi']:+.3f}]; {v['calls']:.1f} calls per question against {alone}.", ""]
    return "\n".join(lines)
