"""Batches of sparse notify-pull iterations on the CPU.

A run on the CPU alone executes its notify-pull iterations with the sparse
notify many at a time in one kernel call
(:func:`garaphpy.kernels.cpu.sparse_iterations`), the smallest on one
thread.  Each batched iteration must be the one the engine would have run
on its own: the same values, frontier and counters.  Checked here against
the same run with batching off (the plan's ``sparse_batches`` turned off) and
against SciPy, on grids (long, thin frontiers), a chain (one vertex a step)
and a SNAP graph.
"""

from __future__ import annotations

import numpy as np
import pytest

import garaphpy
from garaphpy import config
from garaphpy.kernels.cpu import SETTLED_CLAIM, SPARSE_COUNTERS
from garaphpy.programs import SSSP
from garaphpy.scheduler import decisions

import references
from references import (assert_program_values, bfs_scipy, components_scipy, random_csr_csc,
                        sssp_scipy, weighted_chain)

#: Left out of the fast subset (``-m "not slow"``): the other programs and
#: executions of a case whose first one stays in it.
slow = pytest.mark.slow

#: Record fields a batched iteration must share with the same iteration run alone.
RECORD_FIELDS = ("iteration", "mode", "direction", "forced", "active_fraction", "rho",
                 "active_vertices", "updated_vertices", "edges_processed", "activated",
                 "pages")


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    return garaphpy.Graph.load("grid:40x30", store=tmp_path_factory.mktemp("grid") / "s",
                               progress=False)


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    return weighted_chain(tmp_path_factory.mktemp("chain") / "s", 3000, 7)


#: The plan's choices the runs of this module turn off: CC propagates labels
#: without shortcuts (which leave it no sparse iterations to batch), BFS
#: notifies and pulls in iterations run alone (no push: the batches are
#: compared with notify-pulls run alone), SSSP takes its frontiers whole (its
#: buckets of values are batches of their own, tests/test_value_priority.py).
BASE_OFF = frozenset({"shortcut_labels", "settling_push", "value_priority"})

#: What the runs turn off now: nothing, or (``batching`` sets it) BASE_OFF, and
#: ``sparse_batches`` where batching is off.
TURNED_OFF = {"now": frozenset()}


def run_engine(graph, program, sources=(), **options):
    return references.run_engine(graph, program, sources, turned_off=TURNED_OFF["now"],
                                 **options)


def run_engine_quietly(graph, program, sources=(), **options):
    return references.run_engine_quietly(graph, program, sources,
                                         turned_off=TURNED_OFF["now"], **options)


@pytest.fixture
def batching(monkeypatch):
    """Batching on or off (the plan's ``sparse_batches``), and
    ``config.CPU_SERIAL_STEP_EDGES``, for one test, batching from a run's
    first sparse iteration (``CPU_SPARSE_BATCH_AFTER`` = 0); the runs turn
    :data:`BASE_OFF` off."""
    monkeypatch.setattr(config, "CPU_SPARSE_BATCH_AFTER", 0)
    monkeypatch.setitem(TURNED_OFF, "now", BASE_OFF)

    def set_batching(on, serial_edges=None):
        monkeypatch.setitem(TURNED_OFF, "now",
                            BASE_OFF if on else BASE_OFF | {"sparse_batches"})
        monkeypatch.setattr(config, "CPU_SERIAL_STEP_EDGES", serial_edges)
    return set_batching


def reference(graph, name, sources):
    if name == "bfs":
        return bfs_scipy(graph, sources)
    if name == "sssp":
        return sssp_scipy(graph, sources)
    return components_scipy(graph)


def batched(result):
    return sum("sparse_batch" in record.decisions for record in result.iterations)


def run_both(graph, name, sources, batching, serial_edges=None, **options):
    """The run with batching on and off."""
    batching(True, serial_edges)
    on = run_engine(graph, name, sources, mode="cpu", **options)
    batching(False)
    off = run_engine(graph, name, sources, mode="cpu", **options)
    return on, off


