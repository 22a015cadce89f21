"""Credentials in text: Yelp's ``detect-secrets`` plugins, plus shapes they miss in prose.

A plugin fires when its ``analyze_string`` yields a value (its regexes and format checks, e.g. a
JWT's segments must decode) over the whole text (the patterns do not cross lines, so this finds
what a line-by-line scan finds, in one pass); the finding is then the whole match of its
``denylist`` pattern holding that value, or the value itself when it is the secret part of the
match (``analyze_string`` yields a pattern's group: for some plugins the password in a URL, for
others only the token's prefix, such as ``ghp``). ``analyze_line`` is not used because
it may call a provider to verify a secret, and nothing here makes a network call. The plugins
are the provider-specific ones with distinctive shapes; their keyword and high-entropy plugins
are left out because they are written for code and config files (quoted values) and flag prose.

Our own patterns cover what a wiki page writes in sentences:

- an AWS secret access key (40 characters of base64) after "secret access key" (the plugin wants
  it quoted and after "aws");
- a password after "password is", "password:", "password -", "password for X is"... when the value
  looks like one (six or more characters mixing letters with digits or symbols such as ``!@#$``;
  words joined by dashes, references like ``data.vault.secret`` and placeholders such as
  ``$DB_PASSWORD`` or ``<password>`` and "90-days" are not);
- a password in a connection string (``scheme://user:password@host``, ``Password=...;``);
- a whole private key block (the plugin flags the header line only);
- a credential given in a sentence, whatever the value looks like (:mod:`screening.statements`), or in a
  table's credential column (:mod:`screening.tables`), or a value that is not language near a credential noun
  whatever the phrasing (:mod:`screening.linked`);
- tokens the plugins' shapes do not cover (npm ``npm_`` tokens, an Azure ``AccountKey=`` in a connection
  string whatever its length, Slack ``xox?-`` tokens without digit groups, GitHub
  fine-grained ``github_pat_`` tokens, ``sk-``/``pk-`` API keys, Google API keys).
"""

from __future__ import annotations

import re
from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from .findings import Finding
from .linked import find_linked_values
from .statements import find_statements
from .tables import find_table_values

__all__ = ["find_secrets"]

#: plugin -> the kind a finding of it reports.
_PLUGINS: list[tuple[RegexBasedDetector, str]] = [
    (AWSKeyDetector(), "an AWS key"),
    (ArtifactoryDetector(), "an Artifactory token"),
    (AzureStorageKeyDetector(), "an Azure storage key"),
    (BasicAuthDetector(), "a password in a connection string"),
    (DiscordBotTokenDetector(), "a Discord bot token"),
    (GitHubTokenDetector(), "a GitHub token"),
    (GitLabTokenDetector(), "a GitLab token"),
    (JwtTokenDetector(), "a JSON Web Token"),
    (MailchimpDetector(), "a Mailchimp key"),
    (NpmDetector(), "an npm token"),
    (OpenAIDetector(), "an OpenAI key"),
    (PrivateKeyDetector(), "a private key"),
    (PypiTokenDetector(), "a PyPI token"),
    (SendGridDetector(), "a SendGrid key"),
    (SlackDetector(), "a Slack token"),
    (SquareOAuthDetector(), "a Square OAuth secret"),
    (StripeDetector(), "a Stripe key"),
    (TelegramBotTokenDetector(), "a Telegram bot token"),
    (TwilioKeyDetector(), "a Twilio key"),
]

_AWS_SECRET = re.compile(r"(?i)\bsecret[ _-]?(?:access[ _-]?)?key\b(?:\s*\(?(?:aws_)?\w*\)?)?"
                         r"\s*(?:is|was|:|=|-|\u2013|\u2014)?\s*[`'\"]?"
                         r"(?P<v>(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=]))")
_PASSWORD = re.compile(
    r"(?i)\b(?:password|passwd|pwd|passcode|passphrase|secret|api[ _-]?key|access[ _-]?key|auth[ _-]?token|token)s?\b"
    r"(?:\s+(?:for|of|to|on)\s+[\w .@/-]{1,40}?)?"
    r"\s*(?:\bis\s+set\s+to\b|\bis\b|\bwas\b|:=|=|:|\s-\s|\s\u2013\s|\s\u2014\s)\s*"
    r"[`'\"\u201c\u2018]?(?P<v>[^\s`'\"\u201d\u2019]{6,})")
