"""Several eval sets in one ``chatops eval`` run (``--set NAME=QUESTIONS::SOURCE``) and their one table.

Each set is a questions file asked of its own index, built from its own sources in the data dir's
``eval/NAME`` folder (so a second run is incremental); the embedding cache is shared between the sets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EvalSet", "parse_set", "set_data_dir", "format_sets_table"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True, slots=True)
class EvalSet:
    """One ``--set``: a name (its row in the table and its folder under the data dir), a questions
    file and the source specs its index is built from."""

    name: str
    questions: Path
    sources: tuple[str, ...]


def parse_set(spec: str) -> EvalSet:
    """``NAME=QUESTIONS::SOURCE[::SOURCE...]`` -> :class:`EvalSet` (``::`` separates the file and each
    source spec, so a spec may hold ``:`` and ``?``, as ``folder:PATH?url_base=https://...`` does).

    Raises:
        ValueError: the spec lacks a name, a questions file or a source, or the name is not a plain
            folder name (letters, digits, ``_``, ``.``, ``-``; not starting with ``.``, ``_`` or ``-``).
    """
    name, eq, rest = spec.partition("=")
    parts = rest.split("::")
    questions, sources = parts[0].strip(), tuple(p.strip() for p in parts[1:] if p.strip())
    if not eq or not questions or not sources:
        raise ValueError(f"--set {spec!r}: expected NAME=QUESTIONS::SOURCE, e.g. "
                         "dev=../shared/eval/dev.jsonl::folder:../shared/corpus/sourcegraph-handbook")
    if not _NAME.fullmatch(name.strip()):
        raise ValueError(f"--set {spec!r}: the name {name.strip()!r} must be a plain folder name "
                         "(letters, digits, _ . -; it names the set's row and its folder under the data dir)")
    return EvalSet(name.strip(), Path(questions), sources)


def set_data_dir(data_dir: Path, name: str) -> Path:
    """The set's own data dir (its index, state and run log): ``DATA_DIR/eval/NAME``."""
    return data_dir / "eval" / name


def format_sets_table(results: dict[str, dict], label: str = "") -> str:
    """One table with a row per set (in the order given) from each set's eval result (the ``--json``
    object of :func:`bot.evaluate.run_eval`): R@5, answer_contains, citation_validity,
    citation_precision, refusal_unanswerable, false_refusal, answer_chars_mean, unsupported_posted and latency
    p50/p95."""

    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    def ms(x: float | None) -> str:
        return "-" if x is None else f"{x:.0f}"

    header = ["set", "n", "R@5", "contains", "cit_valid", "cit_prec", "refusal", "false_ref", "chars", "unsup",
              "p50_ms", "p95_ms"]
    rows = [header]
    for name, res in results.items():
        a, lat = res["answers"], res["latency_ms"]
        chars = a.get("answer_chars_mean")
        rows.append([name, str(res["questions"]), f(res["retrieval"].get("recall@5")), f(a["answer_contains"]),
                     f(a["citation_validity"]), f(a.get("citation_precision")), f(a["refusal_unanswerable"]),
                     f(a["false_refusal"]), "-" if chars is None else f"{chars:.0f}", str(a.get("unsupported_posted", "-")),
                     ms(lat["p50"]), ms(lat["p95"])])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [f"chatops eval {label}".rstrip() + f": {len(results)} sets"]
    for r in rows:
        cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells).rstrip())
    lines.append("contains = answer_contains, cit_valid = citation_validity, cit_prec = citation_precision, "
                 "refusal = refusal_unanswerable, false_ref = false_refusal, chars = answer_chars_mean, "
                 "unsup = unsupported_posted")
    return "\n".join(lines)
