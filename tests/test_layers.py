"""The import contract: flashtick_kernels <- engine core <- queries, connectors <- engine.service <- flashtick (the
public API), and no cycles.

Function-level imports count as much as top-level ones: a cycle hidden behind a
late import is still a cycle. Third-party imports are not this test's business
(``test_base_install`` checks that every module imports with the base install).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("flashtick_kernels", "engine", "connectors", "queries", "flashtick")
# what each layer may import, besides itself; flashtick (the public API, re-exports) is the top: none imports it
ALLOWED = {
    "flashtick": {"flashtick_kernels", "engine", "queries", "connectors", "engine.service"},
    "flashtick_kernels": set(),
    "engine": {"flashtick_kernels"},
    "queries": {"flashtick_kernels", "engine"},
    "connectors": {"flashtick_kernels", "engine"},
    "engine.service": {"flashtick_kernels", "engine", "queries", "connectors"},
}


def layer_of(module: str) -> str:
    return "engine.service" if module.startswith("engine.service") else module.split(".")[0]


def module_files() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    return modules


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (the longest known prefix of each imported name)."""
    modules = module_files()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        names: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level:
                raise AssertionError(f"{path}: relative import; the layer check reads absolute imports only")
        targets = {resolve(n) for n in names if n.split(".")[0] in PACKAGES}
        # a package's __init__ is not an import of the package by its own modules
        graph[module] = {t for t in targets if t and t != module and not module.startswith(t + ".")}
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_every_import_follows_the_layers() -> None:
    graph = import_graph()
    assert len(graph) > 40, "the walk found too few modules: is ROOT right?"
    upward = [f"{m} imports {t}" for m, targets in sorted(graph.items()) for t in sorted(targets)
              if layer_of(t) != layer_of(m) and layer_of(t) not in ALLOWED[layer_of(m)]]
    assert not upward, "imports against the layers:\n" + "\n".join(upward)


def test_no_import_cycles() -> None:
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_checks_catch_what_they_are_for() -> None:
    """The checker itself: a planted cycle and a planted upward import are found."""
    assert find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []
    assert "connectors" not in ALLOWED["queries"] and "engine.service" not in ALLOWED["engine"]
    assert layer_of("engine.service.server") == "engine.service" and layer_of("engine.scheduler") == "engine"