def assert_same_records(on, off):
    assert len(on.iterations) == len(off.iterations)
    for a, b in zip(on.iterations, off.iterations):
        assert {f: getattr(a, f) for f in RECORD_FIELDS} == \
            {f: getattr(b, f) for f in RECORD_FIELDS}
        np.testing.assert_allclose(a.l1_change, b.l1_change, rtol=1e-12)   # nan == nan
        for name in ("direction", "dense_notify"):
            assert a.decisions.get(name) == b.decisions.get(name)


# -- the rule ------------------------------------------------------------------------------
def test_rule_batches_sparse_notify_pulls_only():
    rule = decisions.sparse_batch
    assert rule(100, 10_000, 5_000, 1.0)
    assert not rule(100, 10_000, 5_000, 1.0, forced="notify-pull")
    assert rule(10**6, 10**9, 10**9, 1.0)
    # the engine would pull: f > 1 / (2 rho)
    assert rule(500, 1000, 10**9, 1.0)
    assert not rule(501, 1000, 10**9, 1.0)
    assert not rule(300, 1000, 10**9, 2.0)
    # the engine would use the dense notify: a * NOTIFY_DENSE_FACTOR > |V|
    factor = config.NOTIFY_DENSE_FACTOR
    assert rule(100, 10**9, 100 * factor, 1.0)
    assert not rule(100, 10**9, 100 * factor - 1, 1.0)
    assert rule(0, 0, 10, 1.0)                                      # no edges: f = 0


def test_rule_runs_small_steps_on_one_thread():
    assert decisions.serial_step(4096, 4096) and decisions.serial_step(0, 0)
    assert not decisions.serial_step(4097, 4096)


def test_one_thread_threshold_grows_with_threads(monkeypatch):
    monkeypatch.setattr(config, "CPU_SERIAL_STEP_EDGES", None)
    monkeypatch.setattr(config, "CPU_SERIAL_EDGES_PER_THREAD", 1024)
    assert decisions.serial_step_edges(1) == decisions.serial_step_edges(4) == 4096
    assert decisions.serial_step_edges(16) == 16384
    monkeypatch.setattr(config, "CPU_SERIAL_STEP_EDGES", 0)    # set: the same on any count
    assert decisions.serial_step_edges(1) == decisions.serial_step_edges(64) == 0


def test_batch_records_the_threshold_it_ran_with(grid, monkeypatch):
    monkeypatch.setattr(config, "CPU_SERIAL_STEP_EDGES", None)
    result = garaphpy.run(grid, "bfs", sources=[41], mode="cpu", threads=2)
    batched = [r for r in result.iterations if "serial_step" in r.decisions]
    assert batched
    # a batch on kept threads (test_settle_rounds.py) steps its small levels by its own rule
    for record in batched:
        expected = decisions.round_serial_edges(2) if "settle_rounds" in record.decisions \
            else decisions.serial_step_edges(2)
        assert record.decisions["serial_step"]["serial_edges"] == expected


# -- batched iterations are the engine's own -----------------------------------------------
@pytest.mark.parametrize("name, execution", [
    ("bfs", "sync"), pytest.param("bfs", "async", marks=slow),
    pytest.param("sssp", "sync", marks=slow), ("sssp", "async"),
    pytest.param("cc", "sync", marks=slow), pytest.param("cc", "async", marks=slow)])
def test_grid_runs_equal_unbatched_runs_and_scipy(grid, name, execution, batching):
    sources = [] if name == "cc" else [41]
    on, off = run_both(grid, name, sources, batching, execution=execution, threads=2)
    # asynchronous label propagation sweeps the graph in few iterations of large
    # frontiers: whether one is sparse enough to batch varies from run to run
    if name != "cc" or execution == "sync":
        assert batched(on) > 0
    assert batched(off) == 0
    assert_program_values(name, on.values, off.values)
    assert_program_values(name, on.values, reference(grid, name, sources))
    assert on.converged and on.stop_reason == off.stop_reason
    if execution == "sync":
        assert_same_records(on, off)


