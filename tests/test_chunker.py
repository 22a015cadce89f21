"""The heading-aware chunker (:mod:`index.chunker`).

Covers chunk sizes (never over ``max_chars``; long sections packed into 400-800 character
chunks; an unsplittable run of text hard-cut), section paths that follow the headings, ``#``
lines inside fenced code that are not headings, section anchors in chunk URLs, chunk ids that stay
the same when other parts of the page change, and the validation of ``ChunkerConfig``; and bounded
work per page: long runs of tiny sibling sections packed up to ``max_chars`` (short runs chunked as
before), the per-page chunk cap, and a 1 MB page with 50,000 headings (no quadratic step); and the chunks of a
fixed page pinned to the index's schema version (a change in how pages are cut must bump it).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path

import pytest

from index.chunker import MAX_CHUNKS_PER_PAGE, SIBLING_RUN, Chunker, ChunkerConfig
from index.knowledge import SCHEMA_VERSION
from core.errors import ChunkLimitError
from connectors.folder import FolderSource
from core.models import Chunk, Document

from tests.helpers import WIKI

CFG = ChunkerConfig()


def _doc(text: str, url: str = "https://wiki.example/page", doc_id: str = "page.md") -> Document:
    return Document(source="folder", doc_id=doc_id, title="Page", url=url, text=text)


def _sentences(prefix: str, n: int) -> str:
    """``n`` distinct sentences of about 60 characters."""
    return " ".join(f"{prefix} sentence number {i} explains one more detail of the policy." for i in range(n))


#: Text before the first heading, long enough (>= min_chars) to stay a chunk of its own.
PREAMBLE = _sentences("Preamble", 8) + "\n\n"


@pytest.fixture(scope="module")
def wiki_docs() -> dict[str, Document]:
    return {d.doc_id: d for d in FolderSource(WIKI).scan() if isinstance(d, Document)}


@pytest.fixture(scope="module")
def wiki_chunks(wiki_docs: dict[str, Document]) -> dict[str, list[Chunk]]:
    chunker = Chunker()
    return {doc_id: chunker.chunk(doc) for doc_id, doc in wiki_docs.items()}


# -- sizes ------------------------------------------------------------------------------------------

def test_example_wiki_chunks_are_bounded_and_ordered(wiki_chunks: dict[str, list[Chunk]]) -> None:
    assert all(wiki_chunks.values()), "every example page has text, so every page has chunks"
    for doc_id, chunks in wiki_chunks.items():
        assert [c.ordinal for c in chunks] == list(range(len(chunks)))
        for c in chunks:
            assert c.text.strip()
            assert len(c.text) <= CFG.max_chars, (doc_id, c.section, len(c.text))
            assert c.doc_id == doc_id and c.key == f"wiki:{doc_id}"  # a folder source is named after its folder


def test_handbook_sized_sections_give_chunks_of_the_documented_sizes(wiki_chunks: dict[str, list[Chunk]]) -> None:
    """Chunks never exceed max_chars; below min_chars they are whole sections (or merged tiny siblings)."""
    sizes = [len(c.text) for chunks in wiki_chunks.values() for c in chunks]
    assert max(sizes) <= CFG.max_chars
    glossary = wiki_chunks["company/glossary.md"]
    # Tiny glossary entries share chunks under their parent section, each with its heading line.
    merged = [c for c in glossary if c.text.count("### ") >= 1 and len(c.section_path) == 1]
    assert merged, [(c.section_path, len(c.text)) for c in glossary]


def test_tiny_sibling_sections_share_a_chunk_under_their_parent() -> None:
    entries = "".join(f"### T{i}\n\nTerm {i} means thing number {i}.\n\n" for i in range(6))
    text = PREAMBLE + "## Terms\n\n" + entries + "## After\n\n" + _sentences("After", 8)
    chunks = Chunker().chunk(_doc(text))
    term_chunks = [c for c in chunks if "Term 0 means" in c.text]
    assert len(term_chunks) == 1
    assert term_chunks[0].section_path == ("Terms",)
    assert "### T1" in term_chunks[0].text and "Term 5 means" in term_chunks[0].text
    assert all("After sentence" not in c.text for c in term_chunks)


def test_a_long_run_of_tiny_top_level_sections_is_packed_with_the_first_sections_anchor() -> None:
    entries = "".join(f"## Q{i}\n\nAnswer {i} is short.\n\n" for i in range(SIBLING_RUN + 8))
    chunks = Chunker().chunk(_doc(PREAMBLE + entries + "## After\n\n" + _sentences("After", 8)))
    packed = [c for c in chunks if "Answer" in c.text]
    # about 40 sections of ~30 characters fit in two chunks, not forty
    assert len(packed) == 2, [(c.section_path, len(c.text)) for c in packed]
    assert packed[0].section_path == ("Q0",) and packed[0].url.endswith("#q0")
    assert packed[0].text.startswith("Answer 0 is short.\n\n## Q1\n\nAnswer 1 is short.")
    second = packed[1].section_path[0]
    assert packed[1].text.startswith(f"Answer {second[1:]} is short.")  # its own first heading is in the path
    assert all(len(c.text) <= CFG.max_chars for c in packed)
    joined = "\n".join(c.text for c in packed)
    assert all(f"Answer {i} is short." in joined for i in range(SIBLING_RUN + 8))
    assert all("After sentence" not in c.text for c in packed)


def test_a_short_run_of_tiny_top_level_sections_is_chunked_as_before() -> None:
    """Normal pages keep their chunk boundaries: only runs of SIBLING_RUN or more are packed."""
    entries = "".join(f"## Q{i}\n\nAnswer {i} is short.\n\n" for i in range(SIBLING_RUN - 1))
    chunks = Chunker().chunk(_doc(PREAMBLE + entries))
    assert [c.section_path for c in chunks[1:]] == [(f"Q{i}",) for i in range(SIBLING_RUN - 1)]
    assert [c.text for c in chunks[1:]] == [f"Answer {i} is short." for i in range(SIBLING_RUN - 1)]


def test_a_page_over_the_chunk_cap_raises_a_clear_error_instead_of_being_truncated() -> None:
    text = "".join(f"# A{i}\n\nx\n\n## B{i}\n\ny\n\n" for i in range(20))  # 20 chunks, no run of siblings
    assert len(Chunker().chunk(_doc(text))) == 20
    with pytest.raises(ChunkLimitError, match="20 chunks, over the limit of 10 per page"):
        Chunker(ChunkerConfig(max_chunks_per_page=10)).chunk(_doc(text))
    assert ChunkerConfig().max_chunks_per_page == MAX_CHUNKS_PER_PAGE
    with pytest.raises(ValueError):
        ChunkerConfig(max_chunks_per_page=0)


@pytest.mark.timeout(60)
def test_a_1mb_page_with_50000_headings_chunks_within_the_cap() -> None:
    text = "# Big page\n\n" + "".join(f"## Heading {i}\n\nword {i}\n" for i in range(50_000))
    assert len(text) > 1_000_000
    chunks = Chunker().chunk(_doc(text))
    assert 0 < len(chunks) <= MAX_CHUNKS_PER_PAGE
    assert all(len(c.text) <= CFG.max_chars for c in chunks)
    assert chunks[0].section_path == ("Heading 0",)
    assert "word 49999" in chunks[-1].text


@pytest.mark.timeout(60)
@pytest.mark.parametrize("text", [
    "word " * 200_000,                                                      # one 1 MB line, cut at spaces
    "y" * 1_000_000,                                                        # no space at all
    "".join(f"# A{i}\n\nx\n\n## B{i}\n\ny\n\n" for i in range(40_000)),  # 80,000 sections, no run
], ids=["one-line", "no-space", "alternating-levels"])
def test_pathological_1mb_pages_chunk_or_are_refused_without_hanging(text: str) -> None:
    try:
        chunks = Chunker().chunk(_doc(text))
    except ChunkLimitError as exc:
        assert "split it into smaller pages" in str(exc)
    else:
        assert len(chunks) <= MAX_CHUNKS_PER_PAGE and all(len(c.text) <= CFG.max_chars for c in chunks)


def test_long_section_is_packed_into_chunks_of_400_to_800_chars() -> None:
    paragraphs = [_sentences(f"Paragraph {p}", 3) for p in range(20)]  # ~20 x 190 chars
    doc = _doc("## Travel\n\n" + "\n\n".join(paragraphs))
    chunks = Chunker().chunk(doc)
    assert len(chunks) >= 4
    for c in chunks[:-1]:
        assert CFG.min_chars <= len(c.text) <= CFG.max_chars, len(c.text)
    assert len(chunks[-1].text) <= CFG.max_chars
    assert all(c.section_path == ("Travel",) for c in chunks)
    # Every paragraph ends up in some chunk, in order.
    joined = "\n\n".join(c.text for c in chunks)
    positions = [joined.find(p) for p in paragraphs]
    assert -1 not in positions and positions == sorted(positions)


def test_long_paragraph_is_split_at_sentence_ends() -> None:
    para = _sentences("Long", 40)  # one ~2,400-character paragraph
    chunks = Chunker().chunk(_doc("## Rules\n\n" + para))
    assert len(chunks) >= 3
    for c in chunks:
        assert len(c.text) <= CFG.max_chars
        assert c.text.rstrip().endswith(".")  # cut between sentences, not inside one


def test_a_wide_padded_table_is_cut_between_rows_and_every_piece_keeps_its_header() -> None:
    """Alignment padding (as editors write it) is dropped, so a table whose padded header alone is over half a
    chunk is still cut between rows, each row on its own line under the header and delimiter rows."""
    pad = " " * 150
    rows = [f"| Item {i}{pad} | ${100 * i}{pad} | Why item {i} matters to remote work.{pad} |" for i in range(30)]
    table = "\n".join([f"| Item{pad} | Price{pad} | Why{pad} |", f"|{'-' * 150}|{'-' * 150}|{'-' * 150}|", *rows])
    chunks = Chunker().chunk(_doc("## Hardware\n\n" + table))
    assert len(chunks) >= 2
    for c in chunks:
        lines = c.text.split("\n")
        assert lines[:2] == ["| Item | Price | Why |", "|---|---|---|"], lines[:2]
        assert all(line.startswith("| Item ") and line.endswith(" |") for line in lines[2:]), lines
    assert "| Item 27 | $2700 | Why item 27 matters to remote work. |" in "\n".join(c.text for c in chunks)


def test_unsplittable_text_is_hard_cut_at_max_chars() -> None:
    blob = "x" * 2000  # no spaces, no sentence ends
    chunks = Chunker().chunk(_doc(blob))
    assert len(chunks) == 3
    assert all(len(c.text) <= CFG.max_chars for c in chunks)
    assert "".join(c.text for c in chunks) == blob


def test_empty_page_has_no_chunks() -> None:
    assert Chunker().chunk(_doc("")) == []
    assert Chunker().chunk(_doc("\n\n   \n")) == []


# -- headings, paths and anchors --------------------------------------------------------------------

def test_section_path_follows_headings() -> None:
    intro, a, a1, b = (_sentences(name, 7) for name in ("Intro", "Alpha", "Nested", "Beta"))
    text = f"# Handbook\n\n{intro}\n\n## Alpha part\n\n{a}\n\n### Nested part\n\n{a1}\n\n## Beta part\n\n{b}\n"
    chunks = Chunker().chunk(_doc(text))
    path_of = {}
    for marker in ("Intro", "Alpha", "Nested", "Beta"):
        owners = [c for c in chunks if f"{marker} sentence number 0" in c.text]
        assert len(owners) == 1, marker
        path_of[marker] = owners[0].section_path
    # The single page title adds nothing to its subsections' paths.
    assert path_of["Alpha"] == ("Alpha part",)
    assert path_of["Nested"] == ("Alpha part", "Nested part")
    assert path_of["Beta"] == ("Beta part",)
    assert path_of["Intro"] in {(), ("Handbook",)}  # the top of the page
    nested = next(c for c in chunks if c.section_path == ("Alpha part", "Nested part"))
    assert nested.section == "Alpha part > Nested part"


def test_small_section_is_merged_with_its_children() -> None:
    text = (PREAMBLE + "## Leave\n\nShort intro.\n\n### Sick leave\n\nTell your manager.\n\n"
            "### Parental leave\n\nSee the parental leave page.\n\n## Other\n\n" + _sentences("Other", 8))
    chunks = Chunker().chunk(_doc(text))
    leave = [c for c in chunks if "Short intro." in c.text]
    assert len(leave) == 1
    assert leave[0].section_path == ("Leave",)
    assert "### Sick leave" in leave[0].text and "See the parental leave page." in leave[0].text
    # A sibling section is not swallowed.
    assert all("Other sentence" not in c.text for c in leave)


def test_hash_line_in_fenced_code_block_is_not_a_heading() -> None:
    text = (PREAMBLE + "## Setup\n\nRun these commands:\n\n```bash\n# install the tools\nmake install\n```\n\n"
            "~~~\n# another comment\n~~~\n\n## Next steps\n\nOpen the app.\n")
    chunks = Chunker().chunk(_doc(text))
    paths = {c.section_path for c in chunks}
    assert all("install the tools" not in " ".join(p) and "another comment" not in " ".join(p) for p in paths)
    setup = next(c for c in chunks if "# install the tools" in c.text)
    assert setup.section_path == ("Setup",)
    assert "```bash\n# install the tools\nmake install\n```" in setup.text
    assert "## Next steps" not in setup.text  # a sibling, not merged into Setup
    assert [c.section_path for c in chunks if "Open the app." in c.text] == [("Next steps",)]


def test_hash_line_inside_nested_fence_is_not_a_heading() -> None:
    text = (PREAMBLE + "## Writing docs\n\nShow code blocks like this:\n\n~~~markdown\n```bash\n# not a heading\n```\n~~~\n\n"
            "## Real section\n\n" + _sentences("Real", 8))
    chunks = Chunker().chunk(_doc(text))
    assert all("not a heading" not in c.section for c in chunks), [c.section_path for c in chunks]
    assert any(c.section_path == ("Real section",) for c in chunks)


def test_chunk_url_has_the_section_anchor() -> None:
    text = PREAMBLE + "## Travel & Expenses (FY24)\n\n" + _sentences("Travel", 8)
    chunks = Chunker().chunk(_doc(text, url="https://wiki.example/finance/travel"))
    travel = [c for c in chunks if "Travel sentence" in c.text]
    assert travel and all(c.url == "https://wiki.example/finance/travel#travel--expenses-fy24" for c in travel)
    preamble = [c for c in chunks if "Preamble sentence" in c.text]
    assert preamble and all(c.url == "https://wiki.example/finance/travel" for c in preamble)


def test_first_section_of_a_page_keeps_its_path_and_anchor() -> None:
    text = "## Travel & Expenses (FY24)\n\n" + _sentences("Travel", 4) + "\n\n## Meals\n\n" + _sentences("Meals", 3)
    chunks = Chunker().chunk(_doc(text, url="https://wiki.example/finance/travel"))
    travel = [c for c in chunks if "Travel sentence number 0" in c.text]
    assert len(travel) == 1
    assert travel[0].section_path == ("Travel & Expenses (FY24)",)
    assert travel[0].url.endswith("#travel--expenses-fy24")
    assert all("Meals sentence" not in c.text for c in travel)


def test_example_wiki_urls_carry_slugs(wiki_chunks: dict[str, list[Chunk]], wiki_docs: dict[str, Document]) -> None:
    chunks = wiki_chunks["engineering/incident-response.md"]
    page_url = wiki_docs["engineering/incident-response.md"].url
    declaring = [c for c in chunks if c.section_path == ("Declaring an incident",)]
    assert declaring and all(c.url == f"{page_url}#declaring-an-incident" for c in declaring)
    for c in chunks:
        if c.section_path:
            anchor = c.url.rsplit("#", 1)[1]
            assert re.fullmatch(r"[a-z0-9_-]+", anchor), c.url
        else:
            assert c.url == page_url  # top of the page: no anchor


# -- stable ids -------------------------------------------------------------------------------------

def test_chunk_ids_are_deterministic(wiki_docs: dict[str, Document]) -> None:
    doc = wiki_docs["people/time-off.md"]
    first = [c.chunk_id for c in Chunker().chunk(doc)]
    second = [c.chunk_id for c in Chunker().chunk(doc)]
    assert first == second
    assert len(set(first)) == len(first)
    assert all(re.fullmatch(r"[0-9a-f]{32}", cid) for cid in first)


def test_editing_one_section_keeps_the_ids_of_other_sections(wiki_docs: dict[str, Document]) -> None:
    doc = wiki_docs["finance/travel-and-expenses.md"]
    old_sentence = "Book at least 14 days before departure when you can."
    new_sentence = "Book at least 21 days before departure when you can."
    assert old_sentence in doc.text
    edited = dataclasses.replace(doc, text=doc.text.replace(old_sentence, new_sentence))

    before = Chunker().chunk(doc)
    after = Chunker().chunk(edited)
    after_ids = {c.chunk_id for c in after}

    untouched = [c for c in before if old_sentence not in c.text]
    touched = [c for c in before if old_sentence in c.text]
    assert untouched and touched
    for c in untouched:
        assert c.chunk_id in after_ids, f"chunk of section {c.section!r} changed id"
    for c in touched:
        assert c.chunk_id not in after_ids
    assert len(after) == len(before)


def test_inserting_a_section_does_not_change_existing_ids(wiki_docs: dict[str, Document]) -> None:
    doc = wiki_docs["engineering/release-process.md"]
    anchor = "## Patch releases"
    assert anchor in doc.text
    inserted = "## Release freeze\n\n" + _sentences("Freeze", 8) + "\n\n"
    edited = dataclasses.replace(doc, text=doc.text.replace(anchor, inserted + anchor))
    before = Chunker().chunk(doc)
    after = Chunker().chunk(edited)
    by_id = {c.chunk_id: c for c in after}
    assert {c.chunk_id for c in before} <= set(by_id)
    assert len(after) > len(before)
    # Later chunks moved (their ordinal grew) but kept their ids.
    moved = [c for c in before if by_id[c.chunk_id].ordinal != c.ordinal]
    assert moved and all(by_id[c.chunk_id].ordinal > c.ordinal for c in moved)


def test_chunk_id_depends_on_source_and_doc_id() -> None:
    text = "## Same\n\n" + _sentences("Same", 8)
    a = Chunker().chunk(_doc(text, doc_id="a.md"))
    b = Chunker().chunk(_doc(text, doc_id="b.md"))
    c = Chunker().chunk(dataclasses.replace(_doc(text, doc_id="a.md"), source="other"))
    assert {x.chunk_id for x in a}.isdisjoint({x.chunk_id for x in b})
    assert {x.chunk_id for x in a}.isdisjoint({x.chunk_id for x in c})


# -- configuration ----------------------------------------------------------------------------------

@pytest.mark.parametrize("min_chars, max_chars, overlap", [
    (0, 800, 0),        # min must be positive
    (-5, 800, 0),
    (800, 800, 100),    # min must be below max
    (900, 800, 100),
    (400, 800, 400),    # overlap must be below min
    (400, 800, -1),     # overlap must not be negative
])
def test_chunker_config_rejects_bad_sizes(min_chars: int, max_chars: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        ChunkerConfig(min_chars=min_chars, max_chars=max_chars, overlap_chars=overlap)


def test_smaller_config_gives_smaller_chunks() -> None:
    cfg = ChunkerConfig(min_chars=100, max_chars=200, overlap_chars=50)
    chunks = Chunker(cfg).chunk(_doc("## Policy\n\n" + "\n\n".join(_sentences(f"P{i}", 2) for i in range(10))))
    assert len(chunks) >= 5
    assert all(len(c.text) <= 200 for c in chunks)


# -- the schema version ------------------------------------------------------------------------------

#: A page with what the clean-up and the chunker read: headings with entities, emphasis and code, the three kinds
#: of links, an image, inline HTML, code spans holding ``<...>``, a table, fenced code with a ``#`` line, nesting.
PINNED_PAGE = """# Release&nbsp;guide

