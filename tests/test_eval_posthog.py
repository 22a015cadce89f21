"""The PostHog question set kept in ``eval/posthog`` (run by ``make eval``) stays well-formed: every gold page exists,
every expected string is on a gold page (each page of a ``multi`` question supplies one), and near misses name none."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

SET = Path(__file__).resolve().parent.parent / "eval" / "posthog"


def test_the_posthog_questions_point_at_pages_that_hold_their_answers() -> None:
    rows = [json.loads(line) for line in (SET / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len({r["id"] for r in rows}) == len(rows) == 50
    kinds = Counter(r["kind"] for r in rows)
    assert kinds["unanswerable"] == 12 and kinds["multi"] == 6 and kinds["followup"] == 4
    for r in rows:
        pages = {p: (SET / "handbook" / p).read_text(encoding="utf-8").lower() for p in r["gold_docs"]}
        if r["kind"] == "unanswerable":
            assert not pages and not r["answer_contains"], r["id"]
            continue
        assert pages and r["answer_contains"], r["id"]
        for want in r["answer_contains"]:
            assert any(want.lower() in text for text in pages.values()), (r["id"], want)
        if r["kind"] == "multi":
            assert all(any(w.lower() in text for w in r["answer_contains"]) for text in pages.values()), r["id"]
        if r["kind"] == "followup":
            assert r["history"], r["id"]
