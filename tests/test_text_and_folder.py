"""The folder connector, source specs and text conversion.

Covers :mod:`connectors.folder` (titles from front matter, first heading, ``<title>`` or the
path; HTML to Markdown; doc ids; URLs with and without ``url_base``; unreadable files reported as
``SkippedPage`` while the scan goes on; links, FIFOs and linked folders skipped, never followed or
opened blocking (:mod:`connectors.safe_files`); a missing root), :mod:`connectors.sources` (spec
parsing and its errors) and :mod:`connectors.text` (Markdown clean-up, slugs, first heading, HTML
nested thousands of levels deep flattened instead of a ``RecursionError``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from connectors.errors import SourceSpecError, SourceUnavailableError
from connectors.folder import FolderSource, SkippedPage, folder_source_name
from core.models import Document
from connectors.safe_files import RefusedFileError, read_regular_file
from connectors.sources import parse_source_spec
from connectors.text import MAX_HTML_DEPTH, clean_markdown, first_heading, html_to_markdown, slugify

from tests.helpers import WIKI, WIKI_PAGES


def _docs(source: FolderSource) -> dict[str, Document]:
    return {d.doc_id: d for d in source.scan() if isinstance(d, Document)}


@pytest.fixture(scope="module")
def wiki_docs() -> dict[str, Document]:
    """Every page of examples/wiki as read by the folder source (read-only)."""
    return _docs(FolderSource(WIKI))


# -- titles and conversion -------------------------------------------------------------------------

def test_front_matter_title_wins_over_first_heading(tmp_path: Path) -> None:
    (tmp_path / "page.md").write_text(
        "---\ntitle: Title From Front Matter\nowner: Docs\n---\n\n# Heading Title\n\nSome body text.\n",
        encoding="utf-8")
    doc = _docs(FolderSource(tmp_path))["page.md"]
    assert doc.title == "Title From Front Matter"
    # The front matter is metadata, not page text; the heading stays in the body.
    assert "owner: Docs" not in doc.text
    assert doc.text.startswith("# Heading Title")


def test_page_without_front_matter_takes_first_heading_as_title(wiki_docs: dict[str, Document]) -> None:
    raw = (WIKI / "company" / "glossary.md").read_text(encoding="utf-8")
    assert not raw.startswith("---"), "the example page is meant to have no front matter"
    assert wiki_docs["company/glossary.md"].title == "Glossary"


def test_page_without_front_matter_or_heading_takes_title_from_file_name(tmp_path: Path) -> None:
    (tmp_path / "team-rituals_2024.md").write_text("Just a paragraph, no heading at all.\n", encoding="utf-8")
    doc = _docs(FolderSource(tmp_path))["team-rituals_2024.md"]
    assert doc.title == "Team rituals 2024"


def test_html_page_becomes_markdown_with_atx_headings(wiki_docs: dict[str, Document]) -> None:
    doc = wiki_docs["it/laptops.html"]
    assert doc.title == "Laptops and equipment"  # from <title>
    lines = doc.text.split("\n")
    assert lines[0] == "# Laptops and equipment"
    for heading in ("Standard laptops", "Refresh cycle", "Requesting equipment", "Leaving the company"):
        assert f"## {heading}" in lines
    assert "<p>" not in doc.text and "<h2>" not in doc.text and "<td>" not in doc.text
    assert "replaced every **3 years**" in doc.text  # emphasis kept as Markdown


def test_html_title_comes_from_title_element(tmp_path: Path) -> None:
    (tmp_path / "p.html").write_text(
        "<html><head><title>Window Title</title><style>p{color:red}</style></head>"
        "<body><nav>Home | About</nav><h1>Body Heading</h1><p>Hello <a href='/x'>link text</a>.</p>"
        "<script>alert(1)</script></body></html>", encoding="utf-8")
    doc = _docs(FolderSource(tmp_path))["p.html"]
    assert doc.title == "Window Title"
    assert "# Body Heading" in doc.text
    assert "link text" in doc.text and "/x" not in doc.text
    assert "alert" not in doc.text and "color:red" not in doc.text and "Home | About" not in doc.text


def test_doc_ids_are_relative_paths_with_slashes(wiki_docs: dict[str, Document]) -> None:
    expected = {p.relative_to(WIKI).as_posix() for p in WIKI.rglob("*") if p.suffix in {".md", ".html"}}
    assert len(expected) == WIKI_PAGES
    assert set(wiki_docs) == expected
    assert "engineering/incident-response.md" in wiki_docs
    assert all("\\" not in d and not d.startswith("/") for d in wiki_docs)
    assert wiki_docs["engineering/incident-response.md"].space == "engineering"


# -- URLs -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rel, expected", [
    ("a/index.md", "https://wiki.example/handbook/a/"),
    ("a/b.md", "https://wiki.example/handbook/a/b"),
    ("index.md", "https://wiki.example/handbook/"),
    ("a/c d.html", "https://wiki.example/handbook/a/c%20d"),
])
def test_url_base_builds_site_urls(tmp_path: Path, rel: str, expected: str) -> None:
    page = tmp_path / rel
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text("# Page\n\nText.\n", encoding="utf-8")
    docs = _docs(FolderSource(tmp_path, url_base="https://wiki.example/handbook"))
    assert docs[rel].url == expected


def test_without_url_base_urls_are_file_uris(wiki_docs: dict[str, Document]) -> None:
    doc = wiki_docs["people/time-off.md"]
    assert doc.url == (WIKI / "people" / "time-off.md").resolve().as_uri()


# -- unreadable pages and missing folders -----------------------------------------------------------

def test_undecodable_file_and_broken_symlink_are_skipped_and_scan_continues(tmp_path: Path) -> None:
    (tmp_path / "a-first.md").write_text("# First\n\nFine.\n", encoding="utf-8")
    (tmp_path / "bad.md").write_bytes(b"# Bad\n\nLatin-1 text: caf\xe9 \xff\xfe\n")
    os.symlink(tmp_path / "does-not-exist.md", tmp_path / "x.md")
    (tmp_path / "z-last.md").write_text("# Last\n\nAlso fine.\n", encoding="utf-8")

    items = list(FolderSource(tmp_path).scan())

    by_id = {i.doc_id: i for i in items}
    assert set(by_id) == {"a-first.md", "bad.md", "x.md", "z-last.md"}
    assert isinstance(by_id["a-first.md"], Document) and isinstance(by_id["z-last.md"], Document)
    bad, link = by_id["bad.md"], by_id["x.md"]
    assert isinstance(bad, SkippedPage) and isinstance(link, SkippedPage)
    assert "UnicodeDecodeError" in bad.reason
    assert "symbolic link" in link.reason  # links are never followed, dangling or not
    assert bad.source == link.source == folder_source_name(tmp_path)  # named after its folder


@pytest.mark.timeout(30)  # a FIFO opened for reading would block forever
def test_links_fifos_and_linked_folders_are_skipped_never_read(tmp_path: Path) -> None:
    root, outside = tmp_path / "wiki", tmp_path / "outside"
    (root / "it").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.md").write_text("# Vault\n\nThe launch word is marzipan-octopus.\n", encoding="utf-8")
    (root / "ok.md").write_text("# Ok\n\nFine.\n", encoding="utf-8")
    os.symlink(outside / "secret.md", root / "leak.md")
    os.symlink("/proc/self/environ", root / "it" / "environment.md")
    os.symlink("ok.md", root / "alias.md")  # even a link to a page inside the folder
    os.mkfifo(root / "pipe.md")
    os.symlink(outside, root / "linked")

    items = {i.doc_id: i for i in FolderSource(root).scan()}

    assert set(items) == {"ok.md", "leak.md", "it/environment.md", "alias.md", "pipe.md", "linked/"}
    assert [d for d, i in items.items() if isinstance(i, Document)] == ["ok.md"]
    for doc_id in ("leak.md", "it/environment.md", "alias.md"):
        assert "symbolic link" in items[doc_id].reason and "not followed" in items[doc_id].reason
    assert "FIFO" in items["pipe.md"].reason and "not a regular file" in items["pipe.md"].reason
    assert "linked folder" in items["linked/"].reason


@pytest.mark.timeout(30)
def test_a_fifo_or_link_swapped_in_after_the_check_is_still_refused(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``lstat`` check can race with the file system: the open itself follows no link and never blocks."""
    (tmp_path / "ok.md").write_text("# Ok\n", encoding="utf-8")
    os.symlink("ok.md", tmp_path / "alias.md")
    os.mkfifo(tmp_path / "pipe.md")
    regular = os.stat(tmp_path / "ok.md")
    real_lstat = os.lstat
    monkeypatch.setattr(os, "lstat", lambda p, *a, **k: regular if Path(p).name in {"alias.md", "pipe.md"}
                        else real_lstat(p, *a, **k))
    with pytest.raises(RefusedFileError, match="FIFO"):
        read_regular_file(tmp_path, tmp_path / "pipe.md", 1000)
    with pytest.raises(RefusedFileError, match="link"):
        read_regular_file(tmp_path, tmp_path / "alias.md", 1000)


