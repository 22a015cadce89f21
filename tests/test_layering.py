"""No import cycles between our modules, function-level imports included.

The import graph of every package is built with ``grimp`` (what ``import-linter`` uses; it reads every
``import`` statement, at module level or inside a function), and its strongly connected components are
found: a component of more than one module is a cycle (A imports B, which imports A, perhaps through
others). The test lists each cycle with the imports that close it.

There are none, and the test keeps it so (issue 10).
"""

from __future__ import annotations

import grimp

PACKAGES = ("bot", "app", "agent", "tools", "index", "connectors", "state", "screening")

def strongly_connected(nodes: list[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of a directed graph (iterative, so deep graphs are fine)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def import_cycles() -> tuple[list[tuple[str, ...]], dict[str, set[str]]]:
    graph = grimp.build_graph(*PACKAGES)
    modules = sorted(graph.modules)
    ours = set(modules)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) & ours for m in modules}
    cycles = [tuple(c) for c in strongly_connected(modules, edges) if len(c) > 1]
    cycles += [(m,) for m in modules if m in edges[m]]  # a module importing itself
    return sorted(cycles), edges


def describe(cycle: tuple[str, ...], edges: dict[str, set[str]]) -> str:
    inside = set(cycle)
    links = [f"{a} -> {b}" for a in cycle for b in sorted(edges[a] & inside)]
    return f"{', '.join(cycle)}: " + "; ".join(links)


def test_strongly_connected_finds_cycles() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    comps = strongly_connected(sorted(edges), edges)
    assert ["a", "b", "c"] in comps and ["d"] in comps and ["e"] in comps


def test_no_import_cycles_between_modules() -> None:
    cycles, edges = import_cycles()
    assert not cycles, "import cycles (break them; function-level imports count):\n" + "\n".join(
        describe(c, edges) for c in cycles)
