"""What a user types wrong gets one line, never a traceback; -v works where users put it.

Each case runs the real ``selfrag`` in a child process, as typed at a shell.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.helpers.cli_process import error_line, no_traceback, selfrag, shared_dir, write_docs


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write_docs(tmp_path / "docs")
    (tmp_path / "one.json").write_text(json.dumps(["Paris"]))
    return tmp_path


ASK = ("ask", "What is the capital of France?", "--docs", "docs", "--method", "vanilla_rag")


@pytest.mark.parametrize("flag", ["-v", "--verbose"])
def test_verbose_after_the_subcommand_logs_each_call(project, flag):
    proc = selfrag(*ASK, "--llm", "scripted:one.json", flag, cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert "selfrag: INFO: call 1: generate" in proc.stderr
    assert proc.stdout.startswith("Paris")


def test_verbose_before_and_after_and_in_a_nested_command(project):
    proc = selfrag("-v", *ASK, "--llm", "scripted:one.json", cwd=project)
    assert proc.returncode == 0 and "INFO: call 1" in proc.stderr
    quiet = selfrag(*ASK, "--llm", "scripted:one.json", cwd=project)
    assert quiet.returncode == 0 and "INFO" not in quiet.stderr
    nested = selfrag("index", "build", "--docs", "docs", "--out", "idx", "--quiet", "-v", cwd=project)
    assert nested.returncode == 0, nested.stderr


@pytest.mark.parametrize("spec, words", [
    ("openai:m@http://[::1/v1", ["http://[::1/v1", "not a valid URL"]),
    ("openai:m@notaurl", ["'notaurl'", "http(s)://"]),
    ("openai:m@ftp://host/v1", ["'ftp://host/v1'", "http(s)://"]),
    ("anthropic:claude@127.0.0.1:8000", ["'127.0.0.1:8000'", "http(s)://"]),
    ("openai:m@http://127.0.0.1:99999/v1", ["invalid port"]),
    ("openai:m@user:s3cret@host", ["'host'", "http(s)://"]),
    ("openai:@http://127.0.0.1:1/v1", ["no model name before '@'"]),
])
def test_a_bad_server_url_in_a_spec_is_named(project, spec, words):
    proc = selfrag(*ASK, "--llm", spec, cwd=project, env={"OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": ""})
    line = error_line(proc)
    assert proc.returncode == 2
    assert "API_KEY is not set" not in line and "s3cret" not in proc.stderr
    for word in words:
        assert word in line, line


def test_an_unreadable_scripted_file_is_one_line():
    folder = shared_dir("selfrag-unreadable-")
    write_docs(folder / "docs")
    script = folder / "secret.json"
    script.write_text(json.dumps(["Paris"]))
    script.chmod(0o000)
    proc = selfrag(*ASK, "--llm", f"scripted:{script}", cwd=folder, unprivileged=True)
    line = error_line(proc)
    assert proc.returncode == 2
    assert str(script) in line and "Permission denied" in line, line


@pytest.mark.parametrize("port", ["99999", "-1", "65536", "eighty"])
def test_serve_refuses_a_port_out_of_range(project, port):
    proc = selfrag("serve", "--docs", "docs", "--port", port, cwd=project, timeout=60)
    no_traceback(proc)
    assert proc.returncode == 2
    assert f"argument --port: {port!r} is not a port: give 0-65535 (0 picks a free one)" in proc.stderr, proc.stderr


def test_a_grid_file_that_is_not_utf8_is_one_line(tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_bytes(b"name: g\n# caf\xe9\nconfigs: [a.yaml]\n")
    proc = selfrag("grid", str(grid), "--in-process", cwd=tmp_path)
    line = error_line(proc)
    assert f"{grid}:2 is not UTF-8 text (byte 0xe9)" in line, line


def test_a_grid_file_that_cannot_be_read_is_one_line():
    folder = shared_dir("selfrag-grid-")
    grid = folder / "grid.yaml"
    grid.write_text("configs: [a.yaml]\n")
    grid.chmod(0o000)
    proc = selfrag("grid", str(grid), "--in-process", cwd=folder, unprivileged=True)
    line = error_line(proc)
    assert str(grid) in line and "Permission denied" in line, line


@pytest.mark.parametrize("retries, refusal", [(1_000_000, "less than or equal to 10"), (11, "less than or equal to 10"),
                                              (10, None), (-1, "greater than or equal to 0")])
def test_grid_retries_are_bounded(tmp_path, retries, refusal):
    (tmp_path / "missing.yaml").write_text("inherits: nowhere.yaml\n")
    grid = tmp_path / "grid.yaml"
    grid.write_text(f"configs: [missing.yaml]\nretries: {retries}\n")
    proc = selfrag("grid", str(grid), "--in-process", cwd=tmp_path)
    line = error_line(proc)
    if refusal is None:  # the retries pass; the cell's config is what fails
        assert "config key 'retries'" not in line and "nowhere.yaml" in line, line
    else:
        assert "config key 'retries'" in line and refusal in line, line


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_milvus_errors_are_selfrags_one_line_only(tmp_path):
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    write_docs(tmp_path / "docs")
    (tmp_path / "one.json").write_text(json.dumps(["Paris"]))
    built = selfrag("index", "build", "--docs", "docs", "--retriever", "milvus", "--out", "midx", "--quiet",
                    cwd=tmp_path, env={"HF_HUB_OFFLINE": "1"})
    assert built.returncode == 0, built.stderr
    proc = selfrag(*ASK[:2], "--index", "midx", "--method", "vanilla_rag", "--llm", "scripted:one.json",
                   "--set", "retrieval.filter='title like ((('", cwd=tmp_path, env={"HF_HUB_OFFLINE": "1"})
    line = error_line(proc)
    assert "LIKE requires a string literal" in line
    assert "[ERROR]" not in proc.stderr and "MilvusException" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_pymilvus_logging_is_the_programs_own_again_after_selfrags_call(caplog):
    import logging

    from selfrag.retrieval.milvus_quiet import QuietClient

    class Failing:
        def search(self):
            logging.getLogger("pymilvus.decorators").error("RPC error: [search], <MilvusException ...>")
            raise RuntimeError("bad filter")

    logger = logging.getLogger("pymilvus")
    before = logger.level
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        with pytest.raises(RuntimeError):
            QuietClient(Failing()).search()
        assert seen == [] and logger.level == before
        logging.getLogger("pymilvus.decorators").error("the program's own line")
        assert seen == ["the program's own line"]
    finally:
        logger.removeHandler(handler)
