"""HTML read by selfrag's own tokenizer: the same text as the standard library's parser on real pages,
the standard's rules on malformed ones, and linear time on what made html.parser quadratic."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from selfrag.ingest import html as html_module
from selfrag.ingest.html import html_sections
from selfrag.ingest.html_tokens import tokenize
from tests.helpers.documents import write_html

PAGES = [
    """<!DOCTYPE html><html><head><title>T</title><style>p {color: red}</style></head>
    <body><nav><a href="/">Home</a></nav><main><h1>Tea &amp; coffee</h1><p>Green tea steeps for
    <b>two</b> minutes.<p>Black tea &lt;four&gt; minutes.<br>Always.</p><!-- a comment -->
    <h2 class="x">Water</h2><ul><li>Soft<li>Filtered</ul><table><tr><td>a<td>b</table></main>
    <footer>Copyright</footer></body></html>""",
    """<html><body><article><h2>One</h2><p>First article.</p></article><div>Outside.</div>
    <article><h2>Two</h2><p>Second <a title="x > y" href='z'>link</a> article.</p></article></body></html>""",
    """<body><div>No main, no article.<script>if (a < b && c > "</div>") {}</script> After the script.
    <h3>Later</h3>Text under later.<img src="i.png" alt="a > b"/></div></body>""",
    """Just text & an ampersand, <not a tag, and a lone < sign.<p>Then a paragraph.""",
    """<HTML><BODY><H1>Upper</H1><P>Upper-case tags.</P><DIV/>Self-closing div.</BODY></HTML>""",
]


def stdlib_sections(text: str):
    """The same reader, fed by the standard library's parser instead of the tokenizer."""
    reader = html_module._Reader()

    class Feed(HTMLParser):
        def handle_starttag(self, tag, attrs):
            reader.start(tag)

        def handle_endtag(self, tag):
            reader.end(tag)

        def handle_data(self, data):
            reader.data(data)

    feed = Feed(convert_charrefs=True)
    feed.feed(text)
    feed.close()
    return reader.runs()


def tokenized_runs(text: str):
    reader = html_module._Reader()
    tokenize(text, reader.start, reader.end, reader.data)
    return reader.runs()


@pytest.mark.parametrize("page", range(len(PAGES)))
def test_the_tokenizer_reads_what_the_standard_parser_reads(page):
    assert tokenized_runs(PAGES[page]) == stdlib_sections(PAGES[page])


def test_a_saved_page(tmp_path):
    text = write_html(tmp_path / "p.html", [("Tea", ["Green tea.", "Black tea."])]).read_text()
    assert tokenized_runs(text) == stdlib_sections(text)
    assert [(s.heading, s.text) for s in html_sections(text)] == [("Tea", "Green tea.\n\nBlack tea.")]


def test_what_the_page_keeps():
    sections = [(s.heading, s.text) for s in html_sections(PAGES[0])]
    assert sections == [("Tea & coffee", "Green tea steeps for two minutes.\n\nBlack tea <four> minutes. Always."),
                        ("Water", "Soft\n\nFiltered\n\nab")]
    assert [s.text for s in html_sections(PAGES[2])] == ["No main, no article. After the script.",
                                                          "Text under later."]


@pytest.mark.parametrize(("page", "text"), [
    ("<p>kept</p><!-- never closed <p>dropped</p>", "kept"),  # a comment runs to the end
    ("<p>kept</p><a href='never closed>dropped</a>", "kept"),  # so does a quoted value
    ("<p>kept</p><a class=it's>and this</a>", "kept\n\nand this"),  # a quote not after "=" opens nothing
    ("<p>kept</p><script>dropped", "kept"),  # and a script
    ("<p>a</p><!---->b<!-->c<!--->d", "a\n\nbcd"),  # empty comments close at once
    ("<p>a</></ p>b<?php x ?>c<!doctype html>d", "abcd"),  # declarations and junk end tags dropped
    ("<p>x &lt;&#62;&amp;&nbsp;y</p>", "x <>& y"),
])
def test_malformed_constructs_follow_the_standard(page, text):
    assert "\n\n".join(s.text for s in html_sections(page)) == text


@pytest.mark.parametrize("unit", ["<a ", "</", "<!", "<?", "<", "<!--", "<p>x", "</div>", "<div>", "&#"])
def test_a_megabyte_of_any_malformed_construct_is_read_in_one_pass(unit):
    """html.parser took minutes on a few MB of "<a ", "</" or "<!" (tests/test_ingest_hostile.py times
    them through `selfrag index build`); the tokenizer calls the reader at most once per character."""
    calls = 0

    def count(*_):
        nonlocal calls
        calls += 1

    page = "<body>" + unit * (2**20 // len(unit))
    tokenize(page, count, count, count)
    assert calls <= len(page)
    html_sections(page)  # and the reader keeps up
