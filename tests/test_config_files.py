"""Config files that are not UTF-8, empty, or hold an unknown top-level key (issue 55, defects 8-10).

Each is one line naming the file, through `selfrag run` as a real process, and
never runs anything: an empty config used to run the default experiment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import selfrag
from selfrag.config import load_config
from selfrag.errors import ConfigError

SRC = str(Path(selfrag.__file__).resolve().parents[1])


def run(config: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "selfrag", "run", str(config), "--output", "out", "--no-progress"],
                          cwd=config.parent, env={**os.environ, "PYTHONPATH": SRC},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert not (config.parent / "out").exists()  # nothing was run
    return proc.stderr.strip()


@pytest.mark.parametrize("content", [b"\xff\xfe a: 1", b"llm:\n  spec: caf\xe9\n"], ids=["bom-like", "latin-1"])
def test_a_config_that_is_not_utf8_is_one_line_naming_the_file(tmp_path, content):
    bad = tmp_path / "c.yaml"
    bad.write_bytes(content)
    line = run(bad)
    assert f"config file {bad}:" in line and "is not UTF-8 text" in line
    (tmp_path / "child.yaml").write_text("inherits: c.yaml\nrun: {seed: 1}\n")
    assert f"config file {bad}:" in run(tmp_path / "child.yaml")  # the parent is named, not the child


def test_the_line_of_the_first_bad_byte_is_named(tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_bytes(b"run:\n  seed: 1\nexperiment: {name: caf\xe9}\n")
    assert f"config file {bad}:3 is not UTF-8 text (byte 0xe9)" in run(bad)


@pytest.mark.parametrize("content", ["", "\n\n", "# nothing here yet\n# still nothing\n", "---\n"])
def test_an_empty_or_comment_only_config_says_so_instead_of_running_the_default(tmp_path, content):
    empty = tmp_path / "empty.yaml"
    empty.write_text(content)
    assert f"config file {empty} is empty" in run(empty)


def test_an_empty_parent_is_named(tmp_path):
    (tmp_path / "base.yaml").write_text("# to do\n")
    (tmp_path / "child.yaml").write_text("inherits: base.yaml\nrun: {seed: 1}\n")
    with pytest.raises(ConfigError, match=f"config file {tmp_path / 'base.yaml'} is empty"):
        load_config(tmp_path / "child.yaml")


@pytest.mark.parametrize("content", ["bogus_key: 1\n", "bogus_key: [1, 2]\n", "bogus_key: {a: 1}\n"])
def test_an_unknown_top_level_key_is_named_with_its_file_and_the_allowed_sections(tmp_path, content):
    config = tmp_path / "c.yaml"
    config.write_text("run: {seed: 1}\n" + content)
    line = run(config)
    assert f"unknown config key 'bogus_key' (in {config})" in line
    assert "top-level sections are architecture, augmentations, cache, data" in line and "self_rag" in line
    assert "valid dictionary" not in line


def test_a_method_section_that_is_not_a_mapping_is_named(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("self_rag: 3\n")
    assert f"config section 'self_rag' (in {config}) must be a mapping" in run(config)


def test_an_unknown_key_from_a_parent_names_the_parent(tmp_path):
    (tmp_path / "base.yaml").write_text("bogus_key: 1\n")
    (tmp_path / "child.yaml").write_text("inherits: base.yaml\n")
    with pytest.raises(ConfigError, match=r"unknown config key 'bogus_key' \(in .*base\.yaml\)"):
        load_config(tmp_path / "child.yaml")


def test_a_folder_given_as_the_config_is_named_as_one(tmp_path):
    (tmp_path / "configs").mkdir()
    with pytest.raises(ConfigError, match="is a folder; give a YAML file"):
        load_config(tmp_path / "configs")


def test_yaml_nested_too_deep_is_one_line(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("run: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "not valid YAML (nested too deeply)" in run(config)
