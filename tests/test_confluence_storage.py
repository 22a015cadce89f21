"""Confluence storage format to Markdown (:mod:`connectors.storage_format`), element by element.

Inputs are storage-format fragments as Confluence stores them (``ac:``/``ri:`` elements, CDATA).
Covers headings (kept for section citations), code and noformat macros (language and text kept
byte for byte, also inside a panel), info/note/warning/tip/panel as quotes, expand bodies kept,
toc/jira/children macros dropped, links to their text, images to ``[image: alt]``, task lists,
status lozenges, tables, emoticons, and the chunker's view of the result.
"""

from __future__ import annotations

from index.chunker import Chunker
from core.models import Document
from connectors.storage_format import fenced_block, storage_to_markdown


def test_headings_paragraphs_and_inline_formatting() -> None:
    md = storage_to_markdown("<h1>Release process</h1><p>Ship <strong>every</strong> <em>Tuesday</em> with "
                             "<code>make release</code>.</p><h2>Branch cut</h2><p>Cut on Monday.</p>")
    assert md == "# Release process\n\nShip **every** *Tuesday* with `make release`.\n\n## Branch cut\n\nCut on Monday."


def test_code_macro_keeps_language_and_text_verbatim() -> None:
    storage = ('<ac:structured-macro ac:name="code" ac:schema-version="1" ac:macro-id="a1">'
               '<ac:parameter ac:name="language">python</ac:parameter><ac:parameter ac:name="title">demo</ac:parameter>'
               '<ac:plain-text-body><![CDATA[if a < b and c > d:\n    print("<b>not html</b>")  # snake_case\n\n\n'
               'x = """```"""]]></ac:plain-text-body></ac:structured-macro>')
    md = storage_to_markdown(storage)
    assert md == ('````python\nif a < b and c > d:\n    print("<b>not html</b>")  # snake_case\n\n\nx = """```"""\n````')


def test_noformat_and_code_inside_a_panel() -> None:
    storage = ('<ac:structured-macro ac:name="note"><ac:parameter ac:name="title">Careful</ac:parameter>'
               '<ac:rich-text-body><p>Run this first:</p><ac:structured-macro ac:name="noformat">'
               '<ac:plain-text-body><![CDATA[rm -rf /tmp/cache]]></ac:plain-text-body></ac:structured-macro>'
               '</ac:rich-text-body></ac:structured-macro><p>After.</p>')
    md = storage_to_markdown(storage)
    assert md == "> **Note: Careful**\n>\n> Run this first:\n>\n> ```\n> rm -rf /tmp/cache\n> ```\n\nAfter."


def test_panel_macros_become_quotes_and_generated_macros_go() -> None:
    storage = ('<ac:structured-macro ac:name="toc"><ac:parameter ac:name="maxLevel">2</ac:parameter></ac:structured-macro>'
               '<ac:structured-macro ac:name="warning"><ac:rich-text-body><p>Never deploy on Fridays.</p>'
               '</ac:rich-text-body></ac:structured-macro>'
               '<ac:structured-macro ac:name="panel"><ac:parameter ac:name="title">Contacts</ac:parameter>'
               '<ac:rich-text-body><p>Ask #platform.</p></ac:rich-text-body></ac:structured-macro>'
               '<ac:structured-macro ac:name="jira"><ac:parameter ac:name="key">OPS-12</ac:parameter></ac:structured-macro>'
               '<ac:structured-macro ac:name="children"/>'
               '<ac:structured-macro ac:name="expand"><ac:parameter ac:name="title">Details</ac:parameter>'
               '<ac:rich-text-body><p>Hidden text stays searchable.</p></ac:rich-text-body></ac:structured-macro>')
    md = storage_to_markdown(storage)
    assert md == ("> **Warning**\n>\n> Never deploy on Fridays.\n\n> **Contacts**\n>\n> Ask #platform.\n\n"
                  "**Details**\n\nHidden text stays searchable.")


def test_links_images_tasks_status_emoticons_and_tables() -> None:
    storage = ('<p>See <ac:link><ri:page ri:content-title="Travel Policy" ri:space-key="HR"/></ac:link>, '
               '<ac:link><ri:page ri:content-title="X"/><ac:link-body><strong>the guide</strong></ac:link-body></ac:link>, '
               '<a href="https://example.com/a">the site</a> and '
               '<ac:link><ri:attachment ri:filename="form.pdf"/></ac:link>.'
               '<ac:emoticon ac:name="smile"/></p>'
               '<ac:image ac:alt="Org chart"><ri:attachment ri:filename="org.png"/></ac:image>'
               '<ac:image><ri:url ri:value="https://img.example.com/x.png"/></ac:image>'
               '<ac:task-list><ac:task><ac:task-id>1</ac:task-id><ac:task-status>complete</ac:task-status>'
               '<ac:task-body>Book flights</ac:task-body></ac:task><ac:task><ac:task-id>2</ac:task-id>'
               '<ac:task-status>incomplete</ac:task-status><ac:task-body>Book hotel</ac:task-body></ac:task></ac:task-list>'
               '<p>State: <ac:structured-macro ac:name="status"><ac:parameter ac:name="colour">Green</ac:parameter>'
               '<ac:parameter ac:name="title">APPROVED</ac:parameter></ac:structured-macro> on <time datetime="2026-03-01"/></p>'
               '<table><tbody><tr><th>Class</th><th>Limit</th></tr><tr><td>Economy</td><td>any trip</td></tr></tbody></table>')
    md = storage_to_markdown(storage)
    assert md == ("See Travel Policy, the guide, the site and form.pdf.\n\n[image: Org chart]\n\n"
                  "[image: https://img.example.com/x.png]\n\n- [x] Book flights\n- [ ] Book hotel\n\n"
                  "State: [APPROVED] on 2026-03-01\n\n| Class | Limit |\n| --- | --- |\n| Economy | any trip |")


def test_empty_and_odd_bodies() -> None:
    assert storage_to_markdown("") == ""
    assert storage_to_markdown("   ") == ""
    assert storage_to_markdown('<ac:structured-macro ac:name="unknown-thing"/><p>kept</p>') == "kept"
    assert storage_to_markdown("<p>unclosed <b>bold") == "unclosed **bold**"


def test_fenced_block_outgrows_inner_backticks() -> None:
    assert fenced_block("a ```` b", "c++") == "`````c++\na ```` b\n`````"


def test_the_chunker_cuts_converted_pages_at_their_headings() -> None:
    body = "<p>" + "Intro sentence about the release train. " * 12 + "</p>"
    storage = body + "<h2>Branch cut</h2><p>Cut the branch on Monday at noon.</p><h2>Rollback</h2><p>Roll back with the deploy tool.</p>"
    doc = Document(source="c", doc_id="page/1", title="Release", url="https://c/x", text=storage_to_markdown(storage))
    chunks = Chunker().chunk(doc)
    assert [c.section_path for c in chunks] == [(), ("Branch cut",), ("Rollback",)]
