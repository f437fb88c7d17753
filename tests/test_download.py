"""`selfrag data download`: verified, resumable downloads, tested against a real HTTP server on 127.0.0.1.

The server serves small fixture files and can drop the connection part way
through a body, ignore Range requests, or serve other bytes than the pinned
ones. Nothing is downloaded from the internet.
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from selfrag.cli.main import main
from selfrag.errors import DataError
from selfrag.eval import download as dl
from selfrag.eval.download import CATALOG, Download, RemoteFile, fetch, sha256_of

pytestmark = pytest.mark.server


@dataclass
class Served:
    body: bytes
    drops: int = 0  # how many of the next requests stop after `drop_at` bytes of the body
    drop_at: int = 0
    honour_range: bool = True
    status: int = 200
    ranges: list[str | None] = field(default_factory=list)


class FileServer:
    """Serves ``files`` (path -> Served) on 127.0.0.1, with Range support and deliberate faults."""

    def __init__(self, files: dict[str, Served]) -> None:
        self.files = files
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802
                item = outer.files.get(self.path)
                if item is None:
                    self.send_error(404)
                    return
                rng = self.headers.get("Range")
                item.ranges.append(rng)
                if item.status != 200:
                    self.send_error(item.status)
                    return
                start = 0
                if rng and item.honour_range:
                    start = int(rng.removeprefix("bytes=").split("-")[0])
                    if start >= len(item.body):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(item.body)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(item.body) - 1}/{len(item.body)}")
                else:
                    self.send_response(200)
                body = item.body[start:]
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if item.drops:
                    item.drops -= 1
                    self.wfile.write(body[: item.drop_at])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)  # the connection dies mid-body
                    self.close_connection = True
                    return
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


BODY = b"".join(f'{{"id": {i}, "question": "q{i}?", "answer": "a{i}"}}\n'.encode() for i in range(4000))
OTHER = b'{"id": "x"}\n' * 50


def one_file(url: str, body: bytes = BODY, *, sha: str | None = None, size: int | None = None) -> Download:
    remote = RemoteFile(f"{url}/data/q.jsonl", "q.jsonl", len(body) if size is None else size,
                        hashlib.sha256(body).hexdigest() if sha is None else sha)
    return Download("fixture", "jsonl", "fixture", (remote,), "q.jsonl", "a fixture", "MIT", url, "the test")


def listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_download_is_verified_then_renamed_and_not_fetched_twice(tmp_path):
    served = Served(BODY)
    with FileServer({"/data/q.jsonl": served}) as server:
        said: list[str] = []
        path = fetch(one_file(server.url), tmp_path, progress=False, say=said.append)
        assert path == (tmp_path / "fixture" / "q.jsonl").resolve() and path.read_bytes() == BODY
        assert listing(tmp_path / "fixture") == ["q.jsonl"]  # no .part left behind
        assert "SHA-256 verified" in said[-1]
        fetch(one_file(server.url), tmp_path, progress=False, say=said.append)
    assert served.ranges == [None]  # the second call found the verified file and asked for nothing
    assert "already downloaded and verified" in said[-1]


def test_a_checksum_mismatch_leaves_no_file(tmp_path):
    with FileServer({"/data/q.jsonl": Served(OTHER)}) as server:
        wrong = one_file(server.url, OTHER, sha="0" * 64)
        with pytest.raises(DataError, match=r"SHA-256 [0-9a-f]{64} is not the pinned 0{64}; the file was removed"):
            fetch(wrong, tmp_path, progress=False, say=lambda _: None)
    assert listing(tmp_path / "fixture") == []


def test_a_wrong_size_leaves_no_file(tmp_path):
    wrong = f"got {len(OTHER)} bytes, expected {len(OTHER) + 7}"
    with FileServer({"/data/q.jsonl": Served(OTHER)}) as server, pytest.raises(DataError, match=wrong):
        fetch(one_file(server.url, OTHER, size=len(OTHER) + 7), tmp_path, progress=False, say=lambda _: None)
    assert listing(tmp_path / "fixture") == []


def test_a_dropped_connection_is_resumed_with_a_range_request(tmp_path):
    served = Served(BODY, drops=2, drop_at=40_000)
    with FileServer({"/data/q.jsonl": served}) as server:
        said: list[str] = []
        path = fetch(one_file(server.url), tmp_path, progress=False, say=said.append)
    assert path.read_bytes() == BODY and listing(tmp_path / "fixture") == ["q.jsonl"]
    # Each retry asked for the rest of the file only.
    assert served.ranges == [None, "bytes=40000-", "bytes=80000-"]
    assert sum("connection lost at" in line and "resuming" in line for line in said) == 2


def test_a_server_that_ignores_range_is_restarted_from_the_start(tmp_path):
    served = Served(BODY, drops=1, drop_at=30_000, honour_range=False)
    with FileServer({"/data/q.jsonl": served}) as server:
        path = fetch(one_file(server.url), tmp_path, progress=False, say=lambda _: None)
    assert served.ranges == [None, "bytes=30000-"]  # asked to resume, got the whole file again
    assert path.read_bytes() == BODY  # written from byte 0, not appended


def test_an_interrupted_download_keeps_only_a_part_file_and_a_later_call_resumes_it(tmp_path, monkeypatch):
    monkeypatch.setattr(dl, "MAX_ATTEMPTS", 2)
    served = Served(BODY, drops=2, drop_at=25_000)
    with FileServer({"/data/q.jsonl": served}) as server:
        with pytest.raises(DataError, match=r"broke off 2 times .* 50000 bytes are kept in .*q\.jsonl\.part: "
                                            r"run the same command again to resume"):
            fetch(one_file(server.url), tmp_path, progress=False, say=lambda _: None)
        # Nothing under the real name: only the .part, which is not mistaken for the file.
        assert listing(tmp_path / "fixture") == ["q.jsonl.part"]
        assert (tmp_path / "fixture" / "q.jsonl.part").stat().st_size == 50_000
        path = fetch(one_file(server.url), tmp_path, progress=False, say=lambda _: None)
    assert served.ranges[-1] == "bytes=50000-" and path.read_bytes() == BODY
    assert listing(tmp_path / "fixture") == ["q.jsonl"]


def test_a_part_file_that_is_not_a_prefix_is_caught_by_the_checksum(tmp_path):
    folder = tmp_path / "fixture"
    folder.mkdir()
    (folder / "q.jsonl.part").write_bytes(b"X" * 1000)  # left by something else
    with FileServer({"/data/q.jsonl": Served(BODY)}) as server, pytest.raises(DataError, match="is not the pinned"):
        fetch(one_file(server.url), tmp_path, progress=False, say=lambda _: None)
    assert listing(folder) == []  # removed; the next call starts clean
    with FileServer({"/data/q.jsonl": Served(BODY)}) as server:
        assert fetch(one_file(server.url), tmp_path, progress=False, say=lambda _: None).read_bytes() == BODY


def test_a_missing_file_is_one_error_without_retries(tmp_path):
    served = Served(BODY, status=404)
    with FileServer({"/data/q.jsonl": served}) as server, pytest.raises(DataError, match="HTTP 404"):
        fetch(one_file(server.url), tmp_path, progress=False, say=lambda _: None)
    assert len(served.ranges) == 1


def test_the_command_downloads_and_names_the_data_path(tmp_path, capsys, monkeypatch):
    body = json.dumps({"123": {"QUESTION": "Is it?", "CONTEXTS": ["It is."], "LABELS": ["X"],
                               "final_decision": "yes"}}).encode()
    with FileServer({"/ori_pqal.json": Served(body)}) as server:
        remote = RemoteFile(f"{server.url}/ori_pqal.json", "ori_pqal.json", len(body), hashlib.sha256(body).hexdigest())
        fixture = Download("pubmedqa", "pubmedqa", "pubmedqa", (remote,), "ori_pqal.json", "PubMedQA (fixture)",
                           "MIT", server.url, "the test")
        monkeypatch.setitem(CATALOG, "pubmedqa", fixture)
        code = main(["data", "download", "pubmedqa", "--dir", str(tmp_path / "d"), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0, err
    path = tmp_path / "d" / "pubmedqa" / "ori_pqal.json"
    assert out.strip() == str(path.resolve())
    assert f"--set data.dataset=pubmedqa --set data.path={path.resolve()}" in err
    # data.path names the result, and the loader reads it as it came.
    from selfrag.config import DataSection
    from selfrag.eval.datasets import load_dataset

    assert [q.id for q in load_dataset(DataSection(dataset="pubmedqa", path=out.strip())).questions] == ["123"]


def test_the_command_shows_progress_and_fails_in_one_line(tmp_path, capsys, monkeypatch):
    with FileServer({"/data/q.jsonl": Served(OTHER)}) as server:
        monkeypatch.setitem(CATALOG, "fixture", one_file(server.url, OTHER, sha="f" * 64))
        code = main(["data", "download", "fixture", "--dir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    errors = [line for line in err.splitlines() if line.startswith("selfrag: error:")]
    assert len(errors) == 1 and "is not the pinned" in errors[0] and "Traceback" not in err
    assert "q.jsonl" in err  # the progress bar's label (tqdm on stderr)


def test_the_catalog_pins_every_file():
    assert set(CATALOG) == {"hotpotqa", "pubmedqa", "mmlu_evidence"}
    for d in CATALOG.values():
        assert d.checksum_source and d.licence and d.homepage.startswith("https://")
        for f in d.files:
            assert f.url.startswith(("https://", "http://")) and f.url.endswith(f.name)
            assert f.size and f.size > 0 and len(f.sha256 or "") == 64
    assert len(CATALOG["mmlu_evidence"].files) == 6 and CATALOG["mmlu_evidence"].data_path == "."


def test_the_pins_match_the_project_copies(shared_data):
    """The copies in ../shared/data are the upstream files (skipped without them): same size and SHA-256."""
    where = {"pubmedqa": shared_data / "pubmedqa", "mmlu_evidence": shared_data / "medical" / "evidence"}
    for name, folder in where.items():
        for f in CATALOG[name].files:
            copy = folder / f.name
            assert copy.stat().st_size == f.size and sha256_of(copy) == f.sha256, copy


def test_data_list_names_every_sample_and_download(capsys):
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("hotpotqa", "hotpotqa_yesno", "pubmedqa", "mmlu_evidence"):
        assert f"  {name} " in out
    assert "https://hotpotqa.github.io/" in out and "SHA-256 pinned" in out
    assert main(["data", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {s["data_path"] for s in listed["samples"]} >= {"sample:hotpotqa", "sample:pubmedqa"}
    assert all(d["pinned"] for d in listed["downloads"])