def test_a_linked_folder_on_the_path_is_not_followed_even_inside_the_root(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "page.md").write_text("# Page\n", encoding="utf-8")
    os.symlink("real", tmp_path / "linked")
    assert read_regular_file(tmp_path, tmp_path / "real" / "page.md", 1000)[0] == b"# Page\n"
    with pytest.raises(RefusedFileError, match="link"):
        read_regular_file(tmp_path, tmp_path / "linked" / "page.md", 1000)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
def test_a_file_reporting_size_0_is_still_read_only_up_to_the_limit() -> None:
    proc = Path("/proc/self").resolve()
    assert os.stat(proc / "environ").st_size == 0  # so a size check before reading proves nothing
    with pytest.raises(RefusedFileError, match="over the 8-byte limit"):
        read_regular_file(proc, proc / "environ", 8)


def test_missing_root_raises_source_unavailable(tmp_path: Path) -> None:
    source = FolderSource(tmp_path / "nowhere")
    with pytest.raises(SourceUnavailableError, match="nowhere"):
        list(source.scan())


def test_hidden_files_and_other_suffixes_are_ignored(tmp_path: Path) -> None:
    (tmp_path / "page.md").write_text("# Page\n", encoding="utf-8")
    (tmp_path / ".draft.md").write_text("# Draft\n", encoding="utf-8")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "notes.md").write_text("# Notes\n", encoding="utf-8")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    (tmp_path / "notes.txt").write_text("plain", encoding="utf-8")
    assert [i.doc_id for i in FolderSource(tmp_path).scan()] == ["page.md"]


