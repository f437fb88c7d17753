"""Hostile document folders through a real `selfrag index build` / `ask`: each is read at a bounded
cost (time and peak memory of the child process) or skipped and named with its reason.

The bounds are generous for a loaded 2-core machine: each case took minutes or gigabytes before
(a FIFO hung forever), and takes about a second now.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

import selfrag
from tests.helpers.documents import _DOCX_DOC_RELS, _DOCX_RELS, _DOCX_STYLES, _DOCX_TYPES, _W

SRC = str(Path(selfrag.__file__).resolve().parents[1])
MAX_RSS_MB = 500
HAS_DOCX = all(__import__("importlib").util.find_spec(m) for m in ("docx", "pypdf"))
needs_docx = pytest.mark.skipif(not HAS_DOCX, reason="needs the docs extra (python-docx)")


@dataclass
class Run:
    code: int
    out: str
    err: str
    seconds: float
    rss_mb: float


def selfrag_cli(*argv: object, cwd: Path, timeout: float = 120) -> Run:
    """Run `selfrag ARGV` in a child; its exit code, output, wall time and peak RSS (from wait4)."""
    out, err = cwd / ".out", cwd / ".err"
    env = {**os.environ, "PYTHONPATH": SRC, "SELFRAG_PROGRESS": "0"}
    start = time.monotonic()
    with out.open("wb") as fo, err.open("wb") as fe:
        child = subprocess.Popen([sys.executable, "-m", "selfrag", *map(str, argv)], cwd=cwd, env=env,
                                 stdin=subprocess.DEVNULL, stdout=fo, stderr=fe, start_new_session=True)
        peak_kb = 0
        while True:
            peak_kb = max(peak_kb, _high_water_kb(child.pid))
            pid, status, _ = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > timeout:
                os.killpg(child.pid, signal.SIGKILL)
                _, status, _ = os.wait4(child.pid, 0)
                break
            time.sleep(0.02)
    child.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - start
    assert seconds < timeout, f"selfrag {' '.join(map(str, argv))} still running after {timeout} s"
    return Run(child.returncode, out.read_text(), err.read_text(), seconds, peak_kb / 1024)


def _high_water_kb(pid: int) -> int:
    """The child's own peak resident size (VmHWM, kB) so far. Not wait4's ru_maxrss: that keeps the
    resident size of the test process the child was forked from, which a long test session makes large."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    match = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
    return int(match.group(1)) if match else 0


def warning(run: Run) -> str:
    lines = [line for line in run.err.splitlines() if "WARNING" in line]
    assert len(lines) == 1, run.err
    return lines[0]


def bounded(run: Run, seconds: float = 10) -> None:
    assert run.seconds < seconds, f"took {run.seconds:.1f} s"
    assert run.rss_mb < MAX_RSS_MB, f"peak RSS {run.rss_mb:.0f} MB"
    assert "Traceback" not in run.err, run.err


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "tea.md").write_text("# Tea\nGreen tea steeps for two minutes.\n")
    return folder


def build(tmp_path: Path, docs: Path, *extra: object, timeout: float = 120) -> Run:
    return selfrag_cli("index", "build", "--docs", docs, "--out", tmp_path / "idx", *extra, cwd=tmp_path,
                       timeout=timeout)


# -- a file that is not UTF-8 --------------------------------------------------------------


def test_a_file_that_is_not_utf8_is_skipped_and_named_with_the_others(tmp_path, docs):
    (docs / "latin1.md").write_bytes(b"caf\xe9 au lait")
    (docs / "photo.png").write_bytes(b"\x89PNG")
    run = build(tmp_path, docs)
    assert run.code == 0, run.err
    line = warning(run)
    assert "latin1.md: not UTF-8 text (byte 0xe9); save it as UTF-8" in line
    assert "photo.png" in line
    assert "from 1 files" in run.out


def test_a_single_file_that_is_not_utf8_is_one_line(tmp_path):
    bad = tmp_path / "latin1.md"
    bad.write_bytes(b"caf\xe9")
    run = build(tmp_path, bad)
    assert run.code == 2 and run.err.count("\n") == 1
    assert "latin1.md: cannot be read: not UTF-8 text (byte 0xe9)" in run.err


# -- Word files ----------------------------------------------------------------------------


def write_big_docx(path: Path, xml_mb: float, *, styles: int = 0, sentences: int = 1) -> int:
    """A .docx whose document.xml is ``xml_mb`` MB of a Heading 1 and a body paragraph of ``sentences``
    runs of one sentence, in bold, repeated (it compresses about 250 to 1), with ``styles`` more
    paragraph styles defined; the number of headings."""
    body = ('<w:r><w:rPr><w:b/><w:lang w:val="en-GB"/></w:rPr>'
            '<w:t xml:space="preserve">Body text of a paragraph that says something. </w:t></w:r>') * sentences
    pair = ('<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Heading words here</w:t></w:r></w:p>'
            f"<w:p>{body}</w:p>")
    block = (pair * 100).encode()
    more = "".join(f'<w:style w:type="paragraph" w:styleId="Custom{i}"><w:name w:val="Custom {i}"/></w:style>'
                   for i in range(styles))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in (("[Content_Types].xml", _DOCX_TYPES), ("_rels/.rels", _DOCX_RELS),
                           ("word/_rels/document.xml.rels", _DOCX_DOC_RELS),
                           ("word/styles.xml", _DOCX_STYLES.replace("</w:styles>", more + "</w:styles>"))):
            z.writestr(name, text)
        with z.open("word/document.xml", "w", force_zip64=True) as fh:
            fh.write(f'<?xml version="1.0" encoding="UTF-8"?>\n<w:document xmlns:w="{_W}"><w:body>'.encode())
            blocks = int(xml_mb * 2**20) // len(block)
            for _ in range(blocks):
                fh.write(block)
            fh.write(b"</w:body></w:document>")
    return blocks * 100


