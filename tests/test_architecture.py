"""The shape docs/architecture.md promises: layers with arrows only downward, small modules.

The import graph is read from the source (every ``import`` statement, at the top of a module or
inside a function; docstring examples are text, not imports).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "metricalc"

LAYERS: list[list[str]] = [
    [
        "errors",
        "validation",
        "fileio",
        "progress",
        "version",
        "hpatches",
        "presets",
        "lazy",
        "allocator",
    ],
    ["core"],
    ["cube"],
    ["metrics", "export"],
    ["keypoints", "retrieval"],
    ["datasets"],
    ["stats"],
    ["plotting", "decompose", "commands"],
    ["store", "experiment", "report"],
    ["benchmarks"],
    ["cli", "__main__", "moved", "patches", "detection", "pose"],
]
"""The layers of docs/architecture.md, lowest first. A unit may import from a lower layer, or from
an earlier unit of its own layer (experiment uses store; a benchmark's room
uses another room: they are one unit, ``benchmarks``). The old package paths
``patches``, ``detection`` and ``pose`` re-export their room from the top (``moved`` maps their old
module paths)."""

MAX_LINES = 600


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, str | None]]:
    """(module imported, name imported from it or None) of every import of metricalc code."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.startswith("metricalc")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base if path.name == "__init__.py" else base[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("metricalc"):
                for alias in node.names:
                    submodule = f"{target}.{alias.name}"
                    is_module = submodule in MODULES
                    found.append((submodule, None) if is_module else (target, alias.name))
    return found


IMPORTS = {name: _imports(name, path) for name, path in MODULES.items()}


def _unit(module: str) -> str:
    """The package or top-level module a module belongs to ("metricalc" for the package init)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "metricalc"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
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
                    work.append((child, iter(sorted(graph.get(child, ())))))
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
                    components.append(sorted(component))
    return components


def test_the_cycle_finder_finds_a_cycle_and_only_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_every_unit_has_a_layer():
    units = {_unit(name) for name in MODULES} - {"metricalc"}
    placed = {unit for layer in LAYERS for unit in layer}
    assert units <= placed, f"add {sorted(units - placed)} to LAYERS and docs/architecture.md"


def test_no_module_is_over_600_lines():
    sizes = {name: len(p.read_text(encoding="utf-8").splitlines()) for name, p in MODULES.items()}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_no_import_cycle_between_modules():
    graph = {
        name: {target for target, _ in imports if target in MODULES and target != name}
        for name, imports in IMPORTS.items()
    }
    # a package's __init__ re-exporting its own modules is not a cycle of the code
    for name in graph:
        graph[name] = {t for t in graph[name] if not name.startswith(t + ".")}
    assert _cycles(graph) == []


def test_arrows_point_only_downward():
    position = {unit: (i, j) for i, layer in enumerate(LAYERS) for j, unit in enumerate(layer)}
    upward = set()
    for name, imports in IMPORTS.items():
        source = _unit(name)
        if source == "metricalc":
            continue  # the package init offers the public API (the rest lazily)
        for target, _ in imports:
            destination = _unit(target)
            if destination == "metricalc":  # the package init: it loads the core, cube, metrics
                if position[source] < position["cli"]:
                    upward.add(f"{name} -> metricalc (the package init)")
                continue
            if destination != source and position[destination] > position[source]:
                upward.add(f"{name} -> {target}")
    assert sorted(upward) == []


def test_no_private_name_is_imported_across_packages():
    crossing = set()
    for name, imports in IMPORTS.items():
        for target, imported in imports:
            if _unit(target) == _unit(name):
                continue
            private_module = any(part.startswith("_") for part in target.split(".")[1:])
            private_name = imported is not None and imported.startswith("_")
            if private_module or (private_name and not imported.startswith("__")):
                crossing.add(f"{name} imports {target}{'.' + imported if imported else ''}")
    assert sorted(crossing) == []


def test_import_metricalc_loads_no_heavy_subsystem():
    code = (
        "import sys, metricalc\n"
        "heavy = ('sqlite3', 'matplotlib', 'cv2', 'dask', 'statsmodels', 'seaborn', 'sklearn',"
        " 'xarray', 'pandas', 'scipy', 'numpy', 'pyarrow', 'metricalc.store',"
        " 'metricalc.keypoints', 'metricalc.report', 'metricalc.cube')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m in heavy))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "[]"


def _lazy_names() -> dict[str, str]:
    """The names ``metricalc/__init__.py`` imports on first use, and the module of each."""
    import metricalc

    return dict(metricalc._LAZY)


@pytest.mark.parametrize(("name", "module"), sorted(_lazy_names().items()))
def test_lazy_names_of_the_package_resolve_to_their_module(name, module):
    import importlib

    import metricalc

    home = importlib.import_module(module)
    expected = home if module == f"metricalc.{name}" else getattr(home, name)
    assert getattr(metricalc, name) is expected
    assert name in metricalc.__all__