@pytest.mark.parametrize("name, threads", [
    ("bfs", 1), pytest.param("bfs", 2, marks=slow), pytest.param("sssp", 1, marks=slow),
    ("sssp", 2)])
def test_chain_is_one_batch_after_another(chain, name, threads, batching):
    on, off = run_both(chain, name, [0], batching, execution="sync", threads=threads)
    assert len(on.iterations) == chain.num_vertices          # one vertex a step, then empty
    assert batched(on) == len(on.iterations)
    steps = [r.decisions["sparse_batch"]["steps"] for r in on.iterations]
    assert max(steps) == config.CPU_SPARSE_BATCH_STEPS
    assert_same_records(on, off)
    assert_program_values(name, on.values, reference(chain, name, [0]))


@pytest.mark.parametrize("name, execution", [
    pytest.param("bfs", "sync", marks=slow), pytest.param("bfs", "async", marks=slow),
    pytest.param("sssp", "sync", marks=slow), pytest.param("sssp", "async", marks=slow),
    ("cc", "sync"), pytest.param("cc", "async", marks=slow)])
def test_snap_graph_runs_equal_unbatched_runs_and_scipy(snap, name, execution, batching):
    sources = [] if name == "cc" else [0]
    on, off = run_both(snap, name, sources, batching, execution=execution, threads=2)
    if name != "cc" or execution == "sync":       # see the grid's test
        assert batched(on) > 0
    if execution == "sync":
        assert_same_records(on, off)
    assert_program_values(name, on.values, off.values)
    assert_program_values(name, on.values, reference(snap, name, sources))


@pytest.mark.parametrize("serial_edges, kinds", [(0, {False}), (16, {True, False}),
                                                  (4096, {True})])
@pytest.mark.parametrize("name", ["bfs", pytest.param("sssp", marks=slow)])
def test_grid_steps_serial_parallel_or_both(grid, name, serial_edges, kinds, batching):
    on, off = run_both(grid, name, [41], batching, serial_edges=serial_edges,
                       execution="sync", threads=2)
    # (a step left with nothing to gather, its notified vertices all settled, is serial)
    serial = {r.decisions["serial_step"]["choice"] for r in on.iterations
              if "sparse_batch" in r.decisions and r.edges_processed}
    assert serial == kinds
    assert_same_records(on, off)
    assert_program_values(name, on.values, reference(grid, name, [41]))


# -- where a batch must stop ---------------------------------------------------------------
@pytest.mark.parametrize("limit", [1, 7, 256, 1000])
def test_max_iterations_inside_a_batch_stops_exactly_there(chain, limit, batching):
    on = run_engine_quietly(chain, "bfs", [0], mode="cpu", max_iterations=limit, threads=2)
    assert len(on.iterations) == limit and not on.converged
    assert batched(on) == limit
    depth = bfs_scipy(chain, [0])
    np.testing.assert_array_equal(on.values, np.where(depth <= limit, depth, -1))


class CappedDistance(SSSP):
    """SSSP's distances below a cap of 1000 (the initial value): along a chain
    the L1 change of step k is 1000 - d(k), falling as the distances grow.  Not
    a fixed point to this test: its runs stop on the L1 change."""

    fixed_point = False

    def init(is_source):
        return 0.0 if is_source else 1000.0


def test_tolerance_stops_at_the_same_iteration(chain, batching):
    on, off = run_both(chain, CappedDistance(), [0], batching, execution="sync",
                       threads=2, tolerance=100.0, max_iterations=10_000)
    assert on.stop_reason == off.stop_reason == "tolerance"
    assert batched(on) == len(on.iterations) == len(off.iterations)
    assert on.iterations[-1].l1_change < 100.0 <= on.iterations[-2].l1_change
    np.testing.assert_array_equal(on.values, off.values)


def test_on_iteration_sees_every_iteration_in_order(chain, batching):
    seen = []
    result = run_engine(chain, "bfs", [0], mode="cpu", threads=2,
                        on_iteration=lambda record: seen.append(record.iteration))
    assert batched(result) == len(result.iterations)
    assert seen == list(range(len(result.iterations)))


