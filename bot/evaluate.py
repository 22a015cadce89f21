"""``chatops eval``: ask every question of an eval file and score retrieval, answers and latency.

The file format is one JSON object per line (``id``, ``question``, ``kind``, ``gold_docs``,
``answer_contains``, optional ``history`` (the asker's own earlier messages), ``expected_tool``,
``expected_args``, ``expected_start``, ``as_user`` (the asker's e-mail; without it the asker has none: public pages only)
and ``audience`` (``dm``, the default: only the asker reads the answer; ``channel``: others do, so
``CHANNEL_ACCESS`` applies)).

Retrieval metrics use the first search of each turn (the standalone question for follow-ups),
reduced to distinct documents in rank order, over the answerable kinds:

- recall@k: for ``multi`` the fraction of gold pages among the top k documents; otherwise 1 when
  any gold page (they are alternatives) is among them.
- MRR@10: reciprocal rank of the first gold document (Voorhees 1999, TREC-8 QA).
- nDCG@10 with binary gains (Järvelin & Kekäläinen 2002); the ideal ranking has all gold pages
  first for ``multi`` and one gold page otherwise.

Answers: ``answer_contains``, ``citation_validity`` (re-checked against the stored chunks),
``refusal_unanswerable``, ``false_refusal``, ``direct_general`` (general questions answered
without retrieval; 0 without an LLM, whose absence makes the bot search and refuse instead) and
``answer_chars_mean``: the mean length in characters of the reply text (citation markers and any
closing line included) over the answerable questions that were answered, not refused (each row's
``answer_chars``; 0 for a refusal) and ``citation_precision``: per answerable question answered (not
refused) with citations, the distinct cited pages (``doc_id``) that are gold pages over the distinct cited
pages; the aggregate is their mean (macro), None when no question qualifies.
``cost``: LLM calls and tokens per question, mean and p95 (0 without an LLM).

``unsupported_posted`` (issue 23): the posted sentences with a figure, time, date, identifier or name that
none of the passages they cite holds (:func:`agent.grounding.ungrounded`), summed over the questions, for
every planner (the extractive answers included). The reply text is cut into sentences, list items and table
rows (:func:`agent.text.sentence_spans`; a marker the segmenter left at the start of the next sentence goes
back to the one it ends); a sentence's ``[n]`` markers name its citations, and one without markers takes the
markers of its paragraph (the extractive composer puts one marker at the end of a paragraph, a list or a
table); a sentence with no marker either is not a cited statement and is not checked. Each citation stands for
its stored chunk's full text (with its title and section), not only the quote. ``unsupported_posted_by_kind``
counts the sentences with a missing fact of each kind (a sentence may count under several); each row carries
its count and the sentences (``unsupported_sentences``: ``sentence`` and the missing ``facts``).

Actions (``kind: action``), for every registered action tool: ``action_tool`` is the fraction of action
questions whose reply proposes the expected tool (``expected_tool``, ``calendar.create`` when absent) as
its pending action; ``action_args`` the fraction whose proposed arguments agree with every
``expected_args`` entry: a list (``attendees``) as a set, case-insensitive; ``title``, ``text`` and
``summary`` loosely (case-insensitive, extra words allowed, each expected word equal to or a prefix of a
proposed word: "Incident retro" matches "Incident retrospective"); anything else (``duration_minutes``,
``project``, ``issue_type``) exactly. ``action_start`` the fraction, over the questions with an
``expected_start``, whose proposed start (``start``, or a reminder's ``at``) is the expected one
(:func:`start_matches`: ``tomorrow 14:00``, ``fri 09:00 America/Los_Angeles``, ``14th 10:00``, ``+14 10:00``)
counted from when the question was asked, in the named zone, else the proposal's ``timezone``.
A question whose expected tool is not registered in the run (``ticket.create`` without ``JIRA_URL``) is
not scored (``action_skipped`` on its row, ``action_skipped`` in the figures: how many). ``action_by_tool``
gives the three figures and the count per expected tool.

Permissions (issue 11), re-checked against the stored chunks' access for the question's viewer
(``as_user`` and ``audience`` through :func:`app.turns.build_turn`): ``acl_leaks`` counts the chunks
the viewer may not read that were cited (quotes included) or handed to the planner as evidence (the
turn's retrieved hits); it must be 0. ``acl_recall`` is the fraction of questions whose gold page is
restricted (not public) and readable by the viewer that were answered citing a gold page (None when
there are none).

Each ``per_question`` row carries what was said, so a run can be read afterwards: the ``question``, the
reply ``text`` and its ``citations`` (``n``, ``doc_id``, ``title``, ``section``, ``quote`` each), and why it
was answered or refused: ``gate``, the evidence gate's verdict (``sufficient``, ``reason``, the ``features`` it
read; ``{}`` for a turn that searched nothing), besides the row's scores.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from agent.agent import Agent
from agent.grounding import FACT_KINDS, ungrounded
from agent.models import HistoryMessage, Reply
from agent.text import sentence_spans
from app.access import AccessPolicy
from app.inbound import InboundMessage
from app.layout import sections
from app.turns import build_turn
from core.access import Viewer
from core.models import Chunk
from telemetry.timing import timed

__all__ = ["EvalQuestion", "load_questions", "run_eval", "format_table", "ANSWERABLE", "action_scores", "title_matches",
           "acl_scores", "doc_chunks", "citation_precision", "unsupported_posted", "posted_sentences"]

ANSWERABLE = frozenset({"single", "multi", "paraphrase", "exact_term", "followup"})


@dataclass(frozen=True, slots=True)
class EvalQuestion:
    """One line of an eval file."""

    id: str
    question: str
    kind: str
    gold_docs: tuple[str, ...]
    answer_contains: tuple[str, ...]
    history: tuple[str, ...] = ()
    expected_tool: str | None = None
    expected_args: dict | None = None
    expected_start: str | None = None
    as_user: str = ""
    audience: str = "dm"


def load_questions(path: str | Path) -> list[EvalQuestion]:
    """Read an eval file.

    Raises:
        ValueError: naming the line that is not valid JSON or lacks a field.
    """
    out = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            out.append(EvalQuestion(
                id=str(d["id"]), question=str(d["question"]), kind=str(d["kind"]),
                gold_docs=tuple(d.get("gold_docs") or ()), answer_contains=tuple(d.get("answer_contains") or ()),
                history=tuple(str(h) for h in d.get("history") or ()), expected_tool=d.get("expected_tool"),
                expected_args=d.get("expected_args"), expected_start=d.get("expected_start"), as_user=str(d.get("as_user") or ""),
                audience=str(d.get("audience") or "dm")))
            if out[-1].audience not in {"dm", "channel"}:
                raise TypeError(f"audience must be dm or channel, not {out[-1].audience!r}")
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{n}: not a valid eval question ({exc}); see the eval README for the format") from exc
    return out


def ranked_docs(reply: Reply) -> list[str]:
    """Distinct doc ids of the turn's first retrieval (fused over its sub-queries), in rank order."""
    first = [q for q in reply.trace.queries if q.get("attempt", 0) == 0]
    if not first:
        return []
    docs: list[str] = []
    for h in first[-1]["hits"]:
        if h["doc_id"] not in docs:
            docs.append(h["doc_id"])
    return docs


