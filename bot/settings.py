"""Settings from environment variables (and an optional ``.env`` file), via pydantic-settings.

Every setting is listed in the README's settings table; keep the two in step.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings"]


class Settings(BaseSettings):
    """All chatops settings. Field names map to upper-case environment variables."""

    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore",
                                      case_sensitive=False)

    chatops_data_dir: Path = Field(Path(".chatops"), description="Where indexes, caches and state live.")
    chatops_cache_dir: Path | None = Field(None, description="Embedding cache folder; default DATA_DIR/cache.")
    chatops_log_level: str = Field("WARNING", description="Python log level.")
    embedding_model: str = Field("local", description="'local' (bundled all-MiniLM-L6-v2 int8 ONNX) or an "
                                 "OpenAI embeddings model name such as text-embedding-3-small.")
    openai_api_key: str | None = Field(None, description="OpenAI (or compatible) API key.")
    openai_base_url: str | None = Field(None, description="OpenAI-compatible endpoint base URL.")
    chatops_sources: str = Field("", description="Sources to index (spec strings separated by commas), e.g. "
                                 "folder:./wiki?name=handbook. Used by chatops serve and /kb reindex.")
    database_url: str | None = Field(None, description="State store (SQLAlchemy URL); SQLite under the data dir "
                                     "when unset, e.g. postgresql+psycopg://user@host:5432/chatops.")
    qdrant_url: str | None = Field(None, description="Qdrant server URL; local mode on disk when unset.")
    qdrant_api_key: str | None = Field(None, description="API key for QDRANT_URL.")
    min_citations: int = Field(2, ge=1, le=10, description="Distinct supporting passages an answer needs.")
    relevance_floor: float = Field(0.43, ge=-1, le=1, description="Cosine similarity a passage needs to count as support.")
    single_source_min_cosine: float = Field(0.55, ge=-1, le=1,
                                            description="Cosine at which one passage may answer alone.")
    rrf_k: int = Field(60, ge=1, description="Reciprocal rank fusion constant.")
    rrf_dense_weight: float = Field(1.0, ge=0, description="RRF weight of dense retrieval.")
    rrf_bm25_weight: float = Field(0.6, ge=0, description="RRF weight of BM25.")
    max_question_chars: int = Field(4000, ge=100, description="Longer messages are truncated.")

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