def test_checkpoints_stay_due_and_resume_exactly(chain, tmp_path, batching):
    class Crash(Exception):
        pass

    def crash_at(record):
        if record.iteration == 1200:
            raise Crash

    directory = tmp_path / "ck"
    with pytest.raises(Crash):
        run_engine(chain, "sssp", [0], mode="cpu", threads=2, checkpoint_dir=directory,
                   checkpoint_every=500, on_iteration=crash_at)
    from garaphpy.scheduler.checkpoint import list_checkpoints
    # batches end where checkpoints are due (500, 1000); the crash comes before 1500
    assert [p.name for p in list_checkpoints(directory)] == [
        "checkpoint-000000500.gck", "checkpoint-000001000.gck"]
    resumed = run_engine(chain, "sssp", [0], mode="cpu", threads=2, checkpoint_dir=directory,
                         checkpoint_every=500, resume=True)
    assert [r.iteration for r in resumed.iterations] == list(range(chain.num_vertices))
    np.testing.assert_array_equal(resumed.values, sssp_scipy(chain, [0]))


# -- runs that never batch -----------------------------------------------------------------
@slow
def test_programs_with_aggregates_are_not_batched(chain, batching):
    result = run_engine_quietly(chain, "pagerank", mode="cpu", threads=2, max_iterations=5)
    assert batched(result) == 0


def test_forced_direction_is_not_batched(chain, batching):
    result = run_engine_quietly(chain, "bfs", [0], mode="cpu", threads=2,
                                direction="notify-pull", max_iterations=50)
    assert batched(result) == 0 and len(result.iterations) == 50


def test_pages_read_from_storage_are_not_batched(tmp_path, batching):
    from references import out_of_core_rmat
    from helpers import budget

    graph = out_of_core_rmat(tmp_path)
    source = int(np.argmax(np.diff(graph.store.out_offsets)))
    result = run_engine(graph, "bfs", [source], mode="cpu", threads=2,
                        **budget(graph, "bfs", 0.2))
    assert any(r.bytes_read for r in result.iterations)
    assert batched(result) == 0
    assert_program_values("bfs", result.values, bfs_scipy(graph, [source]))


