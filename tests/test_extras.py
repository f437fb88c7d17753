"""Optional dependencies: a missing extra names the pip command."""

from __future__ import annotations

import builtins

import pytest

from selfrag.errors import MissingDependencyError, require


def test_require_names_the_extra(monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "llama_cpp":
            raise ImportError("No module named 'llama_cpp'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    monkeypatch.delitem(__import__("sys").modules, "llama_cpp", raising=False)
    with pytest.raises(ImportError) as info:
        require("llama_cpp", "local", "the llamacpp backend")
    assert isinstance(info.value, MissingDependencyError)
    assert "pip install 'selfrag[local]'" in str(info.value)
