"""Settings from environment variables (and an optional ``.env`` file), via pydantic-settings.

Every setting needs a Field description: the settings reference (docs/reference/settings.md) is generated
from this model by docs/hooks/reference.py, and the docs build fails on a setting without one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, ValidationInfo, field_validator
from pydantic import SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "machine_timezone", "at_a_terminal", "setting_variables"]


class Settings(BaseSettings):
    """All chatops settings. Field names map to upper-case environment variables."""

    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore",
                                      case_sensitive=False)

    chatops_data_dir: Path = Field(Path(".chatops"), description="Where indexes, caches and state live.")
    chatops_cache_dir: Path | None = Field(None, description="Embedding cache folder; default DATA_DIR/cache.")
    chatops_log_level: str = Field("INFO", description="Python log level (unset: WARNING for ask, chat and eval).")
    chatops_log_format: str = Field("auto", description="json, text, or auto (text on a terminal, else JSON).")
    otel_exporter_otlp_endpoint: str | None = Field(None, description="OpenTelemetry collector's OTLP/HTTP base "
                                                    "URL (e.g. http://otel-collector:4318); spans of turns, searches, "
                                                    "LLM calls and syncs go to ENDPOINT/v1/traces. Unset: no tracing.")
    otel_service_name: str = Field("chatops", description="The service.name of the exported spans.")
    ask_worker: Literal["auto", "on", "off"] = Field(
        "auto", description="chatops ask's warm worker, a background process per data dir that keeps the imports "
        "and the embedding model loaded and answers the next questions (docs/reference/cli.md): auto (when stdin "
        "and stdout are a terminal), on (scripts too), off. chatops ask --no-worker turns it off for one question. "
        "chatops index and sync start it when they finish, and chatops ask --start-worker starts it (unless off), so "
        "the first question of a session finds it warm.")
    ask_worker_idle_seconds: float = Field(300.0, gt=0, description="The ask worker exits after this many seconds "
                                           "without a question.")
    embedding_model: str = Field("local", description="'local' (bundled all-MiniLM-L6-v2 int8 ONNX) or an "
                                 "OpenAI embeddings model name such as text-embedding-3-small.")
    openai_api_key: str | None = Field(None, description="OpenAI (or compatible) API key.")
    openai_base_url: str | None = Field(None, description="OpenAI-compatible endpoint base URL.")
    chatops_screen_unexplained: bool = Field(
        True, description="The fail-closed credential tier of the reply screen: a sentence naming a credential (a "
        "password, a code, a key, a door, a login) is withheld unless every other word in it is explained as language "
        "or an innocent shape (a URL, a version, a date, a name before a noun...), so a value given in a phrasing the "
        "rules do not read is not quoted either (docs/explanation/evaluation.md, round 8). On by default; 0 turns it "
        "off (only the rules then screen credentials).")
    chatops_sources: str = Field("", description="Sources to index (spec strings separated by commas), e.g. "
                                 "folder:./wiki?name=handbook. Used by chatops serve and /kb reindex.")
    database_url: str | None = Field(None, description="State store (SQLAlchemy URL); SQLite under the data dir "
                                     "when unset, e.g. postgresql+psycopg://user@host:5432/chatops.")
    qdrant_url: str | None = Field(None, description="Qdrant server URL: the shared index, one collection holding "
                                   "the dense and the BM25 vectors (no local store files); unset: the embedded "
                                   "index under the data dir. file:PATH opens the shared layout in Qdrant's local "
                                   "mode (one process; for tests and the eval).")
    qdrant_api_key: str | None = Field(None, description="API key for QDRANT_URL.")
    qdrant_collection: str = Field("chunks", min_length=1, description="The shared index's Qdrant collection "
                                   "(with QDRANT_URL).")
    keyword_index: Literal["auto", "whoosh", "qdrant"] = Field(
        "auto", description="The BM25 index: 'auto' (Whoosh files under the data dir without QDRANT_URL, the "
        "shared collection's sparse vector with it), 'whoosh' (embedded only: refused with QDRANT_URL) or 'qdrant' "
        "(with QDRANT_URL the same as auto; without, a sparse vector in a local collection chunks-bm25 under the "
        "data dir beside the embedded dense store, one process, to compare keyword engines).")
    min_citations: int = Field(2, ge=1, le=10, description="Distinct supporting passages an answer needs.")
    relevance_floor: float = Field(0.43, ge=-1, le=1, description="Cosine similarity a passage needs to count as support.")
    single_source_min_cosine: float = Field(0.55, ge=-1, le=1,
                                            description="Cosine at which one passage may answer alone.")
    rrf_k: int = Field(60, ge=1, description="Reciprocal rank fusion constant.")
    rrf_dense_weight: float = Field(1.0, ge=0, description="RRF weight of dense retrieval.")
    rrf_bm25_weight: float = Field(0.6, ge=0, description="RRF weight of BM25.")
    max_question_chars: int = Field(4000, ge=100, description="Longer messages are truncated.")
    stale_after_days: int = Field(365, ge=1, description="The knowledge-gap report (chatops report, /kb report) "
                                  "lists cited pages not updated for this many days as stale.")

    # Connectors
    chatops_config: Path | None = Field(None, description="The sources file (YAML); unset: ./chatops.yml when it "
                                        "exists. Credentials in it are names of environment variables.")
    chatops_sync_interval: str = Field("1h", description="Schedule of sources that declare none (CHATOPS_SOURCES "
                                       "specs, YAML sources without schedule), e.g. 30m or 2h; 'off' = on demand only.")

    @field_validator("chatops_sync_interval")
    @classmethod
    def _sync_interval(cls, v: str) -> str:
        from connectors.config import parse_interval

        v = v.strip()
        if v.lower() not in {"off", "none", "0", ""}:
            parse_interval(v)
        return v

    # Permissions (issue 11)
    channel_access: Literal["public", "members"] = Field(
        "public", description="What answers posted where others read them (channels, group DMs, Teams channels "
        "and group chats) may cite: 'public' pages only, or 'members': what every member may read (conversations "
        "of at most CHANNEL_MEMBERS_MAX members; larger ones are public only). DMs use the asker's own access.")
    channel_members_max: int = Field(50, ge=1, le=1000, description="With CHANNEL_ACCESS=members, conversations "
                                     "with more members than this use public pages only.")

    # Microsoft Teams (the Bot Framework reads these names as they are)
    microsoft_app_id: str = Field("", validation_alias=AliasChoices("MicrosoftAppId", "MICROSOFT_APP_ID"),
                                  description="Azure Bot's app (client) id; empty: Teams answers 401 unless "
                                  "TEAMS_ALLOW_UNAUTHENTICATED=true.")
    microsoft_app_password: SecretStr | None = Field(None, validation_alias=AliasChoices(
        "MicrosoftAppPassword", "MICROSOFT_APP_PASSWORD"), description="The app's client secret.")
    microsoft_app_tenant_id: str = Field("", validation_alias=AliasChoices("MicrosoftAppTenantId",
                                         "MICROSOFT_APP_TENANT_ID"), description="Tenant id (SingleTenant apps).")
    microsoft_app_type: str = Field("MultiTenant", validation_alias=AliasChoices("MicrosoftAppType",
                                    "MICROSOFT_APP_TYPE"), description="MultiTenant, SingleTenant or UserAssignedMSI.")
    teams_allow_unauthenticated: bool = Field(False, description="Serve /api/messages without Bot Framework "
                                              "authentication when no app id is set (Emulator, tests only).")
    teams_admin_ids: str = Field("", description="AAD object ids allowed to run Teams admin commands, comma-separated.")
    teams_inline_reply_seconds: float = Field(
        10.0, gt=0, lt=15, description="A Teams turn that takes longer is answered proactively (the request ends, "
        "the typing indicator stays, the answer follows); below Teams' 15 s limit for a bot's answer.")
    teams_streaming: bool = Field(True, description="Stream answers in Teams personal chats (informative updates, "
                                  "the text, then the final message); off: the typing indicator and the card alone.")
    teams_app_name: str = Field("chatops", max_length=30, description="The bot's name in the Teams app package "
                                "(make teams-package; Teams allows 30 characters).")
    teams_bot_domain: str = Field("", description="The host name the bot is served on (no scheme), for the Teams "
                                  "app package's validDomains and developer links (make teams-package).")
    teams_developer_name: str = Field("", description="Who publishes the Teams app (its developer.name); default "
                                      "the app name.")

    # The privacy statement and terms of use (GET /privacy, /terms of chatops serve; the Teams package's links)
    privacy_url: str | None = Field(None, description="Your own privacy statement (an https URL): the Teams app "
                                    "package links it and /privacy redirects there; unset: the package links "
                                    "https://TEAMS_BOT_DOMAIN/privacy, which chatops serve serves from "
                                    "PRIVACY_TEXT_FILE or a short default text naming the retention settings.")
    terms_url: str | None = Field(None, description="Your own terms of use (an https URL): the Teams app package "
                                  "links it and /terms redirects there; unset: https://TEAMS_BOT_DOMAIN/terms, "
                                  "served from TERMS_TEXT_FILE or a short default text.")
    privacy_text_file: Path | None = Field(None, description="A UTF-8 file whose text chatops serve serves at "
                                           "/privacy (a .html or .htm file as HTML, any other as plain text); unset: "
                                           "the default text.")
    terms_text_file: Path | None = Field(None, description="A UTF-8 file whose text chatops serve serves at /terms "
                                         "(.html or .htm as HTML, else plain text); unset: the default text.")

    @field_validator("privacy_url", "terms_url")
    @classmethod
    def _https(cls, v: str | None, info: ValidationInfo) -> str | None:
        from urllib.parse import urlsplit

        name = info.field_name or ""  # pydantic names the field for a field validator
        v = (v or "").strip() or None
        if v is not None and (urlsplit(v).scheme != "https" or not urlsplit(v).netloc):
            raise ValueError(f"{name.upper()} must be an https:// URL (Teams links only https pages), "
                             f"e.g. https://intranet.example.com/chatops/{name.split('_')[0]}; got {v[:80]!r}")
        return v

    # LLM planner (on when OPENAI_API_KEY, OPENAI_BASE_URL or AZURE_OPENAI_ENDPOINT is set)
    planner_model: str = Field("gpt-4o-mini", description="Model for routing, rewriting, reflection and checks.")
    answer_model: str = Field("gpt-4o-mini", description="Model that writes the final answer.")
    azure_openai_endpoint: str | None = Field(None, description="Azure OpenAI endpoint; with it the Azure client is "
                                              "used (model names are deployment names).")
    azure_openai_api_version: str = Field("2024-10-21", description="Azure OpenAI API version.")
    turn_budget_ms: int = Field(20000, ge=1000, description="Wall-time budget of one LLM turn, in milliseconds.")
    turn_budget_tokens: int = Field(12000, ge=500, description="Token budget (prompt + completion) of one LLM turn.")
    turn_budget_calls: int = Field(8, ge=2, le=50, description="LLM calls allowed in one turn.")
    llm_tools: Literal["auto", "on", "off"] = Field(
        "auto", description="Tool calling for routing: auto (found out on first use: a 400 on tools or a one-time "
        "probe showing the model ignores them switches to a JSON routing decision, remembered per server and model), "
        "on (trust the server), off (always route by a JSON decision, e.g. llama.cpp's Python server).")
    llm_json_schema: Literal["auto", "on", "off"] = Field(
        "auto", description="Structured outputs: auto (response_format json_schema; on 400/422/500 json_object with "
        "the schema, then JSON asked for in the prompt; remembered per server and model), on (always json_schema), "
        "off (no response_format: JSON asked for in the prompt).")
    llm_fallback_reserve_ms: int = Field(3000, ge=0, description="Milliseconds of the turn budget kept for the "
                                         "extractive answer when the model is slow or fails.")
    llm_max_attempts: int = Field(3, ge=1, le=10, description="Tries per LLM call, retries included (429, 5xx, "
                                  "timeouts, connection errors).")
    llm_price_in: float = Field(0.0, ge=0, description="USD per 1,000 prompt tokens, for the cost in traces.")
    llm_price_out: float = Field(0.0, ge=0, description="USD per 1,000 completion tokens, for the cost in traces.")

    @property
    def llm_enabled(self) -> bool:
        """True when an LLM endpoint is configured."""
        return bool(self.openai_api_key or self.openai_base_url or self.azure_openai_endpoint)

    # Slack
    slack_bot_token: SecretStr | None = Field(None, description="Bot token (xoxb-...) of the Slack app; "
                                              "chatops serve needs it.")
    slack_signing_secret: SecretStr | None = Field(None, description="Signing secret of the Slack app; verifies "
                                                   "every request to /slack/events (HTTP mode).")
    slack_app_token: SecretStr | None = Field(None, description="App-level token (xapp-...) with connections:write, "
                                              "for chatops serve --socket-mode.")
    slack_api_url: str = Field("https://slack.com/api/", description="Base URL of Slack's Web API (tests point it "
                               "at a stand-in).")
    admin_user_ids: str = Field("", description="Slack user ids allowed to run admin commands (/kb reindex), "
                                "separated by commas.")
    slack_stream_answers: bool = Field(True, description="Stream answers into their Slack thread (chat.startStream, "
                                       "appendStream, stopStream); false posts each answer whole (chat.postMessage).")

    # Actions
    calendar_backend: Literal["local", "google", "microsoft"] = Field(
        "local", description="Where calendar.create books: 'local' (state database + .ics files), 'google' (Google "
                             "Calendar) or 'microsoft' (Microsoft 365 through Microsoft Graph).")
    default_timezone: str = Field("UTC", description="IANA time zone for requesters whose zone is unknown "
                                  "(a Slack or Teams user's own zone wins). Unset, the servers use UTC and the "
                                  "commands run at a terminal (ask, chat, actions, reminders) the machine's zone "
                                  "(TZ, else /etc/localtime).")
    calendar_default_duration_minutes: int = Field(30, ge=5, le=480, description="Length of a meeting whose "
                                                   "request names none.")
    action_ttl_minutes: int = Field(60, ge=1, le=7 * 24 * 60, description="How long a preview can be confirmed.")
    calendar_ics_dir: Path | None = Field(None, description="Where the local calendar writes <event id>.ics; "
                                          "default DATA_DIR/calendar.")
    google_service_account_file: str | None = Field(None, description="Service account key (JSON) with domain-wide "
                                                    "delegation; books as the requester's e-mail.")
    google_oauth_token_file: str | None = Field(None, description="OAuth authorized-user token (JSON); books in "
                                                "that user's calendar.")
    google_calendar_id: str = Field("primary", description="Google calendar to write to.")
    google_calendar_api_endpoint: str | None = Field(None, description="Base URL override of the Calendar API "
                                                     "(e.g. http://127.0.0.1:8080/calendar/v3/ for a stand-in).")
    graph_tenant_id: str = Field("", description="CALENDAR_BACKEND=microsoft: the Microsoft Entra tenant (directory) "
                                 "id or domain of the app registration that books meetings.")
    graph_client_id: str = Field("", description="CALENDAR_BACKEND=microsoft: the app registration's application "
                                 "(client) id; it has the Calendars.ReadWrite application permission.")
    graph_client_secret: SecretStr | None = Field(None, description="CALENDAR_BACKEND=microsoft: a client secret of "
                                                  "that app registration.")
    graph_api_endpoint: str = Field("https://graph.microsoft.com/v1.0", description="Microsoft Graph's base URL "
                                    "with its version (a national cloud's, e.g. https://graph.microsoft.us/v1.0).")
    graph_authority_host: str = Field("https://login.microsoftonline.com", description="The Microsoft sign-in host "
                                      "(a national cloud's, e.g. https://login.microsoftonline.us).")
    graph_ca_bundle: str | None = Field(None, description="A PEM file of CA certificates to trust for Microsoft "
                                        "sign-in and Graph instead of the system's (a TLS-inspecting proxy).")

    # Jira (ticket.create; registered only when JIRA_URL and its credentials are set)
    jira_url: str | None = Field(None, description="The Jira site tickets are filed in: Cloud "
                                 "https://acme.atlassian.net, Data Center https://jira.acme.com (with its context "
                                 "path, if any). Unset: no ticket.create.")
    jira_deployment: Literal["cloud", "datacenter"] | None = Field(
        None, description="cloud (REST v3, JIRA_EMAIL + JIRA_API_TOKEN) or datacenter (REST v2, JIRA_PAT); unset: "
        "cloud for *.atlassian.net, datacenter otherwise.")
    jira_email: str = Field("", description="Cloud: the e-mail of the Atlassian account the bot files as (it needs "
                            "Browse projects and Create issues; Modify reporter to set the requester as reporter).")
    jira_api_token: SecretStr | None = Field(None, description="Cloud: an API token of that account "
                                             "(id.atlassian.com > Security > API tokens).")
    jira_pat: SecretStr | None = Field(None, description="Data Center: a personal access token of the bot's Jira "
                                       "account (sent as Authorization: Bearer).")
    jira_default_project: str = Field("", description="The project key a ticket goes in when the request names "
                                      "none (e.g. OPS); empty: the bot asks.")
    jira_issue_type: str = Field("Task", description="The issue type of a request for a 'ticket' or an 'issue' "
                                 "(a 'bug' is a Bug, a 'story' a Story).")
    jira_timeout_seconds: float = Field(20.0, gt=0, le=120, description="Seconds each Jira request may take.")
    slack_workspace_url: str = Field("", description="The Slack workspace's address (https://acme.slack.com), "
                                     "for links to Slack threads (a Jira ticket links the thread it was asked in); "
                                     "empty: the address Slack's auth.test gives the bot's token.")

    @property
    def jira_configured(self) -> bool:
        """True when ticket.create can be registered: JIRA_URL with Cloud or Data Center credentials."""
        token = self.jira_api_token.get_secret_value() if self.jira_api_token else ""
        pat = self.jira_pat.get_secret_value() if self.jira_pat else ""
        return bool(self.jira_url) and (bool(self.jira_email and token) or bool(pat))

    # Retention (issue 13): rows older than these many days are purged daily (`chatops purge` runs it once)
    retention_days_conversations: int = Field(30, description="Days to keep conversation histories and the "
                                              "turn log (users' questions).")
    retention_days_audit: int = Field(365, description="Days to keep the audit log, run records (each source's "
                                      "latest is kept), settled pending actions, sent, failed or cancelled "
                                      "scheduled messages, and local-calendar events (rows and .ics files) that "
                                      "ended that long ago.")
    retention_days_feedback: int = Field(365, description="Days to keep feedback on answers.")

    @field_validator("retention_days_conversations", "retention_days_audit", "retention_days_feedback")
    @classmethod
    def _retention_days(cls, v: int, info: ValidationInfo) -> int:
        name = info.field_name or ""  # pydantic names the field for a field validator
        if v < 1:
            raise ValueError(f"{name.upper()} must be a whole number of days, 1 or more (e.g. "
                             f"{cls.model_fields[name].default}); there is no 'keep forever': to keep "
                             "rows for a very long time write a large number such as 36500")
        return v

    @field_validator("default_timezone")
    @classmethod
    def _default_tz(cls, v: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"DEFAULT_TIMEZONE must be an IANA time zone such as Europe/Berlin, not {v!r}") from None
        return v

    @property
    def ics_dir(self) -> Path:
        """Where the local calendar's .ics files go."""
        return self.calendar_ics_dir or self.chatops_data_dir / "calendar"

    @field_validator("chatops_data_dir", "chatops_cache_dir", "calendar_ics_dir", "privacy_text_file",
                     "terms_text_file")
    @classmethod
    def _absolute(cls, v: Path | None) -> Path | None:
        """Folders are resolved once, when the settings are read: a relative ``CHATOPS_DATA_DIR`` means
        the folder below the directory the command started in, and ``chatops status`` shows which."""
        return None if v is None else v.expanduser().resolve()

    @field_validator("chatops_data_dir", "chatops_cache_dir", "calendar_ics_dir")
    @classmethod
    def _folder(cls, v: Path | None, info: ValidationInfo) -> Path | None:
        """A folder setting must name a folder, or a path that can become one (no file on the way)."""
        if v is None:
            return v
        name = info.field_name or ""  # pydantic names the field for a field validator
        for p in (v, *v.parents):
            if p.exists():
                if not p.is_dir():
                    what = "is a file" if p == v else f"is below {p}, which is a file"
                    raise ValueError(f"{name.upper()}={v} {what}, not a folder; point "
                                     f"{name.upper()} at a folder (it is created when missing)")
                break
        return v

    @field_validator("chatops_log_format")
    @classmethod
    def _log_format(cls, v: str) -> str:
        v = v.strip().lower()
        if v not in {"auto", "json", "text"}:
            raise ValueError("CHATOPS_LOG_FORMAT must be json, text or auto")
        return v

    @property
    def secret_values(self) -> tuple[str, ...]:
        """Every configured secret, for masking in logs."""
        names = ("slack_bot_token", "slack_signing_secret", "slack_app_token", "openai_api_key", "qdrant_api_key",
                 "microsoft_app_password", "jira_api_token", "jira_pat")
        values = (getattr(self, n, None) for n in names)
        plain = (v.get_secret_value() if isinstance(v, SecretStr) else v for v in values)
        return tuple(v for v in plain if isinstance(v, str) and v)

    @field_validator("chatops_log_level")
    @classmethod
    def _level(cls, v: str) -> str:
        v = v.upper()
        if v not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
            raise ValueError("CHATOPS_LOG_LEVEL must be DEBUG, INFO, WARNING, ERROR or CRITICAL")
        return v

    @property
    def index_dir(self) -> Path:
        """The knowledge index folder."""
        return self.chatops_data_dir / "index"

    @property
    def state_url(self) -> str:
        """The state store's SQLAlchemy URL."""
        if self.database_url:
            return self.database_url
        path = (self.chatops_data_dir / "state.sqlite").resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{path}"

    @property
    def embedding_cache_path(self) -> Path:
        """The embedding cache file."""
        return (self.chatops_cache_dir or self.chatops_data_dir / "cache") / "embeddings.sqlite"


