"""Hidden states read from the forward pass a call makes anyway: llama.cpp's evaluation callback.

A request that names layers (``LLMRequest.hidden``) gets the model's hidden
state at two positions of its own forward pass: ``prompt``, the last prompt
token (the state that writes the first answer token), and ``answer``, the
last token the reply was read from. Layer ``L`` is the output of transformer
block ``L`` (``l_out-L``; a negative number counts from the top), and ``-1``
is the final normalised state the output head reads (``result_norm``).

llama.cpp hands every node of its compute graph to an evaluation callback
(``cb_eval``), first asking whether the callback wants the node's data; only
the wanted nodes are copied, and only their last row (the last token of the
batch). Nothing is computed that the call would not compute: the reply's
tokens and log-probabilities are bit for bit those of a call that reads no
state (``tests/test_llamacpp_hidden.py``). The callback reads the
``ggml_tensor`` struct of the llama.cpp build it was written against; a build
whose layout differs is detected on the first capture (the wanted node must
be a float32 matrix as wide as the model's embedding) and reading is then
switched off for the process with one warning, the replies unchanged.
"""

from __future__ import annotations

import ctypes
import logging
from typing import Any

import numpy as np

log = logging.getLogger("selfrag")

_GGML_MAX_DIMS, _GGML_MAX_OP_PARAMS, _GGML_MAX_SRC, _GGML_MAX_NAME = 4, 64, 10, 64
_F32 = 0


class _Tensor(ctypes.Structure):
    """The head of ``struct ggml_tensor`` (ggml.h), as far as ``name``."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("buffer", ctypes.c_void_p),
        ("ne", ctypes.c_int64 * _GGML_MAX_DIMS),
        ("nb", ctypes.c_size_t * _GGML_MAX_DIMS),
        ("op", ctypes.c_int),
        ("op_params", ctypes.c_int32 * (_GGML_MAX_OP_PARAMS // 4)),
        ("flags", ctypes.c_int32),
        ("src", ctypes.c_void_p * _GGML_MAX_SRC),
        ("view_src", ctypes.c_void_p),
        ("view_offs", ctypes.c_size_t),
        ("data", ctypes.c_void_p),
        ("name", ctypes.c_char * _GGML_MAX_NAME),
    ]


def node_name(layer: int, n_layer: int) -> str:
    """The graph node of ``layer`` (negative: from the top; -1 the final normalised state)."""
    if layer == -1:
        return "result_norm"
    index = layer if layer >= 0 else n_layer + 1 + layer
    if not 0 <= index < n_layer:
        raise ValueError(f"layer {layer} is outside the model's {n_layer} layers")
    return f"l_out-{index}"


class HiddenCapture:
    """The evaluation callback of one llama.cpp context and what it has copied."""

    def __init__(self, n_embd: int, n_layer: int) -> None:
        self.n_embd = n_embd
        self.n_layer = n_layer
        self.broken = False
        self._wanted: dict[str, int] = {}  # node name -> requested layer
        self._last: dict[int, np.ndarray] = {}
        self.callback = self._make_callback()

    def _make_callback(self) -> Any:
        import llama_cpp

        @llama_cpp.ggml_backend_sched_eval_callback
        def callback(tensor: Any, ask: bool, user_data: Any) -> bool:
            if not self._wanted:
                return not ask  # nothing wanted: decline every node (and let a data call go on)
            try:
                node = ctypes.cast(tensor, ctypes.POINTER(_Tensor)).contents
                name = node.name.decode("utf-8", "replace")
                if ask:
                    return name in self._wanted
                layer = self._wanted.get(name)
                if layer is not None:
                    self._copy(layer, node)
            except Exception as exc:  # noqa: BLE001 - never let a reading break the decode
                self._fail(f"{type(exc).__name__}: {exc}")
            return True

        return callback

    def _copy(self, layer: int, node: _Tensor) -> None:
        width, rows = int(node.ne[0]), int(node.ne[1])
        if node.type != _F32 or width != self.n_embd or rows < 1 or not node.data:
            self._fail(f"node {node.name!r} is type {node.type}, {width} wide, {rows} rows")
            return
        data = np.ctypeslib.as_array(ctypes.cast(node.data, ctypes.POINTER(ctypes.c_float)), shape=(rows, width))
        self._last[layer] = data[rows - 1].copy()

    def _fail(self, why: str) -> None:
        if not self.broken:
            log.warning("hidden states cannot be read from this llama.cpp build (%s); replies are unchanged", why)
        self.broken = True
        self._wanted = {}

    def start(self, layers: tuple[int, ...]) -> None:
        """Copy the last row of each of ``layers`` at every decode from now on."""
        self._last = {}
        self._wanted = {} if self.broken else {node_name(layer, self.n_layer): layer for layer in layers}

    def snapshot(self) -> dict[int, list[float]]:
        """The states copied at the latest decode, by layer."""
        return {layer: [float(v) for v in state] for layer, state in self._last.items()}

    def stop(self) -> None:
        self._wanted = {}
        self._last = {}


def install(llm: Any) -> HiddenCapture | None:
    """A context for ``llm`` (a ``llama_cpp.Llama``) that hands its graph nodes to a capture; None when the
    llama-cpp-python build has no evaluation callback."""
    try:
        import llama_cpp
        from llama_cpp import _internals
    except ImportError:
        return None
    capture = HiddenCapture(llm.n_embd(), int(llama_cpp.llama_model_n_layer(llm._model.model)))
    llm.context_params.cb_eval = capture.callback
    llm._ctx = _internals.LlamaContext(model=llm._model, params=llm.context_params, verbose=llm.verbose)
    return capture