# -- source specs -----------------------------------------------------------------------------------

@pytest.mark.parametrize("spec, fragments", [
    ("notatype:x", ["unknown source type", "notatype", "folder:"]),
    ("folder", ["TYPE:LOCATION", "folder:"]),
    ("folder:", ["TYPE:LOCATION", "folder:"]),
    ("folder:./wiki?bogus=1", ["unknown option", "bogus", "name=", "url_base="]),
])
def test_parse_source_spec_errors_are_helpful(spec: str, fragments: list[str]) -> None:
    with pytest.raises(SourceSpecError) as info:
        parse_source_spec(spec)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_parse_source_spec_builds_a_folder_source(tmp_path: Path) -> None:
    source = parse_source_spec(f"folder:{tmp_path}?name=handbook&url_base=https://h.example/docs")
    assert isinstance(source, FolderSource)
    assert source.root == tmp_path.resolve()
    assert source.name == "handbook"
    assert source.url_for("a/b.md") == "https://h.example/docs/a/b"


def test_parse_source_spec_rejects_spec_with_options_but_no_location() -> None:
    with pytest.raises(SourceSpecError):
        parse_source_spec("folder:?name=handbook")


# -- text helpers -----------------------------------------------------------------------------------

def test_clean_markdown_reduces_links_images_comments_and_shortcodes() -> None:
    md = ("See [the travel page](https://wiki/x_(y)) and ![team photo](img/team.png) here.\n"
          "<!-- internal note -->Visible {{< hint info >}}text{{< /hint >}} with <b>bold</b>.\n"
          "Use [Ledgerly][ledger] daily.\n\n[ledger]: https://ledgerly.example\n")
    out = clean_markdown(md)
    assert "See the travel page and [image: team photo] here." in out
    assert "internal note" not in out and "{{" not in out and "<b>" not in out
    assert "Visible text with bold." in out
    assert "Use Ledgerly daily." in out
    assert "https://" not in out


