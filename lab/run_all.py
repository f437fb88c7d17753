"""Regenerate every report in lab/results/, one entry point after another.

    python -m lab.run_all            # everything (about 1.5 hours: quality runs, dense encoding)
    python -m lab.run_all --quick    # the fast ones only (critical path, throughput, cache replay, serve load)
    python -m lab.run_all --only critical_path throughput

Entry points run one after another (each one's timings assume the machine is
otherwise idle). A failing one is reported and the rest still run; the exit
code is non-zero if any failed. ``llama_build`` is the one entry point not
run here: it compares two builds of llama-cpp-python, each installed in a
Python environment of its own, which it must be given (``--build
NAME=PYTHON``); see lab/README.md.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (entry point, arguments for --quick or None to skip it in --quick mode), in run order.
ENTRY_POINTS: list[tuple[str, list[str] | None]] = [
    ("critical_path", []),
    ("throughput", []),
    ("cache_replay", []),
    ("serve_load", []),
    ("citations", []),  # reads recorded runs: no model call
    ("decision_modes", None),  # the embedded model, a few minutes
    ("retrieval", None),  # a BM25-only run would replace the full report's dense rows
    ("prefix_sharing", None),
    ("quality", None),
    ("confidence", []),  # reads the quality runs, calls no model
    ("critic_study", []),  # reads the critic readings, calls no model
    ("critic_kinds", []),  # reads the critic readings, calls no model
    ("critic_packaged", []),  # the packaged fits on the critic readings, calls no model
    ("critic_labels", []),  # the confidence's label rules on the critic readings, calls no model
    ("confidence_probes", []),  # whole-state probes on the critic readings' hidden states, calls no model
    ("grid_scale", None),  # about 5 minutes: eight cells on 1, 2 and 4 Ray workers
    ("milvus_scale", None),  # about an hour: Milvus Lite and in-process dense up to 1M passages
]
NOT_RUN = {
    "critic_new_user": "asks a benchmark GGUF over lab/new_user_docs (--llm llamacpp:PATH.gguf)",
    "critic_reads": "hours per benchmark model: reads the fitting pool and the evaluation sets (--llm, --set; "
                    "lab/README.md)",
    "llama_build": "needs two llama-cpp-python builds, each in its own Python environment (--build NAME=PYTHON)",
    "relatives": "needs benchmark GGUFs (--llm llamacpp:PATH.gguf): the fitting pool and four settings per model",
    "samples": "writes the samples shipped in the package (src/selfrag/data/samples/), not a report",
    "streaming_latency": "needs a benchmark GGUF to time (--llm llamacpp:PATH.gguf; lab/README.md)",
    "support_readings": "needs the benchmark GGUF that wrote the records it reads (--llm llamacpp:PATH.gguf)",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate every report of the lab.")
    parser.add_argument("--quick", action="store_true", help="skip the slow model runs")
    parser.add_argument("--only", nargs="+", choices=[s for s, _ in ENTRY_POINTS], help="run only these")
    args = parser.parse_args(argv)
    failed: list[str] = []
    for name, quick_args in ENTRY_POINTS:
        if args.only and name not in args.only:
            continue
        if args.quick and quick_args is None:
            print(f"== {name}: skipped (--quick)", flush=True)
            continue
        script_args = quick_args if args.quick else []
        print(f"== {name} {' '.join(script_args)}".rstrip(), flush=True)
        start = time.perf_counter()
        try:
            code = importlib.import_module(f"lab.{name}").main(script_args)
        except SystemExit as exc:  # argparse or an explicit exit inside the entry point
            code = exc.code if isinstance(exc.code, int) else 1
        except Exception as exc:  # one entry point's failure does not stop the others
            print(f"   {name} failed: {type(exc).__name__}: {exc}", flush=True)
            code = 1
        print(f"   {name}: exit {code} in {time.perf_counter() - start:.0f} s", flush=True)
        if code:
            failed.append(name)
    for name, why in NOT_RUN.items():
        print(f"== {name}: not run here ({why})", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}")
        return 1
    print(f"all reports written to {HERE / 'results'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
