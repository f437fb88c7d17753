"""Fetching the full benchmark files from their canonical public locations (``selfrag data download``).

Each download in :data:`CATALOG` is one or more files, each with its URL, its
size and its SHA-256 (where they could be established; ``checksum_source``
says from what). A file is written to ``NAME.part`` and renamed to its name
only once its size and checksum match, so a file under its real name is
always complete and verified. An interrupted transfer (a dropped connection,
Ctrl-C) leaves the ``.part`` file; the next attempt, in the same call or a
later one, asks the server for the rest (an HTTP Range request) and starts
over if the server does not honour it. A checksum mismatch removes the
partial file and fails with one line. Files are written in their official
format, which the dataset loaders read as they are.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from ..errors import DataError
from ..redaction import redact_secrets

log = logging.getLogger(__name__)
MAX_ATTEMPTS = 5
PART = ".part"


@dataclass(frozen=True)
class RemoteFile:
    url: str
    name: str  # the file name written in the download's folder
    size: int | None  # bytes; None: not pinned
    sha256: str | None  # None: not pinned (the download then says so)


@dataclass(frozen=True)
class Download:
    name: str
    dataset: str  # the data.dataset that reads it
    folder: str  # under --dir
    files: tuple[RemoteFile, ...]
    data_path: str  # what data.path names, relative to the folder ("." for the folder itself)
    description: str
    licence: str
    homepage: str
    checksum_source: str  # where the pinned checksums come from

    @property
    def total_size(self) -> int | None:
        sizes = [f.size for f in self.files]
        return None if None in sizes else sum(s for s in sizes if s is not None)


_PUBMEDQA = "https://raw.githubusercontent.com/pubmedqa/pubmedqa/1cbae8e92f72f20c8d3747cbb3bf5bc53554d997/data"
_BIORAG = ("https://raw.githubusercontent.com/dmis-lab/self-biorag/603373c7a1e4a479c8db7e056078a67b66457f58/"
           "data/benchmark/evidence/all")
# subject -> (bytes, sha256) of retrieved_mmlu_<subject>_test.jsonl at the commit above.
_MMLU = {
    "anatomy": (1102075, "55447f921df792781d07d3ae69c072e4707520c155f44027412723697dbf257d"),
    "clinical_knowledge": (2216275, "1f8fa1f436ed7562d33d4be21c1d0b4e650f5ab6bc8031e377f2868211ade6e9"),
    "college_biology": (1271163, "c7cd615e03797e7525c99c8ed1543d5e9d19e7ce85284a5ba8bdec1aaced89b2"),
    "college_medicine": (1523266, "dadf8ed5e0886ffc9ff83edd04f000c2e1aee0c56ad11e377f8d7b25e0e57533"),
    "medical_genetics": (835802, "c98b2d98e828b68dd5b7fae300e9ef26cdbeadd89eeac24244d527b8eaeaf18a"),
    "professional_medicine": (2373011, "0f8722afc2f44f5f8791819768cd1e848d7fd914f5163fabeccb428394b04c3e"),
}

CATALOG: dict[str, Download] = {
    d.name: d
    for d in (
        Download(
            "hotpotqa", "hotpotqa", "hotpotqa",
            (RemoteFile("http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_distractor_v1.json",
                        "hotpot_dev_distractor_v1.json", 46_320_117,
                        "4e9ecb5c8d3b719f624d66b60f8d56bf227f03914f5f0753d6fa1b359d7104ea"),),
            "hotpot_dev_distractor_v1.json",
            "HotpotQA dev set, distractor setting: 7,405 questions, each with its 10 paragraphs (official JSON)",
            "CC BY-SA 4.0", "https://hotpotqa.github.io/",
            "published: facebookresearch/ParlAI parlai/tasks/hotpotqa/build.py pins the same SHA-256",
        ),
        Download(
            "pubmedqa", "pubmedqa", "pubmedqa",
            (RemoteFile(f"{_PUBMEDQA}/ori_pqal.json", "ori_pqal.json", 2_584_787,
                        "8b3276be8942ebbd77f3ddcda12c1749bf0e490045a736fd8438ee40cf37a41d"),
             RemoteFile(f"{_PUBMEDQA}/test_ground_truth.json", "test_ground_truth.json", 11_414,
                        "939fe566f09017d13b1ca64d2ddfee0bc2374b366048152997669cccedc44d51")),
            "ori_pqal.json",
            "PubMedQA PQA-L: 1,000 expert-labelled yes/no/maybe questions with their abstracts, and the "
            "official test split's 500 ids (data.split: test or train)",
            "MIT", "https://pubmedqa.github.io/",
            "measured on byte-identical copies of the files at the pinned commit (not published by PubMedQA)",
        ),
        Download(
            "mmlu_evidence", "mmlu_evidence", "mmlu_evidence",
            tuple(RemoteFile(f"{_BIORAG}/retrieved_mmlu_{subject}_test.jsonl",
                             f"retrieved_mmlu_{subject}_test.jsonl", size, sha)
                  for subject, (size, sha) in _MMLU.items()),
            ".",
            "MMLU medical (6 subjects, 1,089 questions) with the 10 evidence passages Self-BioRAG retrieved "
            "for each (the Self-BioRAG evaluation files)",
            "questions MIT (MMLU); evidence passages: no licence stated by dmis-lab/self-biorag",
            "https://github.com/dmis-lab/self-biorag",
            "measured on copies taken unchanged from the pinned commit, sizes checked against the upstream "
            "files (not published by Self-BioRAG)",
        ),
    )
}


def get_download(name: str) -> Download:
    try:
        return CATALOG[name]
    except KeyError:
        raise DataError(f"nothing to download called {name!r}; choose one of: {', '.join(CATALOG)} "
                        "(`selfrag data list` describes them)") from None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def fetch(
    download: Download, folder: str | Path, *, progress: bool = True, client: httpx.Client | None = None,
    say: Callable[[str], None] | None = None,
) -> Path:
    """Fetch every file of ``download`` into ``folder/<download.folder>``; returns what data.path should name.

    A file already there with the pinned size and checksum is kept (not fetched again).
    """
    say = say or (lambda message: print(f"selfrag: {message}", file=sys.stderr))
    target_dir = Path(folder).expanduser() / download.folder
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataError(f"cannot create {target_dir}: {exc.strerror}; choose another --dir") from None
    own = client is None
    client = client or httpx.Client(follow_redirects=True, timeout=httpx.Timeout(60.0, connect=20.0))
    try:
        for remote in download.files:
            target = target_dir / remote.name
            if target.is_file() and _matches(target, remote):
                say(f"{target}: already downloaded and verified")
                continue
            _fetch_file(client, remote, target, progress, say)
    finally:
        if own:
            client.close()
    return (target_dir / download.data_path).resolve() if download.data_path != "." else target_dir.resolve()


def _matches(path: Path, remote: RemoteFile) -> bool:
    if remote.size is not None and path.stat().st_size != remote.size:
        return False
    return remote.sha256 is None or sha256_of(path) == remote.sha256


def _fetch_file(client: httpx.Client, remote: RemoteFile, target: Path, progress: bool,
                say: Callable[[str], None]) -> None:
    part = target.with_name(target.name + PART)
    shown = redact_secrets(remote.url)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            _transfer(client, remote, part, progress)
            break
        except _Dropped as exc:
            have = part.stat().st_size if part.exists() else 0
            if attempt == MAX_ATTEMPTS:
                raise DataError(f"{shown}: the transfer broke off {attempt} times ({exc}); {have} bytes are kept "
                                f"in {part}: run the same command again to resume") from None
            say(f"{shown}: connection lost at {have} bytes ({exc}); resuming (attempt {attempt + 1} of {MAX_ATTEMPTS})")
    _verify(remote, part, shown)
    os.replace(part, target)
    checked = "SHA-256 verified" if remote.sha256 else f"no pinned checksum; SHA-256 {sha256_of(target)}"
    say(f"{target}: {target.stat().st_size} bytes, {checked}")


class _Dropped(Exception):
    """The connection failed or closed before the whole body arrived: worth resuming."""


def _transfer(client: httpx.Client, remote: RemoteFile, part: Path, progress: bool) -> None:
    """Fill ``part`` up to the whole file, continuing from what it holds (Range) where the server allows."""
    from tqdm import tqdm

    have = part.stat().st_size if part.exists() else 0
    if remote.size is not None and have > remote.size:
        part.unlink()  # longer than the file can be: not a prefix of it
        have = 0
    if remote.size is not None and have == remote.size:
        return
    headers = {"Range": f"bytes={have}-"} if have else {}
    shown = redact_secrets(remote.url)
    try:
        with client.stream("GET", remote.url, headers=headers) as response:
            status = response.status_code
            if status == 416 and have:  # nothing after what we have: verification decides
                return
            if status >= 400:
                retry = status >= 500 or status in (408, 429)
                message = f"{shown}: HTTP {status} {response.reason_phrase}"
                if retry:
                    raise _Dropped(message)
                raise DataError(f"{message}; the file is not there (check the URL or your network's proxy)")
            start = _start_of(response, have)
            mode = "ab" if start else "wb"  # 200 (the server ignored Range): start over
            expected = _expected_length(response, start, remote)
            total = remote.size or (start + expected if expected is not None else None)
            received = start
            with part.open(mode) as fh, tqdm(total=total, initial=start, unit="B", unit_scale=True,
                                             unit_divisor=1024, desc=remote.name, file=sys.stderr,
                                             disable=not progress, leave=False) as bar:
                for chunk in response.iter_bytes():  # as it arrives: a body cut short keeps what came
                    fh.write(chunk)
                    received += len(chunk)
                    bar.update(len(chunk))
            if expected is not None and received - start < expected:
                raise _Dropped(f"the body ended after {received - start} of {expected} bytes")
    except httpx.HTTPError as exc:  # connect errors, timeouts, a connection dropped mid-body
        raise _Dropped(f"{type(exc).__name__}: {redact_secrets(str(exc)) or 'no detail'}") from None


def _start_of(response: httpx.Response, have: int) -> int:
    """Where the body starts in the file: ``have`` for a 206 that continues there, else 0."""
    if response.status_code != 206:
        return 0
    content_range = response.headers.get("content-range", "")  # "bytes START-END/TOTAL"
    try:
        first = int(content_range.split()[1].split("-")[0])
    except (IndexError, ValueError):
        return 0
    if first != have:
        raise _Dropped(f"the server resumed at byte {first}, not {have}")
    return have


def _expected_length(response: httpx.Response, start: int, remote: RemoteFile) -> int | None:
    length = response.headers.get("content-length")
    if length and length.isdigit():
        return int(length)
    return remote.size - start if remote.size is not None else None


def _verify(remote: RemoteFile, part: Path, shown: str) -> None:
    """Refuse (and remove) a file whose size or checksum is not the pinned one."""
    size = part.stat().st_size
    if remote.size is not None and size != remote.size:
        part.unlink()
        raise DataError(f"{shown}: got {size} bytes, expected {remote.size}; the partial file was removed: "
                        "run the command again")
    if remote.sha256 is not None:
        got = sha256_of(part)
        if got != remote.sha256:
            part.unlink()
            raise DataError(f"{shown}: SHA-256 {got} is not the pinned {remote.sha256}; the file was removed "
                            "(the server sent other bytes than the official file: retry later, or report it)")