@pytest.mark.parametrize("push", [False, True], ids=["notify-pull", "push"])
@pytest.mark.parametrize("early_exit", [False, True], ids=["full", "early-exit"])
@pytest.mark.parametrize("serial_edges", [0, 10**6])
@pytest.mark.parametrize("symmetric", [False, True], ids=["directed", "symmetric"])
def test_kernel_leaves_no_claimed_flag_and_counts_like_numpy(serial_edges, early_exit, push,
                                                             symmetric):
    """The kernel alone on a random graph: its counters against a NumPy BFS
    (Beamer's top-down steps with ``push``, which needs early exit).  On a
    symmetric graph the kernel is told the degrees match, and counts the
    settled in-edges from the next frontier's out-degrees."""
    from garaphpy.kernels.cpu_program import compile_program
    from garaphpy.programs import BFS
    from garaphpy.programs.bfs import UNREACHED

    n, m = 500, 450 if symmetric else 900
    out_offsets, out_targets, in_offsets, sources = random_csr_csc(7, n, m, symmetric)
    compiled = compile_program(BFS(), None, parallel=False)
    is_source = np.zeros(n, np.bool_)
    degree = np.diff(out_offsets)
    root = int(np.argmax(degree))
    is_source[root] = True
    attrs = (degree, np.diff(in_offsets), np.zeros(n), np.arange(n), is_source)
    values = np.full(n, UNREACHED, compiled.value_dtype)
    values[root] = 0
    claimed = np.zeros(n, np.uint8)
    if early_exit:      # settled vertices hold a claim for good
        claimed[is_source] = SETTLED_CLAIM
    counters = np.zeros((64, len(SPARSE_COUNTERS)), np.int64)
    changes = np.zeros(64)
    settled = is_source.copy() if early_exit else np.zeros(1, np.bool_)
    in_degree = np.diff(in_offsets)
    unsettled = np.array([in_degree[~is_source].sum() if early_exit else 0], np.int64)
    # early exit is for synchronous runs (in place, a parent found first may be a level late)
    values_write = values.copy() if early_exit else values
    frontier, steps = compiled.kernels.sparse_iterations(
        compiled.identity, np.array([root]), claimed,
        (out_offsets, out_targets, in_offsets, sources, np.zeros(1)),
        (values, values_write, early_exit), (attrs, np.zeros(1), n, 1),
        (m, 1.0, 0, -np.inf, 0.0), (64, serial_edges, 4, 2), (counters, changes),
        (early_exit, settled, unsettled, push, symmetric))
    pushed = push and early_exit
    np.testing.assert_array_equal(counters[:steps, 5], counters[:steps, 3] <= serial_edges)
    assert steps > 3
    assert not claimed.any() if not early_exit else \
        (claimed == np.where(settled, SETTLED_CLAIM, 0)).all()
    # NumPy: the frontier's out-neighbours each step; depth = first step reached
    depth = np.full(n, -1)
    depth[root] = 0
    level, step = np.array([root]), 0
    while level.size and step < steps:
        targets = np.unique(np.concatenate([out_targets[out_offsets[u]:out_offsets[u + 1]]
                                            for u in level]))
        if early_exit:      # the settled ones are dropped before their gather
            assert counters[step, 6] == in_degree[depth < 0].sum()
            targets = targets[depth[targets] < 0]
        # a push writes each new vertex once and reads the frontier's out-edges
        assert counters[step, :4].tolist() == [
            level.size, int(degree[level].sum()), targets.size,
            int(degree[level].sum()) if pushed else int(in_degree[targets].sum())]
        new = targets[depth[targets] < 0]
        depth[new] = step + 1
        assert counters[step, 4] == new.size
        level, step = np.sort(new), step + 1
    assert level.size == 0 and frontier.size == 0
    np.testing.assert_array_equal(values, np.where(depth < 0, UNREACHED, depth))
    if early_exit:
        np.testing.assert_array_equal(settled, depth >= 0)
        assert unsettled[0] == in_degree[depth < 0].sum()


def test_batches_start_after_the_first_single_sparse_iterations(chain):
    after = config.CPU_SPARSE_BATCH_AFTER
    assert after > 0
    result = run_engine(chain, "bfs", [0], mode="cpu", threads=2)
    single = [r for r in result.iterations if "sparse_batch" not in r.decisions]
    assert [r.iteration for r in single] == list(range(after))
    assert batched(result) == len(result.iterations) - after
    np.testing.assert_array_equal(result.values, bfs_scipy(chain, [0]))
    short = run_engine_quietly(chain, "bfs", [0], mode="cpu", threads=2,
                               max_iterations=after)
    assert batched(short) == 0


def test_matching_degrees_count_the_settled_in_edges_from_the_frontier(grid, monkeypatch):
    """A grid's vertices have as many in-edges as out-edges: batched top-down
    steps count the settled in-edges from the next frontier's out-degrees,
    and every record equals the one counted from the in-edge offsets."""
    from garaphpy.scheduler.cpu.batches import SparseBatches

    assert np.array_equal(grid.store.out_degree, grid.store.in_degree)
    monkeypatch.setattr(config, "CPU_SPARSE_BATCH_AFTER", 0)
    matched = run_engine(grid, "bfs", [0], mode="cpu", threads=2)
    monkeypatch.setattr(SparseBatches, "degrees_match", lambda self: False)
    counted = run_engine(grid, "bfs", [0], mode="cpu", threads=2)
    assert batched(matched) > 10
    np.testing.assert_array_equal(matched.values, counted.values)
    np.testing.assert_array_equal(matched.values, bfs_scipy(grid, [0]))
    assert [r.decisions for r in matched.iterations] == \
        [r.decisions for r in counted.iterations]
    assert [(r.active_vertices, r.edges_processed) for r in matched.iterations] == \
        [(r.active_vertices, r.edges_processed) for r in counted.iterations]
