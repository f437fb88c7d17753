"""Which instruction sets to build llama.cpp with, read from the CPU.

llama-cpp-python builds llama.cpp with ``GGML_NATIVE=ON`` by default
(``-march=native``). On a virtual machine whose CPU advertises AMX but does
not let the process use AMX tile state, that build dies with SIGSEGV on the
first matrix product. selfrag builds with ``GGML_NATIVE=OFF`` and switches on
exactly the instruction sets ``/proc/cpuinfo`` lists, never AMX.

Standard library only: ``scripts/setup.sh`` runs this file with the system
Python before any package is installed::

    python3 src/selfrag/doctor/cpu.py --cmake-args   # the CMAKE_ARGS to build with
    python3 src/selfrag/doctor/cpu.py --describe     # one line: what was seen and chosen
"""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass
from pathlib import Path

# (GGML option, the cpuinfo flags that must all be present). Order: as ggml lists them.
X86_OPTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("GGML_SSE42", ("sse4_2",)),
    ("GGML_AVX", ("avx",)),
    ("GGML_AVX2", ("avx2",)),
    ("GGML_FMA", ("fma",)),
    ("GGML_F16C", ("f16c",)),
    ("GGML_BMI2", ("bmi2",)),
    ("GGML_AVX_VNNI", ("avx_vnni",)),
    # ggml's AVX512 switch compiles with -mavx512f -mavx512cd -mavx512vl -mavx512dq -mavx512bw.
    ("GGML_AVX512", ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw")),
    ("GGML_AVX512_VBMI", ("avx512f", "avx512_vbmi")),
    ("GGML_AVX512_VNNI", ("avx512f", "avx512_vnni")),
    ("GGML_AVX512_BF16", ("avx512f", "avx512_bf16")),
)
# Never switched on: a VM may advertise AMX and still fault on its first tile instruction.
NEVER = ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16")
AMX_FLAGS = ("amx_tile", "amx_int8", "amx_bf16")
# The flags worth showing a user (what the build depends on).
SHOWN_FLAGS = tuple(
    dict.fromkeys(f for _, need in X86_OPTIONS for f in need).keys()
) + AMX_FLAGS


@dataclass(frozen=True)
class BuildFlags:
    """The llama.cpp build options chosen for this machine."""

    machine: str
    cpu_flags: frozenset[str]
    enabled: tuple[str, ...]
    disabled: tuple[str, ...]
    note: str = ""

    @property
    def cmake_args(self) -> str:
        parts = ["-DGGML_NATIVE=OFF"]
        parts += [f"-D{opt}=ON" for opt in self.enabled]
        parts += [f"-D{opt}=OFF" for opt in self.disabled]
        return " ".join(parts)

    @property
    def amx_advertised(self) -> bool:
        return any(f in self.cpu_flags for f in AMX_FLAGS)

    def describe(self) -> str:
        seen = [f for f in SHOWN_FLAGS if f in self.cpu_flags]
        chosen = ", ".join(o.removeprefix("GGML_") for o in self.enabled) or "none (generic build)"
        line = f"CPU {self.machine}: flags seen {' '.join(seen) or 'none'}; llama.cpp built with {chosen}"
        if self.amx_advertised:
            line += "; AMX advertised but never used"
        if self.note:
            line += f" ({self.note})"
        return line


def read_cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The ``flags`` of the first processor in ``/proc/cpuinfo`` (empty when unreadable)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return frozenset()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def choose_flags(cpu_flags: frozenset[str] | None = None, machine: str | None = None) -> BuildFlags:
    """Build options from what the CPU reports; AMX always off."""
    machine = machine or platform.machine() or "unknown"
    flags = read_cpu_flags() if cpu_flags is None else cpu_flags
    if machine.lower() not in ("x86_64", "amd64", "i686", "i386"):
        # ggml's generic build for other architectures (e.g. aarch64) uses the baseline ISA.
        return BuildFlags(machine, flags, (), (), note="not x86: baseline instruction set")
    if not flags:
        return BuildFlags(
            machine, flags, (), tuple(o for o, _ in X86_OPTIONS) + NEVER,
            note="no /proc/cpuinfo flags: baseline x86-64 build",
        )
    enabled = tuple(opt for opt, need in X86_OPTIONS if all(f in flags for f in need))
    disabled = tuple(opt for opt, _ in X86_OPTIONS if opt not in enabled) + NEVER
    return BuildFlags(machine, flags, enabled, disabled)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    flags = choose_flags()
    if args == ["--cmake-args"]:
        print(flags.cmake_args)
    elif args == ["--describe"]:
        print(flags.describe())
    else:
        print("usage: cpu.py --cmake-args | --describe", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
