"""Decode a few tokens with llama.cpp in a child process, so a native crash cannot kill the caller.

A llama.cpp library built for instructions the machine cannot run dies with
SIGSEGV or SIGILL, taking the whole Python process with it. Everything that
must survive such a crash (``scripts/setup.sh``, ``selfrag doctor``, the test
suite) asks a child process instead::

    python -m selfrag.doctor.smoke [--model PATH]     # parent: one line, exit 0 / 1

The child prints llama.cpp's system info first (flushed, so it survives a
crash in decoding), then loads the model and decodes through the same
:class:`~selfrag.llm.llamacpp.LlamaCppBackend` path the product uses.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REBUILD = "bash scripts/setup.sh --rebuild"
SYSTEM_INFO = "system_info: "
RESULT = "result: "
PROMPT = "Complete the list: one, two, three,"


@dataclass(frozen=True)
class SmokeResult:
    ok: bool
    message: str  # one line: what happened
    fix: str = ""  # one line: what to do (empty when ok)
    system_info: str = ""
    details: dict = field(default_factory=dict)

    def line(self) -> str:
        return self.message if self.ok or not self.fix else f"{self.message}; fix: {self.fix}"


def compiled_features(system_info: str) -> dict[str, bool]:
    """``{"AVX2": True, "AMX_INT8": False, ...}`` from llama.cpp's system info string."""
    features: dict[str, bool] = {}
    for part in system_info.replace("\n", "|").split("|"):
        name, eq, value = part.partition("=")
        if eq and value.strip() in ("0", "1"):
            key = name.strip().split(":")[-1].strip()
            features[key] = value.strip() == "1"
    return features


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def run_smoke(
    model: str | Path | None = None,
    *,
    timeout: float = 300.0,
    python: str | None = None,
    env: dict[str, str] | None = None,
    max_tokens: int = 4,
) -> SmokeResult:
    """Load ``model`` (default: the embedded one) and decode ``max_tokens`` tokens in a child."""
    cmd = [python or sys.executable, "-m", "selfrag.doctor.smoke", "--child", "--max-tokens", str(max_tokens)]
    if model:
        cmd += ["--model", str(model)]
    what = f"llama.cpp smoke test ({Path(str(model)).name if model else 'embedded model'})"
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, env=env or os.environ.copy()
        )
    except subprocess.TimeoutExpired:
        return SmokeResult(
            False, f"{what}: no answer within {timeout:.0f} s",
            "check the machine's load; then rerun `selfrag doctor`",
        )
    info = ""
    result: dict = {}
    for line in proc.stdout.splitlines():
        if line.startswith(SYSTEM_INFO):
            info = line[len(SYSTEM_INFO):]
        elif line.startswith(RESULT):
            try:
                result = json.loads(line[len(RESULT):])
            except json.JSONDecodeError:
                result = {}
    if proc.returncode < 0:
        features = compiled_features(info)
        amx = [k for k, v in features.items() if v and k.startswith("AMX")]
        cause = f"llama.cpp contains {'/'.join(amx)} code" if amx else "llama.cpp was built for instructions this CPU refuses"
        return SmokeResult(
            False,
            f"{what}: the child process died with {_signal_name(proc.returncode)} while loading or decoding ({cause})",
            f"rebuild llama-cpp-python for this CPU without -march=native: {REBUILD}",
            info,
        )
    if proc.returncode != 0 or not result.get("ok"):
        last = result.get("error") or _last_line(proc.stderr) or f"exit status {proc.returncode}"
        fix = result.get("fix") or f"reinstall: {REBUILD}"
        return SmokeResult(False, f"{what} failed: {last}", fix, info)
    return SmokeResult(
        True,
        f"{what}: decoded {result.get('tokens')} tokens in {result.get('seconds', 0):.2f} s",
        system_info=info,
        details=result,
    )


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _child(model: str | None, max_tokens: int) -> int:
    import asyncio
    import time

    try:
        import llama_cpp
    except ImportError:
        print(RESULT + json.dumps({
            "ok": False, "error": "llama-cpp-python is not installed",
            "fix": "pip install 'selfrag[local]' (or bash scripts/setup.sh)",
        }), flush=True)
        return 1
    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
    print(SYSTEM_INFO + " ".join(info.split()), flush=True)

    from selfrag.errors import SelfragError
    from selfrag.llm.llamacpp import LlamaCppBackend

    start = time.perf_counter()
    try:
        backend = LlamaCppBackend(model, n_ctx=512)
        gen = asyncio.run(backend.generate(PROMPT, max_tokens=max_tokens))
    except SelfragError as exc:
        print(RESULT + json.dumps({"ok": False, "error": str(exc)}), flush=True)
        return 1
    print(RESULT + json.dumps({
        "ok": True,
        "tokens": gen.completion_tokens,
        "text": gen.text,
        "seconds": round(time.perf_counter() - start, 3),
        "model": str(backend.model_path),
        "llama_cpp_version": getattr(llama_cpp, "__version__", "?"),
    }), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m selfrag.doctor.smoke")
    parser.add_argument("--model", help="a GGUF file (default: the embedded model)")
    parser.add_argument("--max-tokens", type=int, default=4)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.model, args.max_tokens)
    result = run_smoke(args.model, max_tokens=args.max_tokens)
    print(("ok: " if result.ok else "error: ") + result.line(), file=sys.stdout if result.ok else sys.stderr)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