def test_clean_markdown_reads_inline_syntax_as_commonmark_does() -> None:
    """The cases the former regexes mangled (issue 27): each line is what a CommonMark reader shows."""
    md = ("Name it `<project>-partners` and write `![Alt](URL)` or `[text](link)`.\n\n"
          "[![Build status](https://ci/badge.svg)](https://ci/builds) and [](https://empty) end.\n\n"
          "Open the [\\[COPY\\] checklist](https://docs/x) and the [FAR [2.101]](https://far) part.\n\n"
          "Use [Cloudflare for SaaS] via the [bucket](<https://storage/a b>).\n\n"
          "Write to <https://www.tsp.gov> or [Ledgerly][missing].\n\n"
          "[Cloudflare for SaaS]:\n  https://cloudflare.example/saas\n")
    out = clean_markdown(md)
    assert "Name it `<project>-partners` and write `![Alt](URL)` or `[text](link)`." in out  # code untouched
    assert "[image: Build status] and  end." in out  # a badge's link and an empty link
    assert "Open the \\[COPY\\] checklist and the FAR [2.101] part." in out  # brackets inside a label
    assert "Use Cloudflare for SaaS via the bucket." in out  # shortcut reference, <destination>
    assert "Write to <https://www.tsp.gov> or Ledgerly." in out  # autolink as written; undefined reference
    assert "cloudflare.example" not in out  # a definition over two lines goes whole


def test_folder_page_heading_paths_are_plain_text(tmp_path: Path) -> None:
    from index.chunker import Chunker
    (tmp_path / "tokens.md").write_text("# Tokens\n\nIntro.\n\n## `SRC_SESSION_KEY` &amp; **rotation**\n\nRotate it.\n\n"
                                        "## Q: what if it leaks? **\n\nRevoke it.\n")
    doc = next(d for d in FolderSource(tmp_path).scan() if isinstance(d, Document))
    paths = [c.section_path for c in Chunker().chunk(doc)]
    assert ("SRC_SESSION_KEY & rotation",) in paths  # underscores kept, entity read, markers gone
    assert ("Q: what if it leaks?",) in paths  # a stray closing run goes too
    assert slugify("`SRC_SESSION_KEY` rotation") == "src_session_key-rotation"


def test_clean_markdown_keeps_links_and_tags_in_fenced_code() -> None:
    md = "Intro with [a link](http://x).\n\n```html\n<b>[keep](http://a)</b>\n![img](b.png)\n```\n\nAfter [b](http://y)."
    out = clean_markdown(md)
    assert "<b>[keep](http://a)</b>\n![img](b.png)" in out
    assert "Intro with a link." in out and "After b." in out


def test_clean_markdown_keeps_comments_and_shortcodes_in_fenced_code() -> None:
    md = ("Embed a note like this:\n\n```html\n<!-- start of note\n```\n\n"
          "Important prose that must survive.\n\n```html\nend of note -->\n{{< figure src=a.png >}}\n```\n")
    out = clean_markdown(md)
    assert "Important prose that must survive." in out
    assert "<!-- start of note" in out
    assert "{{< figure src=a.png >}}" in out


@pytest.mark.timeout(60)
def test_html_nested_thousands_deep_is_flattened_keeping_headings_and_text() -> None:
    deep = ("<h2>Deep heading</h2><p>Deep <b>bold</b> words.</p><ul><li>one</li><li>two</li></ul>"
            "<pre>code  x\n  y</pre>")
    for depth in (400, 20_000):
        html = (f"<html><head><title>T</title></head><body><h1>Top</h1><p>hello</p>{'<div>' * depth}{deep}"
                f"{'</div>' * depth}<h2>After</h2><p>tail</p></body></html>")
        title, md = html_to_markdown(html)
        assert title == "T"
        assert md == ("# Top\n\nhello\n\n## Deep heading\n\nDeep bold words.\n\none\n\ntwo\n\n"
                      "```\ncode  x\n  y\n```\n\n## After\n\ntail"), md
    # below the limit nothing changes: emphasis and list markup are kept
    shallow = "<body>" + "<div>" * (MAX_HTML_DEPTH - 5) + deep + "</div>" * (MAX_HTML_DEPTH - 5) + "</body>"
    assert "Deep **bold** words." in html_to_markdown(shallow)[1] and "- one" in html_to_markdown(shallow)[1]