@needs_docx
def test_a_word_file_of_60_mb_of_xml_is_skipped_before_it_is_parsed(tmp_path, docs):
    write_big_docx(docs / "bomb.docx", 60)
    assert (docs / "bomb.docx").stat().st_size < 1_000_000
    run = build(tmp_path, docs)
    bounded(run)
    assert run.code == 0, run.err
    line = warning(run)
    assert "bomb.docx: its XML unpacks to 60.0 MB, over the 16.0 MB limit (data.max_unpacked_mb)" in line


def amplified_pdf(path: Path, pages: int, stream_mb: float) -> None:
    """A small PDF whose ``pages`` pages all draw one shared content stream of ``stream_mb`` MB of text
    operators (compressed, so the file stays tiny)."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    ops = b"BT /F1 12 Tf 72 700 Td (the same line of text) Tj ET\n"
    stream = DecodedStreamObject()
    stream.set_data(ops * int(stream_mb * 1024 * 1024 / len(ops)))
    content = writer._add_object(stream.flate_encode())
    font = writer._add_object(DictionaryObject({NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"):
                                                NameObject("/Type1"), NameObject("/BaseFont"): NameObject("/Helvetica")}))
    for _ in range(pages):
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Contents")] = content
        page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
    with path.open("wb") as out:
        writer.write(out)


@needs_docx
def test_a_pdf_whose_pages_share_a_huge_content_stream_is_skipped(tmp_path, docs):
    """20 pages drawing one 1 MB stream: a 28 s text extraction before; refused with the limit named."""
    amplified_pdf(docs / "bomb.pdf", pages=20, stream_mb=1.0)
    assert (docs / "bomb.pdf").stat().st_size < 50_000
    run = selfrag_cli("index", "build", "--docs", docs, "--out", tmp_path / "idx", cwd=tmp_path)
    assert run.code == 0, run.err
    assert "bomb.pdf: its pages' content decodes to 17.0 MB, over the 16.0 MB limit (data.max_unpacked_mb)" in warning(run)
    bounded(run)


@needs_docx
def test_a_pdf_under_the_content_cap_is_read(tmp_path, docs):
    amplified_pdf(docs / "long.pdf", pages=4, stream_mb=0.5)
    run = selfrag_cli("index", "build", "--docs", docs, "--out", tmp_path / "idx", cwd=tmp_path)
    assert run.code == 0 and "WARNING" not in run.err, run.err
    bounded(run)


@needs_docx
def test_a_word_file_with_many_styles_reads_in_linear_time(tmp_path, docs):
    """Before: python-docx searched the styles for every paragraph; with 2,000 styles (174 KB) that
    was about 5 ms a paragraph, so 10,000 paragraphs took minutes. Now the styles are read once."""
    headings = write_big_docx(docs / "styled.docx", 2, styles=2000)
    run = build(tmp_path, docs, "--json", timeout=60)
    bounded(run)
    assert run.code == 0, run.err
    assert f'"document_count": {headings + 1}' in run.out  # a passage per heading, and tea.md


@needs_docx
def test_a_word_file_of_15_mb_of_xml_under_the_cap_is_bounded(tmp_path, docs):
    """Under the default caps: 15.5 MB of XML, 51,000 paragraphs in 127,500 runs, cut into 25,500
    passages of 4.5 MB of text (7 s before, 2.3 s and 323 MB now)."""
    headings = write_big_docx(docs / "long.docx", 15.5, sentences=4)
    run = build(tmp_path, docs, "--json", timeout=120)
    bounded(run, seconds=30)
    assert run.code == 0, run.err
    assert f'"document_count": {headings + 1}' in run.out


# -- HTML, text, many files ----------------------------------------------------------------


def test_deeply_nested_html_reads_in_linear_time(tmp_path, docs):
    """Before: every end tag and every piece of text scanned the open-element stack (50,000 deep:
    minutes)."""
    depth = 50_000
    (docs / "nested.html").write_text("<html><body>" + "<div>" * depth + "deep text" + "</div>" * depth
                                      + "<p>after the divs</p></body></html>")
    run = build(tmp_path, docs, timeout=60)
    bounded(run)
    assert run.code == 0 and "from 2 files" in run.out, run.err


@pytest.mark.parametrize("unit", ["<a ", "</", "<!", "<p>x"])
def test_nine_megabytes_of_malformed_html_read_in_seconds(tmp_path, docs, unit):
    """Before: html.parser rescanned the rest of the page for each unclosed "<a ", "</" or "<!" (over
    60 s each), and 2.3 million unclosed <p> took 34 s and 826 MB."""
    (docs / "bad.html").write_text("<html><body><p>Before the junk.</p>" + unit * (9 * 2**20 // len(unit)))
    run = build(tmp_path, docs, timeout=60)
    bounded(run, seconds=10 if unit != "<p>x" else 30)
    assert run.code == 0 and "from 2 files" in run.out, run.err


def test_a_markdown_file_of_a_million_sections_is_skipped_at_the_passage_cap(tmp_path, docs):
    """Before: 1.3 million one-word passages, 17 s and 1.1 GB."""
    (docs / "tiny.md").write_text("# h\nx\n" * (9 * 2**20 // 6))
    run = build(tmp_path, docs, timeout=60)
    bounded(run)
    assert run.code == 0, run.err
    assert "tiny.md: cut into more than 50,000 passages (data.max_passages)" in warning(run)


def test_a_folder_nested_1200_deep_is_walked(tmp_path, docs):
    """Before: the recursive walk ended in a RecursionError traceback."""
    levels = [docs / "d"]
    for _ in range(1199):
        levels.append(levels[-1] / "d")
    try:
        for level in levels:  # one level at a time: os.makedirs recurses
            level.mkdir()
        (levels[-1] / "deep.md").write_text("The deepest note.")
        run = build(tmp_path, docs, timeout=60)
    finally:  # removed here, bottom up: pytest's own clean-up (shutil.rmtree) recurses too
        (levels[-1] / "deep.md").unlink(missing_ok=True)
        for level in reversed(levels):
            if level.is_dir():
                level.rmdir()
    bounded(run)
    assert run.code == 0 and "from 2 files" in run.out, run.err


def test_a_text_file_over_the_size_cap_is_skipped_unread(tmp_path, docs):
    """Before: a 200 MB file took 165 s and 5.3 GB. A sparse file: its size is all that is looked at."""
    with (docs / "huge.txt").open("wb") as fh:
        fh.truncate(200 * 2**20)
    run = build(tmp_path, docs)
    bounded(run, seconds=5)
    assert run.code == 0, run.err
    assert "huge.txt: 200 MB of text, over the 10.0 MB limit (data.max_text_mb)" in warning(run)


def test_a_text_file_of_one_long_line_under_the_cap_is_bounded(tmp_path, docs):
    """9 MB on one line without a sentence end: cut at words, one passage at a time."""
    (docs / "line.txt").write_text("word " * (9 * 2**20 // 5))
    run = build(tmp_path, docs)
    bounded(run, seconds=30)
    assert run.code == 0, run.err


def test_thirty_thousand_small_files_index_in_linear_time(tmp_path):
    """Before: each file's id was checked against every id taken so far (10,000 files 6 s, 30,000
    about a minute); now a set lookup (30,000 files: about 3 s)."""
    folder = tmp_path / "many"
    for i in range(30_000):
        sub = folder / f"d{i // 1000:02d}"
        if i % 1000 == 0:
            sub.mkdir(parents=True)
        (sub / f"n{i}.md").write_text(f"Note {i} says {i * 7}.")
    run = build(tmp_path, folder, timeout=120)
    assert run.code == 0, run.err
    assert "of 30000 documents from 30000 files" in run.out
    assert run.seconds < 40, f"took {run.seconds:.1f} s"


# -- FIFOs and devices ---------------------------------------------------------------------


@pytest.mark.parametrize("command", ["index", "ask"])
def test_docs_naming_a_fifo_is_refused_at_once(tmp_path, command):
    fifo = tmp_path / "notes.md"
    os.mkfifo(fifo)
    script = tmp_path / "script.json"
    script.write_text('["x"]')
    if command == "index":
        run = build(tmp_path, fifo, timeout=30)
    else:
        run = selfrag_cli("ask", "q", "--docs", fifo, "--llm", f"scripted:{script}", cwd=tmp_path, timeout=30)
    bounded(run, seconds=10)
    assert run.code == 2 and run.err.count("\n") == 1, run.err
    assert f"documents {fifo}: a FIFO, not a file or folder; give a folder or a regular file" in run.err


def test_a_device_given_as_docs_is_refused(tmp_path):
    run = build(tmp_path, Path("/dev/zero"), timeout=30)
    bounded(run, seconds=10)
    assert run.code == 2 and "documents /dev/zero: a character device, not a file or folder" in run.err


def test_fifos_and_links_to_devices_in_a_folder_are_named_in_the_skipped_line(tmp_path, docs):
    os.mkfifo(docs / "pipe.md")
    os.mkfifo(docs / "unknown-format")
    (docs / "zero.txt").symlink_to("/dev/zero")
    run = build(tmp_path, docs, "--follow-external-links", timeout=30)
    bounded(run)
    assert run.code == 0, run.err
    line = warning(run)
    assert "3 entries that are not regular files (pipe.md: a FIFO, unknown-format: a FIFO, " \
           "zero.txt: a character device)" in line
