"""Questions per second of ``selfrag run`` against an API backend, by concurrency.

The real CLI (``selfrag run configs/vanilla_rag.yaml``, a child process) runs
against a fake OpenAI-compatible server on 127.0.0.1 that answers every call
after a fixed delay (``lab/fake_openai.py``), so the ideal rate is known exactly:
``concurrency / (rounds x delay)`` questions per second, where ``rounds`` is
the number of LLM calls on a question's critical path (1 for vanilla_rag).
The shipped demo set has 12 questions, too few to keep 32 workers busy, so the
questions are synthetic: a temporary generic-JSONL file, each question with
its own 10 passages (BM25 top 5 of them go into the prompt), cache off.

Three rates per run:

* **steady** = questions / (first request reaching the server .. last answer
  leaving it): the runner's rate once it is going; compared with the ideal.
* **runner** = questions / the run's own ``wall_time_s`` (summary.json).
* **end to end** = questions / the child process's wall time, start-up
  (interpreter, imports, config, dataset, backend) and shutdown included.

Start-up is also measured on its own with a 1-question run. Each point is the
best of ``--repeats`` runs (by steady rate); every run is in the JSON.

    python -m lab.throughput                       # about a minute
    python -m lab.throughput --delay 0.2 --per-worker 20 --concurrency 1 8 32 64

Writes ``throughput.md``, ``throughput.json`` and (with matplotlib)
``throughput.png`` into ``--out`` (default ``lab/results``); the report is
written by :mod:`lab.throughput_report`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lab.fake_openai import (
    ROOT,
    CLIRun,
    FakeOpenAIServer,
    add_common_arguments,
    environment,
    run_selfrag,
    shown_command,
)
from lab.throughput_report import make_plot, notes, report

HERE = Path(__file__).resolve().parent

CONFIG = "configs/vanilla_rag.yaml"
ROUNDS = 1  # LLM calls on vanilla_rag's critical path: retrieve, then answer once
PASSAGES = 10
WORDS = [
    "river", "valley", "northern", "harbour", "ancient", "market", "festival", "bridge", "tower",
    "museum", "railway", "province", "coast", "mountain", "lake", "forest", "island", "trade",
    "guild", "council", "cathedral", "fortress", "library", "university", "garden", "canal",
    "square", "palace", "archive", "observatory", "vineyard", "mill",
]


# -- data ------------------------------------------------------------------------------


def synthetic_questions(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` generic-JSONL questions, each with one gold and nine distractor passages."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        region, city = f"Region {i:04d}", f"Town{i:04d}"
        gold = (
            f"{city} is the capital of {region}. It lies by the {rng.choice(WORDS)} and is known "
            f"for its {rng.choice(WORDS)} and its {rng.choice(WORDS)}."
        )
        contexts = [{"title": city, "text": gold}]
        for j in range(PASSAGES - 1):
            filler = " ".join(rng.choice(WORDS) for _ in range(40))
            contexts.append(
                {"title": f"Place {i:04d}-{j}", "text": f"Place {i:04d}-{j} has a {filler}."}
            )
        rng.shuffle(contexts)
        rows.append(
            {
                "id": f"q{i:04d}",
                "question": f"Which town is the capital of {region}?",
                "answers": [city],
                "contexts": contexts,
            }
        )
    return rows


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    return path


# -- measuring --------------------------------------------------------------------------


def one_run(
    server: FakeOpenAIServer, data: Path, out: Path, run_id: str, n: int, concurrency: int
) -> dict[str, Any]:
    """One ``selfrag run`` of ``n`` questions at ``concurrency``; its timings and counters."""
    server.reset()
    overrides = [
        "data.dataset=jsonl",
        f"data.path={data}",
        f"data.subset_size={n}",
        "cache.enabled=false",
        f"llm.spec={server.spec()}",
        f"run.concurrency={concurrency}",
    ]
    cpu_before = time.process_time()  # this process: the fake server's threads
    run: CLIRun = run_selfrag(CONFIG, overrides, out, run_id)
    server_cpu = time.process_time() - cpu_before
    if run.returncode != 0 or run.summary.get("n_answered") != n:
        tail = run.stderr.strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{shown_command(run)} failed (exit {run.returncode}): {tail[0]}")
    time.sleep(0.05)  # let the server threads record their last answers
    stats = server.stats()
    delay = server.delay
    runner_s = float(run.summary["wall_time_s"])
    span = float(stats["span_s"] or 0.0)
    ideal_qps = concurrency / (ROUNDS * delay)
    ideal_span = math.ceil(n / concurrency) * ROUNDS * delay
    steady_qps = n / span if span else 0.0
    return {
        "n": n,
        "concurrency": concurrency,
        "command": shown_command(run),
        "wall_s": run.wall_s,
        "runner_s": runner_s,
        "span_s": span,
        "ideal_span_s": ideal_span,
        "outside_runner_s": run.wall_s - runner_s,
        "child_cpu_s": run.cpu_s,
        "child_cpu_per_question_ms": 1000 * run.cpu_s / n,
        "server_cpu_s": server_cpu,
        "requests": stats["requests"],
        "peak_in_flight": stats["peak_in_flight"],
        "mean_in_flight": stats["mean_in_flight"],
        "llm_calls_per_question": run.summary["llm_calls"]["per_question"],
        "latency_ms_p50": run.summary["latency_ms"]["p50"],
        "latency_ms_p95": run.summary["latency_ms"]["p95"],
        "steady_qps": steady_qps,
        "runner_qps": n / runner_s if runner_s else 0.0,
        "end_to_end_qps": n / run.wall_s,
        "ideal_qps": ideal_qps,
        "efficiency": steady_qps / ideal_qps,
        "efficiency_vs_batches": ideal_span / span if span else 0.0,
    }


async def _probe(url: str, concurrency: int, n: int) -> dict[str, Any]:
    """``n`` chat calls through selfrag's own HTTP transport, ``concurrency`` workers, no runner."""
    from selfrag.llm.http import HTTPTransport

    transport = HTTPTransport(url, {"Content-Type": "application/json"}, 60.0, "probe")
    payload = {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "Which town?"}],
        "max_tokens": 256,
    }

    async def drain(calls: Any) -> None:
        for _ in calls:  # a shared iterator, as the runner's workers share the questions
            await transport.post_json("/chat/completions", payload)

    async def batch(count: int) -> None:
        calls = iter(range(count))
        async with asyncio.TaskGroup() as group:
            for _ in range(min(concurrency, count)):
                group.create_task(drain(calls))

    await batch(concurrency)  # open the connections first
    cpu, start = time.process_time(), time.perf_counter()
    await batch(n)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    await transport.aclose()
    return {
        "concurrency": concurrency,
        "n": n,
        "wall_s": wall,
        "qps": n / wall,
        "cpu_per_call_ms": 1000 * cpu / n,
    }


