"""The bound on questions in flight: 429 at once when full (nothing queues), slots always given back."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from selfrag.serve.background import BackgroundServer
from selfrag.serve.errors import ApiError
from selfrag.serve.limits import Gate
from selfrag.serve.settings import Limits

from .conftest import wait_for
from .test_serve_kit import QUESTION, HeldBackend, make_answerer, make_app


def in_flight(url: str) -> int:
    return httpx.get(url + "/health").json()["in_flight"]


def test_the_gate_refuses_one_over_its_capacity_and_counts_it():
    gate = Gate(2)
    gate.enter()
    with gate.slot():
        assert gate.full
        with pytest.raises(ApiError) as info:
            gate.enter()
    assert info.value.status == 429 and info.value.headers["Retry-After"] == "1"
    assert gate.in_flight == 1 and gate.refused == 1
    gate.leave()
    with gate.slot():
        pass
    assert gate.in_flight == 0


@pytest.mark.server
def test_the_bound_answers_429_instead_of_queueing():
    held = HeldBackend()
    app = make_app(make_answerer(held), limits=Limits(max_concurrent=2))
    with BackgroundServer(app) as server, ThreadPoolExecutor(4) as pool:
        def ask(stream: bool = False) -> httpx.Response:
            return httpx.post(server.url + "/v1/ask", json={"question": QUESTION, "stream": stream}, timeout=30)

        first = [pool.submit(ask), pool.submit(ask, True)]
        assert wait_for(lambda: held.waiting == 2)
        refused = [ask(), ask(True)]  # both bounds: JSON and streamed questions share it
        chat = httpx.post(server.url + "/v1/chat/completions", timeout=30,
                          json={"model": "vanilla_rag", "messages": [{"role": "user", "content": QUESTION}]})
        assert held.waiting == 2  # the refused ones never reached the model
        held.release.set()
        done = [f.result() for f in first]
        after = ask()
    for r in [*refused, chat]:
        assert r.status_code == 429 and r.headers["retry-after"] == "1"
        assert r.json()["error"]["code"] == "too_many_requests"
    assert [r.status_code for r in done] == [200, 200]
    assert done[0].json()["answer"] == "Paris" and '"answer":"Paris"' in done[1].text
    assert after.status_code == 200


@pytest.mark.server
def test_a_client_that_leaves_a_stream_gives_its_slot_back():
    held = HeldBackend()
    app = make_app(make_answerer(held), limits=Limits(max_concurrent=1))
    with BackgroundServer(app) as server:
        with httpx.stream("POST", server.url + "/v1/ask", json={"question": QUESTION, "stream": True}) as r:
            assert r.status_code == 200
            lines = r.iter_lines()  # kept: a dropped iterator closes the connection
            assert next(lines).startswith("event: start")
            assert wait_for(lambda: held.waiting == 1)
            assert in_flight(server.url) == 1
        # The connection is closed: the answer is cancelled and the slot is free again.
        assert wait_for(lambda: in_flight(server.url) == 0 and held.waiting == 0)
        held.release.set()
        assert httpx.post(server.url + "/v1/ask", json={"question": QUESTION}).status_code == 200