def test_slugify_matches_github_anchors() -> None:
    assert slugify("Travel & Expenses (FY24)") == "travel--expenses-fy24"
    assert slugify("Declaring an incident") == "declaring-an-incident"
    assert slugify("**Bold** `code` heading") == "bold-code-heading"


def test_first_heading_skips_hash_lines_in_code_fences() -> None:
    md = "Intro text.\n\n```bash\n# install the tools\nmake install\n```\n\n## Real heading\n"
    assert first_heading(md) == "Real heading"
    assert first_heading("No heading here.") == ""


@pytest.mark.parametrize("folder, name", [("handbook", "handbook"), ("my wiki (2024)", "my-wiki-2024"),
                                          ("_private", "private"), ("...", "folder")])
def test_a_folder_source_is_named_after_its_folder(tmp_path: Path, folder: str, name: str) -> None:
    root = tmp_path / folder
    root.mkdir()
    assert FolderSource(root).name == name == folder_source_name(root)
    assert FolderSource(root, name="kb").name == "kb"


# -- text that reads as written --------------------------------------------------------------------

def test_a_hard_wrapped_paragraph_is_read_as_one_line(tmp_path: Path) -> None:
    (tmp_path / "leave.md").write_text(
        "# Leave\n\nCaregivers can take up to 16 weeks of paid leave once they have\nbeen employed for "
        "12 months.\nAsk People Ops first.\n\n- a list item that wraps\n  onto a second line\n- second\n\n"
        "| Code | Fix |\n|---|---|\n| E42 | Restart |\n", encoding="utf-8")
    text = _docs(FolderSource(tmp_path))["leave.md"].text
    assert ("Caregivers can take up to 16 weeks of paid leave once they have been employed for 12 months. "
            "Ask People Ops first.") in text
    assert "- a list item that wraps onto a second line\n- second" in text
    assert "| Code | Fix |\n|---|---|\n| E42 | Restart |" in text  # tables keep their rows


def test_a_setext_heading_becomes_an_atx_heading() -> None:
    assert clean_markdown("Travel\n======\n\nBook early.\n\nHotels\n------\n\nUse Navan.") == \
        "# Travel\n\nBook early.\n\n## Hotels\n\nUse Navan."


def test_template_shortcodes_are_stripped_keeping_their_visible_text(tmp_path: Path) -> None:
    (tmp_path / "help.md").write_text(
        "# Help\n\nAsk in {% slack_channel \"#help\" %} or read {% page \"Travel policy\" %}.\n"
        "{% if site.beta %}\nBeta users see {{ site.beta_name }} this {{< hint info >}}note{{< /hint >}}.\n"
        "{% endif %}\n{% include \"footer.html\" %}\nUnexpanded {{Infobox|x=1}} wiki template.\n\n"
        "Inline `{{ keep.me }}` stays.\n\n```yaml\nrun: {{ github.run_id }}\n```\n", encoding="utf-8")
    text = _docs(FolderSource(tmp_path))["help.md"].text
    assert "Ask in #help or read Travel policy." in text
    assert "Beta users see  this note." in text
    assert "footer" not in text and "{%" not in text and "Infobox" not in text and "{{<" not in text
    assert "`{{ keep.me }}`" in text and "run: {{ github.run_id }}" in text  # code shows the syntax on purpose


def test_an_mdx_page_is_read_without_its_jsx(tmp_path: Path) -> None:
    (tmp_path / "expenses.mdx").write_text(
        "---\ntitle: Expenses\n---\nimport { Callout } from '../components'\nexport const meta = {\n  owner: 'finance',\n}\n\n"
        "# Expenses\n\n<Callout type=\"warning\" onClick={() => go(\"a>b\")}>\nSubmit receipts within 30 days.\n"
        "</Callout>\n\nPress <Kbd>Ctrl</Kbd> to copy {/* hidden */}. <Card title=\"x\" />\n", encoding="utf-8")
    doc = _docs(FolderSource(tmp_path))["expenses.mdx"]
    assert doc.title == "Expenses"
    assert "Submit receipts within 30 days." in doc.text and "Press Ctrl to copy" in doc.text
    for leftover in ("import", "export", "Callout", "Kbd", "Card", "hidden", "{", "<"):
        assert leftover not in doc.text, leftover