Intro with a [link](https://example.com/x "t"), an ![diagram](d.png) and <b>bold</b> HTML.

## &nbsp;&nbsp; Paging *the* `on-call`

Type `/genie alert <description of incident> for [@team]` in Slack, see [the policy][pol] or [pol].

[pol]: https://example.com/policy

| Step | Who |
|------|-----|
| Page | `<lead>` |

```
# not a heading <kept>
```

### Escalation &amp; __handover__

""" + _sentences("Escalation", 30) + "\n"

#: Schema version -> the fingerprint of :data:`PINNED_PAGE`'s chunks under it.
PINNED_CHUNKS = {"9": "1b4ef579dc6ee283"}


def test_chunker_output_is_pinned_to_the_schema_version(tmp_path: Path) -> None:
    """An incremental run re-chunks only the pages whose content hash changed: when the folder clean-up or the
    chunker cuts pages differently, :data:`index.knowledge.SCHEMA_VERSION` must change too (so indexes built before
    are rebuilt), or an index updated in place keeps old chunks that one built afresh does not have."""
    (tmp_path / "release.md").write_text(PINNED_PAGE, encoding="utf-8")
    docs = [d for d in FolderSource(tmp_path, url_base="https://wiki.example/").scan() if isinstance(d, Document)]
    rows = [[c.chunk_id, c.title, list(c.section_path), c.url, c.text] for d in docs for c in Chunker().chunk(d)]
    got = hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]
    assert PINNED_CHUNKS.get(SCHEMA_VERSION) == got, (
        f"the pinned page is now cut into other chunks (fingerprint {got}; schema {SCHEMA_VERSION} pins "
        f"{PINNED_CHUNKS.get(SCHEMA_VERSION)}): bump SCHEMA_VERSION in index/knowledge.py and pin {got} under it")