_PLACEHOLDER = re.compile(r"^(?:[$<{%\[(]|\*{3}|[xX]{4}|https?://)|^[A-Z][A-Z0-9]*_[A-Z0-9_]+$|^\d+[-\s]?[a-zA-Z]+$")
_STRONG_SYMBOLS = frozenset("!@#$%^&*+=?~")
_CONN_PASSWORD = re.compile(r"(?i)(?:^|[;\s\"'])(?:password|pwd)\s*=\s*(?P<v>[^;\s\"']{3,})")
_PRIVATE_BLOCK = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*-----|\Z)", re.S)
_EXTRA_TOKENS: list[tuple[str, str]] = [
    (r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b", "an AWS key"),
    (r"\bxox[abposr]-[0-9A-Za-z-]{10,}|\bxapp-\d-[0-9A-Za-z-]{10,}", "a Slack token"),
    (r"\bgh[pousr]_[0-9A-Za-z]{30,}\b|\bgithub_pat_[0-9A-Za-z_]{40,}\b", "a GitHub token"),
    (r"\b(?:sk|pk|rk)[-_](?:live_|test_|proj-)?[0-9A-Za-z_-]{20,}\b", "an API key"),
    (r"\bAIza[0-9A-Za-z_-]{35}\b", "a Google API key"),
    (r"\bnpm_[A-Za-z0-9]{36}\b", "an npm token"),
    (r"(?<=AccountKey=)[A-Za-z0-9+/]{20,}={0,2}|(?<=SharedAccessKey=)[A-Za-z0-9+/]{20,}={0,2}",
     "an Azure storage key"),
    (r"\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*", "a JSON Web Token"),
]
_EXTRA = re.compile("|".join(f"(?P<t{i}>{p})" for i, (p, _) in enumerate(_EXTRA_TOKENS)))


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    """A plugin match without the delimiters some patterns include (spaces, quotes, ``=``, ``:``)."""
    while start < end and text[start] in " \t\n\"'=:":
        start += 1
    while end > start and text[end - 1] in " \t\n\"'":
        end -= 1
    return start, end


def _looks_like_password(value: str) -> bool:
    value = value.rstrip(".,;)")
    if len(value) < 6 or _PLACEHOLDER.search(value):
        return False
    has_digit = any(ch.isdigit() for ch in value)
    has_alpha = any(ch.isalpha() for ch in value)
    has_symbol = any(ch in _STRONG_SYMBOLS for ch in value)
    return (has_digit and has_alpha) or (has_symbol and (has_digit or has_alpha))


def find_secrets(text: str) -> list[Finding]:
    """Credentials in ``text``, as findings of category ``secret`` (unsorted, may overlap)."""
    found: list[Finding] = []
    for plugin, kind in _PLUGINS:
        values = {v for v in plugin.analyze_string(text) if v}
        if not values:
            continue  # the plugin's own checks (e.g. a JWT's segments must decode) said no
        for pattern in plugin.denylist:
            for m in pattern.finditer(text):
                value = next((v for v in values if v in m.group(0)), None)
                if value is None:
                    continue
                if len(value) >= 8:  # the pattern's group is the secret (a password in a URL, an AWS secret)
                    start = m.start() + m.group(0).index(value)
                    found.append(Finding(kind, "secret", start, start + len(value)))
                else:  # the group is a prefix ("ghp"): the whole match is the token
                    found.append(Finding(kind, "secret", *_trim(text, m.start(), m.end())))
    for m in _EXTRA.finditer(text):
        assert m.lastgroup is not None  # every alternative of _EXTRA is a named group, t<i>
        found.append(Finding(_EXTRA_TOKENS[int(m.lastgroup[1:])][1], "secret", m.start(), m.end()))
    for m in _AWS_SECRET.finditer(text):
        v = m.group("v")
        if any(c.isdigit() for c in v) and any(c.isupper() for c in v) and any(c.islower() for c in v):
            found.append(Finding("an AWS secret access key", "secret", m.start("v"), m.end("v")))
    for m in _PASSWORD.finditer(text):
        if _looks_like_password(m.group("v")):
            found.append(Finding("a password", "secret", m.start("v"), m.start("v") + len(m.group("v").rstrip(".,;)"))))
    for m in _CONN_PASSWORD.finditer(text):
        if not _PLACEHOLDER.search(m.group("v")):
                found.append(Finding("a password in a connection string", "secret", m.start("v"), m.end("v")))
    found.extend(find_statements(text))
    found.extend(find_table_values(text))
    found.extend(find_linked_values(text))
    found.extend(Finding("a private key", "secret", m.start(), m.end()) for m in _PRIVATE_BLOCK.finditer(text))
    return found