def transport_probe(server: FakeOpenAIServer, concurrency: int, n: int) -> dict[str, Any]:
    """:func:`_probe` in a child process (the server must not share this process's GIL)."""
    server.reset()
    cmd = [sys.executable, "-m", "lab.throughput", "--transport-probe", server.url, str(concurrency), str(n)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"transport probe failed (exit {proc.returncode}): {tail[0]}")
    result = json.loads(proc.stdout)
    ideal = concurrency / server.delay
    result.update(
        ideal_qps=ideal, efficiency=result["qps"] / ideal, peak_in_flight=server.peak_in_flight
    )
    return result


def best(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    return max(runs, key=lambda r: r[key])


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- main -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Questions/s of selfrag run against a fake API, by concurrency."
    )
    add_common_arguments(parser, HERE / "results")
    parser.add_argument(
        "--concurrency",
        type=int,
        nargs="+",
        default=[1, 8, 32],
        help="run.concurrency values (default 1 8 32)",
    )
    parser.add_argument(
        "--per-worker",
        type=int,
        default=16,
        help="questions per worker: n = this x concurrency (default 16)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="runs per concurrency, the best is reported (default 3)",
    )
    parser.add_argument(
        "--transport-probe", nargs=3, metavar=("URL", "C", "N"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.transport_probe:  # the child process of transport_probe()
        url, c, n = args.transport_probe
        print(json.dumps(asyncio.run(_probe(url, int(c), int(n)))))
        return 0
    if args.delay <= 0 or args.per_worker < 1 or args.repeats < 1 or min(args.concurrency) < 1:
        parser.error("--delay, --per-worker, --repeats and --concurrency must be positive")
    concurrency = sorted(set(args.concurrency))

    env = environment()
    started = time.perf_counter()
    n_max = args.per_worker * max(concurrency)
    all_runs: list[dict[str, Any]] = []
    all_probes: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    http_only: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix="selfrag-throughput-") as tmp,
        FakeOpenAIServer(delay=args.delay) as server,
    ):
        tmp_dir = Path(tmp)
        data = write_jsonl(tmp_dir / "questions.jsonl", synthetic_questions(n_max))
        out = tmp_dir / "runs"
        log(
            f"fake server at {server.url}, delay {args.delay * 1000:.0f} ms; {n_max} synthetic questions"
        )
        starts = []
        for rep in range(args.repeats):
            r = one_run(server, data, out, f"startup-{rep}", 1, 1)
            starts.append(r)
            log(
                f"start-up run {rep + 1}: {r['wall_s']:.2f} s end to end, {r['outside_runner_s']:.2f} s outside the runner"
            )
        startup = min(starts, key=lambda r: r["wall_s"])
        for c in concurrency:
            n = args.per_worker * c
            runs = []
            for rep in range(args.repeats):
                r = one_run(server, data, out, f"c{c}-{rep}", n, c)
                extra_cpu = max(0.0, r["child_cpu_s"] - startup["child_cpu_s"])
                r["client_cpu_per_question_ms"] = 1000 * extra_cpu / n
                r["client_busy"] = extra_cpu / r["runner_s"] if r["runner_s"] else 0.0
                runs.append(r)
                log(
                    f"concurrency {c:>3}, n {n:>4}, run {rep + 1}: steady {r['steady_qps']:7.1f} q/s "
                    f"(ideal {r['ideal_qps']:.0f}), end to end {r['end_to_end_qps']:6.1f} q/s, "
                    f"peak in flight {r['peak_in_flight']}"
                )
            all_runs += runs
            rows.append(best(runs, "steady_qps"))
            probes = [transport_probe(server, c, n) for _ in range(args.repeats)]
            all_probes += probes
            http_only.append(best(probes, "qps"))
            log(f"concurrency {c:>3}, HTTP only: {http_only[-1]['qps']:7.1f} q/s")

    regenerate = "python -m lab.throughput"
    result: dict[str, Any] = {
        "environment": env,
        "parameters": {
            "config": CONFIG,
            "method": "vanilla_rag",
            "rounds": ROUNDS,
            "delay_s": args.delay,
            "concurrency": concurrency,
            "per_worker": args.per_worker,
            "repeats": args.repeats,
            "passages_per_question": PASSAGES,
            "dataset": "synthetic generic JSONL (temporary file)",
        },
        "startup": startup,
        "rows": rows,
        "http_only": http_only,
        "notes": notes(rows, http_only),
        "all_runs": [*starts, *all_runs],
        "all_http_only": all_probes,
        "benchmark_wall_s": round(time.perf_counter() - started, 1),
        "regenerate": regenerate,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    plot = make_plot(args.out / "throughput.png", rows, http_only, args.delay)
    (args.out / "throughput.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (args.out / "throughput.md").write_text(report(result, plot), encoding="utf-8")
    log(f"wrote {args.out / 'throughput.md'} in {result['benchmark_wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
