"""Credentials in Markdown tables: a column headed by a credential noun, or a row whose first cell names one.

A wiki keeps shared accounts and door codes in tables as often as in sentences::

    | System   | User           | Password    |
    | -------- | -------------- | ----------- |
    | Demo CRM | demo@acme.test | orchardlane |

A cell under a header that ends with a credential noun of :mod:`screening.statements` ("Password", "Door
code", "Kennwort", "Code d'accès", "Contraseña"), or the cell after a first cell that ends with one ("| Wi-Fi
password | sunnymeadow |"), is judged as the value of a statement is (:func:`screening.statements.value_span`):
a placeholder, an instruction ("see the vault", "ask IT"), a measure ("12 characters"), a place ("1Password",
"SSO") or a phrase that runs on is not a value. Under a bare "Code" header a value needs four or more
characters with a digit, the header must not name an identifier ("Error code", "Postal code"), and the column
must not be the table's first: a first column keys the rows ("| Code | Symptom | Fix |" lists error codes), a
secret is a value looked up by them ("| Door | Code |").
Public: :func:`find_table_values`.
"""

from __future__ import annotations

import re

from .findings import Finding
from .statements import CODE_NOUN, ID_CODES, NOUN, value_span

__all__ = ["find_table_values"]

_ROW = re.compile(r"^[ \t]*\|(?P<cells>.*)\|[ \t]*$")
_DELIMITER = re.compile(r"^[ \t]*\|?(?:[ \t]*:?-{3,}:?[ \t]*\|)+(?:[ \t]*:?-{3,}:?[ \t]*)?[ \t]*$")
_CREDENTIAL_HEADER = re.compile(rf"(?i)(?:^|[\s(/])(?:{NOUN})(?:\s*\([^()]*\))?\s*$")
_CODE_HEADER = re.compile(rf"(?i)(?:(?P<pre>[\w-]+)\s+)?(?<![\w-]){CODE_NOUN}(?:\s*\([^()]*\))?\s*$")


def _cells(line: str, offset: int) -> list[tuple[str, int]]:
    """A table row's cells, stripped, each with where it starts in the scanned text."""
    m = _ROW.match(line)
    if not m:
        return []
    cells, pos = [], offset + m.start("cells")
    for raw in m.group("cells").split("|"):
        lead = len(raw) - len(raw.lstrip())
        cells.append((raw.strip(), pos + lead))
        pos += len(raw) + 1
    return cells


def _kind(header: str) -> str | None:
    """``credential`` for a header naming a credential, ``code`` for a bare code, else None."""
    if _CREDENTIAL_HEADER.search(header):
        return "credential"
    m = _CODE_HEADER.search(header)
    if m and (m.group("pre") or "").lower() not in ID_CODES and (m.group("comp") or "").lower() not in ID_CODES:
        return "code"
    return None


def _judge(cell: str, start: int, kind: str) -> Finding | None:
    if not cell:
        return None
    span = value_span(cell, start, strict=False)
    if span is None:
        return None
    value = cell[span[0] - start:span[1] - start]
    if kind == "code" and (len(value) < 4 or not any(c.isdigit() for c in value)):
        return None
    if value.isalpha() and value.isupper() and len(value) <= 5:  # "SSO", "LDAP", "MFA": how one signs in
        return None
    return Finding("a credential in a table", "secret", *span)


def find_table_values(text: str) -> list[Finding]:
    """Credential values in the Markdown tables of ``text`` (findings of category ``secret``; ``[]`` without tables)."""
    if "|" not in text:
        return []
    found: list[Finding] = []
    lines, pos = [], 0
    for line in text.split("\n"):
        lines.append((line, pos))
        pos += len(line) + 1
    columns: dict[int, str] = {}
    for i, (line, offset) in enumerate(lines):
        if not _ROW.match(line):
            columns = {}
            continue
        if _DELIMITER.match(line):
            continue
        cells = _cells(line, offset)
        if i + 1 < len(lines) and _DELIMITER.match(lines[i + 1][0]):  # a header row
            columns = {n: kind for n, (cell, _) in enumerate(cells)
                       if (kind := _kind(cell)) and not (kind == "code" and n == 0)}
            continue
        for n, (cell, start) in enumerate(cells):
            if n in columns and (f := _judge(cell, start, columns[n])):
                found.append(f)
        if len(cells) >= 2 and (kind := _kind(cells[0][0])) and (f := _judge(*cells[1], kind)):
            found.append(f)
    return found
