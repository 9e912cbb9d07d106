"""Packages depend downward only (docs/ARCHITECTURE.md), checked from every module's imports.

Every import counts, including the ones inside functions (lazy imports are still
dependencies), relative ones, module names in strings (``importlib.import_module``, a lazy
table) and ``python -m`` launches of a child process. Packages of the same layer may use each
other one way, never both ways.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "hotshard"

# bottom to top; a package may import its own layer (one way) and any layer below it
LAYERS = [
    {"errors", "observations", "mitigations", "_atomic", "_files", "_format", "_http", "_threads",
     "_validate"},
    {"profile"},
    {"shards", "workload", "detect"},
    {"sim", "cluster", "compare"},
    {"drive", "service", "observe"},
    {"diagnose", "report", "render", "demo"},
    {"cli"},
    {"__init__", "__main__"},  # the lazy public API over every layer; python -m hotshard
]
# a module named in a string: a lazy import, or what ``python -m`` runs
_MODULE_STRING = re.compile(r"^hotshard(\.[a-z_][a-z0-9_]*)*$")
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _package_of(path: Path) -> str:
    return path.relative_to(SRC).parts[0].removesuffix(".py")


def _is_package(name: str) -> bool:
    return (SRC / name).is_dir() or (SRC / f"{name}.py").is_file()


def _references(path: Path, text: str | None = None) -> list[tuple[list[str], int, str]]:
    """Every module name ``path`` (or ``text`` read as though it were that module) refers
    to, per AST node: (dotted names, line, kind). Kinds: "import"; "from" (``from m import
    a, b``: m.a, m.b, then m itself, since each of a, b may be a module or a name in m);
    "string" (a lazy table, ``import_module``); "launch" (a child's ``python -m hotshard``:
    a dependency, not an import). One walker for both checks below: packages for the
    layers, modules for the circles."""
    tree = ast.parse(path.read_text() if text is None else text, filename=str(path))
    here = path.relative_to(SRC).with_suffix("").parts
    found = []
    for node in ast.walk(tree):
        names, kind = [], "import"
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            # relative: resolved against this module's package (a module's and an __init__'s
            # alike); ``from pkg import mod`` imports the module, ``from mod import name`` mod
            base = ("hotshard", *here[:-node.level]) if node.level else ()
            module = ".".join([*base, *([node.module] if node.module else [])])
            names, kind = [f"{module}.{a.name}" for a in node.names] + [module], "from"
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and "." in node.value and _MODULE_STRING.match(node.value)):
            names, kind = [node.value], "string"
        elif isinstance(node, ast.List | ast.Tuple):  # [python, "-m", "hotshard", ...]
            values = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            names = [f"{b}.__main__" for a, b in zip(values, values[1:], strict=False)
                     if a == "-m" and b == "hotshard"]
            kind = "launch"
        if names:
            found.append((names, node.lineno, kind))
    return found


def _imports(path: Path, text: str | None = None) -> list[tuple[str, int]]:
    """(hotshard top-level package referred to, line) for every reference in ``path``."""
    found = []
    for names, line, _ in _references(path, text):
        packages = []
        for name in names:
            bits = name.split(".")
            if (bits[0] == "hotshard" and len(bits) > 1 and _is_package(bits[1])
                    and bits[1] not in packages):
                packages.append(bits[1])
        found += [(package, line) for package in packages]
    return found


def _edges() -> dict[tuple[str, str], str]:
    edges = {}
    for path in sorted(SRC.rglob("*.py")):
        src = _package_of(path)
        for dst, line in _imports(path):
            if dst != src:
                edges.setdefault((src, dst), f"{path.relative_to(SRC.parent)}:{line}")
    return edges


def test_every_package_has_a_layer():
    packages = {_package_of(p) for p in SRC.rglob("*.py")}
    assert packages <= set(RANK), f"add to LAYERS: {sorted(packages - set(RANK))}"


def test_no_import_runs_up_the_layers():
    upward = [f"{where}: {a} imports {b}" for (a, b), where in _edges().items()
              if RANK.get(a, 99) < RANK.get(b, 99)]
    assert not upward, "imports against docs/ARCHITECTURE.md's layers:\n" + "\n".join(upward)


def _components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of two or more nodes of ``graph`` (node -> the nodes it
    imports; others ignored): Tarjan's algorithm, iteratively. A cycle of any length, not only
    a pair importing each other."""
    index, low, on_stack, stack, groups, counter = {}, {}, set(), [], [], [0]

    def visit(root):
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next((c for c in children if c in graph), None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
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
                    groups.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def _cycles(edges: dict[tuple[str, str], str]) -> list[list[str]]:
    """The packages' import cycles (``_components`` of the edges' graph)."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    return _components(graph)


def test_no_packages_import_each_other_in_a_cycle():
    edges = _edges()
    groups = _cycles(edges)
    detail = [", ".join(f"{edges[(a, b)]} ({a} -> {b})" for (a, b) in edges
                        if a in g and b in g) for g in groups]
    assert not groups, "packages in an import cycle:\n" + "\n".join(detail)


def test_the_cycle_check_sees_a_cycle_of_three():
    edges = {("a", "b"): "x", ("b", "c"): "y", ("c", "a"): "z", ("c", "d"): "w"}
    assert _cycles(edges) == [["a", "b", "c"]]
    assert _cycles({("a", "b"): "x", ("b", "c"): "y"}) == []


@pytest.mark.parametrize(("source", "target"), [
    ("from hotshard.shards.partitioners import make_partitioner\n", "shards"),
    ("def f():\n    import hotshard.cli\n", "cli"),
    ("from hotshard import shards\n", "shards"),
    ("from ..shards import partitioners\n", "shards"),
    ("importlib.import_module('hotshard.sim.system')\n", "sim"),
    ("LAZY = {'simulate': 'hotshard.sim.system'}\n", "sim"),
    ("cmd = [sys.executable, '-m', 'hotshard', 'serve']\n", "__main__"),
    ("cmd = [sys.executable, '-m', 'hotshard.service.launch']\n", "service"),
])
def test_the_checker_sees_imports_in_any_form(source, target):
    as_if = SRC / "profile" / "probe.py"  # read as a module of the profile package
    assert [dst for dst, _ in _imports(as_if, source)] == [target]


def _module_of(path: Path) -> str:
    return ".".join(("hotshard", *path.relative_to(SRC).with_suffix("").parts))


def _module_imports(path: Path, text: str | None = None) -> set[str]:
    """The hotshard modules (not package ``__init__``s) that ``path`` imports, in any form
    but a child process's launch: each named module file (of ``from m import a, b``, the
    ones of m.a, m.b that are modules, else m)."""
    found = set()
    for names, _, kind in _references(path, text):
        if kind == "launch":
            continue
        files = [n for n in names if n.startswith("hotshard.")
                 and (SRC / Path(*n.split(".")[1:])).with_suffix(".py").is_file()]
        if kind == "from":
            files = [n for n in files if n != names[-1]] or files
        found.update(files)
    return found


@pytest.mark.parametrize(("source", "modules"), [
    ("from hotshard.sim import system, cache\n", {"hotshard.sim.system", "hotshard.sim.cache"}),
    ("from hotshard.sim.system import simulate\n", {"hotshard.sim.system"}),
    ("from .locality import Locality\n", {"hotshard.profile.locality"}),
    ("import hotshard.sim.system, hotshard.sim.cache\n",
     {"hotshard.sim.system", "hotshard.sim.cache"}),
    ("LAZY = {'simulate': 'hotshard.sim.system'}\n", {"hotshard.sim.system"}),
    ("cmd = [sys.executable, '-m', 'hotshard', 'serve']\n", set()),
])
def test_the_circle_checker_sees_each_module_named(source, modules):
    as_if = SRC / "profile" / "probe.py"
    assert _module_imports(as_if, source) == modules


def test_no_import_circle_between_modules():
    """Inside a package too: a circle of modules (fit <-> alternatives, count <-> engines) means
    neither can be read, loaded or tested without the other. Package ``__init__``s (front doors
    with lazy tables) are not nodes."""
    graph = {}
    for path in SRC.rglob("*.py"):
        if path.name != "__init__.py":
            graph[_module_of(path)] = _module_imports(path) - {_module_of(path)}
    circles = _components(graph)
    assert not circles, "modules importing each other in a circle:\n" + "\n".join(
        " <-> ".join(c) for c in circles)
