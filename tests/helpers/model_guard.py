"""A pytest plugin: tests that load the real llama.cpp model first prove, in a child
process, that decoding works here.

A llama.cpp build that the CPU cannot run dies with SIGSEGV and would take the
whole pytest process with it. The check runs once per session; when it fails,
every test that needs the model fails with the child's one-line diagnosis and
the rest of the suite runs and reports as usual.
"""

from __future__ import annotations

import functools

import pytest

from selfrag.doctor.smoke import SmokeResult, run_smoke

MODEL_FIXTURES = {"embedded_llm"}


@functools.cache
def embedded_model_smoke() -> SmokeResult:
    return run_smoke()


def needs_model(item: pytest.Item) -> bool:
    fixtures = set(getattr(item, "fixturenames", ()))
    return item.get_closest_marker("model") is not None or bool(fixtures & MODEL_FIXTURES)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if not needs_model(item):
        return
    result = embedded_model_smoke()
    if not result.ok:
        pytest.fail(f"the real llama.cpp model cannot run on this machine: {result.line()}", pytrace=False)
