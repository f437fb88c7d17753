"""The portable llama.cpp build, the child-process smoke check, `selfrag doctor`, and the test guard."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from selfrag.cli.main import main
from selfrag.doctor.checks import check_cache_path, check_llama_build, check_llm, extras_status
from selfrag.doctor.cpu import NEVER, choose_flags, read_cpu_flags
from selfrag.doctor.smoke import SmokeResult, compiled_features, run_smoke

REPO = Path(__file__).resolve().parents[1]
# The flags of the Xeon in issue 13 (AMX advertised, AVX-512 present).
XEON_AMX = frozenset(
    ["fpu", "sse", "sse2", "ssse3", "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl", "avx512_vbmi", "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16"]
)
# An AVX2 machine without AVX-512 (like this project's own CI machines).
AVX2_ONLY = frozenset(["fpu", "sse", "sse2", "ssse3", "sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "bmi2"])


# -- build flags from the CPU ------------------------------------------------------------


def test_amx_cpu_gets_every_avx512_switch_and_never_amx():
    flags = choose_flags(XEON_AMX, "x86_64")
    args = flags.cmake_args.split()
    assert args[0] == "-DGGML_NATIVE=OFF"
    for on in ("AVX", "AVX2", "FMA", "F16C", "AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AVX_VNNI"):
        assert f"-DGGML_{on}=ON" in args
    for opt in NEVER:
        assert f"-D{opt}=OFF" in args and f"-D{opt}=ON" not in args
    assert "AMX advertised but never used" in flags.describe()


def test_cpu_without_avx512_builds_avx2_and_switches_avx512_off():
    args = choose_flags(AVX2_ONLY, "x86_64").cmake_args.split()
    assert "-DGGML_AVX2=ON" in args and "-DGGML_FMA=ON" in args
    assert "-DGGML_AVX512=OFF" in args and "-DGGML_AVX512_VNNI=OFF" in args


def test_partial_avx512_is_not_enough_for_the_avx512_switch():
    # ggml's AVX512 switch also compiles -mavx512bw/-mavx512vl: avx512f alone must not turn it on.
    args = choose_flags(AVX2_ONLY | {"avx512f"}, "x86_64").cmake_args.split()
    assert "-DGGML_AVX512=OFF" in args


def test_unreadable_cpuinfo_and_other_architectures_get_a_baseline_build():
    assert "-DGGML_AVX=OFF" in choose_flags(frozenset(), "x86_64").cmake_args.split()
    arm = choose_flags(frozenset({"neon", "asimd"}), "aarch64")
    assert arm.cmake_args == "-DGGML_NATIVE=OFF" and "not x86" in arm.describe()


def test_cpuinfo_flags_are_read_from_the_first_processor():
    text = "processor\t: 0\nflags\t\t: fpu avx avx2\n\nprocessor\t: 1\nflags\t\t: fpu\n"
    assert read_cpu_flags(text) == frozenset({"fpu", "avx", "avx2"})


def test_cpu_script_runs_with_the_system_python_before_install():
    out = subprocess.run(
        [sys.executable, "-S", str(REPO / "src/selfrag/doctor/cpu.py"), "--cmake-args"],
        capture_output=True, text=True, check=True, env={"PATH": os.environ.get("PATH", "")},
    )
    assert out.stdout.startswith("-DGGML_NATIVE=OFF") and "AMX_TILE=ON" not in out.stdout


# -- llama.cpp's own report ----------------------------------------------------------------


def test_compiled_features_are_read_from_llama_system_info():
    info = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | AVX512 = 0 | AMX_INT8 = 1 | LLAMAFILE = 1 |"
    features = compiled_features(info)
    assert features["AVX2"] is True and features["AVX512"] is False and features["AMX_INT8"] is True


def test_a_build_using_instructions_the_cpu_lacks_is_a_problem():
    smoke = SmokeResult(True, "ok", system_info="CPU : AVX = 1 | AVX2 = 1 | AVX512 = 1 |")
    check = check_llama_build(smoke, AVX2_ONLY)
    assert not check.ok and "AVX512" in check.problem and "--rebuild" in check.fix
    assert check_llama_build(smoke, XEON_AMX).ok


def test_amx_code_that_crashed_is_named_as_the_cause():
    smoke = SmokeResult(False, "died", "rebuild", system_info="CPU : AVX2 = 1 | AMX_INT8 = 1 |")
    check = check_llama_build(smoke, XEON_AMX)
    assert not check.ok and "AMX_INT8" in check.problem


# -- the child-process smoke check -------------------------------------------------------


def crashing_llama_cpp(tmp_path: Path) -> dict[str, str]:
    """An environment whose ``import llama_cpp`` dies with a real SIGSEGV (a broken native library)."""
    fake = tmp_path / "broken" / "llama_cpp"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("import ctypes\nctypes.string_at(0)\n")
    env = os.environ.copy()
    env["PYTHONPATH"] = os.pathsep.join([str(fake.parent), str(REPO), env.get("PYTHONPATH", "")])
    return env


def test_a_crash_in_the_child_is_reported_as_one_line_with_the_fix(tmp_path):
    result = run_smoke(env=crashing_llama_cpp(tmp_path), timeout=60)
    assert not result.ok
    assert "SIGSEGV" in result.message and "setup.sh --rebuild" in result.fix
    assert "\n" not in result.line()


def test_a_missing_model_file_fails_cleanly(tmp_path):
    result = run_smoke(tmp_path / "nope.gguf", timeout=120)
    assert not result.ok and "nope.gguf" in result.message


@pytest.mark.model
def test_the_embedded_model_decodes_in_the_child():
    result = run_smoke(timeout=300)
    assert result.ok, result.line()
    assert result.details["tokens"] >= 1
    assert "=" in result.system_info  # llama.cpp's "FEATURE = 0/1" report came through


# -- selfrag doctor ---------------------------------------------------------------------


@pytest.mark.model
def test_doctor_passes_on_a_good_install(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["doctor", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    names = {c["name"]: c for c in report["checks"]}
    assert report["ok"] is True
    assert names["decode smoke test"]["ok"] and "decoded" in names["decode smoke test"]["value"]
    assert "compiled:" in names["llama.cpp build"]["value"]
    assert "SmolLM2" in names["embedded model"]["value"]
    for key in ("python", "selfrag", "llama-cpp-python", "torch", "cpu", "extras", "llm cache"):
        assert key in names
    assert names["critic"]["value"] == "fitted heads: the fit shipped for it"  # the embedded model's


def test_doctor_says_which_critic_a_model_gets(tmp_path):
    from selfrag.doctor.checks import check_critic
    from selfrag.llm.model_files import file_sha256
    from selfrag.methods.critique.fits import critic_dir
    from selfrag.reflection.critic_fit import packaged

    model = tmp_path / "m.gguf"
    model.write_bytes(b"a model file")
    assert check_critic(f"llamacpp:{model}").value == \
        "fitted heads: the packaged defaults (fit one with `selfrag critic fit`)"
    own = critic_dir() / f"{file_sha256(model)}.json"
    own.write_text("{}")
    assert check_critic(f"llamacpp:{model}").value.startswith(f"fitted heads: the packaged defaults: critic fit {own}")
    packaged("default.json").write(own)
    assert check_critic(f"llamacpp:{model}").value == f"fitted heads: its own fit, {own}"
    assert check_critic("openai:gpt-4o-mini").value.startswith("prompted")


def test_doctor_with_a_crashing_llama_cpp_exits_nonzero_with_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "selfrag", "doctor"],
        capture_output=True, text=True, env=crashing_llama_cpp(tmp_path), cwd=tmp_path, timeout=300,
    )
    assert proc.returncode == 1
    problems = [ln for ln in proc.stderr.splitlines() if ln.startswith("selfrag doctor:")]
    assert len(problems) == 1, proc.stderr
    assert "decode smoke test" in problems[0] and "SIGSEGV" in problems[0] and "fix:" in problems[0]
    assert "Traceback" not in proc.stderr


def test_doctor_checks_a_given_backend(tmp_path):
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(["OK"]))
    assert check_llm(f"scripted:{script}").ok
    down = check_llm("openai:m@http://127.0.0.1:9/v1", timeout=10)
    assert not down.ok and down.problem and down.fix


def test_cache_paths_that_cannot_be_databases_are_problems(tmp_path):
    (tmp_path / "dir.db").mkdir()
    assert not check_cache_path("llm cache", tmp_path / "dir.db").ok
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert not check_cache_path("llm cache", blocker / "sub" / "cache.db").ok
    assert check_cache_path("llm cache", tmp_path / "new" / "cache.db").ok


def test_extras_are_read_from_the_package_metadata():
    status = extras_status()
    assert {"local", "dense", "dev"} <= set(status)
    assert status["dev"] == []  # the test suite runs with the dev extra


# -- the test suite survives a native crash ----------------------------------------------


def test_a_crashing_decode_fails_model_tests_and_the_suite_goes_on(pytester, tmp_path, monkeypatch):
    for key, value in crashing_llama_cpp(tmp_path).items():
        if key == "PYTHONPATH":
            monkeypatch.setenv(key, value)
    pytester.makeini("[pytest]\nmarkers =\n    model: needs the real model\n")
    pytester.makepyfile(
        test_inner="""
import pytest

@pytest.mark.model
def test_needs_the_model():
    import llama_cpp  # would kill the process if it ran

def test_plain():
    assert sum([1, 2]) == 3
"""
    )
    result = pytester.runpytest_subprocess("-p", "tests.helpers.model_guard", "-q")
    # The guard fails the test in its setup (before any fixture loads the model): pytest
    # counts that as an error, the process lives on, and the exit status is non-zero.
    result.assert_outcomes(passed=1, errors=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*cannot run on this machine*SIGSEGV*setup.sh --rebuild*"])
