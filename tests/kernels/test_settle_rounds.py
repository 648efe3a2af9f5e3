"""Beamer's top-down steps on threads kept across levels (BFS).

A program final once set (the built-in BFS) run on the CPU alone with two
threads or more takes its batches of sparse steps in
:func:`garaphpy.kernels.cpu.settle_push_rounds`: one parallel region whose
threads meet at a barrier per level (GAPBS's top-down BFS), small levels
stepped by one thread.  Each level must be the step the launched kernels
take: the same depths as SciPy's, the same counters and directions
iteration by iteration, on symmetric and directed graphs, with every level
shared, every level on one thread, or the rule's mix; a loaded machine and
threads that do not meet fall back to the launched steps; a false
declaration still raises.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

import garaphpy
from garaphpy import _numba_setup, config
from garaphpy.program import ProgramError, VertexProgram
from garaphpy.scheduler import decisions
from garaphpy.scheduler.cpu import team

from references import bfs_scipy, run_engine, run_engine_quietly


@pytest.fixture(scope="module")
def graphs(tmp_path_factory, request):
    base = tmp_path_factory.mktemp("settle-rounds")
    chain = np.arange(2999, dtype=np.int64)
    return {
        "grid": garaphpy.Graph.load("grid:60x50", store=base / "grid", progress=False),
        "chain": garaphpy.Graph.from_arrays(chain, chain + 1, np.ones(2999), num_vertices=3000,
                                            store=base / "chain"),
        # directed: in-degrees differ from out-degrees (settled in-edges read from the CSC)
        "rmat": garaphpy.Graph.load("rmat:12", store=base / "rmat", progress=False),
        "rmat-symmetric": garaphpy.Graph.load("rmat:12", store=base / "rmat-s",
                                              progress=False).as_undirected(),
        "sample": garaphpy.Graph.load(
            request.config.rootpath / "examples" / "graphs" / "sample-web.txt.gz",
            store=base / "sample", progress=False),
    }


@pytest.fixture
def rounds_on(monkeypatch):
    """Rounds allowed, on a machine taken as not loaded, batches from the start."""
    monkeypatch.setattr(config, "CPU_SPARSE_BATCH_AFTER", 0)
    monkeypatch.setattr(_numba_setup, "WAIT_POLICY", "default (spin, then sleep)")


def source_of(graph) -> int:
    """The largest out-degree (a hub: Beamer's rule pulls in between), or 0 on the chain."""
    return int(np.argmax(graph.store.out_degree))


def bfs(graph, source, quietly=False, **options):
    options = {"mode": "cpu", "threads": 2, **options}
    run = run_engine_quietly if quietly else run_engine
    return run(graph, "bfs", [source], **options)


def in_rounds(result) -> int:
    return sum("settle_rounds" in r.decisions for r in result.iterations)


def steps_of(result) -> list:
    """Each iteration as the engine saw it: counters, direction, unsettled in-edges."""
    return [(r.iteration, r.direction, r.active_vertices, r.updated_vertices,
             r.edges_processed, r.activated, r.decisions["direction"].get("unsettled_in_edges"))
            for r in result.iterations]


def test_rule_needs_the_push_two_threads_an_unloaded_machine_and_the_switch(monkeypatch):
    assert decisions.cpu_settle_rounds(True, 2, loaded=False)
    assert not decisions.cpu_settle_rounds(False, 16, loaded=False)
    assert not decisions.cpu_settle_rounds(True, 1, loaded=False)
    assert not decisions.cpu_settle_rounds(True, 16, loaded=True)
    assert decisions.round_serial_edges(16) == 16 * config.CPU_ROUND_SERIAL_EDGES_PER_THREAD
    monkeypatch.setattr(config, "CPU_ROUND_SERIAL_EDGES", 5)
    assert decisions.round_serial_edges(16) == 5


@pytest.mark.parametrize("serial_edges", [0, None, 10**12],
                         ids=["every-level-shared", "rule", "every-level-alone"])
@pytest.mark.parametrize("name", ["grid", "chain", "rmat", "rmat-symmetric", "sample"])
def test_levels_equal_scipy_and_the_launched_steps(graphs, name, serial_edges, rounds_on,
                                                   monkeypatch):
    graph = graphs[name]
    source = source_of(graph)
    monkeypatch.setattr(config, "CPU_ROUND_SERIAL_EDGES", serial_edges)
    rounds = bfs(graph, source)
    assert in_rounds(rounds) > 0 and rounds.converged
    np.testing.assert_array_equal(rounds.values, bfs_scipy(graph, [source]))
    alone = [(r.decisions["serial_step"]["choice"], r.edges_processed)
             for r in rounds.iterations if "settle_rounds" in r.decisions]
    if serial_edges == 0:       # but a level with no out-edge
        assert not any(choice for choice, edges in alone if edges > 0)
    elif serial_edges == 10**12:
        assert all(choice for choice, _ in alone)
    launched = bfs(graph, source, turned_off={"settle_rounds"})
    assert in_rounds(launched) == 0
    np.testing.assert_array_equal(rounds.values, launched.values)
    assert steps_of(rounds) == steps_of(launched)


@pytest.mark.parametrize("serial_edges", [0, 10**12], ids=["shared", "alone"])
def test_levels_larger_than_a_threads_buffer(tmp_path, serial_edges, rounds_on, monkeypatch):
    """A fan, 0 -> 1..3000 and each i -> i + 3000: levels of 3,000 vertices, which
    a thread appends to the queue in several flushes of its buffer (among
    isolated vertices: the levels stay sparse, in batches)."""
    from garaphpy.kernels import cpu as cpu_kernels

    assert cpu_kernels.SETTLE_ROUND_BUFFER < 1500
    fan = np.arange(1, 3001, dtype=np.int64)
    graph = garaphpy.Graph.from_arrays(np.concatenate([np.zeros(3000, np.int64), fan]),
                                       np.concatenate([fan, fan + 3000]), np.ones(6000),
                                       num_vertices=200_001, store=tmp_path / "fan")
    monkeypatch.setattr(config, "CPU_SETTLING_PULL_FACTOR", 1e-9)     # top-down throughout
    monkeypatch.setattr(config, "CPU_ROUND_SERIAL_EDGES", serial_edges)
    result = bfs(graph, 0)
    assert in_rounds(result) == 3
    assert [r.activated for r in result.iterations] == [3000, 3000, 0]
    np.testing.assert_array_equal(result.values, bfs_scipy(graph, [0]))


def test_a_loaded_machine_launches_its_steps(graphs, rounds_on, monkeypatch):
    monkeypatch.setattr(_numba_setup, "WAIT_POLICY", "PASSIVE")
    graph = graphs["grid"]
    result = bfs(graph, 61)
    assert in_rounds(result) == 0
    np.testing.assert_array_equal(result.values, bfs_scipy(graph, [61]))


def test_one_thread_launches_its_steps(graphs, rounds_on):
    result = bfs(graphs["grid"], 61, threads=1)
    assert in_rounds(result) == 0


def test_threads_that_do_not_meet_leave_the_run_to_the_launched_steps(graphs, rounds_on,
                                                                      monkeypatch):
    """One team member more than the threads run: the rendezvous fails before any
    work, and the run goes on with launched steps, to the same depths."""
    monkeypatch.setattr(team, "team_size", lambda: numba.get_num_threads() + 1)
    graph = graphs["grid"]
    result = bfs(graph, 61)
    assert in_rounds(result) == 0
    assert any("sparse_batch" in r.decisions for r in result.iterations)
    np.testing.assert_array_equal(result.values, bfs_scipy(graph, [61]))


def test_iteration_limit_and_checkpoints(graphs, tmp_path, rounds_on, monkeypatch):
    graph = graphs["chain"]
    monkeypatch.setattr(config, "CPU_PUSH_ROUND_STEPS", 50)     # calls of 50 levels
    limited = bfs(graph, 0, quietly=True, max_iterations=7)
    assert len(limited.iterations) == 7 and in_rounds(limited) > 0
    np.testing.assert_array_equal(limited.values[:8], np.arange(8))
    assert (limited.values[8:] == -1).all()

    class Crash(Exception):
        pass

    def crash_at(record):
        if record.iteration == 1500:
            raise Crash

    directory = tmp_path / "ck"
    with pytest.raises(Crash):
        bfs(graph, 0, checkpoint_dir=directory, checkpoint_every=100, on_iteration=crash_at)
    resumed = bfs(graph, 0, checkpoint_dir=directory, checkpoint_every=100, resume=True)
    assert resumed.converged and in_rounds(resumed) > 0
    np.testing.assert_array_equal(resumed.values, np.arange(3000))


class DegreeLevels(VertexProgram):
    """Depths plus the parent's out-degree, declared final once set: a false
    declaration (a path of more edges through low degrees may be shorter)."""

    value_dtype = np.int64
    sum = "min"
    initially_active = "sources"
    needs_sources = True
    final_once_set = True
    max_iterations = 100_000

    def init(is_source):
        return 0 if is_source else 1099511627776     # 2**40

    def gather(src, src_out_degree):
        return src + src_out_degree

    def apply(value, accum):
        return min(value, accum)

    def activate(new, old):
        return new < old


def test_a_false_declaration_still_raises(graphs, rounds_on):
    graph = graphs["rmat"]
    with pytest.raises(ProgramError, match="declares final_once_set = True"):
        run_engine(graph, DegreeLevels(), [source_of(graph)], mode="cpu", threads=2)


def test_no_thread_shares_its_buffers(capsys):
    """numba moves an allocation of a size fixed in a parallel loop out of it
    (allocation hoisting): the threads' buffers would be one array shared by
    all.  The kernel, compiled here for BFS (not from the cache), must hoist
    none."""
    from garaphpy import api
    from garaphpy.kernels import cpu as cpu_kernels
    from garaphpy.programs.bfs import BFS, UNREACHED

    program = api._compiled_program(BFS(), parallel=True)
    calls = program.kernels
    kernel = numba.njit(parallel=True)(cpu_kernels.settle_push_rounds.py_func)
    n = 5
    offsets = np.array([0, 2, 3, 4, 5, 5], np.int64)        # 0 -> 1, 2; 1 -> 3; 2 -> 3; 3 -> 4
    targets = np.array([1, 2, 3, 3, 4], np.int32)
    in_offsets = np.array([0, 0, 1, 2, 4, 5], np.int64)
    values = np.array([0] + [UNREACHED] * 4, np.int64)
    settled = np.array([True, False, False, False, False])
    claimed = np.array([2, 0, 0, 0, 0], np.uint8)
    attrs = (np.ones(n, np.int32), np.ones(n, np.int32), np.ones(n), np.arange(n),
             np.zeros(n, np.bool_))
    unsettled = np.array([5], np.int64)
    left, steps = kernel(calls.gather_call, calls.apply_call, calls.activate_call,
                         calls.combine, program.identity, np.array([0], np.int64),
                         (offsets, targets, in_offsets, np.ones(5)), (values, values, False),
                         (attrs, np.zeros(1), n, 0), (100, -np.inf, 0.0, 0),
                         (settled, claimed, unsettled, False),
                         (np.zeros((100, 7), np.int64), np.zeros(100)),
                         numba.get_num_threads())
    np.testing.assert_array_equal(values, [0, 1, 1, 2, 3])
    assert steps == 4 and left.size == 0 and unsettled[0] == 0 and settled.all()
    capsys.readouterr()
    kernel.parallel_diagnostics(level=4)
    report = capsys.readouterr().out
    assert "Allocation hoisting" in report
    assert "is hoisted out" not in report.split("Loop invariant code motion")[-1]
