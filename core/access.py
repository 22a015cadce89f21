"""Who may read a page: its effective read access, and who is asking (issue 11).

The model (fail closed throughout):

- Every document, and so every chunk, carries an :class:`Access`, resolved at index time by its
  source: ``public`` (every employee may read it) and a set of **principals** that may, each
  ``user:<e-mail>`` (lower case) or ``group:<source>/<group>`` (lower case), as :func:`user` and
  :func:`group` spell them. A page whose permissions could not be read is :meth:`Access.nobody`
  (``unresolved`` says why): readable by nobody, never cited, counted in ``chatops status``.
- A :class:`Viewer` is who will see an answer: the principals of the asker (their e-mail and their
  groups) and whether only public pages may be used (``public_only``: a channel audience, a guest, an
  asker whose e-mail is unknown).
- A viewer may read a chunk when the chunk is public, or (unless ``public_only``) when one of the
  viewer's principals is in the chunk's set. :meth:`Access.tokens` and :meth:`Viewer.tokens` are the
  two sides of that test as plain index terms, so the stores can apply it inside retrieval as a
  keyword pre-filter (Qdrant payload ``MatchAny``, a Whoosh ``Or`` of ``Term`` filters): the chunk may
  be read when the two token sets intersect.
- A viewer may also carry a **scope** (:attr:`Viewer.sources`, from the ``channels:`` of the sources
  file): the sources the conversation is limited to. It is no access right (it never widens what may
  be read), but the stores apply it the same way, as one more condition of the pre-filter inside the
  query (the chunk's source is one of them), never as a cut of results already ranked.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

__all__ = ["Access", "Viewer", "PUBLIC_TOKEN", "user", "group", "normalise"]

#: The index term of a public chunk.
PUBLIC_TOKEN = "public"


def user(email: str) -> str:
    """The principal of a person: ``user:`` and the e-mail, trimmed and lower-cased.

    Raises:
        ValueError: for an empty e-mail.
    """
    e = (email or "").strip().lower()
    if not e:
        raise ValueError("a user principal needs an e-mail address")
    return f"user:{e}"


def group(source: str, name: str) -> str:
    """The principal of a group of a source: ``group:<source>/<name>``, lower-cased.

    Raises:
        ValueError: for an empty source or group name.
    """
    s, n = (source or "").strip().lower(), (name or "").strip().lower()
    if not s or not n:
        raise ValueError("a group principal needs a source and a group name")
    return f"group:{s}/{n}"


def normalise(principal: str) -> str:
    """A principal as stored and compared: ``user:``/``group:`` prefix kept, the rest trimmed and lower-cased.

    Raises:
        ValueError: when ``principal`` is neither ``user:...`` nor ``group:.../...`` (unknown formats are
            refused, never widened to "everyone").
    """
    p = (principal or "").strip()
    kind, _, rest = p.partition(":")
    kind = kind.lower()
    if kind == "user" and rest.strip():
        return user(rest)
    if kind == "group" and "/" in rest:
        src, _, name = rest.partition("/")
        return group(src, name)
    raise ValueError(f"unknown principal {principal!r}: expected user:<e-mail> or group:<source>/<name>")


@dataclass(frozen=True, slots=True)
class Access:
    """The effective read access of a document (and of each of its chunks).

    Attributes:
        public: every employee may read it.
        principals: who else may read it (normalised ``user:``/``group:`` strings).
        unresolved: why the access could not be read ("" when it was); an unresolved document is
            readable by nobody, whatever the other fields say.
    """

    public: bool = False
    principals: frozenset[str] = field(default_factory=frozenset)
    unresolved: str = ""

    @classmethod
    def everyone(cls) -> "Access":
        """Public: every employee may read it."""
        return cls(public=True)

    @classmethod
    def nobody(cls, reason: str) -> "Access":
        """Readable by nobody because the permissions could not be read (``reason`` says why)."""
        return cls(unresolved=reason or "permissions could not be read")

    @classmethod
    def only(cls, principals: Iterable[str]) -> "Access":
        """Restricted to ``principals`` (normalised; raises ``ValueError`` for an unknown format)."""
        return cls(principals=frozenset(normalise(p) for p in principals))

    @property
    def resolved(self) -> bool:
        """Whether the permissions were read (an unresolved document is readable by nobody)."""
        return not self.unresolved

    def tokens(self) -> tuple[str, ...]:
        """The index terms of this access, sorted: ``("public",)`` for a public page, else its principals;
        ``()`` when unresolved (matches no viewer)."""
        if self.unresolved:
            return ()
        if self.public:
            return (PUBLIC_TOKEN,)
        return tuple(sorted(self.principals))

    def readable_by(self, viewer: "Viewer") -> bool:
        """The same test the stores apply as a pre-filter, for one document."""
        return bool(set(self.tokens()) & set(viewer.tokens()))


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who will see an answer: the asker's principals and the audience's limit.

    Attributes:
        principals: the asker's ``user:<e-mail>`` and ``group:`` principals (normalised); empty when the
            e-mail is unknown.
        public_only: only public pages may be used (a channel audience, a guest, an unknown asker).
        audience: ``"dm"`` (only the asker sees the answer) or ``"channel"`` (others may), for the trace.
        sources: the scope: only chunks of these sources are searched (the ``channels:`` of the sources
            file); None: every source. An empty set matches nothing (fail closed).
    """

    principals: frozenset[str] = field(default_factory=frozenset)
    public_only: bool = True
    audience: str = "channel"
    sources: frozenset[str] | None = None

    @classmethod
    def public(cls, audience: str = "channel") -> "Viewer":
        """A viewer who may see public pages only."""
        return cls(frozenset(), True, audience)

    @classmethod
    def person(cls, principals: Iterable[str], audience: str = "dm") -> "Viewer":
        """A viewer with their own access (``principals`` normalised; raises ``ValueError`` for an unknown format)."""
        return cls(frozenset(normalise(p) for p in principals), False, audience)

    def tokens(self) -> tuple[str, ...]:
        """The index terms this viewer matches, sorted: ``public`` plus, unless ``public_only``, their principals."""
        if self.public_only:
            return (PUBLIC_TOKEN,)
        return tuple(sorted({PUBLIC_TOKEN, *self.principals}))

    def scoped(self, sources: Iterable[str] | None) -> "Viewer":
        """This viewer limited to ``sources`` (None: unchanged). A viewer already scoped keeps only the
        sources in both scopes: a scope only ever narrows."""
        if sources is None:
            return self
        wanted = frozenset(sources)
        return replace(self, sources=wanted if self.sources is None else self.sources & wanted)

    def cache_key(self) -> str:
        """A key that is equal exactly when two viewers may read the same chunks (for caches): the
        access tokens and, for a scoped viewer, its sources."""
        key = "\x1f".join(self.tokens())
        if self.sources is not None:
            key += "\x1e" + "\x1f".join(sorted(self.sources))
        return key
