"""A program's default execution (fewer iterations; on
every processor).

A program's ``execution`` is the execution a run takes when the user asks
for none, on the CPU alone, the GPU alone and in a hybrid run.  The
built-in SSSP, CC and SSWP declare ``"async"``: updates made earlier in an
iteration are read later in it, so they reach the same fixed point in
fewer iterations.  The older ``cpu_execution`` is deprecated: where a
program declares it, it takes the place of ``execution``, with a warning.  BFS stays
synchronous: its iterations are the levels, and in place it gained 0.92-1.03x.  Checked here: the rule, the declaration's validation, and that
the default CPU run's values equal the synchronous run's and SciPy's.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import garaphpy
from garaphpy import api
from garaphpy.program import ProgramError, VertexProgram
from garaphpy.scheduler import decisions

from references import (MinLabels, assert_program_values, bfs_scipy, components_scipy,
                        run_engine, sssp_scipy, sswp_heap)


def test_rule_asked_then_the_programs_on_every_processor():
    rule = decisions.run_execution
    assert rule(None, "async") == "async"
    assert rule("sync", "async") == "sync"           # the user's choice wins
    assert rule(None, "sync") == "sync"
    assert rule("async", "sync") == "async"


def test_builtin_min_max_programs_declare_async_and_bfs_sync():
    from garaphpy.program import default_execution
    from garaphpy.programs import program_class

    for name in ("sssp", "cc", "sswp"):
        assert default_execution(program_class(name)) == "async"
        assert program_class(name).cpu_execution is None
    assert default_execution(program_class("bfs")) == "sync"


def test_deprecated_cpu_execution_warns_and_takes_the_place_of_execution(grid):
    from garaphpy.program import default_execution

    with pytest.warns(DeprecationWarning, match="cpu_execution is deprecated"):
        class OldStyle(MinLabels):
            cpu_execution = "async"
            max_iterations = 10_000

    assert OldStyle.execution == "sync" and default_execution(OldStyle) == "async"
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)    # warned once, where declared

        class Inheriting(OldStyle):
            max_iterations = 20_000

    assert default_execution(Inheriting) == "async"
    result = garaphpy.run(grid, OldStyle(), mode="cpu", threads=2)
    assert result.execution == "async"
    np.testing.assert_array_equal(result.values, components_scipy(grid))


def test_cpu_execution_must_be_sync_async_or_none():
    with pytest.raises(ProgramError, match="cpu_execution = 'fast'"):
        class Bad(VertexProgram):
            sum = "min"
            cpu_execution = "fast"

            def gather(src):
                return src

            def apply(value, accum):
                return min(value, accum)


class OwnMin(MinLabels):
    """A user's min program that declares the asynchronous execution."""

    execution = "async"
    max_iterations = 10_000


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    return garaphpy.Graph.load("grid:60x40", store=tmp_path_factory.mktemp("grid") / "s",
                               progress=False)


REFERENCES = {"bfs": bfs_scipy, "sssp": sssp_scipy, "sswp": sswp_heap,
              "cc": lambda graph, sources: components_scipy(graph)}


@pytest.mark.parametrize("graph_name", ["grid", "snap"])
@pytest.mark.parametrize("name", ["sssp", "sswp", "cc"])
def test_builtin_min_max_programs_run_async_on_the_cpu_with_the_same_values(
        request, graph_name, name):
    graph = request.getfixturevalue(graph_name)
    sources = [] if name == "cc" else [0]
    default = run_engine(graph, name, sources, mode="cpu", threads=2)
    synchronous = run_engine(graph, name, sources, mode="cpu", threads=2, execution="sync")
    assert default.execution == "async" and synchronous.execution == "sync"
    assert default.converged and synchronous.converged
    assert_program_values(name, default.values, synchronous.values)
    assert_program_values(name, default.values, REFERENCES[name](graph, sources))
    if any("value_priority" in r.decisions for r in default.iterations):
        # buckets of values: more iterations, each smaller (tests/kernels/test_value_priority.py)
        assert sum(r.edges_processed for r in default.iterations) <= \
            sum(r.edges_processed for r in synchronous.iterations)
    else:
        assert default.num_iterations <= synchronous.num_iterations
    report = default.program.verify(default.graph, default)
    assert report.ok, str(report)


def test_label_propagation_on_a_grid_takes_a_few_sweeps_instead_of_its_diameter(
        grid, monkeypatch):
    alone = {"shortcut_labels"}     # propagation alone
    default = api.execute(grid, "cc", mode="cpu", threads=1, turned_off=alone)
    synchronous = api.execute(grid, "cc", mode="cpu", threads=1, execution="sync",
                              turned_off=alone)
    # vertex ids run along the rows: one in-place sweep carries the smallest label far
    assert synchronous.num_iterations >= 60 + 40 - 1
    assert default.num_iterations <= 4
    np.testing.assert_array_equal(default.values, synchronous.values)


def test_user_program_declaring_it_runs_async(grid):
    result = garaphpy.run(grid, OwnMin(), mode="cpu", threads=2)
    assert result.execution == "async"
    np.testing.assert_array_equal(result.values, components_scipy(grid))


def test_programs_without_it_keep_their_execution(grid):
    with pytest.warns(garaphpy.NotConvergedWarning):     # 3 iterations, as asked
        result = garaphpy.run(grid, "pagerank", mode="cpu", threads=2, max_iterations=3,
                              tolerance=0.0)
    assert result.execution == "sync"
    result = garaphpy.run(grid, "bfs", mode="cpu", threads=2, sources=[0])
    assert result.execution == "sync"
    np.testing.assert_array_equal(result.values, bfs_scipy(grid, [0]))