def retrieval_scores(q: EvalQuestion, docs: list[str], extra_k: int = 10) -> dict[str, float]:
    """recall@1/5/10 (and recall@extra_k), mrr@10 and ndcg@10 of one question."""
    gold = set(q.gold_docs)
    s: dict[str, float] = {}
    for k in sorted({1, 5, 10, extra_k}):
        found = gold & set(docs[:k])
        s[f"recall@{k}"] = len(found) / len(gold) if q.kind == "multi" else float(bool(found))
    s["mrr@10"] = next((1.0 / r for r, d in enumerate(docs[:10], start=1) if d in gold), 0.0)
    dcg = sum(1.0 / math.log2(r + 1) for r, d in enumerate(docs[:10], start=1) if d in gold)
    if q.kind != "multi":
        dcg = next((1.0 / math.log2(r + 1) for r, d in enumerate(docs[:10], start=1) if d in gold), 0.0)
    ideal_n = len(gold) if q.kind == "multi" else 1
    idcg = sum(1.0 / math.log2(r + 1) for r in range(1, min(ideal_n, 10) + 1))
    s["ndcg@10"] = dcg / idcg if idcg else 0.0
    return s


def _contains_all(text: str, needles: Iterable[str]) -> bool:
    low = text.lower()
    return all(n.lower() in low for n in needles)


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def _pct(xs: list[float], p: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    i = min(len(xs) - 1, max(0, math.ceil(p * len(xs)) - 1))
    return round(xs[i], 1)


def _chars(x: float | None) -> str:
    """A mean length in characters for a table ("-" when there is none)."""
    return "-" if x is None else f"{x:.0f}"


def doc_chunks(index) -> dict[str, str]:
    """Doc id -> one of its chunk ids, from the index's manifest (for :func:`acl_scores`)."""
    return {p.doc_id: p.chunk_ids[0] for p in index.manifest.all_pages() if p.chunk_ids}


def acl_scores(q: EvalQuestion, reply: Reply, viewer: Viewer | None, lookup: Callable[[str], Chunk | None],
               doc_chunks: dict[str, str] | None = None) -> dict:
    """``acl_leaks`` (chunks cited or retrieved that ``viewer`` may not read; a chunk gone from the
    store counts) and ``acl_restricted_gold`` (the gold page is restricted and readable by ``viewer``:
    the question counts for ``acl_recall``) with ``acl_answered`` (then answered citing a gold page)."""
    if viewer is None:
        viewer = Viewer.public()
    seen = {c.chunk_id for c in reply.citations} | {h["chunk_id"] for qq in reply.trace.queries for h in qq["hits"]}
    leaks = 0
    for cid in sorted(seen):
        chunk = lookup(cid)
        if chunk is None or not chunk.access.readable_by(viewer):
            leaks += 1
    restricted = False
    for doc in q.gold_docs:
        chunk = lookup(doc_chunks[doc]) if doc_chunks and doc in doc_chunks else None
        if chunk is not None and not chunk.access.public and chunk.access.readable_by(viewer):
            restricted = True
    answered = restricted and not reply.refused and any(c.doc_id in set(q.gold_docs) for c in reply.citations)
    return {"acl_leaks": leaks, "acl_restricted_gold": restricted, "acl_answered": answered}


def run_eval(agent: Agent, questions: list[EvalQuestion], lookup: Callable[[str], Chunk | None],
             k: int = 10, progress=None, access: AccessPolicy | None = None,
             doc_chunks: dict[str, str] | None = None, tools: Collection[str] | None = None) -> dict:
    """Ask each question and score it; returns the ``--json`` object (see module docstring).

    Args:
        agent: the agent under test.
        questions: the eval set.
        lookup: chunk id to the indexed chunk, used to re-check every citation independently of the
            agent's own validation (the quote must be a verbatim span of the stored chunk, and the
            chunk must be among the turn's retrieved hits).
        k: also report ``recall@k`` (distinct documents).
        progress: optional callback ``(question, reply, row)``.
        access: who sees what (the runtime's :class:`app.access.AccessPolicy`: static groups,
            ``CHANNEL_ACCESS``); None: the defaults.
        doc_chunks: doc id -> a chunk id (:func:`doc_chunks`), to tell restricted gold pages (``acl_recall``).
        tools: the registered tool names; an action question expecting another tool is not scored
            (``action_skipped``). None: every action question is scored.
    """
    rows = []
    for q in questions:
        with timed("chatops.eval.question") as clock:
            history = tuple(HistoryMessage.own(h) for h in q.history)  # the asker's own earlier messages
            turn = build_turn(InboundMessage(platform="eval", text=q.question, history=history, user_email=q.as_user,
                                             channel_kind="dm" if q.audience == "dm" else "channel"), access)
            asked_at = datetime.now(timezone.utc)
            reply = agent.answer(turn)
        ms = clock.ms
        row = {"id": q.id, "kind": q.kind, "question": q.question, "route": reply.route, "refused": reply.refused,
               "latency_ms": ms, "text": reply.text, "citations": said_citations(reply),
               "answer_chars": 0 if reply.refused else len(reply.text),
               "citation_valid": citations_valid(reply, lookup), "gate": reply.trace.gate or {}}
        row.update(acl_scores(q, reply, turn.viewer, lookup, doc_chunks))
        unsupported = unsupported_posted(reply, lookup)
        row["unsupported_posted"] = len(unsupported)
        row["unsupported_sentences"] = unsupported
        if q.kind in ANSWERABLE:
            docs = ranked_docs(reply)
            row["docs"] = docs[:max(10, k)]
            row.update(retrieval_scores(q, docs, k))
            row["answer_contains"] = (not reply.refused) and _contains_all(reply.text, q.answer_contains)
            row["citation_precision"] = citation_precision(q, reply)
        if q.kind == "unanswerable":
            row["refused_ok"] = reply.refused and not reply.citations
        if q.kind == "general":
            row["direct"] = not reply.trace.queries and not reply.refused
        if q.kind == "action":
            if tools is not None and (q.expected_tool or "calendar.create") not in tools:
                row["action_skipped"] = True
            else:
                row.update(action_scores(q, reply, asked_at))
        row["llm_calls"] = int(reply.trace.timings_ms.get("llm_calls", 0))
        row["llm_tokens"] = int(reply.trace.timings_ms.get("llm_tokens", 0))
        row["llm_timeouts"] = int(reply.trace.timings_ms.get("llm_timeouts", 0))
        row["llm_fallback"] = any(s.get("step") == "fallback" for s in reply.trace.steps)
        rows.append(row)
        if progress:
            progress(q, reply, row)
    return summarize(rows)


def said_citations(reply: Reply) -> list[dict]:
    """The reply's citations as a row shows them: ``n``, ``doc_id``, ``title``, ``section`` and ``quote`` each."""
    return [{"n": c.n, "doc_id": c.doc_id, "title": c.title, "section": c.section, "quote": c.quote}
            for c in reply.citations]


def citation_precision(q: EvalQuestion, reply: Reply) -> float | None:
    """Distinct cited pages (``doc_id``) that are gold pages / distinct cited pages, for an answerable
    question answered (not refused) with citations; None otherwise (it does not count)."""
    if q.kind not in ANSWERABLE or reply.refused or not reply.citations:
        return None
    cited = {c.doc_id for c in reply.citations}
    return len(cited & set(q.gold_docs)) / len(cited)


_MARKER = re.compile(r"\[(\d{1,3})\]")
_LEADING_MARKERS = re.compile(r"^(?:\s*\[\d{1,3}\])+")


def posted_sentences(text: str) -> list[tuple[str, set[int]]]:
    """The sentences, list items and table rows of a reply, each with the citation numbers it stands on:
    ``(sentence without markers, {n, ...})``; its own ``[n]`` markers, else those of its paragraph (blocks
    separated by a blank line), else none.

    >>> posted_sentences("Everyone gets 25 days. [1] Ask first. [2]\\n\\nSteps:\\n- File it\\n- Wait [3]")
    [('Everyone gets 25 days.', {1}), ('Ask first.', {2}), ('Steps:', {3}), ('File it', {3}), ('Wait', {3})]
    """
    out: list[tuple[str, set[int]]] = []
    for para in re.split(r"\n\s*\n", text):
        inherited = {int(n) for n in _MARKER.findall(para)}
        pieces: list[str] = []
        for span in sentence_spans(para, min_chars=0):
            piece = span.text
            lead = _LEADING_MARKERS.match(piece)
            if lead and pieces:  # "... 25 days. [1] Ask first." split after the period: the marker is the first's
                pieces[-1] += lead.group()
                piece = piece[lead.end():]
            pieces.append(piece)
        for piece in pieces:
            own = {int(n) for n in _MARKER.findall(piece)}
            sentence = _MARKER.sub("", piece).strip()
            if re.search(r"\w", sentence):
                out.append((sentence, own or inherited))
    return out


def unsupported_posted(reply: Reply, lookup: Callable[[str], Chunk | None]) -> list[dict]:
    """The reply's posted sentences with a fact none of their cited chunks holds (see the module docstring):
    ``[{"sentence", "facts": ["kind:text", ...]}]``; ``[]`` for a refusal or a reply without citations."""
    if reply.refused or not reply.citations:
        return []
    by_n: dict[int, dict[str, str]] = defaultdict(dict)
    for c in reply.citations:
        if c.chunk_id not in by_n[c.n]:
            chunk = lookup(c.chunk_id)
            by_n[c.n][c.chunk_id] = "" if chunk is None else f"{chunk.title}\n{chunk.section}\n{chunk.text}"
    out = []
    for sentence, marks in posted_sentences(reply.text):
        if not marks:
            continue
        missing = ungrounded(sentence, [t for n in sorted(marks) for t in by_n.get(n, {}).values()])
        if missing:
            out.append({"sentence": sentence, "facts": [f"{f.kind}:{f.text}" for f in missing]})
    return out


def title_matches(expected: str, got: str) -> bool:
    """Loose title match: case-insensitive, extra words allowed, each expected word equal to or a
    prefix of one of ``got``'s words (``"Incident retro"`` matches ``"Incident retrospective"``)."""
    import re

    words = re.findall(r"[\w:/-]+", got.lower())
    return all(any(w == e or w.startswith(e) for w in words) for e in re.findall(r"[\w:/-]+", expected.lower()))


def action_scores(q: EvalQuestion, reply: Reply, asked_at: datetime | None = None) -> dict:
    """``action_tool`` (the expected tool was proposed), ``action_args`` (every expected argument agrees)
    and ``action_start`` (the proposed start is the expected one, None without ``expected_start``; see the
    module docstring) of one action question asked at ``asked_at`` (aware; now when None), plus what was
    proposed (``action_proposed``) and the tool expected (``action_expected``)."""
    pa = reply.pending_action
    want_tool = q.expected_tool or "calendar.create"
    tool_ok = pa is not None and pa.tool == want_tool
    expected = q.expected_args or {}
    args_ok = start_ok = False
    if tool_ok and pa is not None:
        args_ok = all(_arg_matches(name, want, pa.args.get(name)) for name, want in expected.items())
        start_ok = bool(q.expected_start) and start_matches(q.expected_start or "", _start_of(pa.args),
                                                             str(pa.args.get("timezone") or "UTC"),
                                                             asked_at or datetime.now(timezone.utc))
    proposed = ({k: v for k, v in pa.args.items() if k != "description"} if pa is not None else None)
    return {"action_tool": tool_ok, "action_args": args_ok, "action_start": start_ok if q.expected_start else None,
            "action_proposed": proposed, "action_expected": want_tool}


#: The argument holding an action's start time, per kind of action (an event's ``start``, a reminder's ``at``).
_START_ARGS = ("start", "at")

_WEEKDAYS = {d: i for i, d in enumerate(("mon", "tue", "wed", "thu", "fri", "sat", "sun"))}
_START = re.compile(r"^(?:(?P<day>today|tomorrow|\+\d{1,3}|mon|tue|wed|thu|fri|sat|sun|\d{1,2}(?:st|nd|rd|th))\s+)?"
                    r"(?P<hh>\d{1,2}):(?P<mm>\d{2})(?:\s+(?P<tz>[A-Za-z_]+/[A-Za-z_/+-]+|UTC))?$", re.IGNORECASE)


def _start_of(args: dict) -> str:
    return next((str(args[k]) for k in _START_ARGS if args.get(k)), "")


def start_matches(expected: str, proposed: str, proposal_tz: str, asked_at: datetime) -> bool:
    """Whether the proposed start (ISO 8601 with an offset) is the ``expected`` one, asked at ``asked_at``.

    ``expected`` is ``[DAY ]HH:MM[ ZONE]``: the local time in ``ZONE`` (an IANA name; ``proposal_tz``
    when absent) and the day: ``today``, ``tomorrow``, ``+N`` (N days after the day it was asked), a
    weekday (``thu``: the first such day after the day it was asked, or that day itself when the time is
    still ahead) or a day of the month (``14th``: the first one from the day it was asked whose time is
    still ahead); without a day, the first such time still ahead.

    Raises:
        ValueError: for an ``expected`` that does not read so (a mistake in the eval file).
    """
    from zoneinfo import ZoneInfo

    m = _START.match(expected.strip())
    if m is None:
        raise ValueError(f"expected_start {expected!r} is not '[DAY ]HH:MM[ ZONE]' (e.g. 'tomorrow 14:00')")
    if not proposed:
        return False
    tz = ZoneInfo(m["tz"] or proposal_tz or "UTC")
    try:
        got = datetime.fromisoformat(proposed).astimezone(tz)
    except ValueError:
        return False
    now = asked_at.astimezone(tz)
    if (got.hour, got.minute) != (int(m["hh"]), int(m["mm"])):
        return False
    day, today = (m["day"] or "").lower(), now.date()
    ahead = now.time().replace(second=0, microsecond=0) < got.time().replace(second=0, microsecond=0)
    first = today if ahead else today + timedelta(days=1)
    if day == "today":
        want: date = today
    elif day == "tomorrow":
        want = today + timedelta(days=1)
    elif day.startswith("+"):
        want = today + timedelta(days=int(day[1:]))
    elif day in _WEEKDAYS:
        want = first + timedelta(days=(_WEEKDAYS[day] - first.weekday()) % 7)
    elif day:
        n = int(day[:-2])
        want = next((first + timedelta(days=i) for i in range(0, 62) if (first + timedelta(days=i)).day == n), first)
    else:
        want = first
    return got.date() == want


def _arg_matches(name: str, want: object, got: object) -> bool:
    """One expected argument against the proposed one (lists as sets, titles and texts loosely)."""
    if isinstance(want, list):
        return {str(a).lower() for a in want} == {str(a).lower() for a in (got or [])}  # type: ignore[attr-defined]  # got: a list here
    if name in {"title", "text", "summary"}:
        return title_matches(str(want), str(got or ""))
    return got == want


def citations_valid(reply: Reply, lookup: Callable[[str], Chunk | None]) -> bool:
    """True when every citation's quote is in its stored chunk, the chunk was retrieved this turn,
    and every ``[n]`` marker of the text has a citation."""
    import re

    shown = {h["chunk_id"] for q in reply.trace.queries for h in q["hits"]}
    numbers = {c.n for c in reply.citations}
    markers = {int(m) for m in re.findall(r"\[(\d{1,3})\]", reply.text)}
    if not markers <= numbers:
        return False
    for c in reply.citations:
        chunk = lookup(c.chunk_id)
        if chunk is None or c.chunk_id not in shown or c.quote not in chunk.text or chunk.doc_id != c.doc_id:
            return False
    return True


def _figures(rows: list[dict]) -> dict:
    ans = [r for r in rows if r["kind"] in ANSWERABLE]
    una = [r for r in rows if r["kind"] == "unanswerable"]
    out: dict = {"questions": len(rows)}
    metrics = sorted({m for r in ans for m in r if m.startswith("recall@")}, key=lambda m: int(m[7:]))
    out["retrieval"] = {m: _mean([r[m] for r in ans]) for m in [*metrics, "mrr@10", "ndcg@10"]}
    if not ans:
        out["retrieval"] = {m: None for m in ("recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10")}
    out["answers"] = {
        "answer_contains": _mean([float(r["answer_contains"]) for r in ans]),
        "citation_validity": _mean([float(bool(r["citation_valid"])) for r in rows]),
        "refusal_unanswerable": _mean([float(r["refused_ok"]) for r in una]),
        "false_refusal": _mean([float(r["refused"]) for r in ans]),
        "answer_chars_mean": _mean([float(r["answer_chars"]) for r in ans if not r["refused"]]),
        "citation_precision": _mean([r["citation_precision"] for r in ans if r.get("citation_precision") is not None]),
    }
    out["answers"]["unsupported_posted"] = sum(int(r.get("unsupported_posted", 0)) for r in rows)
    out["answers"]["unsupported_posted_by_kind"] = {
        k: sum(1 for r in rows for u in r.get("unsupported_sentences", ()) if any(f.startswith(f"{k}:") for f in u["facts"]))
        for k in FACT_KINDS}
    gen = [r for r in rows if r["kind"] == "general"]
    out["answers"]["direct_general"] = _mean([float(r["direct"]) for r in gen])
    act = [r for r in rows if r["kind"] == "action" and not r.get("action_skipped")]
    out["answers"].update(_action_figures(act))
    out["answers"]["action_skipped"] = sum(1 for r in rows if r.get("action_skipped"))
    by_tool: dict[str, list[dict]] = defaultdict(list)
    for r in act:
        by_tool[str(r.get("action_expected") or "calendar.create")].append(r)
    out["answers"]["action_by_tool"] = {t: {"questions": len(v), **_action_figures(v)} for t, v in sorted(by_tool.items())}
    restricted = [r for r in rows if r.get("acl_restricted_gold")]
    out["access"] = {"acl_leaks": sum(int(r.get("acl_leaks", 0)) for r in rows),
                     "acl_recall": _mean([float(r["acl_answered"]) for r in restricted]),
                     "acl_questions": len(restricted)}
    calls = [float(r.get("llm_calls", 0)) for r in rows]
    tokens = [float(r.get("llm_tokens", 0)) for r in rows]
    out["cost"] = {"llm_calls_mean": _mean(calls), "llm_calls_p95": _pct(calls, 0.95),
                   "llm_tokens_mean": _mean(tokens), "llm_tokens_p95": _pct(tokens, 0.95)}
    lat = [r["latency_ms"] for r in rows]
    out["latency_ms"] = {"p50": _pct(lat, 0.5), "p95": _pct(lat, 0.95), "max": _pct(lat, 1.0)}
    return out


def _action_figures(rows: list[dict]) -> dict:
    """``action_tool``, ``action_args`` and ``action_start`` (over the rows with an expected start) of scored rows."""
    return {"action_tool": _mean([float(r["action_tool"]) for r in rows]),
            "action_args": _mean([float(r["action_args"]) for r in rows]),
            "action_start": _mean([float(r["action_start"]) for r in rows if r.get("action_start") is not None])}


def summarize(rows: list[dict]) -> dict:
    """Aggregate per-question rows into the eval object, overall and ``by_kind``."""
    out = _figures(rows)
    by_kind: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_kind[r["kind"]].append(r)
    out["by_kind"] = {k: {kk: vv for kk, vv in _figures(v).items()} for k, v in sorted(by_kind.items())}
    out["per_question"] = [{k: (round(v, 1) if k == "latency_ms" else v) for k, v in r.items()} for r in rows]
    return out


def format_table(result: dict, label: str = "") -> str:
    """A human-readable summary of an eval result."""
    r, a, lat = result["retrieval"], result["answers"], result["latency_ms"]

    def f(x):
        return "  -  " if x is None else f"{x:.3f}"

    lines = [f"chatops eval {label}".rstrip() + f": {result['questions']} questions",
             "retrieval  R@1   R@5   R@10  MRR@10 nDCG@10",
             f"           {f(r['recall@1'])} {f(r['recall@5'])} {f(r['recall@10'])} {f(r['mrr@10'])} {f(r['ndcg@10'])}",
             f"answers    answer_contains {f(a['answer_contains'])}  citation_validity {f(a['citation_validity'])}  "
             f"refusal_unanswerable {f(a['refusal_unanswerable'])}  false_refusal {f(a['false_refusal'])}",
             f"           citation_precision {f(a.get('citation_precision'))}  "
             f"answer_chars_mean {_chars(a.get('answer_chars_mean'))}  "
             f"unsupported_posted {a.get('unsupported_posted', '-')}",
             f"actions    action_tool {f(a.get('action_tool'))}  action_args {f(a.get('action_args'))}  "
             f"action_start {f(a.get('action_start'))}  skipped {a.get('action_skipped', 0)}",
             *(f"           {t:<16} n={v['questions']:<3} tool {f(v['action_tool'])}  args {f(v['action_args'])}  "
               f"start {f(v['action_start'])}" for t, v in (a.get("action_by_tool") or {}).items()),
             f"access     acl_leaks {result.get('access', {}).get('acl_leaks', 0)}  "
             f"acl_recall {f(result.get('access', {}).get('acl_recall'))} "
             f"({result.get('access', {}).get('acl_questions', 0)} restricted questions)",
             f"latency    p50 {lat['p50']} ms  p95 {lat['p95']} ms"]
    kinds = ["by kind      n   R@5   R@10  contains refused  cit_precision"]
    for k, v in result["by_kind"].items():
        kinds.append(f"{k:<12}{v['questions']:>2}  {f(v['retrieval']['recall@5'])} {f(v['retrieval']['recall@10'])} "
                     f"{f(v['answers']['answer_contains'])}    "
                     f"{f(v['answers']['refusal_unanswerable'] if k == 'unanswerable' else v['answers']['false_refusal'])}    "
                     f"{f(v['answers'].get('citation_precision'))}")
    return sections("\n".join(lines), "\n".join(kinds))

