"""The throughput benchmark's report: the Markdown tables, the reading of them, the plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab.fake_openai import environment_line


def report(result: dict[str, Any], plot: Path | None) -> str:
    env, p = result["environment"], result["parameters"]
    rounds, passages = p["rounds"], p["passages_per_question"]
    start = result["startup"]
    load = env.get("load_average") or [0.0]
    lines = [
        "# Throughput of `selfrag run` against an API backend",
        "",
        environment_line(env),
    ]
    if load[0] >= 0.5:
        lines.append(
            "The machine was not idle (see the load average), so CPU-bound rates are pessimistic; "
            "the fake server's delay is exact."
        )
    lines += [
        "",
        f"Method `vanilla_rag` (`{p['config']}`: BM25 top 5 of each question's {passages} passages, one "
        f"LLM call per question, so rounds = {rounds}), cache off, through the real CLI in a child "
        f"process against a fake OpenAI-compatible server on 127.0.0.1 (`lab/fake_openai.py`, "
        f"a thread per connection) that answers every call after **{p['delay_s'] * 1000:.0f} ms**. "
        f"Synthetic questions (the shipped demo set has only 12): n = {p['per_worker']} x "
        f"concurrency, so every run is {p['per_worker']} rounds of the ideal schedule "
        f"({p['per_worker'] * p['delay_s']:.1f} s). Best of {p['repeats']} runs per row (by steady "
        "rate).",
        "",
        "*ideal* = concurrency / (rounds x delay). *steady* = n / (first request at the server .. "
        "last answer from it). *runner* = n / the run's own `wall_time_s`. *end to end* = n / wall "
        "time of the whole `selfrag run` process. *efficiency* = steady / ideal. *in flight* = "
        "requests at the server at the same time (peak; mean = total request time / span). "
        "*client CPU* = CPU time (user + system) of the `selfrag` process beyond that of the "
        "1-question start-up run, per question; *client busy* = that CPU time / the runner's "
        "wall time (1.0 = one core, the most one event loop can use); *server CPU* = CPU time of "
        "the fake server (the benchmark's own process) per question.",
        "",
        "| concurrency | n | ideal q/s | steady q/s | efficiency | runner q/s | end-to-end q/s "
        "| wall s | outside runner s | peak in flight | mean in flight | p50 / p95 latency ms "
        "| client CPU ms/q | client busy | server CPU ms/q | LLM calls/q |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['concurrency']} | {r['n']} | {r['ideal_qps']:.1f} | {r['steady_qps']:.1f} "
            f"| {r['efficiency']:.0%} | {r['runner_qps']:.1f} | {r['end_to_end_qps']:.1f} "
            f"| {r['wall_s']:.2f} | {r['outside_runner_s']:.2f} | {r['peak_in_flight']} "
            f"| {r['mean_in_flight']:.1f} | {r['latency_ms_p50']:.0f} / {r['latency_ms_p95']:.0f} "
            f"| {r['client_cpu_per_question_ms']:.2f} | {r['client_busy']:.2f} "
            f"| {1000 * r['server_cpu_s'] / r['n']:.2f} | {r['llm_calls_per_question']:.0f} |"
        )
    lines += [
        "",
        "## Start-up",
        "",
        f"A 1-question run takes {start['wall_s']:.2f} s end to end, of which the runner itself "
        f"(`wall_time_s`) is {start['runner_s']:.2f} s and the LLM call {p['delay_s']:.2f} s: "
        f"**{start['outside_runner_s']:.2f} s** goes to starting and stopping the process "
        f"(interpreter, imports, config, dataset, backend; {start['child_cpu_s']:.2f} s of CPU). "
        "That cost is paid once per run, so the end-to-end rate of a short run understates the "
        "steady rate; the steady column leaves it out.",
        "",
        "## HTTP alone",
        "",
        "The same calls through selfrag's own HTTP transport (`selfrag.llm.http.HTTPTransport`, "
        "the client the `openai:` backend uses) from a child process with the same number of "
        "workers, no runner, no retrieval, no scoring: what the HTTP stack (httpx and the "
        "Python fake server on the same cores) allows by itself.",
        "",
        "| concurrency | n | ideal q/s | HTTP-only q/s | efficiency | client CPU ms/call "
        "| runner steady q/s | runner / HTTP-only |",
        "|---|---|---|---|---|---|---|---|",
    ]
    steady = {r["concurrency"]: r["steady_qps"] for r in result["rows"]}
    for h in result["http_only"]:
        run_qps = steady[h["concurrency"]]
        lines.append(
            f"| {h['concurrency']} | {h['n']} | {h['ideal_qps']:.1f} | {h['qps']:.1f} "
            f"| {h['efficiency']:.0%} | {h['cpu_per_call_ms']:.2f} | {run_qps:.1f} "
            f"| {run_qps / h['qps']:.0%} |"
        )
    lines += ["", "## Reading", ""] + [f"- {x}" for x in result["notes"]] + [""]
    if plot is not None:
        lines += [f"![questions/s by concurrency]({plot.name})", ""]
    lines += [
        f"Regenerate: `{result['regenerate']}` (options: `--delay`, `--per-worker`, "
        "`--concurrency`, `--repeats`; about a minute). Every run's numbers are in "
        "`throughput.json`.",
        "",
    ]
    return "\n".join(lines)


def notes(rows: list[dict[str, Any]], http_only: list[dict[str, Any]]) -> list[str]:
    out = []
    overlapped = all(r["peak_in_flight"] == r["concurrency"] for r in rows)
    peaks = ", ".join(str(r["peak_in_flight"]) for r in rows)
    levels = ", ".join(str(r["concurrency"]) for r in rows)
    out.append(
        f"The runner overlaps its calls: the server saw at most {peaks} requests at once at "
        f"concurrency {levels}"
        + (
            ", i.e. every worker had its call in flight."
            if overlapped
            else " (fewer than the workers somewhere)."
        )
    )
    top = max(rows, key=lambda r: r["concurrency"])
    http = {h["concurrency"]: h for h in http_only}.get(top["concurrency"])
    if http is not None:
        missing = round(100 * (1 - top["efficiency"]))
        http_part = min(missing, max(0, round(100 * (1 - http["efficiency"]))))
        out.append(
            f"At concurrency {top['concurrency']} the runner reaches {top['efficiency']:.0%} of ideal "
            f"and HTTP alone {http['efficiency']:.0%}: of the {missing} points missing, about "
            f"{http_part} are the HTTP stack "
            f"itself (the client takes {http['cpu_per_call_ms']:.1f} ms of CPU per call in httpx "
            f"and JSON, the fake server {1000 * top['server_cpu_s'] / top['n']:.1f} ms) and about "
            f"{missing - http_part} the runner's own work per "
            f"question (retrieval over the question's passages, scoring, the prediction line: "
            f"{top['client_cpu_per_question_ms']:.1f} ms of CPU per question in all, keeping the "
            f"event loop {top['client_busy']:.0%} busy). On 2 shared cores the client and the server "
            "compete for CPU, so the gap is a property of this machine as much as of selfrag."
        )
    out.append(
        "selfrag's HTTP client (`src/selfrag/llm/http.py`) allows 64 connections per backend, 32 of "
        "them kept alive: concurrency up to 32 is never throttled by the pool; above 32 the extra "
        "connections are reopened per call, and above 64 calls queue for a connection."
    )
    out.append(
        "Pitfall found while building this benchmark: Python's `http.server` writes the headers "
        "and the body of a response in two sends, and without `TCP_NODELAY` the body waits for the "
        "client's delayed ACK, about 40 ms per call on Linux (the first version of the fake server "
        "measured 7.1 q/s at concurrency 1, 71% of ideal, with a p50 latency of 143 ms for a "
        "100 ms delay). The fake server now disables Nagle's algorithm, as real servers do."
    )
    return out


def make_plot(
    path: Path, rows: list[dict[str, Any]], http_only: list[dict[str, Any]], delay: float
) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    conc = [r["concurrency"] for r in rows]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot(
        conc, [r["ideal_qps"] for r in rows], "k--", marker="o", label="ideal: c / (rounds x delay)"
    )
    ax.plot(
        [h["concurrency"] for h in http_only],
        [h["qps"] for h in http_only],
        marker="^",
        label="HTTP only (no runner)",
    )
    ax.plot(conc, [r["steady_qps"] for r in rows], marker="o", label="selfrag run, steady")
    ax.plot(conc, [r["end_to_end_qps"] for r in rows], marker="s", label="selfrag run, end to end")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(conc, [str(c) for c in conc])
    ax.set_xlabel("run.concurrency")
    ax.set_ylabel("questions / s")
    ax.set_title(f"vanilla_rag against a fake API, {delay * 1000:.0f} ms per call")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
