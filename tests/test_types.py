"""Type checking a user's script: ``garaphpy.run`` is the function, ``Graph`` and
``Result`` are annotated, and the package ships ``py.typed``.

mypy runs on a script made of the README's library examples (skipped where
mypy is not installed; it is in the ``test`` extra).
"""

from __future__ import annotations

import configparser
import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

USER_SCRIPT = '''
import math

import networkx as nx
import numpy as np
import scipy.sparse

import garaphpy
from garaphpy import VertexProgram

g = garaphpy.Graph.from_arrays(np.array([10, 20, 30]), np.array([20, 30, 10]))
g = garaphpy.Graph.open(g.store.path)
g = garaphpy.Graph.load("rmat:10", generator_options={"seed": 7, "weighted": True})
scipy_matrix = scipy.sparse.random(100, 100, density=0.01, format="csr", random_state=1)
g = garaphpy.Graph.from_scipy(scipy_matrix)
print(g.describe(), g.summary, g.original_ids())

result: garaphpy.Result = garaphpy.run(g, "sssp", sources=[0])
values: np.ndarray = result.values
converged: bool = result.converged
count: int = result.num_iterations
first: object = result[0]
print(values, converged, count, first, result.iterations, result.summary())

G = nx.DiGraph()
G.add_weighted_edges_from([(1, 2, 3.0), (2, 3, 1.0), (1, 3, 5.0), (3, 1, 2.0)])
small = garaphpy.Graph.from_networkx(G)
ranks = garaphpy.run(small, "pagerank", mode="cpu")
nx.set_node_attributes(G, ranks.to_dict(), "pagerank")
paths = garaphpy.run(small, "sssp", sources=[1], mode="cpu")
print(paths.to_pandas(), paths.path_to(3), paths.predecessors())
edges = nx.to_pandas_edgelist(G)
h = garaphpy.Graph.from_pandas(edges, source="source", destination="target", weight="weight")
print(h.to_scipy().toarray(), h.original_ids())


class WidestPath(VertexProgram):
    sum = "max"
    initially_active = "sources"
    needs_weights = needs_sources = True

    def init(is_source):
        return math.inf if is_source else 0.0

    def gather(src, weight):
        return min(src, weight)

    def apply(value, accum):
        return max(value, accum)

    def activate(new, old):
        return new > old


widest = garaphpy.run(g, WidestPath, sources=[0])
'''

MISTAKES = '''
import garaphpy

g = garaphpy.Graph.from_arrays([0, 1], [1, 0])
garaphpy.run(g, "bfs", 0)
garaphpy.run("graph.txt", "bfs")
missing = garaphpy.run(g, "bfs").valeus
'''


def test_the_package_ships_py_typed():
    assert (REPO / "garaphpy" / "py.typed").is_file()
    setup = configparser.ConfigParser()
    setup.read(REPO / "setup.cfg")
    assert "py.typed" in setup["options.package_data"].get("garaphpy", "")


def test_garaphpy_run_is_the_function_and_the_module_runs_the_cli():
    code = ("import garaphpy, garaphpy.run, inspect; from garaphpy import run; "
            "assert inspect.isfunction(garaphpy.run) and run is garaphpy.run; print('ok')")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    checked = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=env)
    assert checked.stdout.strip() == "ok", checked.stderr
    helped = subprocess.run([sys.executable, "-m", "garaphpy.run", "--help"],
                            capture_output=True, text=True, env=env)
    assert helped.returncode == 0 and "usage: python -m garaphpy.run" in helped.stdout


def _mypy(tmp_path, script: str):
    (tmp_path / "user.py").write_text(textwrap.dedent(script))
    env = {**os.environ, "MYPYPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--ignore-missing-imports", "--follow-imports=silent",
         "--no-incremental", "--cache-dir", os.devnull, "user.py"],
        cwd=tmp_path, capture_output=True, text=True, env=env)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_mypy_passes_the_readmes_examples_and_catches_mistakes(tmp_path):
    checked = _mypy(tmp_path, USER_SCRIPT)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    wrong = _mypy(tmp_path, MISTAKES)
    report = wrong.stdout
    assert wrong.returncode == 1, report
    assert 'Too many positional arguments for "run"' in report
    assert 'incompatible type "str"; expected "Graph"' in report
    assert '"Result" has no attribute "valeus"' in report
