"""No import cycles between our modules, function-level imports included.

The import graph of every package is built with ``grimp`` (what ``import-linter`` uses; it reads every
``import`` statement, at module level or inside a function), and its cycles are found with grimp's own
upstream and downstream queries (A imports B, which imports A, perhaps through others). The test lists
each cycle with the imports that close it.

There are none, and the test keeps it so (issue 10).
"""

from __future__ import annotations

import grimp

PACKAGES = ("bot", "app", "agent", "tools", "index", "connectors", "core", "state", "screening")

def cycles_in(graph: grimp.ImportGraph) -> list[tuple[str, ...]]:
    """The import cycles of ``graph``, each as its sorted module names.

    A module lies on a cycle when some module both imports it (perhaps through others) and is imported by
    it: grimp answers both questions (``find_upstream_modules``, ``find_downstream_modules``), so the
    cycle through a module is it plus the intersection (its strongly connected component)."""
    cycles: set[tuple[str, ...]] = set()
    for m in graph.modules:
        loop = graph.find_upstream_modules(m) & graph.find_downstream_modules(m)
        if loop or graph.direct_import_exists(importer=m, imported=m):  # a module importing itself too
            cycles.add(tuple(sorted(loop | {m})))
    return sorted(cycles)


def import_cycles() -> tuple[list[tuple[str, ...]], dict[str, set[str]]]:
    """The import cycles among our modules and the direct-import edges (to describe them)."""
    graph = grimp.build_graph(*PACKAGES)
    ours = set(graph.modules)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) & ours for m in ours}
    return cycles_in(graph), edges


def describe(cycle: tuple[str, ...], edges: dict[str, set[str]]) -> str:
    inside = set(cycle)
    links = [f"{a} -> {b}" for a in cycle for b in sorted(edges[a] & inside)]
    return f"{', '.join(cycle)}: " + "; ".join(links)


def test_cycles_in_finds_each_cycle_once() -> None:
    graph = grimp.ImportGraph()
    for importer, imported in [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a"), ("e", "e"), ("f", "d")]:
        graph.add_import(importer=importer, imported=imported)
    assert cycles_in(graph) == [("a", "b", "c"), ("e",)]


def test_no_import_cycles_between_modules() -> None:
    cycles, edges = import_cycles()
    assert not cycles, "import cycles (break them; function-level imports count):\n" + "\n".join(
        describe(c, edges) for c in cycles)
