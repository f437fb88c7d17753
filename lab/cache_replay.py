"""A repeated ``selfrag run`` is answered from the LLM cache: zero calls reach the server.

Each scenario runs the real CLI (``selfrag run``, a child process) twice over
the shipped demo questions, with the SQLite cache on and one cache file, as
two separate runs (different run ids and output folders), against a fake
OpenAI-compatible server on 127.0.0.1 that answers every call after a fixed
delay (``lab/fake_openai.py``). The server counts the calls it receives. The
second run must make none, and every question must get the same answer in
both runs.

Scenarios: ``vanilla_rag`` (1 call per question) and ``self_rag`` with
``retrieval_mode=always`` (2 x 3 calls per question; the fake server's
fixed answer is not valid critique output, so the critiques fall back to their
defaults, which is all this check needs).

    python -m lab.cache_replay                   # about 10 s
    python -m lab.cache_replay --delay 0.2 --concurrency 2

Writes ``cache_replay.md`` and ``cache_replay.json`` into ``--out`` (default
``lab/results``). Exits 1 with a one-line message when a second run
reached the server or changed an answer (the reports are written first).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

from lab.fake_openai import (
    CLIRun,
    FakeOpenAIServer,
    add_common_arguments,
    environment,
    environment_line,
    run_selfrag,
    shown_command,
)

HERE = Path(__file__).resolve().parent


class Scenario(NamedTuple):
    name: str
    config: str
    overrides: tuple[str, ...] = ()
    note: str = ""
    why_first_run_cached: str = ""  # why its first run can be partly answered from the cache


SCENARIOS = (
    Scenario("vanilla_rag", "configs/vanilla_rag.yaml", note="1 call per question"),
    Scenario(
        "self_rag_always",
        "configs/self_rag.yaml",
        ("self_rag.retrieval_mode=always",),
        note="combined critique, 3 candidates, 6 calls per question",
        why_first_run_cached=(
            "the utility prompt holds only the question and the candidate's answer, and with the "
            "fake server's fixed answer the 3 candidates' utility calls of a question are "
            "identical, so 2 of them wait for the first one (the cache's in-flight "
            "de-duplication) instead of calling the server"
        ),
    ),
)
RUNS = ("first", "replay")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def answers(run: CLIRun) -> dict[str, Any]:
    """Question id -> predicted answer (None for an error line)."""
    return {str(rec["id"]): rec.get("prediction") for rec in run.predictions()}


def run_pair(
    server: FakeOpenAIServer, scenario: Scenario, tmp: Path, concurrency: int
) -> dict[str, Any]:
    """The scenario twice over one cache; both runs' numbers and whether the replay held."""
    cache = tmp / scenario.name / "cache.db"
    overrides = [
        "data.dataset=demo",
        "data.path=null",
        "data.subset_size=null",
        "cache.enabled=true",
        f"cache.path={cache}",
        f"llm.spec={server.spec()}",
        f"run.concurrency={concurrency}",
        *scenario.overrides,
    ]
    runs: list[dict[str, Any]] = []
    predictions: list[dict[str, Any]] = []
    for label in RUNS:
        server.reset()
        output = tmp / scenario.name / label  # a separate output folder per run
        run = run_selfrag(scenario.config, overrides, output, f"{scenario.name}-{label}")
        time.sleep(0.05)  # let the server threads record their last answers
        if run.returncode != 0 or not run.summary:
            tail = run.stderr.strip().splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"{shown_command(run)} failed (exit {run.returncode}): {tail[0]}")
        s = run.summary
        runs.append(
            {
                "run": label,
                "command": shown_command(run),
                "wall_s": run.wall_s,
                "runner_s": float(s["wall_time_s"]),
                "server_calls": server.requests,
                "llm_calls": s["llm_calls"]["total"],
                "cached_llm_calls": s["cached_llm_calls"],
                "cache_hits": s["cache"]["hits"],
                "cache_misses": s["cache"]["misses"],
                "n_questions": s["n_questions"],
                "n_answered": s["n_answered"],
                "n_errors": s["n_errors"],
                "em": s["metrics"].get("em"),
            }
        )
        predictions.append(answers(run))
        log(
            f"{scenario.name} {label}: {run.wall_s:.2f} s, {server.requests} server calls, "
            f"{s['cached_llm_calls']} of {s['llm_calls']['total']} LLM calls cached"
        )
    first, replay = predictions
    differing = sorted(q for q in first.keys() | replay.keys() if first.get(q) != replay.get(q))
    return {
        "scenario": scenario.name,
        "config": scenario.config,
        "overrides": list(scenario.overrides),
        "note": scenario.note,
        "why_first_run_cached": scenario.why_first_run_cached,
        "runs": runs,
        "replay_server_calls": runs[1]["server_calls"],
        "same_answers": not differing,
        "differing_ids": differing,
        "questions_compared": len(first.keys() | replay.keys()),
        "example_answer": next(iter(first.values()), None),
    }


