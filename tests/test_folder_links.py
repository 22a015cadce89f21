"""Folder sources link pages where the site publishes them and leave out the files about the folder
(issue 24 items 8 and 11), through ``chatops index folder:...`` and ``chatops sync`` with ``chatops.yml``.

- A page's front matter ``permalink:`` wins (``url_base`` + the permalink): a Jekyll page
  ``_peopleops/index.md`` with ``permalink: /peopleops/`` links to ``URL/peopleops/``;
- ``url_template`` (``{url_base}``, ``{path}``, ``{dir}``, ``{stem}``, ``{file}``, ``{jekyll_path}``) links
  the others for sites that rewrite paths; a template naming an unknown placeholder is refused (exit 2);
- ``README.md``, ``SOURCE.md``, ``LICENSE*`` and ``CONTRIBUTING.md`` at the root are left out by default
  (a README in a sub-folder is a page); ``exclude`` sets the list, ``exclude: []`` indexes every file;
  pages indexed before and now excluded are deleted from both stores by the next run.

URLs are read back from the real Whoosh and Qdrant indexes the CLI wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from connectors.folder import FolderSource
from index.stores import QdrantStore, WhooshStore

from tests.helpers import run_chatops, seed_embedding_cache

pytestmark = pytest.mark.server  # starts processes or servers: not in make test-fast

SITE = "https://handbook.example.com"
BODY = "\n\nThis page explains {what} for everyone at the company, with the details that matter.\n"
PAGES = {
    "README.md": "# About this repository\n" + BODY.format(what="how the repository is built"),
    "SOURCE.md": "# Source of this corpus\n" + BODY.format(what="where this export came from"),
    "LICENSE.md": "# MIT License\n" + BODY.format(what="the licence"),
    "CONTRIBUTING.md": "# Contributing\n" + BODY.format(what="how to propose a change"),
    "_peopleops/index.md": "---\ntitle: People Ops\npermalink: /peopleops/\n---\n" + BODY.format(what="people ops"),
    "_peopleops/benefits.md": "---\ntitle: Benefits\nlayout: page\n---\n" + BODY.format(what="the benefits"),
    "_marketing/brand.md": "---\ntitle: Brand\npermalink: /marketing/brand\n---\n" + BODY.format(what="the brand"),
    "team/README.md": "# Team directory\n" + BODY.format(what="who is on the team"),
    "drafts/idea.md": "# A draft idea\n" + BODY.format(what="an idea not yet agreed"),
}
ROOT_FILES = {"README.md", "SOURCE.md", "LICENSE.md", "CONTRIBUTING.md"}


@pytest.fixture
def handbook(tmp_path: Path) -> Path:
    root = tmp_path / "handbook"
    for rel, text in PAGES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def data(tmp_path: Path, wiki_index, embedding_cache_dir: Path) -> Path:
    return seed_embedding_cache(tmp_path / "data", embedding_cache_dir / "embeddings.sqlite")


def _index(data: Path, spec: str, *extra: str, **env: str):
    proc = run_chatops(["index", *extra, spec], data, cwd=data.parent, **env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _urls(data: Path) -> dict[str, set[str]]:
    """``{doc_id: {url...}}`` of every chunk in the BM25 store, checked against the dense store."""
    bm25 = WhooshStore(data / "index" / "whoosh")
    dense = QdrantStore(384, path=data / "index" / "qdrant")
    try:
        ids = bm25.chunk_ids()
        assert ids == dense.chunk_ids()
        chunks = bm25.chunks(ids)
        assert {c.chunk_id: c.url for c in dense.chunks(ids).values()} == {c.chunk_id: c.url for c in chunks.values()}
    finally:
        bm25.close()
        dense.close()
    out: dict[str, set[str]] = {}
    for c in chunks.values():
        out.setdefault(c.doc_id, set()).add(c.url.split("#", 1)[0])
    return out


def test_permalinks_win_and_root_files_about_the_folder_are_left_out(handbook: Path, data: Path) -> None:
    _index(data, f"folder:{handbook}?url_base={SITE}/")
    urls = _urls(data)
    assert not ROOT_FILES & set(urls), sorted(urls)
    assert urls["team/README.md"] == {f"{SITE}/team/README"}  # a README below the root is a page
    assert urls["_peopleops/index.md"] == {f"{SITE}/peopleops/"}
    assert urls["_marketing/brand.md"] == {f"{SITE}/marketing/brand"}
    assert urls["_peopleops/benefits.md"] == {f"{SITE}/_peopleops/benefits"}  # no permalink, no template: its path


def test_url_template_links_pages_without_a_permalink(handbook: Path, data: Path) -> None:
    _index(data, f"folder:{handbook}?url_base={SITE}&url_template={{url_base}}/{{jekyll_path}}.html")
    urls = _urls(data)
    assert urls["_peopleops/benefits.md"] == {f"{SITE}/peopleops/benefits.html"}
    assert urls["_peopleops/index.md"] == {f"{SITE}/peopleops/"}  # the permalink still wins
    assert urls["drafts/idea.md"] == {f"{SITE}/drafts/idea.html"}


def test_pages_newly_excluded_are_pruned_from_both_stores(handbook: Path, data: Path) -> None:
    first = _index(data, f"folder:{handbook}?url_base={SITE}&exclude=")  # an empty exclude: every file
    assert first.stdout.startswith(f"handbook: {len(PAGES)} added")
    assert ROOT_FILES <= set(_urls(data))
    second = _index(data, f"folder:{handbook}?url_base={SITE}")  # the default leaves the root files out
    assert f", {len(ROOT_FILES)} deleted" in second.stdout, second.stdout
    third = _index(data, f"folder:{handbook}?url_base={SITE}&exclude=drafts/*|README.md")
    assert ", 1 deleted" in third.stdout and "3 added" in third.stdout, third.stdout  # SOURCE, LICENSE, CONTRIBUTING
    urls = _urls(data)
    assert "drafts/idea.md" not in urls and "README.md" not in urls and "SOURCE.md" in urls


def test_chatops_yml_exclude_and_url_template(handbook: Path, data: Path, tmp_path: Path) -> None:
    config = tmp_path / "chatops.yml"
    config.write_text(f"""sources:
  - name: handbook
    type: folder
    path: "{handbook}"
    url_base: {SITE}
    url_template: "{{url_base}}/{{jekyll_path}}"
    exclude: ["drafts/*", "LICENSE*"]
