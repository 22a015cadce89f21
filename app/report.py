"""The knowledge-gap report: what the wiki could not answer, what it answered badly, and which pages carry it.

For a period (default the last 7 days) it reads the turn log (``StateStore.turn_records``: every knowledge
question and follow-up ``chatops serve`` answered or refused, with its cited pages), the feedback on those
turns (keyed by trace id), and the pages of every source (the index manifest, with each page's title, link
and last update from its stored chunks), and gives a :class:`GapReport`:

- **refused questions grouped by similar wording** (:func:`group_questions`): each question is embedded with
  the index's own embedding model, and questions are joined by average-linkage agglomerative clustering
  (UPGMA, Sokal & Michener 1958; :func:`average_linkage_clusters`, the nearest-neighbour-chain algorithm in
  numpy, which gives the flat clusters of SciPy's ``fcluster(linkage(x, "average", "cosine"), t, "distance")``
  without its 145 MB in the runtime) on cosine distance, cut where the
  average cosine similarity between two groups falls below :data:`GROUP_MIN_SIMILARITY`: two groups merge
  only when their questions are, on average, about as alike as two wordings of one question. Groups come
  most frequent first, with their distinct wordings as examples;
- **answers marked unhelpful**, with the pages they cited and the feedback comments;
- per source: pages, the pages cited in the period (**most cited** first), the pages **never cited**, and the
  **stale** citations (cited pages not updated for ``STALE_AFTER_DAYS``);
- totals: questions, answered, refused, the answer rate, helpful and unhelpful votes.

Everything here is platform-neutral: ``chatops report`` prints it (:mod:`app.report_render`), ``/kb report``
posts its summary. Reading needs only the manifest and the stored chunks (:func:`app.wiring.open_index_chunks`:
an embedded index's Whoosh files, which readers open without a lock, or a shared index's collection on its
Qdrant server, with nothing made on this machine), so the report runs while ``chatops serve`` holds the index.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from typing import TYPE_CHECKING, Any

from state import StateStore, TurnRecord

if TYPE_CHECKING:  # the index and NumPy are imported when a report is built, not when this module is
    from index.knowledge import StoredChunks
    from index.manifest import Manifest
    from numpy.typing import ArrayLike

    from .settings import Settings

__all__ = ["GapReport", "PageInfo", "PageUse", "RefusedGroup", "CitedPage", "UnhelpfulAnswer", "SourceReport",
           "Vote", "build_report", "gap_report", "report_from_settings", "group_questions", "index_pages",
           "parse_since", "looks_like_period",
           "GROUP_MIN_SIMILARITY", "DEFAULT_SINCE", "UNKNOWN_SOURCE"]

#: Average cosine similarity (all-MiniLM-L6-v2) at or above which two groups of refused questions merge.
#: Measured on paraphrases: two wordings of one question score 0.45-0.73 (average 0.6 within a group),
#: questions on different topics 0.13-0.32.
GROUP_MIN_SIMILARITY = 0.5

#: The period when none is given.
DEFAULT_SINCE = "7d"

#: The source of a cited page the index no longer holds (deleted or re-chunked since it was cited).
UNKNOWN_SOURCE = "(no longer indexed)"

#: Distinct wordings kept as a group's examples.
MAX_EXAMPLES = 3

#: At most this many refused questions (the most recent) are grouped: clustering costs time and memory in
#: the square of their number (2,000 distinct wordings: 0.24 s; 5,000: 2.7 s, on one core); the others are
#: counted in :attr:`GapReport.ungrouped`.
MAX_GROUPED = 2000

#: Texts to their embeddings, an ``(n, dim)`` NumPy array (``Embedder.embed``).
Embed = Callable[[Sequence[str]], Any]

_PERIOD = re.compile(r"^\s*(\d+)\s*([hdw])\s*$", re.I)
_PERIOD_WORD = re.compile(r"^(\d+[hdw]|\d{4}-\d{2}-\d{2})$", re.I)


def looks_like_period(word: str) -> bool:
    """Whether one chat word names a report period (``7d``, ``24h``, ``2w`` or a date ``2026-11-01``), so
    ``report 30d`` is a command and ``report phishing`` a question. Validity is :func:`parse_since`'s."""
    return bool(_PERIOD_WORD.match(word.strip()))