def report(result: dict[str, Any]) -> str:
    env, p = result["environment"], result["parameters"]
    lines = [
        "# Cache replay: a repeated run makes no LLM calls",
        "",
        environment_line(env),
        "",
        f"Each scenario runs `selfrag run` (the real CLI, a child process) twice over the shipped "
        f"demo questions ({result['scenarios'][0]['runs'][0]['n_questions']}), concurrency "
        f"{p['concurrency']}, with `cache.enabled=true` and one `cache.path` per scenario, as two "
        f"runs with their own run ids and output folders, against a fake OpenAI-compatible server "
        f"on 127.0.0.1 that answers every call after {p['delay_s'] * 1000:.0f} ms with the fixed "
        f"text {p['answer']!r} and counts the calls it receives.",
        "",
        "*server calls* = requests the fake server received during that run; *LLM calls* and "
        "*cached* = the run's summary (`llm_calls.total`, `cached_llm_calls`); *hits / misses* = "
        "the summary's `cache` block. A first run can have cached calls of its own: identical "
        "calls in flight at the same time are made once.",
        "",
        "| scenario | run | wall s | runner s | server calls | LLM calls | cached | hits / misses "
        "| answered | errors | EM |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for sc in result["scenarios"]:
        for r in sc["runs"]:
            em = "n/a" if r["em"] is None else f"{r['em']:.3f}"
            lines.append(
                f"| {sc['scenario']} | {r['run']} | {r['wall_s']:.2f} | {r['runner_s']:.2f} "
                f"| {r['server_calls']} | {r['llm_calls']} | {r['cached_llm_calls']} "
                f"| {r['cache_hits']} / {r['cache_misses']} | {r['n_answered']} | {r['n_errors']} | {em} |"
            )
    for sc in result["scenarios"]:
        first = sc["runs"][0]
        if first["cached_llm_calls"] and sc["why_first_run_cached"]:
            lines += [
                "",
                f"`{sc['scenario']}`'s first run has {first['cached_llm_calls']} cached calls of "
                f"{first['llm_calls']}: {sc['why_first_run_cached']}.",
            ]
    lines += ["", "## Checks", ""]
    for sc in result["scenarios"]:
        first, replay = sc["runs"]
        calls = "PASS" if sc["replay_server_calls"] == 0 else "FAIL"
        same = "PASS" if sc["same_answers"] else "FAIL"
        lines.append(
            f"- `{sc['scenario']}` ({sc['note']}): replay reached the server "
            f"{sc['replay_server_calls']} times ({calls}; the first run {first['server_calls']}); "
            f"answers identical for {sc['questions_compared'] - len(sc['differing_ids'])} of "
            f"{sc['questions_compared']} questions ({same}); wall time {first['wall_s']:.2f} s -> "
            f"{replay['wall_s']:.2f} s, runner {first['runner_s']:.2f} s -> {replay['runner_s']:.2f} s."
        )
    lines += [
        "",
        "The replay's wall time is mostly process start-up (interpreter, imports, dataset, "
        "retriever): the runner's own time is the better measure of what the cache saves.",
        "",
        f"Regenerate: `{result['regenerate']}` (options: `--delay`, `--concurrency`). Commands of "
        "every run are in `cache_replay.json`.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Check that a repeated selfrag run is answered from the cache."
    )
    add_common_arguments(parser, HERE / "results")
    parser.add_argument("--concurrency", type=int, default=4, help="run.concurrency (default 4)")
    args = parser.parse_args(argv)
    if args.delay < 0 or args.concurrency < 1:
        parser.error("--delay must be >= 0 and --concurrency >= 1")

    env = environment()
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="selfrag-cache-replay-") as tmp,
        FakeOpenAIServer(delay=args.delay) as server,
    ):
        log(f"fake server at {server.url}, delay {args.delay * 1000:.0f} ms")
        scenarios = [run_pair(server, sc, Path(tmp), args.concurrency) for sc in SCENARIOS]
        answer = server.answer

    regenerate = "python -m lab.cache_replay"
    result: dict[str, Any] = {
        "environment": env,
        "parameters": {
            "delay_s": args.delay,
            "concurrency": args.concurrency,
            "dataset": "demo",
            "answer": answer,
        },
        "scenarios": scenarios,
        "passed": all(sc["replay_server_calls"] == 0 and sc["same_answers"] for sc in scenarios),
        "benchmark_wall_s": round(time.perf_counter() - started, 1),
        "regenerate": regenerate,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cache_replay.json").write_text(
        json.dumps(result, indent=2) + "\n", encoding="utf-8"
    )
    (args.out / "cache_replay.md").write_text(report(result), encoding="utf-8")
    log(f"wrote {args.out / 'cache_replay.md'} in {result['benchmark_wall_s']:.0f} s")
    for sc in scenarios:
        if sc["replay_server_calls"]:
            print(
                f"cache_replay: the second {sc['scenario']} run made {sc['replay_server_calls']} "
                "call(s) to the server; it should have made none",
                file=sys.stderr,
            )
            return 1
        if not sc["same_answers"]:
            print(
                f"cache_replay: the second {sc['scenario']} run changed the answers of "
                f"{len(sc['differing_ids'])} question(s), e.g. {sc['differing_ids'][0]}",
                file=sys.stderr,
            )
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
