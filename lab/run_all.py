"""Regenerate every benchmark report in benchmarks/results/.

    python benchmarks/run_all.py            # everything (about 1.5 hours: quality runs, dense encoding)
    python benchmarks/run_all.py --quick    # the fast ones only (critical path, throughput, cache replay)
    python benchmarks/run_all.py --only critical_path throughput

Scripts run one after another (each one's timings assume the machine is
otherwise idle). A failing script is reported and the rest still run; the
exit code is non-zero if any failed.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (script, arguments for --quick or None to skip it in --quick mode), in run order.
SCRIPTS: list[tuple[str, list[str] | None]] = [
    ("critical_path", []),
    ("throughput", []),
    ("cache_replay", []),
    ("retrieval", None),  # a BM25-only run would replace the full report's dense rows
    ("prefix_sharing", None),
    ("quality", None),
]


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", HERE / f"{name}.py")
    if spec is None or spec.loader is None:
        raise FileNotFoundError(HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs: dataclasses look their module up in sys.modules.
    sys.modules[spec.name] = module
    sys.path.insert(0, str(HERE))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(HERE))
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate every benchmark report.")
    parser.add_argument("--quick", action="store_true", help="skip the slow model runs")
    parser.add_argument("--only", nargs="+", choices=[s for s, _ in SCRIPTS], help="run only these")
    args = parser.parse_args(argv)
    failed: list[str] = []
    for name, quick_args in SCRIPTS:
        if args.only and name not in args.only:
            continue
        if args.quick and quick_args is None:
            print(f"== {name}: skipped (--quick)", flush=True)
            continue
        script_args = quick_args if args.quick else []
        print(f"== {name} {' '.join(script_args)}".rstrip(), flush=True)
        start = time.perf_counter()
        try:
            code = load(name).main(script_args)
        except SystemExit as exc:  # argparse or an explicit exit inside the script
            code = exc.code if isinstance(exc.code, int) else 1
        except Exception as exc:  # one script's failure does not stop the others
            print(f"   {name} failed: {type(exc).__name__}: {exc}", flush=True)
            code = 1
        print(f"   {name}: exit {code} in {time.perf_counter() - start:.0f} s", flush=True)
        if code:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}")
        return 1
    print(f"all reports written to {HERE / 'results'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
