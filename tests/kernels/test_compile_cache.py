"""The CPU program cache: generated program modules kept across processes.

A program's module (:func:`garaphpy.kernels.cpu_program.load_program_module`)
is written once to ``GARAPHPY_CACHE/programs`` and numba's disk cache of its
kernels is reused by later processes; a changed constant or function body
gets a new key; an unusable cache directory compiles in memory; two
processes compiling the same program at once both succeed.  Values are
checked against NumPy references.
"""

from __future__ import annotations

import json
import math
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import garaphpy
from garaphpy import api
from garaphpy.kernels import cpu_program
from garaphpy.program import VertexProgram
from garaphpy.programs import PageRank
from helpers import REPOSITORY


#: A 6-vertex graph: edges (src, dst) with weights.
SOURCES = np.array([0, 0, 1, 2, 3, 3, 4, 5, 5])
TARGETS = np.array([1, 2, 2, 0, 4, 5, 3, 0, 4])


def pagerank_reference(damping: float, iterations: int = 200) -> np.ndarray:
    """Power iteration with dangling mass spread evenly (NumPy, dense)."""
    n = 6
    matrix = np.zeros((n, n))
    out_degree = np.bincount(SOURCES, minlength=n)
    for u, v in zip(SOURCES, TARGETS):
        matrix[v, u] += 1.0 / out_degree[u]
    rank = np.full(n, 1.0 / n)
    for _ in range(iterations):
        dangling = rank[out_degree == 0].sum()
        rank = (1 - damping) / n + damping * (matrix @ rank + dangling / n)
    return rank


class CountIn(VertexProgram):
    """Each vertex's in-degree times ``scale``, in one pull."""

    value_dtype = "float64"
    sum = "add"
    constants = {"scale": 1.0}

    def init(vertex):
        return 0.0

    def gather(src):
        return scale  # noqa: F821  (a program constant)

    def apply(accum):
        return accum

    def activate(new, old):
        return False


class CountInTwice(CountIn):
    """CountIn with another gather body."""

    def gather(src):
        return 2.0 * scale  # noqa: F821


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    return garaphpy.Graph.from_arrays(SOURCES, TARGETS, num_vertices=6,
                                      store=tmp_path_factory.mktemp("store") / "g")


def _run_cpu(graph, program, **keywords):
    return garaphpy.run(graph, program, mode="cpu", threads=1, **keywords)


SCRIPT = """
import json, sys
import numpy as np
import garaphpy
from garaphpy import api
from garaphpy.programs import PageRank
graph = garaphpy.Graph.from_arrays(np.array({sources}), np.array({targets}), num_vertices=6,
                                   store=sys.argv[1])
program = PageRank(damping=0.75)
result = garaphpy.run(graph, program, mode="cpu", threads=1, tolerance=1e-12,
                      max_iterations=500)
compiled = api._compiled_program(program, parallel=False)    # a one-thread run's
print(json.dumps({{"module_cached": compiled.module_cached, "hits": compiled.cache_hits(),
                  "values": result.values.tolist()}}))
""".format(sources=SOURCES.tolist(), targets=TARGETS.tolist())


