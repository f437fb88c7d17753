"""Real document files written with the standard library: a PDF, a DOCX, an HTML page, Markdown.

The files are small but genuine (a PDF with a cross-reference table and two
fonts, a DOCX zip with heading styles), so the readers of ``selfrag[docs]``
parse them exactly as they would a file from a word processor.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from xml.sax.saxutils import escape

# (heading, paragraphs) per section.
Sections = list[tuple[str, list[str]]]


def _pdf_string(text: str) -> str:
    return "(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def write_pdf(path: Path, pages: list[Sections]) -> Path:
    """A PDF with one page per entry: headings in 16 pt Helvetica-Bold, body lines in 11 pt Helvetica."""
    objects: list[str] = []

    def add(body: str) -> int:
        objects.append(body)
        return len(objects)

    catalog = add("")  # filled in below
    pages_obj = add("")
    regular = add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    bold = add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold >>")
    kids = []
    for sections in pages:
        lines, y = [], 740
        for heading, paragraphs in sections:
            lines.append(f"BT /F2 16 Tf 72 {y} Td {_pdf_string(heading)} Tj ET")
            y -= 24
            for paragraph in paragraphs:
                words, line = paragraph.split(), ""
                for word in words:  # wrap at about 80 characters
                    if len(line) + len(word) > 80:
                        lines.append(f"BT /F1 11 Tf 72 {y} Td {_pdf_string(line.strip())} Tj ET")
                        y -= 14
                        line = ""
                    line += word + " "
                if line.strip():
                    lines.append(f"BT /F1 11 Tf 72 {y} Td {_pdf_string(line.strip())} Tj ET")
                    y -= 14
                y -= 8
        stream = "\n".join(lines)
        content = add(f"<< /Length {len(stream.encode('latin-1'))} >>\nstream\n{stream}\nendstream")
        kids.append(add(
            f"<< /Type /Page /Parent {pages_obj} 0 R /MediaBox [0 0 612 792] /Contents {content} 0 R "
            f"/Resources << /Font << /F1 {regular} 0 R /F2 {bold} 0 R >> >> >>"
        ))
    objects[catalog - 1] = f"<< /Type /Catalog /Pages {pages_obj} 0 R >>"
    objects[pages_obj - 1] = f"<< /Type /Pages /Kids [{' '.join(f'{k} 0 R' for k in kids)}] /Count {len(kids)} >>"
    out = b"%PDF-1.4\n"
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root {catalog} 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(out)
    return path


_DOCX_TYPES = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>
<Override PartName="/word/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.styles+xml"/>
</Types>"""
_DOCX_RELS = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>
</Relationships>"""
_DOCX_DOC_RELS = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/styles" Target="styles.xml"/>
</Relationships>"""
_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_DOCX_STYLES = f"""<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:styles xmlns:w="{_W}">
<w:style w:type="paragraph" w:default="1" w:styleId="Normal"><w:name w:val="Normal"/></w:style>
<w:style w:type="paragraph" w:styleId="Title"><w:name w:val="Title"/><w:basedOn w:val="Normal"/></w:style>
<w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/><w:basedOn w:val="Normal"/></w:style>
<w:style w:type="paragraph" w:styleId="Heading2"><w:name w:val="heading 2"/><w:basedOn w:val="Normal"/></w:style>
</w:styles>"""


def write_docx(path: Path, sections: Sections, *, title: str | None = None, level: int = 1) -> Path:
    """A Word document: an optional Title paragraph, then each section's heading (Heading N) and paragraphs."""

    def para(text: str, style: str | None = None) -> str:
        props = f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>' if style else ""
        return f'<w:p>{props}<w:r><w:t xml:space="preserve">{escape(text)}</w:t></w:r></w:p>'

    body = [para(title, "Title")] if title else []
    for heading, paragraphs in sections:
        body.append(para(heading, f"Heading{level}"))
        body.extend(para(p) for p in paragraphs)
    document = (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<w:document xmlns:w="{_W}"><w:body>'
                + "".join(body) + "</w:body></w:document>")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", _DOCX_TYPES)
        z.writestr("_rels/.rels", _DOCX_RELS)
        z.writestr("word/_rels/document.xml.rels", _DOCX_DOC_RELS)
        z.writestr("word/document.xml", document)
        z.writestr("word/styles.xml", _DOCX_STYLES)
    return path


def write_html(path: Path, sections: Sections, *, title: str = "Page") -> Path:
    """A web page as saved from a browser: navigation, a script, a cookie banner and a footer around an
    article whose sections are ``<h2>`` headings and paragraphs."""
    article = "".join(
        f"<h2>{escape(h)}</h2>" + "".join(f"<p>{escape(p)}</p>" for p in ps) for h, ps in sections
    )
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{escape(title)}</title>
<style>body {{ font-family: sans-serif; }}</style>
<script>window.analytics = {{track: function() {{ return "tracking code"; }}}};</script></head>
<body>
<header><nav><a href="/">Home</a> | <a href="/shop">Shop</a> | <a href="/login">Log in</a></nav></header>
<div class="cookie-banner">We use cookies to improve your experience. Accept all cookies?</div>
<main><article><h1>{escape(title)}</h1>{article}</article></main>
<aside>Related: ten gadgets you need this summer</aside>
<footer>Copyright 2024 Example Corp. All rights reserved. Privacy policy.</footer>
</body></html>"""
    path.write_text(page, encoding="utf-8")
    return path


def write_markdown(path: Path, sections: Sections, *, title: str | None = None) -> Path:
    """A Markdown file: an optional ``# title``, then ``## heading`` sections."""
    parts = [f"# {title}\n"] if title else []
    for heading, paragraphs in sections:
        parts.append(f"## {heading}\n")
        parts.extend(p + "\n" for p in paragraphs)
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def write_folder(folder: Path, files: dict[str, str]) -> Path:
    """A folder of text files, ``name -> text``; the folder is made."""
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder
