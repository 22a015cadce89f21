"""Permissions on a real handbook: ``acl_leaks`` and ``acl_recall`` of ``chatops eval`` (issue 11).

The Meltano handbook (``../shared/corpus/meltano-handbook``) is split into two folder sources in a temporary
folder: everything but ``_peopleops/`` is public, and ``_peopleops/`` (HR: leave, pay, hiring) is readable
only by the static group ``people`` (``audience=people``; ``groups: {people: [pat@example.com]}`` in a
generated ``chatops.yml``). Every question of ``../shared/eval/dev2.jsonl`` is asked three times, through
the real ``chatops eval`` (the same retrieval pre-filters as the bot):

- by Pat, a member, in a DM: the restricted pages must still answer (``acl_recall``, and recall@5 of the
  restricted questions against the unrestricted run);
- by Bob, not a member, in a DM: nothing restricted may be cited, quoted or retrieved (``acl_leaks`` = 0);
- by Pat in a channel (``CHANNEL_ACCESS=public``): the same, since others read the answer.

Prints the figures per variant. Run: ``.venv/bin/python bench/acl_eval.py`` (about 3 minutes; the embedding
cache under ``CHATOPS_CACHE_DIR`` makes reruns faster). Skips with a reason when ../shared is absent.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CORPUS = SHARED / "corpus" / "meltano-handbook"
QUESTIONS = SHARED / "eval" / "dev2.jsonl"
RESTRICTED = "_peopleops"
MEMBER, OTHER = "pat@example.com", "bob@example.com"


def variants(rows: list[dict]) -> dict[str, list[dict]]:
    """The three askings of every question (ids suffixed), keyed by variant name."""
    out: dict[str, list[dict]] = {"member-dm": [], "other-dm": [], "member-channel": []}
    for q in rows:
        restricted = any(g.startswith(RESTRICTED + "/") for g in q.get("gold_docs", []))
        out["member-dm"].append({**q, "id": q["id"] + "-m", "as_user": MEMBER, "audience": "dm"})
        for name, who, audience in (("other-dm", OTHER, "dm"), ("member-channel", MEMBER, "channel")):
            v = {**q, "id": f"{q['id']}-{name}", "as_user": who, "audience": audience}
            if restricted:  # the gold page is out of reach: the right outcome is a refusal
                v.update(kind="unanswerable", gold_docs=[], answer_contains=[])
            out[name].append(v)
    return out


def main() -> int:
    if not (CORPUS.is_dir() and QUESTIONS.is_file()):
        print(f"skipped: {CORPUS} or {QUESTIONS} is missing (../shared holds the handbook corpus)")
        return 0
    rows = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    n_restricted = sum(any(g.startswith(RESTRICTED + "/") for g in q.get("gold_docs", [])) for q in rows)
    with tempfile.TemporaryDirectory(prefix="acl-eval-") as tmp:
        t = Path(tmp)
        public, hr = t / "handbook", t / "people"
        shutil.copytree(CORPUS, public, ignore=shutil.ignore_patterns(RESTRICTED))
        shutil.copytree(CORPUS / RESTRICTED, hr / RESTRICTED)  # doc ids keep the "_peopleops/" prefix
        (t / "chatops.yml").write_text(f"groups:\n  people: [{MEMBER}]\n")
        env = {**os.environ, "CHATOPS_CONFIG": str(t / "chatops.yml"), "CHATOPS_DATA_DIR": str(t / "data"),
               "CHATOPS_LOG_LEVEL": "WARNING"}
        sources = ["--source", f"folder:{public}?name=handbook", "--source", f"folder:{hr}?name=people&audience=people"]
        print(f"Meltano handbook: {RESTRICTED}/ restricted to group 'people' ({n_restricted} of {len(rows)} "
              f"dev2 questions have their gold page there)")
        for name, qs in variants(rows).items():
            qfile = t / f"{name}.jsonl"
            qfile.write_text("".join(json.dumps(q) + "\n" for q in qs))
            proc = subprocess.run([sys.executable, "-m", "bot.cli", "eval", "--questions", str(qfile), *sources,
                                   "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
            if proc.returncode != 0:
                print(proc.stderr[-2000:], file=sys.stderr)
                return proc.returncode
            r = json.loads(proc.stdout)
            acc, ans, ret = r.get("access", {}), r["answers"], r["retrieval"]
            print(f"{name:15s} acl_leaks {acc.get('acl_leaks')}  acl_recall {acc.get('acl_recall')} "
                  f"({acc.get('acl_questions')} restricted questions)  recall@5 {ret.get('recall@5')}  "
                  f"answer_contains {ans.get('answer_contains')}  refusal_unanswerable "
                  f"{ans.get('refusal_unanswerable')}  false_refusal {ans.get('false_refusal')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