def machine_timezone() -> str:
    """This machine's IANA zone, as ``tzlocal`` finds it (the ``TZ`` variable, else ``/etc/localtime``
    or ``/etc/timezone``); ``UTC`` when it names none this machine knows."""
    import warnings

    import tzlocal
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        with warnings.catch_warnings():  # a TZ it cannot read: a warning, then its fallback
            warnings.simplefilter("ignore")
            name = tzlocal.get_localzone_name() or "UTC"
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return "UTC"
    return name


def at_a_terminal(settings: Settings) -> Settings:
    """The settings of a command a person runs at a terminal (``chatops ask``, ``chat``, ``actions``,
    ``reminders``): without ``DEFAULT_TIMEZONE`` (environment or ``.env``), the requester's zone is
    the machine's (:func:`machine_timezone`), since the person typing is where the machine is.

    The servers (``chatops serve``, ``worker``) keep ``DEFAULT_TIMEZONE``, else UTC: their machine's
    zone (a container's is UTC) says nothing about their users, whose own zones come from their
    Slack or Teams profiles. ``chatops eval`` keeps them too, so a score does not depend on the
    machine it ran on.
    """
    if "default_timezone" in settings.model_fields_set:
        return settings
    return settings.model_copy(update={"default_timezone": machine_timezone()})


def setting_variables() -> frozenset[str]:
    """Every environment variable a setting is read from, lower-cased (the settings ignore case): each field's
    name and its aliases."""
    names: set[str] = set()
    for name, field in Settings.model_fields.items():
        names.add(name.lower())
        alias = field.validation_alias
        for choice in getattr(alias, "choices", [alias] if isinstance(alias, str) else []):
            if isinstance(choice, str):
                names.add(choice.lower())
    return frozenset(names)
