"""The Confluence stand-in's nouns: the credentials it accepts, pages, injected faults, timestamps and cursors."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

CLOUD_EMAIL = "bot@example.com"
CLOUD_TOKEN = "cloud-api-token-123"
DC_TOKEN = "dc-personal-access-token-456"


@dataclass
class Page:
    """One page of the stand-in."""

    id: str
    space: str
    title: str
    body: str
    version: int = 1
    modified: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    created: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    status: str = "current"  # current | trashed
    users: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    parent: str | None = None


@dataclass
class Fault:
    """Answer ``status`` (with ``headers``) to the next ``times`` requests matching ``pattern``, after ``skip`` matches."""

    pattern: re.Pattern[str]
    status: int
    times: int
    headers: dict[str, str]
    skip: int = 0
    hits: int = 0
    delay: float = 0.0  # with status 0: answer normally after this many seconds


def iso_z(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    pad = "=" * (-len(cursor) % 4)
    return int(json.loads(base64.urlsafe_b64decode(cursor + pad))["o"])
