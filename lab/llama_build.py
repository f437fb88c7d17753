"""Speed of the portable llama.cpp build against the native (-march=native) one.

Each build lives in its own Python environment; this script runs the same
measurement in each, one after the other, in a child process, and writes
lab/results/llama_build.md:

    python -m lab.llama_build --build portable=.venv/bin/python \
        --build native=/tmp/native-venv/bin/python [--model PATH]... [--repeats 3]

The measurement uses llama-cpp-python's low-level ``eval`` (no selfrag code):
prompt throughput evaluates a 512-token prompt in one batch; decode
throughput generates 128 tokens greedily, one ``eval`` per token. The best of
``--repeats`` runs counts (least disturbed by other load). The builds' compiled
features come from ``llama_print_system_info``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from lab.machine import machine

CHILD = r"""
import json, sys, time
import numpy as np
import llama_cpp
model, n_prompt, n_decode, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
info = llama_cpp.llama_print_system_info().decode()
llm = llama_cpp.Llama(model_path=model, n_ctx=n_prompt + n_decode + 8, n_batch=n_prompt, logits_all=False, verbose=False)
words = ("the quick brown fox jumps over a lazy dog while seven planets circle an old star " * 200).encode()
prompt = llm.tokenize(words, add_bos=True)[:n_prompt]
out = {"system_info": " ".join(info.split()), "prompt": [], "decode": []}
for _ in range(repeats):
    llm.reset()
    t = time.perf_counter(); llm.eval(prompt); out["prompt"].append(n_prompt / (time.perf_counter() - t))
    n_vocab = llm.n_vocab()
    t = time.perf_counter()
    for _ in range(n_decode):
        logits = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(n_vocab,))
        llm.eval([int(np.argmax(logits))])
    out["decode"].append(n_decode / (time.perf_counter() - t))
print("RESULT " + json.dumps(out))
"""


def measure(python: str, model: str, n_prompt: int, n_decode: int, repeats: int) -> dict:
    proc = subprocess.run(
        [python, "-c", CHILD, model, str(n_prompt), str(n_decode), str(repeats)],
        capture_output=True, text=True, timeout=3600,
    )
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def features(info: str) -> str:
    on = [p.split("=")[0].strip() for p in info.split("|") if p.strip().endswith("= 1")]
    return " ".join(x.split(":")[-1].strip() for x in on)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", action="append", required=True, metavar="NAME=PYTHON")
    ap.add_argument("--model", action="append", metavar="GGUF", help="default: the embedded model")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "llama_build.md"))
    args = ap.parse_args(argv)
    models = args.model
    if not models:
        from selfrag.llm.llamacpp import default_model_path

        models = [str(default_model_path())]
    builds = [b.split("=", 1) for b in args.build]
    rows, infos = [], {}
    for model in models:
        for name, python in builds:
            r = measure(python, model, args.prompt_tokens, args.decode_tokens, args.repeats)
            print(name, Path(model).name, {k: v for k, v in r.items() if k != "system_info"}, flush=True)
            if "error" in r:
                rows.append(f"| {Path(model).name} | {name} | failed: {r['error']} | | |")
                continue
            infos[name] = features(r["system_info"])
            rows.append(
                f"| {Path(model).name} | {name} | {max(r['prompt']):.0f} | {max(r['decode']):.1f} "
                f"| {statistics.median(r['prompt']):.0f} / {statistics.median(r['decode']):.1f} |"
            )
    lines = [
        "# Portable vs native llama.cpp build",
        "",
        "Measured {date} on {platform} ({usable_cpus} of {cpu_count} CPUs usable, {cpu}), "
        "Python {python}, commit {commit}.".format(cpu=cpu_model(), **machine()),
        "",
        "Written by `python -m lab.llama_build`: the same llama-cpp-python version built twice, "
        "once by `scripts/setup.sh` (GGML_NATIVE=OFF, instruction sets from /proc/cpuinfo, never AMX) "
        "and once with llama-cpp-python's default `-march=native`. Tokens per second, best of "
        f"{args.repeats} runs (median in the last column): a {args.prompt_tokens}-token prompt "
        f"evaluated in one batch, {args.decode_tokens} tokens decoded greedily one at a time.",
        "",
        "| model | build | prompt tok/s | decode tok/s | median prompt / decode |",
        "|---|---|---|---|---|",
        *rows,
        "",
        "Compiled features (llama.cpp system info):",
        "",
        *[f"- {name}: {feats}" for name, feats in infos.items()],
        "",
    ]
    Path(args.out).write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
