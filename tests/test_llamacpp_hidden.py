"""Hidden states read from a call's own forward pass (llama.cpp's evaluation callback), on the real
embedded model: the state is the one llama.cpp's embeddings API gives, and reading it changes nothing of
the reply."""

from __future__ import annotations

import numpy as np
import pytest

from selfrag.llm.base import build_request
from selfrag.llm.llamacpp import LlamaCppBackend, default_model_path
from selfrag.llm.llamacpp_hidden import node_name

pytestmark = pytest.mark.model

PROMPT = [{"role": "user", "content": "Passage: Paris is the capital of France.\nQuestion: What is the capital "
                                      "of France? Answer briefly."}]


async def test_reading_states_changes_no_reply_and_gives_each_layer_asked_for():
    plain = LlamaCppBackend()
    reading = LlamaCppBackend()
    before = await plain.generate(PROMPT, max_tokens=12, top_logprobs=5)
    after = await reading.generate(PROMPT, max_tokens=12, top_logprobs=5, hidden=(10, -2, -1))
    assert after.text == before.text
    assert [t.top for t in after.logprobs] == [t.top for t in before.logprobs]  # bit for bit
    assert before.hidden is None
    width = reading._llm.n_embd()
    for where in ("prompt", "answer"):
        assert sorted(after.hidden[where]) == [-2, -1, 10]
        assert all(len(v) == width and np.isfinite(v).all() for v in after.hidden[where].values())
    # The prompt's and the answer's last tokens are different positions: different states.
    assert after.hidden["prompt"][-1] != after.hidden["answer"][-1]
    # A call that asks for no state after one that did is the plain call again.
    again = await reading.generate(PROMPT, max_tokens=12)
    assert again.text == before.text and again.hidden is None


async def test_the_final_state_is_what_the_embeddings_api_gives():
    import llama_cpp

    backend = LlamaCppBackend()
    gen = await backend.generate(PROMPT, max_tokens=4, hidden=(-1,))
    ids = backend.prompt_ids(build_request(PROMPT, max_tokens=4))
    emb = llama_cpp.Llama(model_path=str(default_model_path()), n_ctx=2048, n_batch=64, verbose=False,
                          embedding=True, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_NONE)
    emb.eval(ids)
    expected = np.ctypeslib.as_array(llama_cpp.llama_get_embeddings_ith(emb._ctx.ctx, -1), shape=(emb.n_embd(),))
    assert np.allclose(gen.hidden["prompt"][-1], expected, atol=1e-4)


def test_layers_name_the_graph_nodes():
    assert node_name(-1, 30) == "result_norm"
    assert node_name(0, 30) == "l_out-0" and node_name(-2, 30) == "l_out-29" and node_name(15, 30) == "l_out-15"
    with pytest.raises(ValueError, match="outside the model's 30 layers"):
        node_name(30, 30)
