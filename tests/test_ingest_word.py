"""Word files: the one-pass reader gives what python-docx's own API gives, reads tables python-docx
cannot, and the package is sized before anything is parsed (images apart from the XML)."""

from __future__ import annotations

import importlib.util
import io
import zipfile
from pathlib import Path
from xml.sax.saxutils import escape

import pytest

from selfrag.ingest import IngestLimits, collect
from selfrag.ingest.limits import TooLarge
from selfrag.ingest.office import docx_sections
from tests.helpers.documents import _DOCX_DOC_RELS, _DOCX_RELS, _DOCX_STYLES, _DOCX_TYPES, _W

pytestmark = pytest.mark.skipif(not importlib.util.find_spec("docx"), reason="needs the docs extra (python-docx)")

STYLES = _DOCX_STYLES.replace("</w:styles>", (
    '<w:style w:type="paragraph" w:styleId="Quote"><w:name w:val="Quote"/></w:style>'
    '<w:style w:type="character" w:styleId="Heading9Char"><w:name w:val="Heading 9 Char"/></w:style>'
    "</w:styles>"))


def run(text: str) -> str:
    return f'<w:r><w:t xml:space="preserve">{escape(text)}</w:t></w:r>'


def para(*parts: str, style: str | None = None) -> str:
    props = f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>' if style else ""
    return f"<w:p>{props}{''.join(parts)}</w:p>"


def cell(text: str, merge: str | None = None) -> str:
    props = "" if merge is None else (f'<w:tcPr><w:vMerge w:val="{merge}"/></w:tcPr>' if merge else
                                      "<w:tcPr><w:vMerge/></w:tcPr>")
    return f"<w:tc>{props}{para(run(text)) if text else '<w:p/>'}</w:tc>"


def docx_bytes(body: str, *, parts: dict[str, bytes] | None = None, types: str = _DOCX_TYPES) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", types)
        z.writestr("_rels/.rels", _DOCX_RELS)
        z.writestr("word/_rels/document.xml.rels", _DOCX_DOC_RELS)
        z.writestr("word/styles.xml", STYLES)
        z.writestr("word/document.xml", f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
                                        f'<w:document xmlns:w="{_W}"><w:body>{body}</w:body></w:document>')
        for name, data in (parts or {}).items():
            z.writestr(name, data)
    return buf.getvalue()


PARAGRAPHS = "".join([
    para(run("Brewing guide"), style="Title"),
    para(run("Intro before any heading.")),
    para(run("Temperature"), style="Heading1"),
    para(run("Water at"), "<w:r><w:tab/><w:t>92</w:t><w:br/><w:t>degrees</w:t></w:r>", run(" is right.")),
    para('<w:hyperlink w:anchor="x">' + run("A linked") + "</w:hyperlink>", run(" sentence.")),
    para(run("Styled with an id the document lacks."), style="NoSuchStyle"),
    para(run("A character style's id on a paragraph."), style="Heading9Char"),
    para(run("Quoted  text,   spaced out."), style="Quote"),
    para(),
    para(run("Storage"), style="Heading2"),
    para(run("Keeps two weeks."), "<w:r><w:noBreakHyphen/><w:t>cold</w:t></w:r>"),
])


def python_docx_reading(data: bytes) -> list[tuple[str | None, str]]:
    """What python-docx's public API reads: each paragraph's text and style name, gathered as the
    reader gathers them (a Heading or Title style starts a section)."""
    import docx

    sections: list[tuple[str | None, list[str]]] = [(None, [])]
    for p in docx.Document(io.BytesIO(data)).paragraphs:
        text = " ".join(p.text.split())
        if not text:
            continue
        if (p.style.name if p.style is not None else "").lower().startswith(("heading", "title")):
            sections.append((text, []))
        else:
            sections[-1][1].append(text)
    return [(h, "\n\n".join(ps)) for h, ps in sections if ps]


def test_paragraphs_read_as_python_docx_reads_them():
    data = docx_bytes(PARAGRAPHS)
    got = [(s.heading, s.text) for s in docx_sections(data)]
    assert got == python_docx_reading(data)
    assert got[1] == ("Temperature", "Water at 92 degrees is right.\n\nA linked sentence.\n\n"
                      "Styled with an id the document lacks.\n\nA character style's id on a paragraph.\n\n"
                      "Quoted text, spaced out.")


