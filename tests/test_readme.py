"""The README fits on a screen and points to the docs: at most 200 lines, the two commands, and a link to
every how-to guide and reference page that exists. What the README used to pin (every setting, every
command documented) is now pinned on the generated reference pages (tests/test_docs.py)."""

from __future__ import annotations

import re

from tests.helpers import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_is_at_most_200_lines() -> None:
    assert len(README.splitlines()) <= 200


def test_the_readme_gives_the_two_commands_and_how_to_build_the_docs() -> None:
    for command in ("make demo", "make test", "make docs", "make docs-serve"):
        assert command in README


def test_the_readme_links_every_how_to_and_reference_page() -> None:
    links = set(re.findall(r"\]\(([^)\s]+)\)", README))
    for folder in ("how-to", "reference"):
        for page in sorted((ROOT / "docs" / folder).glob("*.md")):
            if page.stem == "data-dir":
                continue
            assert f"docs/{folder}/{page.name}" in links, f"the README does not link docs/{folder}/{page.name}"
    for link in links:
        if not link.startswith(("http", "#")):
            assert (ROOT / link).exists(), f"the README links {link}, which does not exist"
