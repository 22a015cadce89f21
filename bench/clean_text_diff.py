"""Check: two checkouts clean and chunk the same folders into the same chunks, and how fast.

Runs the folder connector (:class:`connectors.folder.FolderSource`, which calls
:func:`connectors.text.clean_markdown`) and the chunker (:class:`index.chunker.Chunker`) over each
corpus folder, once with the code of ``--base`` and once with the code of ``--head`` (each in its own
process, that checkout first on ``PYTHONPATH``), then compares the chunks page by page: title,
section path, URL and text. Identical chunks mean an index built from either checkout holds the
same passages, so retrieval figures cannot differ. Also prints, per side, the seconds spent in
``clean_markdown`` (the best of ``--repeat`` passes) and the whole scan + chunk time.

Usage: ``.venv/bin/python bench/clean_text_diff.py --base /path/to/main [--head .]
[--corpus ../shared/corpus/sourcegraph-handbook ...] [--show 5] [--repeat 3]``
(default corpora: the three folders under ``../shared/corpus``). Exits 1 when any chunk differs.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

_WORKER = r"""
import json, sys, time
import connectors.folder as folder
from connectors.folder import FolderSource
from index.chunker import Chunker
from core.models import Document

out_path, repeat, roots = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
real = folder.clean_markdown
spent = [0.0]
def timed(md):
    t = time.perf_counter()
    try:
        return real(md)
    finally:
        spent[0] += time.perf_counter() - t
folder.clean_markdown = timed
result = {"code": folder.__file__, "corpora": {}}
chunker = Chunker()
for root in roots:
    best_clean = best_total = float("inf")
    for _ in range(repeat):
        spent[0] = 0.0
        t0 = time.perf_counter()
        pages = {}
        for item in FolderSource(root).scan():
            if isinstance(item, Document):
                pages[item.doc_id] = [[c.title, list(c.section_path), c.url, c.text] for c in chunker.chunk(item)]
            else:
                pages[item.doc_id] = "skipped: " + item.reason
        best_total = min(best_total, time.perf_counter() - t0)
        best_clean = min(best_clean, spent[0])
    result["corpora"][root] = {"pages": pages, "clean_s": best_clean, "total_s": best_total}
json.dump(result, open(out_path, "w"))
"""


def _run(checkout: Path, roots: list[str], repeat: int, out: Path) -> dict:
    """Scan and chunk ``roots`` with ``checkout``'s code in a subprocess; its JSON result."""
    env = dict(os.environ, PYTHONPATH=str(checkout))
    subprocess.run([sys.executable, "-c", _WORKER, str(out), str(repeat), *roots], env=env, check=True,
                   cwd=checkout)
    return json.loads(out.read_text())


def _lines(chunks: list) -> list[str]:
    """A page's chunks as lines (section paths, then texts), overlaps and repeats once each, for a diff."""
    seen: dict[str, None] = {}
    for title, path, _url, text in chunks:
        seen.setdefault(f"{title} > {' > '.join(path)}", None)
        for line in text.split("\n"):
            seen.setdefault(line, None)
    return list(seen)


def main() -> int:
    here = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, required=True, help="the checkout to compare against (e.g. main)")
    ap.add_argument("--head", type=Path, default=here, help="the checkout under test (default: this one)")
    ap.add_argument("--corpus", action="append", help="a corpus folder (repeatable)")
    ap.add_argument("--show", type=int, default=5, help="differing chunks printed per corpus")
    ap.add_argument("--repeat", type=int, default=1, help="passes per side; the best time is kept")
    args = ap.parse_args()
    roots = args.corpus or sorted(str(p) for p in (here.parent / "shared" / "corpus").iterdir() if p.is_dir())
    with tempfile.TemporaryDirectory() as tmp:
        base = _run(args.base.resolve(), roots, args.repeat, Path(tmp, "base.json"))
        head = _run(args.head.resolve(), roots, args.repeat, Path(tmp, "head.json"))
    print(f"base code: {base['code']}\nhead code: {head['code']}")
    differing_total = 0
    for root in roots:
        b, h = base["corpora"][root], head["corpora"][root]
        n_chunks = sum(len(v) for v in h["pages"].values() if isinstance(v, list))
        differing = shown = 0
        for doc_id in sorted(set(b["pages"]) | set(h["pages"])):
            bc, hc = b["pages"].get(doc_id), h["pages"].get(doc_id)
            if bc == hc:
                continue
            if not isinstance(bc, list) or not isinstance(hc, list):
                differing += 1
                print(f"--- {doc_id}: {str(bc)[:80]} -> {str(hc)[:80]}")
                continue
            # A chunk of head's that base does not have (a changed text shifts its neighbours too).
            base_chunks = [tuple(map(str, c)) for c in bc]
            differing += sum(tuple(map(str, c)) not in base_chunks for c in hc) + max(0, len(bc) - len(hc))
            if shown < args.show:  # the page's changed lines, over all its chunks
                shown += 1
                print(f"--- {doc_id}: {len(bc)} -> {len(hc)} chunks")
                sys.stdout.writelines(line + "\n" for line in difflib.unified_diff(
                    _lines(bc), _lines(hc), "base", "head", n=0, lineterm="")
                    if not line.startswith(("---", "+++", "@@")))
        differing_total += differing
        print(f"{Path(root).name}: {len(h['pages'])} pages, {n_chunks} chunks, {differing} differing; "
              f"clean_markdown {b['clean_s']:.2f} s -> {h['clean_s']:.2f} s, "
              f"scan+chunk {b['total_s']:.2f} s -> {h['total_s']:.2f} s")
    return 1 if differing_total else 0


if __name__ == "__main__":
    sys.exit(main())