def _subprocess(cache: Path, store: Path) -> subprocess.Popen:
    environment = {**os.environ, "GARAPHPY_CACHE": str(cache),
                   "PYTHONPATH": os.pathsep.join([str(REPOSITORY),
                                                  os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-c", SCRIPT, str(store)], env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _report(process: subprocess.Popen) -> dict:
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.mark.slow      # fresh processes compile the program: 15-30 s on 2 cores
def test_second_process_loads_the_program_from_the_cache(tmp_path):
    first = _report(_subprocess(tmp_path / "cache", tmp_path / "store"))
    second = _report(_subprocess(tmp_path / "cache", tmp_path / "store"))
    assert not first["module_cached"] and first["hits"] == 0
    assert second["module_cached"] and second["hits"] > 0
    assert second["values"] == first["values"]
    np.testing.assert_allclose(second["values"], pagerank_reference(0.75), rtol=1e-9)
    assert len(list((tmp_path / "cache" / "programs").glob("PageRank-*.py"))) == 1


@pytest.mark.slow      # fresh processes compile the program: 15-30 s on 2 cores
def test_concurrent_compiles_of_one_program_both_succeed(tmp_path):
    processes = [_subprocess(tmp_path / "cache", tmp_path / f"store{i}") for i in range(2)]
    reports = [_report(process) for process in processes]
    assert reports[0]["values"] == reports[1]["values"]
    np.testing.assert_allclose(reports[0]["values"], pagerank_reference(0.75), rtol=1e-9)
    assert not list((tmp_path / "cache" / "programs").glob("*.tmp"))


def _program_cache(monkeypatch, directory: Path) -> None:
    monkeypatch.setattr(api, "_program_cache_directory", lambda: directory)


def test_a_changed_constant_gets_a_new_module_and_its_values(graph, tmp_path, monkeypatch):
    _program_cache(monkeypatch, tmp_path / "programs")
    monkeypatch.setattr(api, "_COMPILED", {})
    values = {}
    for damping in (0.55, 0.6):
        result = _run_cpu(graph, PageRank(damping=damping), tolerance=1e-12,
                          max_iterations=500)
        values[damping] = result.values
        np.testing.assert_allclose(result.values, pagerank_reference(damping), rtol=1e-9)
    assert len(list((tmp_path / "programs").glob("PageRank-*.py"))) == 2
    keys = {cpu_program.program_key(PageRank(damping=d)) for d in (0.55, 0.6)}
    assert len(keys) == 2


def test_a_changed_function_body_gets_a_new_key_and_its_values(graph, tmp_path, monkeypatch):
    _program_cache(monkeypatch, tmp_path / "programs")
    in_degree = np.bincount(TARGETS, minlength=6).astype(float)
    sources = [cpu_program.program_module_source(p) for p in (CountIn(), CountInTwice())]
    assert sources[0] != sources[1]
    assert cpu_program.program_key(CountIn()) != cpu_program.program_key(CountInTwice())
    np.testing.assert_array_equal(_run_cpu(graph, CountIn(scale=3.0)).values, 3 * in_degree)
    np.testing.assert_array_equal(_run_cpu(graph, CountInTwice(scale=3.0)).values,
                                  6 * in_degree)


def test_an_unusable_cache_directory_compiles_in_memory(graph, tmp_path, monkeypatch):
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    _program_cache(monkeypatch, not_a_directory / "programs")
    monkeypatch.setattr(api, "_COMPILED", {})
    program = PageRank(damping=0.7)
    result = _run_cpu(graph, program, tolerance=1e-12, max_iterations=500)
    np.testing.assert_allclose(result.values, pagerank_reference(0.7), rtol=1e-9)
    compiled = api._compiled_program(program, parallel=False)
    assert not compiled.module_cached and compiled.kernels.CACHE is False


def test_only_the_paths_a_run_takes_are_compiled_and_it_is_announced(graph, tmp_path,
                                                                      monkeypatch, caplog):
    _program_cache(monkeypatch, tmp_path / "programs")
    monkeypatch.setattr(api, "_COMPILED", {})
    monkeypatch.setattr(cpu_program, "ANNOUNCE_AFTER_SECONDS", 0.0)
    program = PageRank(damping=0.65)            # a key no other test compiled
    with caplog.at_level(logging.INFO, logger="garaphpy"):
        result = _run_cpu(graph, program, tolerance=1e-12, max_iterations=500)
    assert {r.direction for r in result.iterations} == {"pull"}
    assert result.plan.cpu.fused_pull       # on the CPU alone, over one CSC in memory
    kernels = api._compiled_program(program, parallel=False).kernels   # threads=1
    assert kernels.pull_fused_aggregates.signatures
    # the page-by-page pull and its apply: never taken by a fused run, never compiled
    assert not kernels.pull_range_precomputed.signatures and not kernels.pull_range.signatures
    assert not kernels.apply_vertices.signatures
    assert not kernels.pull_vertices.signatures      # notify-pull: never compiled
    messages = [r.getMessage() for r in caplog.records if r.name == cpu_program.__name__]
    assert messages == ["compiling PageRank for the CPU (first run; cached afterwards)"]


@pytest.mark.slow      # compiles a fresh program module twice: 9 s on 2 cores
def test_a_one_thread_run_compiles_serial_kernels_with_the_same_values(graph, tmp_path,
                                                                      monkeypatch):
    # threads=1 takes the module without numba's parallel=True (it compiles in a
    # fraction of the time); two threads take the parallel one: same ranks
    _program_cache(monkeypatch, tmp_path / "programs")
    monkeypatch.setattr(api, "_COMPILED", {})
    program = PageRank(damping=0.8)
    assert "parallel=True" not in cpu_program.program_module_source(program, parallel=False)
    assert "parallel=True" in cpu_program.program_module_source(program, parallel=True)
    serial = _run_cpu(graph, program, tolerance=1e-12, max_iterations=500)
    parallel = garaphpy.run(graph, program, mode="cpu", threads=2, tolerance=1e-12,
                            max_iterations=500)
    np.testing.assert_allclose(serial.values, pagerank_reference(0.8), rtol=1e-9)
    np.testing.assert_allclose(parallel.values, serial.values, rtol=1e-12)
    assert api._compiled_program(program, parallel=False).kernels.pull_fused_aggregates \
        .signatures
    assert len(list((tmp_path / "programs").glob("PageRank-*.py"))) == 2


class Hops(VertexProgram):
    """Fewest hops from vertex 0 (reads no edge value)."""

    value_dtype = "float64"
    sum = "min"
    initially_active = "sources"

    def init(vertex):
        return 0.0 if vertex == 0 else math.inf

    def gather(src):
        return src + 1.0

    def apply(value, accum):
        return min(value, accum)

    def activate(new, old):
        return new < old


class WeightedHops(Hops):
    """Shortest distance from vertex 0 over the edge values."""

    def gather(src, weight):
        return src + weight


def test_a_program_reading_no_weights_compiles_once_for_any_weight_type(graph, tmp_path,
                                                                       monkeypatch):
    # the kernels get one dummy for the edge values of every store (weighted
    # with int32 or float32, or unweighted): one signature per kernel
    _program_cache(monkeypatch, tmp_path / "programs")
    monkeypatch.setattr(api, "_COMPILED", {})
    weights = np.arange(1, len(SOURCES) + 1)
    graphs = [graph] + [garaphpy.Graph.from_arrays(SOURCES, TARGETS, weights.astype(dtype),
                                                   num_vertices=6, store=tmp_path / name)
                        for name, dtype in (("int", np.int32), ("real", np.float32))]
    assert [g.store.weight_dtype for g in graphs[1:]] == [np.int32, np.float32]
    hops = scipy_shortest(np.ones(len(SOURCES)))
    for g in graphs:
        np.testing.assert_array_equal(_run_cpu(g, Hops(), sources=[0]).values, hops)
    kernels = api._compiled_program(Hops(), parallel=False).kernels
    compiled = {name: len(getattr(kernels, name).signatures)
                for name in ("pull_range", "pull_vertices", "sparse_iterations")}
    assert max(compiled.values()) == 1 and sum(compiled.values()) >= 1, compiled
    for g, dtype in zip(graphs[1:], (np.int32, np.float32)):
        np.testing.assert_array_equal(_run_cpu(g, WeightedHops(), sources=[0]).values,
                                      scipy_shortest(weights.astype(dtype)))


def scipy_shortest(weights: np.ndarray) -> np.ndarray:
    """Shortest distances from vertex 0 (SciPy's Dijkstra)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import dijkstra
    matrix = csr_matrix((weights.astype(np.float64), (SOURCES, TARGETS)), shape=(6, 6))
    return dijkstra(matrix, indices=0)


COMPILES_SCRIPT = """
import json, sys
from numba.core import event

compiled = []


class Compiles(event.Listener):
    def on_start(self, event_):
        function = event_.data["dispatcher"].py_func
        compiled.append(f"{function.__module__}.{function.__qualname__}")

    def on_end(self, event_):
        pass


event.register("numba:compile", Compiles())
from garaphpy.cli import main
code = main(sys.argv[1:])
from garaphpy.kernels import cpu
parallel = [name for name in ("touch", "vertex_ids", "frontier_degree_sum")
            if getattr(cpu, name).signatures]       # compiled or loaded
print(json.dumps({"code": code, "compiled": compiled, "parallel": parallel}))
"""


@pytest.mark.slow      # a fresh process compiles the program: 10-30 s on 2 cores
@pytest.mark.parametrize("overrides", [[], ["run.program=bfs", "run.sources=422"]],
                         ids=["quickstart", "bfs"])
def test_a_second_process_compiles_nothing(overrides, tmp_path):
    # the README's quickstart (PageRank), and BFS (an integer program: its init
    # values are checked on the host) over the shipped graph: the first process
    # fills the caches, the second loads every kernel from them
    arguments = [str(REPOSITORY / "examples" / "quickstart.toml"), "--quiet"]
    for override in [*overrides, f"output.values={tmp_path / 'values.txt'}",
                     f"output.iterations={tmp_path / 'iterations.jsonl'}"]:
        arguments += ["--set", override]
    environment = {**os.environ, "GARAPHPY_CACHE": str(tmp_path / "cache"),
                   "PYTHONPATH": os.pathsep.join([str(REPOSITORY),
                                                  os.environ.get("PYTHONPATH", "")])}
    reports = []
    for _ in range(2):
        process = subprocess.run([sys.executable, "-c", COMPILES_SCRIPT, *arguments],
                                 env=environment, capture_output=True, text=True, timeout=600)
        assert process.returncode == 0, process.stderr
        reports.append(json.loads(process.stdout.strip().splitlines()[-1]))
    assert [report["code"] for report in reports] == [0, 0]
    assert reports[1]["compiled"] == []
    # a small graph runs on one thread: numpy stands in for the parallel helpers
    assert reports[0]["parallel"] == reports[1]["parallel"] == []