_UNITS = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}


# -- the result ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PageInfo:
    """One indexed page.

    Attributes:
        source, doc_id: the page's source name and id within it.
        title: the page title (its doc id when unknown).
        url: the page link without a section anchor, or ``""``.
        updated_at: when the page last changed at its source (UTC), or ``None`` when the source does not say.
    """

    source: str
    doc_id: str
    title: str
    url: str = ""
    updated_at: datetime | None = None

    @property
    def key(self) -> str:
        """``source:doc_id``, the manifest's document key."""
        return f"{self.source}:{self.doc_id}"


@dataclass(frozen=True, slots=True)
class PageUse:
    """A page cited in the period.

    Attributes:
        page: the page.
        citations: how many citations point to it (one per citation number of an answer; an answer may cite
            two sections of one page).
        answers: how many answers cited it.
        age_days: whole days since the page was last updated (at the report's end), or ``None`` when unknown.
        stale: cited while not updated for ``STALE_AFTER_DAYS`` or more.
    """

    page: PageInfo
    citations: int
    answers: int
    age_days: int | None = None
    stale: bool = False


@dataclass(frozen=True, slots=True)
class RefusedGroup:
    """Refused questions with similar wording (see :func:`group_questions`).

    Attributes:
        count: how many refused questions the group holds.
        examples: up to :data:`MAX_EXAMPLES` distinct wordings, the most typical (nearest the group's centre) first.
        reasons: the gate's refusal reasons, most frequent first.
        last_asked: when a question of the group was last asked.
    """

    count: int
    examples: tuple[str, ...]
    reasons: tuple[str, ...] = ()
    last_asked: datetime | None = None


@dataclass(frozen=True, slots=True)
class CitedPage:
    """One citation of an answer: its number in the answer and the page it points to."""

    n: int
    source: str
    doc_id: str
    title: str
    url: str = ""
    section: str = ""


@dataclass(frozen=True, slots=True)
class UnhelpfulAnswer:
    """A turn that someone marked not helpful.

    Attributes:
        trace_id, platform, question, outcome, created_at: the turn (``outcome``: answered or refused).
        citations: the pages the answer cited.
        votes: how many people marked it not helpful.
        comments: their comments (non-empty ones).
    """

    trace_id: str
    platform: str
    question: str
    outcome: str
    created_at: datetime | None
    citations: tuple[CitedPage, ...]
    votes: int
    comments: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SourceReport:
    """One source's pages in the period.

    Attributes:
        source: the source name (:data:`UNKNOWN_SOURCE` for citations of pages the index no longer holds).
        pages: pages indexed.
        citations: citations of its pages.
        answers: answers citing at least one of its pages.
        cited: its cited pages, most cited first.
        never_cited: its pages nobody was pointed to in the period, by title.
        stale: its cited pages not updated for ``STALE_AFTER_DAYS``, oldest first.
    """

    source: str
    pages: int
    citations: int
    answers: int
    cited: tuple[PageUse, ...] = ()
    never_cited: tuple[PageInfo, ...] = ()
    stale: tuple[PageUse, ...] = ()


@dataclass(frozen=True, slots=True)
class Vote:
    """One person's feedback on a turn (the state store's ``feedback`` row)."""

    trace_id: str
    value: str
    comment: str = ""


