"""The credential screen (issue 24 item 1): detection and false positives per language, and what it flags on real handbooks.

Two figures:

- over each batch in ``tests/data/credentials/`` (credential statements and innocent look-alikes in English,
  German, French and Spanish: ``statements.jsonl``, the corpus the rules were built on, and the held-out batches
  ``heldout.jsonl`` to ``heldout7.jsonl``): per language, the share of statements with a
  ``secret`` finding (detection) and the share of look-alikes with one (false positives), via :func:`screening.scan`;
- per handbook under ``../shared/corpus`` (each a folder source, chunked by the indexer's
  :class:`index.chunker.Chunker`): the chunks with a ``secret`` finding, and how many of those only the
  statement screen (:mod:`screening.statements`) flags, with the first few printed for review.

Run: ``.venv/bin/python bench/credential_screen.py [--corpus FILE] [--show N] [--no-handbooks]`` (about a minute per
handbook; ``--show`` prints the flagged sentences, the ones to read for false positives). Skips the handbooks with a
reason when ../shared/corpus is absent.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from connectors.folder import FolderSource
from index.chunker import Chunker
from screening import scan
from screening.linked import find_linked_values
from screening.statements import find_statements

ROOT = Path(__file__).resolve().parents[1]

CORPUS = ROOT / "tests" / "data" / "credentials" / "statements.jsonl"
BATCHES = [CORPUS] + sorted((ROOT / "tests" / "data" / "credentials").glob("heldout*.jsonl"))
HANDBOOKS = ROOT.parent / "shared" / "corpus"


def corpus_rates(path: Path = CORPUS) -> dict[str, dict[str, float]]:
    """Per language (and ``all``): ``{"detection", "false_positives", "credentials", "lookalikes"}``."""
    hits: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # detected, credentials, flagged, look-alikes
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        flagged = any(f.category == "secret" for f in scan(row["text"], ("secret",)))
        for key in (row["lang"], "all"):
            h = hits[key]
            if row["credential"]:
                h[0] += flagged
                h[1] += 1
            else:
                h[2] += flagged
                h[3] += 1
    return {k: {"detection": h[0] / max(h[1], 1), "false_positives": h[2] / max(h[3], 1),
                "credentials": h[1], "lookalikes": h[3]} for k, h in sorted(hits.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, action="append", help="a batch (default: every batch)")
    parser.add_argument("--show", type=int, default=5, help="flagged statement sentences to print per handbook")
    parser.add_argument("--no-handbooks", action="store_true", help="only the batches")
    args = parser.parse_args()
    for corpus in args.corpus or BATCHES:
        print(f"corpus {corpus.relative_to(ROOT) if corpus.is_relative_to(ROOT) else corpus}")
        for lang, r in corpus_rates(corpus).items():
            print(f"  {lang:4} detection {r['detection']:.3f} ({r['credentials']} statements)  "
                  f"false positives {r['false_positives']:.3f} ({r['lookalikes']} look-alikes)")
    if args.no_handbooks:
        return
    if not HANDBOOKS.is_dir():
        print(f"handbooks: skipped ({HANDBOOKS} is absent)")
        return
    chunker = Chunker()
    for book in sorted(p for p in HANDBOOKS.iterdir() if p.is_dir()):
        chunks = flagged = by_statement = 0
        shown: list[str] = []
        for doc in FolderSource(book).scan():
            if not hasattr(doc, "text"):
                continue  # a skipped page
            for chunk in chunker.chunk(doc):
                chunks += 1
                found = scan(chunk.text, ("secret",))
                if not found:
                    continue
                flagged += 1
                stated = find_statements(chunk.text) + find_linked_values(chunk.text)
                if stated and len(stated) == len(found):
                    by_statement += 1
                for f in stated[: max(0, args.show - len(shown))]:
                    line_start = chunk.text.rfind("\n", 0, f.start) + 1
                    line_end = chunk.text.find("\n", f.end)
                    shown.append(f"{doc.doc_id}: {chunk.text[line_start:line_end if line_end >= 0 else None][:160]}")
        print(f"handbook {book.name}: {flagged} of {chunks} chunks flagged as holding a credential "
              f"({by_statement} by a statement or a linked value only)")
        for s in shown:
            print(f"    {s}")


if __name__ == "__main__":
    main()
