"""The composition root: settings in, ready-to-use index, tools and agent out."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, overload

from agent.agent import Agent
from agent.gate import GateConfig
from agent.planner import ActionConfig, FallbackPlanner, Planner, RuleBasedPlanner
from core.access import Viewer
from index.embeddings import CachedEmbedder, Embedder, EmbeddingCache, OnnxMiniLMEmbedder, OpenAIEmbedder
from core.errors import EmbeddingError
from index.knowledge import MANIFEST_FILE, KnowledgeIndex, StoredChunks, open_manifest, open_stored_chunks
from index.manifest import Manifest
from tools.base import ToolRegistry
from tools.knowledge_search import KnowledgeSearch, SearchConfig

from .access import AccessPolicy, access_policy, unreadable_citations
from .settings import Settings

if TYPE_CHECKING:  # the LLM planner is imported when it is built (settings.llm_enabled)
    from agent.llm.planner import LLMPlanner

__all__ = ["build_embedder", "open_index", "open_index_manifest", "open_index_chunks", "build_agent",
           "register_action_tools", "Runtime"]

log = logging.getLogger(__name__)


def build_embedder(settings: Settings, verify_cache: bool = False, lazy_model: bool = False,
                   model: Embedder | None = None) -> CachedEmbedder:
    """The configured embedder wrapped in the on-disk embedding cache.

    ``verify_cache=True`` (indexing runs, through :func:`open_index` with ``repair``) checks the whole
    cache file on open and rebuilds a damaged one; other commands skip that full read. ``lazy_model=True``
    (``chatops ask`` and ``chat``) loads the local model on the first text the cache does not hold, not now, and
    without optimising its graph (a few texts to embed: see :class:`index.embeddings.OnnxMiniLMEmbedder`).
    ``model``: an embedder already built from these settings (``chatops ask``'s warm worker keeps one loaded),
    used instead of building one; the cache is opened anew.

    Raises:
        EmbeddingError: when an API model is named but no OpenAI key or base URL is set.
    """
    inner: Embedder
    if model is not None:
        inner = model
    elif settings.embedding_model in ("", "local"):
        # chatops ask embeds a few texts: a graph not optimised loads 0.3-0.7 s sooner and runs them as fast
        inner = OnnxMiniLMEmbedder(lazy=lazy_model, optimize=not lazy_model)
    else:
        if not (settings.openai_api_key or settings.openai_base_url):
            raise EmbeddingError(f"EMBEDDING_MODEL={settings.embedding_model} needs OPENAI_API_KEY or "
                                 "OPENAI_BASE_URL; set one, or EMBEDDING_MODEL=local")
        from openai import OpenAI

        client = OpenAI(api_key=settings.openai_api_key or "unused", base_url=settings.openai_base_url,
                        timeout=30, max_retries=3)
        inner = OpenAIEmbedder(settings.embedding_model, client)
    return CachedEmbedder(inner, EmbeddingCache(settings.embedding_cache_path, verify=verify_cache))


def _shared_manifest_database(settings: Settings) -> str | None:
    """The state store's URL when the index is shared (``QDRANT_URL``: its manifest lives in the state
    database), migrated to the newest revision first, so every command may open the index whether or not it
    opened the state store before; ``None`` for an embedded index (its manifest is a file).

    Raises:
        StateStoreError: the database cannot be reached or migrated (SchemaTooNewError: a newer chatops).
    """
    if not settings.qdrant_url:
        return None
    from state.migrate import upgrade

    upgrade(settings.state_url)  # idempotent: nothing to do when the state store already migrated it
    return settings.state_url


def open_index(settings: Settings, embedder: CachedEmbedder | None = None, repair: bool = False,
               full: bool = False, lazy_model: bool = False) -> KnowledgeIndex:
    """Open (or create) the knowledge index: embedded under the data dir, or shared (``QDRANT_URL``: the
    collection ``QDRANT_COLLECTION`` on that server, its manifest in the state database, ``DATABASE_URL`` or the
    data dir's ``state.sqlite``; see :class:`index.knowledge.KnowledgeIndex`).

    ``repair=True`` (indexing runs) moves a damaged store aside instead of raising; the run's
    reconciliation rebuilds it (see :class:`index.knowledge.KnowledgeIndex`); it also verifies the
    embedding cache on open (see :func:`build_embedder`). ``full`` (with ``repair``: a full run) also moves a
    damaged manifest aside and starts it empty (``rebuild_manifest``). ``lazy_model``: as :func:`build_embedder`.
    """
    embedder = embedder or build_embedder(settings, verify_cache=repair, lazy_model=lazy_model and not repair)
    return KnowledgeIndex(settings.index_dir, embedder,
                          qdrant_url=settings.qdrant_url, qdrant_api_key=settings.qdrant_api_key,
                          collection=settings.qdrant_collection, keyword_index=settings.keyword_index, repair=repair,
                          database_url=_shared_manifest_database(settings), rebuild_manifest=repair and full)


@overload
def open_index_manifest(settings: Settings, create: Literal[True] = True) -> Manifest: ...


@overload
def open_index_manifest(settings: Settings, create: bool) -> Manifest | None: ...


def open_index_manifest(settings: Settings, create: bool = True) -> Manifest | None:
    """The index's manifest alone, for reads that need no store (``chatops status``, ``sources list``,
    ``report``): the state database's for a shared index (``QDRANT_URL``, see :func:`index.knowledge.open_manifest`),
    else ``index/manifest.sqlite`` under the data dir.

    Args:
        create: when False, ``None`` for an embedded index never created (no manifest file), instead of
            creating an empty one.

    Raises:
        IndexCorruptError, DiskFullError, IndexUnavailableError: as :class:`index.manifest.Manifest`.
        StateStoreError: the state database cannot be reached or migrated.
    """
    if not (create or settings.qdrant_url or (settings.index_dir / MANIFEST_FILE).is_file()):
        return None
    return open_manifest(settings.index_dir, settings.qdrant_url, _shared_manifest_database(settings),
                         settings.qdrant_collection)


def open_index_chunks(settings: Settings, dim: int) -> StoredChunks | None:
    """The index's stored chunks alone (titles, links, dates), for reads beside a running ``chatops serve``
    (``chatops report``): the shared collection (``QDRANT_URL``, ``QDRANT_COLLECTION``; no local files), else the
    keyword store's files under the data dir (``None`` when never made), as
    :func:`index.knowledge.open_stored_chunks`. ``dim`` is the embedder's vector size.

    Raises:
        IndexCorruptError, IndexLockedError, IndexOutdatedError, IndexUnavailableError: as
        :func:`index.knowledge.open_stored_chunks`.
    """
    return open_stored_chunks(settings.index_dir, dim, settings.qdrant_url, settings.qdrant_api_key,
                              settings.qdrant_collection, settings.keyword_index)


@dataclass(slots=True)
class Runtime:
    """Everything a command needs, built once.

    ``access`` is who sees what (:class:`app.access.AccessPolicy`, for :func:`app.turns.build_turn`):
    built from the settings and the sources file's ``groups:``; a server that has the state store
    sets its ``groups_of`` (the groups the sources reported).
    """

    settings: Settings
    index: KnowledgeIndex
    search: KnowledgeSearch
    tools: ToolRegistry
    agent: Agent
    access: AccessPolicy = AccessPolicy()

    def unreadable_citations(self, citations: Iterable[Any], viewer: Viewer) -> list[Any]:
        """The citations whose stored chunk ``viewer`` may not read (a chunk that is gone counts as
        unreadable): :func:`app.access.unreadable_citations` over this index, for "Share in channel"."""
        return unreadable_citations(citations, viewer, self.index.dense.get)

    def close(self) -> None:
        """Release the index and whatever the action tools opened (the calendar backend)."""
        self.index.close()
        for tool in self.tools.actions():
            tool.close()


def graph_options(settings: Settings) -> dict[str, str | None]:
    """The Microsoft 365 backend's keyword arguments (:class:`tools.calendar.microsoft.GraphCalendar`) from the
    ``GRAPH_*`` settings."""
    return {"tenant_id": settings.graph_tenant_id, "client_id": settings.graph_client_id,
            "client_secret": settings.graph_client_secret.get_secret_value() if settings.graph_client_secret else "",
            "api_endpoint": settings.graph_api_endpoint, "authority_host": settings.graph_authority_host,
            "ca_bundle": settings.graph_ca_bundle}


def register_action_tools(tools: ToolRegistry, settings: Settings) -> ToolRegistry:
    """Register the side-effect tools (:mod:`tools.actions`; the planners only propose them, and
    :mod:`app.actions` runs a confirmed one once): one line each, the only place outside ``tools/``
    that names them. Building them opens nothing; the calendar backend opens on first use, and Jira's client on the
    first ticket request (``ticket.create`` is registered only when ``JIRA_URL`` and its credentials are set)."""
    from tools.calendar.factory import calendar_tool
    from tools.reminder import ReminderCreate

    tools.register(calendar_tool(
        settings.calendar_backend, default_duration_minutes=settings.calendar_default_duration_minutes,
        state_url=settings.state_url, ics_dir=settings.ics_dir,
        service_account_file=settings.google_service_account_file, oauth_token_file=settings.google_oauth_token_file,
        calendar_id=settings.google_calendar_id, api_endpoint=settings.google_calendar_api_endpoint,
        graph=graph_options(settings)))
    tools.register(ReminderCreate())
    if settings.jira_configured:
        from tools.jira.factory import jira_tool

        tools.register(jira_tool(
            settings.jira_url or "", deployment=settings.jira_deployment, email=settings.jira_email,
            api_token=settings.jira_api_token.get_secret_value() if settings.jira_api_token else "",
            pat=settings.jira_pat.get_secret_value() if settings.jira_pat else "",
            default_project=settings.jira_default_project, default_issue_type=settings.jira_issue_type,
            timeout_seconds=settings.jira_timeout_seconds))
    return tools


def purge_calendar(settings: Settings, before: datetime) -> int | None:
    """Retention of the local calendar (``CALENDAR_BACKEND=local``): delete its events, rows and ``.ics``
    files, that ended before ``before`` (aware datetime); ``None`` for Google (its events are Google's)."""
    if settings.calendar_backend != "local":
        return None
    from tools.calendar.factory import purge_local_calendar

    return purge_local_calendar(settings.state_url, settings.ics_dir, before)


def build_agent(settings: Settings, index: KnowledgeIndex | None = None, retriever: str = "hybrid",
                lazy_model: bool = False) -> Runtime:
    """Index, the tool registry with ``knowledge.search`` and the action tools
    (:func:`register_action_tools`), and the agent with the rule-based planner. ``lazy_model``: the local
    embedding model is loaded on the first text the embedding cache does not hold (one-off CLI questions)."""
    index = index or open_index(settings, lazy_model=lazy_model)
    search = KnowledgeSearch(index, SearchConfig(rrf_k=settings.rrf_k, dense_weight=settings.rrf_dense_weight,
                                                 bm25_weight=settings.rrf_bm25_weight))
    gate = GateConfig(min_citations=settings.min_citations, relevance_floor=settings.relevance_floor,
                      strong_single=settings.single_source_min_cosine)
    from agent.calibration import gate_config, index_calibration

    gate = gate_config(gate, index_calibration(index.manifest, index.path))  # the corpus's own operating point
    tools = ToolRegistry()
    tools.register(search)
    register_action_tools(tools, settings)
    actions = ActionConfig(default_timezone=settings.default_timezone)
    rules = RuleBasedPlanner(tools, gate=gate, retriever=retriever, actions=actions)
    planner: Planner = build_llm_planner(settings, tools, rules) if settings.llm_enabled else rules
    agent = Agent(planner, min_citations=settings.min_citations, max_question_chars=settings.max_question_chars)
    return Runtime(settings, index, search, tools, agent, access_policy(settings))


#: What the LLM client found out about its server (tool calling, structured output, speed), in the data dir.
LLM_SERVERS_FILE = "llm-servers.json"


def build_llm_planner(settings: Settings, tools: ToolRegistry, fallback: FallbackPlanner) -> LLMPlanner:
    """The tool-first LLM planner over ``tools``, falling back to ``fallback`` (the rule-based one)."""
    from agent.llm.client import LLMClient, build_openai_client
    from agent.llm.memory import ServerMemory
    from agent.llm.planner import LLMPlanner, LLMPlannerConfig

    client = build_openai_client(settings.openai_api_key, settings.openai_base_url, settings.azure_openai_endpoint,
                                 settings.azure_openai_api_version, timeout=settings.turn_budget_ms / 1000)
    llm = LLMClient(client, max_attempts=settings.llm_max_attempts, price_in=settings.llm_price_in,
                    price_out=settings.llm_price_out, json_schema=settings.llm_json_schema, tools=settings.llm_tools,
                    memory=ServerMemory(settings.chatops_data_dir / LLM_SERVERS_FILE))
    config = LLMPlannerConfig(planner_model=settings.planner_model, answer_model=settings.answer_model,
                              budget_ms=settings.turn_budget_ms, budget_tokens=settings.turn_budget_tokens,
                              budget_calls=settings.turn_budget_calls,
                              fallback_reserve_ms=settings.llm_fallback_reserve_ms)
    return LLMPlanner(tools, llm, fallback, config)
