"""garaphpy's import structure: no cycles, no imports from a layer above.

Every ``import``/``from ... import`` in every module of the package is read
with :mod:`ast`, function-level (lazy) imports included, so an upward import
cannot hide inside a function.  The layers, lowest first, are what the code
is (DESIGN.md: kernels/ and scheduler/ never import programs/); a module may
import its own layer and those below.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import garaphpy

PACKAGE_DIRECTORY = Path(garaphpy.__file__).parent

#: Lowest first.  A name covers the module and, for a package, everything in it.
LAYERS = (
    # what everything reads: errors, tunables, the sum monoids, cache paths,
    # logging, numba's threading layer, disk cache key and compile clock,
    # kernels run interpreted, the declared run and build options, floats as text
    ("errors", "config", "monoids", "paths", "progress", "_numba_setup", "_numba_cache",
     "compile_clock", "interpreted", "options", "_version", "labels", "value_lines"),
    # the vertex program model
    ("program",),
    # the store: edge sources, readers, the builder, pages on disk; generators
    # produce edge sources
    ("storage", "generators"),
    # CPU and GPU kernels, the program compilers
    ("kernels",),
    # the engines and their policies
    ("scheduler",),
    # partitioned runs over a Dask cluster's workers, each running the engines' kernels
    ("distributed",),
    # the built-in programs: data to the layers below, which never import them
    ("programs",),
    # what users call: the package root, graphs, runs, output, command line
    ("", "graph", "api", "output", "configfile", "trials", "cli", "console", "run", "__main__",
     "nx_backend"),
)

#: (importer, imported) edges allowed against the layers, each with its reason.
KNOWN_EXCEPTIONS: dict = {}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIRECTORY).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE_DIRECTORY.rglob("*.py"))}


def _imports(name: str, path: Path, modules: dict) -> set[str]:
    """The garaphpy modules ``name`` imports anywhere in its file ("" is the root)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    package = [part for part in package if part]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names if alias.name.split(".")[0] == "garaphpy"]
            found.update(target.removeprefix("garaphpy").lstrip(".") for target in targets)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module.split(".")[0] == "garaphpy":
                target = node.module.removeprefix("garaphpy").lstrip(".")
            else:
                continue
            for alias in node.names:
                submodule = f"{target}.{alias.name}".lstrip(".")
                found.add(submodule if submodule in modules else target)
    found.discard(name)
    return found


def _import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _layer(name: str) -> int:
    top = name.split(".")[0]
    for level, members in enumerate(LAYERS):
        if top in members:
            return level
    raise AssertionError(f"garaphpy.{name} is in no layer of tests/test_layers.py")


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph``, or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return stack[stack.index(target):] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_every_module_has_a_layer_and_the_reader_sees_lazy_imports():
    graph = _import_graph()
    for name in graph:
        _layer(name)
    # a function-level import the reader must not miss (cli imports graph lazily)
    assert "graph" in graph["cli"]
    assert "storage.store" in graph["graph"]


def test_no_module_imports_from_a_layer_above_it():
    graph = _import_graph()
    upward = sorted(f"garaphpy.{importer or '__init__'} (layer {_layer(importer)}) imports "
                    f"garaphpy.{imported or '__init__'} (layer {_layer(imported)})"
                    for importer, targets in graph.items() for imported in targets
                    if _layer(imported) > _layer(importer)
                    and (importer, imported) not in KNOWN_EXCEPTIONS)
    assert upward == []


def test_no_import_cycle():
    graph = {name: {target for target in targets if (name, target) not in KNOWN_EXCEPTIONS}
             for name, targets in _import_graph().items()}
    assert _cycle(graph) is None


def test_known_exceptions_are_still_needed():
    graph = _import_graph()
    stale = [edge for edge in KNOWN_EXCEPTIONS if edge[1] not in graph.get(edge[0], ())]
    assert stale == []


@pytest.mark.parametrize("edges, expected", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, None),
])
def test_the_cycle_finder_finds_cycles(edges, expected):
    assert _cycle(edges) == expected