@dataclass(frozen=True, slots=True)
class GapReport:
    """The knowledge-gap report of one period (see the module docstring).

    Attributes:
        since, until: the period, ``[since, until)``, UTC.
        stale_after_days: ``STALE_AFTER_DAYS`` as used.
        questions, answered, refused: recorded knowledge turns, and how many were answered or refused.
        helpful, not_helpful: feedback votes on the period's turns.
        refused_groups: refused questions grouped by similar wording, largest group first.
        unhelpful: turns marked not helpful, most votes first.
        sources: one entry per source (indexed, or cited), by name.
        ungrouped: older refused questions left out of the grouping (beyond :data:`MAX_GROUPED`).
    """

    since: datetime
    until: datetime
    stale_after_days: int
    questions: int
    answered: int
    refused: int
    helpful: int = 0
    not_helpful: int = 0
    refused_groups: tuple[RefusedGroup, ...] = ()
    unhelpful: tuple[UnhelpfulAnswer, ...] = ()
    sources: tuple[SourceReport, ...] = field(default=())
    ungrouped: int = 0

    @property
    def answer_rate(self) -> float | None:
        """Answered / (answered + refused), or ``None`` when there was no question."""
        decided = self.answered + self.refused
        return self.answered / decided if decided else None

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (times as ISO 8601 strings, ``answer_rate`` included)."""
        out: dict[str, Any] = _jsonable({**asdict(self), "answer_rate": self.answer_rate})  # a dict stays a dict
        return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


# -- the period ------------------------------------------------------------------------------------------------
def parse_since(text: str, now: datetime) -> datetime:
    """The start of the period ``text`` names: ``7d``, ``24h``, ``2w`` before ``now``, or a date
    (``2026-11-01``, midnight UTC) or an ISO time (``2026-11-01T09:00+01:00``; UTC when no zone is given).

    Raises:
        ValueError: for anything else, or a start after ``now``; the message gives the accepted forms.
    """
    m = _PERIOD.match(text or "")
    if m:
        start = now - int(m.group(1)) * _UNITS[m.group(2).lower()]
    else:
        try:
            parsed = datetime.fromisoformat(text.strip())
        except (ValueError, AttributeError):
            raise ValueError(f"--since {text!r} is not a period like 7d, 24h or 2w, nor a date like 2026-11-01"
                             ) from None
        if len(text.strip()) == 10:
            parsed = datetime.combine(date.fromisoformat(text.strip()), time(0))
        start = parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
    if start > now:
        raise ValueError(f"--since {text!r} is in the future; give a past date or a period like 7d")
    return start.astimezone(timezone.utc)


# -- pages -----------------------------------------------------------------------------------------------------
def index_pages(manifest: Manifest, store: StoredChunks) -> tuple[list[PageInfo], dict[str, str]]:
    """Every indexed page with its title, link and last update, and the page key of every chunk id.

    The manifest lists the pages and their chunk ids; each page's first stored chunk (``store``: any of the
    index's stores, which keep title, URL and ``updated_at`` with every chunk) gives the rest. Reads only;
    safe beside a running bot.

    Returns:
        ``(pages, chunk_page)``: the pages by source then title, and ``{chunk_id: "source:doc_id"}``.
    """
    entries = manifest.all_pages()
    chunk_page = {cid: e.doc_key for e in entries for cid in e.chunk_ids}
    stored = store.chunks(e.chunk_ids[0] for e in entries if e.chunk_ids)
    pages = []
    for e in entries:
        chunk = stored.get(e.chunk_ids[0]) if e.chunk_ids else None
        if chunk is None:
            pages.append(PageInfo(e.source, e.doc_id, e.doc_id))
            continue
        pages.append(PageInfo(e.source, e.doc_id, chunk.title or e.doc_id, chunk.url.split("#", 1)[0],
                              chunk.updated_at.astimezone(timezone.utc) if chunk.updated_at else None))
    pages.sort(key=lambda p: (p.source, p.title.lower(), p.doc_id))
    return pages, chunk_page


# -- grouping --------------------------------------------------------------------------------------------------
def _normal(text: str) -> str:
    return " ".join(text.lower().split()).rstrip("?!. ")


def average_linkage_clusters(distances: ArrayLike, threshold: float) -> list[int]:
    """Flat clusters of average-linkage (UPGMA) agglomerative clustering cut at ``threshold``: a cluster label
    per point, points with the same label in one cluster (labels are small integers, in no particular order).

    ``distances`` is a symmetric ``n x n`` matrix (its diagonal is ignored). Two clusters join when the mean
    distance between their points is at most ``threshold``, merging closest first, as SciPy's
    ``fcluster(linkage(..., method="average"), threshold, criterion="distance")`` does. The merges come from the
    nearest-neighbour chain (Murtagh 1983; what SciPy runs for average linkage), O(n^2) time and memory, with
    the Lance-Williams update ``d(k, i+j) = (|i| d(k, i) + |j| d(k, j)) / (|i| + |j|)``. Average linkage has no
    inversions (a merge is never closer than the merges below it), so the cut is the union of the merges at
    distance ``<= threshold``, in whatever order the chain finds them.
    """
    import numpy as np

    d = np.array(distances, dtype=np.float64)
    n = d.shape[0]
    if d.shape != (n, n):
        raise ValueError(f"distances must be a square matrix, not {d.shape}")
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    np.fill_diagonal(d, np.inf)
    size = np.ones(n, dtype=np.float64)
    active = n
    chain: list[int] = []
    while active > 1:
        if not chain:
            chain.append(int(np.argmin(size == 0)))  # the first cluster still active
        a = chain[-1]
        c = int(np.argmin(d[a]))
        if len(chain) > 1 and d[a, chain[-2]] <= d[a, c]:
            c = chain[-2]  # ties go to the previous link, so the chain always ends in a reciprocal pair
        if len(chain) < 2 or c != chain[-2]:
            chain.append(c)
            continue
        chain.pop()
        chain.pop()
        if d[a, c] <= threshold:
            parent[root(a)] = root(c)
        merged = (size[a] * d[a] + size[c] * d[c]) / (size[a] + size[c])  # the joined cluster lives at c
        d[c, :] = merged
        d[:, c] = merged
        d[c, c] = np.inf
        d[a, :] = np.inf
        d[:, a] = np.inf
        size[c] += size[a]
        size[a] = 0
        active -= 1
    return [root(i) for i in range(n)]


def group_questions(questions: Sequence[str], embed: Embed,
                    min_similarity: float = GROUP_MIN_SIMILARITY) -> list[list[int]]:
    """Group questions by similar wording; returns the groups as lists of indexes into ``questions``,
    largest first (ties: first asked first), each ordered most typical first.

    Identical wordings (case, spacing and final punctuation aside) are one point (how often each was asked
    counts in the group's size and in choosing its most typical wording). The rest is average-linkage
    agglomerative clustering (UPGMA) on cosine distance between the questions' embeddings, cut at distance
    ``1 - min_similarity`` (see the module docstring). The most typical wording is the one with the highest mean similarity to the others of its group.

    Raises:
        ValueError: when ``embed`` returns a matrix of the wrong shape.
    """
    if not questions:
        return []
    import numpy as np

    distinct: dict[str, list[int]] = {}
    for i, q in enumerate(questions):
        distinct.setdefault(_normal(q), []).append(i)
    members = list(distinct.values())
    texts = [questions[m[0]] for m in members]
    vectors = np.asarray(embed(texts), dtype=np.float64)
    if vectors.ndim != 2 or vectors.shape[0] != len(texts):
        raise ValueError(f"the embedder returned shape {vectors.shape} for {len(texts)} questions")
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    sims = vectors @ vectors.T
    labels = average_linkage_clusters(1.0 - sims, 1.0 - min_similarity)
    groups: dict[int, list[int]] = defaultdict(list)
    for point, label in enumerate(labels):
        groups[int(label)].append(point)
    out = []
    for points in groups.values():
        weight = np.array([len(members[p]) for p in points], dtype=np.float64)
        typical = sorted(points, key=lambda p: (-float(sims[p, points] @ weight) / weight.sum(), members[p][0]))
        out.append([i for p in typical for i in members[p]])
    out.sort(key=lambda g: (-len(g), min(g)))
    return out


# -- the report ------------------------------------------------------------------------------------------------
def _days(now: datetime, then: datetime | None) -> int | None:
    return None if then is None else max(0, (now - then).days)


def _distinct(citations: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """One citation per number: an answer that quotes a source twice cites it once (``[1]`` twice is one)."""
    seen: dict[Any, Mapping[str, Any]] = {}
    for c in citations:
        seen.setdefault(c.get("n") or c.get("chunk_id"), c)
    return list(seen.values())


def build_report(turns: Sequence[TurnRecord], votes: Iterable[Vote], pages: Sequence[PageInfo],
                 chunk_page: Mapping[str, str], embed: Embed, *, since: datetime, until: datetime,
                 stale_after_days: int = 365, min_similarity: float = GROUP_MIN_SIMILARITY,
                 max_grouped: int = MAX_GROUPED) -> GapReport:
    """The report over given turns, votes and pages (pure apart from ``embed``; :func:`gap_report` reads them).

    An answer's citations count once per citation number (several quotes of one source share a number).
    A citation is attributed to its page through its chunk id (``chunk_page``), else through its doc id
    when exactly one indexed page has it, else to :data:`UNKNOWN_SOURCE` under its own title.

    Args:
        turns: the period's turn records. votes: the feedback on them (others are ignored).
        pages: every indexed page. chunk_page: ``{chunk_id: "source:doc_id"}``.
        embed: texts to an ``(n, dim)`` matrix (for :func:`group_questions`).
        since, until: the period (aware datetimes). stale_after_days: ``STALE_AFTER_DAYS``.
        max_grouped: how many of the most recent refused questions are grouped (:data:`MAX_GROUPED`).
    """
    by_key = {p.key: p for p in pages}
    by_doc: dict[str, list[PageInfo]] = defaultdict(list)
    for p in pages:
        by_doc[p.doc_id].append(p)

    def page_of(c: Mapping[str, Any]) -> PageInfo:
        key = chunk_page.get(str(c.get("chunk_id", "")))
        if key in by_key:
            return by_key[key]
        same = by_doc.get(str(c.get("doc_id", "")), [])
        if len(same) == 1:
            return same[0]
        doc_id = str(c.get("doc_id", ""))
        return PageInfo(UNKNOWN_SOURCE, doc_id, str(c.get("title") or doc_id), str(c.get("url", "")).split("#")[0])

    known = {t.trace_id: t for t in turns}
    by_trace: dict[str, list[Vote]] = defaultdict(list)
    for v in votes:
        if v.trace_id in known:
            by_trace[v.trace_id].append(v)

    # pages cited
    citations: Counter[str] = Counter()
    answers: Counter[str] = Counter()
    cited_pages: dict[str, PageInfo] = {}
    for t in turns:
        seen = set()
        for c in _distinct(t.citations):
            page = page_of(c)
            cited_pages[page.key] = page
            citations[page.key] += 1
            seen.add(page.key)
        answers.update(seen)
    uses = {key: PageUse(page, citations[key], answers[key], _days(until, page.updated_at),
                         page.updated_at is not None and until - page.updated_at >= timedelta(days=stale_after_days))
            for key, page in cited_pages.items()}

    sources = []
    names = sorted({p.source for p in pages} | {p.source for p in cited_pages.values()},
                   key=lambda s: (s == UNKNOWN_SOURCE, s))
    for name in names:
        own = [u for u in uses.values() if u.page.source == name]
        cited = tuple(sorted(own, key=lambda u: (-u.citations, -u.answers, u.page.title.lower())))
        stale = tuple(sorted((u for u in own if u.stale), key=lambda u: (-(u.age_days or 0), u.page.title.lower())))
        turns_citing = sum(1 for t in turns if any(page_of(c).source == name for c in t.citations))
        sources.append(SourceReport(
            source=name, pages=sum(1 for p in pages if p.source == name), citations=sum(u.citations for u in own),
            answers=turns_citing, cited=cited,
            never_cited=tuple(p for p in pages if p.source == name and p.key not in uses), stale=stale))

    # refused questions, grouped
    refused = [t for t in turns if t.outcome == "refused"]
    grouped = refused[-max_grouped:] if max_grouped > 0 else []  # turns come oldest first
    groups = []
    for idx in group_questions([t.question for t in grouped], embed, min_similarity):
        members = [grouped[i] for i in idx]
        examples: list[str] = []
        seen_wordings: set[str] = set()
        for t in members:
            if _normal(t.question) not in seen_wordings and len(examples) < MAX_EXAMPLES:
                seen_wordings.add(_normal(t.question))
                examples.append(t.question)
        reasons = tuple(r for r, _ in Counter(t.reason for t in members if t.reason).most_common())
        times = [t.created_at for t in members if t.created_at is not None]
        groups.append(RefusedGroup(len(members), tuple(examples), reasons, max(times) if times else None))

    # answers marked unhelpful
    unhelpful = []
    for trace_id, vs in by_trace.items():
        down = [v for v in vs if v.value == "not_helpful"]
        if not down:
            continue
        t = known[trace_id]
        cites = []
        for c in _distinct(t.citations):
            page = page_of(c)
            cites.append(CitedPage(int(c.get("n", 0) or 0), page.source, page.doc_id,
                                   str(c.get("title") or page.title), str(c.get("url") or page.url),
                                   str(c.get("section", ""))))
        unhelpful.append(UnhelpfulAnswer(trace_id, t.platform, t.question, t.outcome, t.created_at, tuple(cites),
                                         len(down), tuple(v.comment.strip() for v in down if v.comment.strip())))
    unhelpful.sort(key=lambda u: (-u.votes, u.created_at or since))

    all_votes = [v for vs in by_trace.values() for v in vs]
    return GapReport(
        since=since, until=until, stale_after_days=stale_after_days, questions=len(turns),
        answered=sum(1 for t in turns if t.outcome == "answered"), refused=len(refused),
        helpful=sum(1 for v in all_votes if v.value == "helpful"),
        not_helpful=sum(1 for v in all_votes if v.value == "not_helpful"),
        refused_groups=tuple(groups), unhelpful=tuple(unhelpful), sources=tuple(sources),
        ungrouped=len(refused) - len(grouped))


def gap_report(store: StateStore, manifest: Manifest | None, bm25: StoredChunks | None, embed: Embed, *,
               since: datetime, until: datetime, stale_after_days: int = 365,
               min_similarity: float = GROUP_MIN_SIMILARITY) -> GapReport:
    """Read the period's turns and feedback from ``store`` and the pages from the index (its manifest and a
    store of its chunks, ``bm25``; none when either is None: nothing indexed yet), then :func:`build_report`.

    Raises:
        ValueError: for naive ``since`` or ``until``, or ``since`` not before ``until``.
        StateStoreError, IndexCorruptError: when the state store or the index cannot be read.
    """
    if since >= until:
        raise ValueError("the report's period must start before it ends")
    turns = store.turn_records(since=since, until=until)
    rows = store.feedback_for_traces([t.trace_id for t in turns])
    votes = [Vote(r["trace_id"], r["value"], r.get("comment") or "") for r in rows]
    pages, chunk_page = index_pages(manifest, bm25) if manifest is not None and bm25 is not None else ([], {})
    return build_report(turns, votes, pages, chunk_page, embed, since=since.astimezone(timezone.utc),
                        until=until.astimezone(timezone.utc), stale_after_days=stale_after_days,
                        min_similarity=min_similarity)


def report_from_settings(settings: Settings, since: datetime, until: datetime,
                         embed: Embed | None = None) -> GapReport:
    """``chatops report``'s read: the state store at ``settings.state_url``, the configured index (its manifest
    and stored chunks only, :func:`app.wiring.open_index_chunks`, so it works while ``chatops serve`` runs and
    makes no local files for a shared index; no pages when nothing was indexed yet), and the configured
    embedding model (``embed``, when given, replaces it for the grouping).

    Raises:
        ValueError, StateStoreError, IndexCorruptError: as :func:`gap_report`.
        IndexLockedError, IndexOutdatedError, IndexUnavailableError: as :func:`app.wiring.open_index_chunks`.
    """
    from .wiring import build_embedder, open_index_chunks, open_index_manifest

    embedder = build_embedder(settings)
    store = StateStore(settings.state_url)
    manifest = bm25 = None
    try:
        manifest = open_index_manifest(settings, create=False)
        if manifest is not None and manifest.counts()[0]:
            bm25 = open_index_chunks(settings, embedder.dim)
        return gap_report(store, manifest, bm25, embed or embedder.embed, since=since, until=until,
                          stale_after_days=settings.stale_after_days)
    finally:
        for part in (bm25, manifest, store, embedder.cache):
            if part is not None:
                part.close()