""", encoding="utf-8")
    proc = run_chatops(["sync"], data, cwd=tmp_path, CHATOPS_CONFIG=str(config))
    assert proc.returncode == 0, proc.stderr[-3000:]
    urls = _urls(data)
    assert set(urls) == set(PAGES) - {"drafts/idea.md", "LICENSE.md"}  # an explicit list replaces the default
    assert urls["_peopleops/benefits.md"] == {f"{SITE}/peopleops/benefits"}
    assert urls["README.md"] == {f"{SITE}/README"}
    config.write_text(config.read_text(encoding="utf-8").replace('exclude: ["drafts/*", "LICENSE*"]', "exclude: []"),
                      encoding="utf-8")
    proc = run_chatops(["sync"], data, cwd=tmp_path, CHATOPS_CONFIG=str(config))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert set(_urls(data)) == set(PAGES)


@pytest.mark.parametrize("template, fragment", [
    ("{url_base}/{slug}", "unknown placeholder(s) slug"),
    ("{url_base}/{path", "not a valid template"),
    ("/docs/{path}", "must make an http(s) URL"),
])
def test_a_bad_url_template_exits_2_saying_what_to_write(handbook: Path, data: Path, tmp_path: Path, template: str,
                                                         fragment: str) -> None:
    config = tmp_path / "chatops.yml"
    config.write_text(json.dumps({"sources": [{"name": "handbook", "type": "folder", "path": str(handbook),
                                               "url_base": SITE, "url_template": template}]}), encoding="utf-8")
    proc = run_chatops(["sync"], data, cwd=tmp_path, CHATOPS_CONFIG=str(config))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert fragment in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("doc_id, template, expected", [
    ("a/b.md", "{url_base}/{path}", f"{SITE}/a/b"),
    ("a/index.md", "{url_base}/{path}", f"{SITE}/a/"),
    ("b.md", "{url_base}/{dir}/{stem}/", f"{SITE}/b/"),
    ("_x/_y/c d.md", "{url_base}/{jekyll_path}", f"{SITE}/x/y/c%20d"),
    ("a/b.md", "{url_base}/raw/{file}", f"{SITE}/raw/b.md"),
])
def test_url_template_placeholders(tmp_path: Path, doc_id: str, template: str, expected: str) -> None:
    assert FolderSource(tmp_path, url_base=SITE, url_template=template).url_for(doc_id) == expected