def test_tables_are_read_cell_by_cell_with_merged_cells_once():
    table = ("<w:tbl>"
             f"<w:tr>{cell('Bean', '')}{cell('Roast')}</w:tr>"  # a merge that python-docx's rows cannot read
             f"<w:tr>{cell('', 'restart')}{cell('Light')}</w:tr>"
             f"<w:tr>{cell('Arabica', 'restart')}{cell('Dark')}</w:tr>"
             f"<w:tr>{cell('', None)}{cell('Medium')}</w:tr>"
             f"<w:tr>{cell('', 'continue')}{cell('')}</w:tr>"
             "</w:tbl>")
    data = docx_bytes(para(run("Beans"), style="Heading1") + table)
    assert [(s.heading, s.text) for s in docx_sections(data)] == [
        ("Beans", "Roast\n | Light\nArabica | Dark\n | Medium")]


def test_a_first_row_merge_is_read_through_collect(tmp_path):
    """python-docx's row.cells raised ValueError on it (a traceback from `selfrag ask`)."""
    table = f"<w:tbl><w:tr>{cell('', 'continue')}{cell('Only cell')}</w:tr></w:tbl>"
    (tmp_path / "t.docx").write_bytes(docx_bytes(table))
    assert [d.text for d in collect(tmp_path).documents] == ["Only cell"]


def test_images_count_against_the_file_cap_not_the_xml_cap():
    image = b"\0" * (25 * 2**20)  # compresses to about 25 KB
    data = docx_bytes(PARAGRAPHS, parts={"word/media/image1.png": image},
                      types=_DOCX_TYPES.replace("<Default Extension=\"xml\"",
                                                '<Default Extension="png" ContentType="image/png"/>'
                                                '<Default Extension="xml"'))
    assert docx_sections(data)  # 25 MB of image, over max_unpacked_mb: read
    with pytest.raises(TooLarge, match=r"unpacks to 25\.\d MB, over the 20\.0 MB limit \(data\.max_file_mb\)"):
        docx_sections(data, IngestLimits(max_file_mb=20))


def test_a_part_named_like_an_image_but_typed_as_xml_counts_as_xml():
    data = docx_bytes(PARAGRAPHS, parts={"word/media/image1.png": b"<x/>" * (6 * 2**20)},
                      types=_DOCX_TYPES.replace("</Types>", '<Override PartName="/word/media/image1.png" '
                                                'ContentType="application/xml"/></Types>'))
    with pytest.raises(TooLarge, match=r"its XML unpacks to 24\.\d MB, over the 16\.0 MB limit"):
        docx_sections(data)


def test_a_part_that_unpacks_to_more_than_its_entry_says_is_refused(tmp_path):
    """The cap reads the sizes the zip's directory declares; a part whose entry lies is refused by
    zipfile when python-docx reads it (a CRC or size error), not unpacked in full."""
    data = bytearray(docx_bytes(para(run("Honest.")) + para(run("x" * 200_000))))
    entry = data.rfind(b"word/document.xml") - 46  # its central directory entry
    assert data[entry:entry + 4] == b"PK\x01\x02"
    data[entry + 24:entry + 28] = (1000).to_bytes(4, "little")  # declared uncompressed size
    (tmp_path / "liar.docx").write_bytes(bytes(data))
    (tmp_path / "ok.md").write_text("Fine.")
    found = collect(tmp_path)
    assert [why for f, why in found.skipped.unreadable] == ["not a readable Word document (BadZipFile)"]


def test_a_word_file_whose_text_passes_the_text_cap_is_skipped_and_named(tmp_path):
    (tmp_path / "long.docx").write_bytes(docx_bytes(para(run("word " * 30_000))))
    (tmp_path / "ok.md").write_text("Fine.")
    found = collect(tmp_path, limits=IngestLimits(max_text_mb=0.1))
    assert found.skipped.too_large == [
        ("long.docx", "146 KB of text, over the 102 KB limit (data.max_text_mb)")]
    assert "1 file too large to read (long.docx: 146 KB of text" in found.skipped.summary(Path("notes"))
