"""Sparse iterations in buckets of values on the CPU (delta-stepping).

A program that declares ``value_priority`` (SSSP, SSWP), run asynchronously
on the CPU alone, takes its frontier bucket by bucket
(:func:`garaphpy.kernels.cpu.priority_iterations`).  The order must change
the work, never the values: checked against SciPy's Dijkstra and a heap
reference on grids, a chain and a SNAP graph, with buckets so narrow that
most values wait in the far bin, with batches of a few steps, across
iteration limits and checkpoints; and the rules that turn the order on.
"""

from __future__ import annotations

import numpy as np
import pytest

import garaphpy
from garaphpy import config
from garaphpy.program import ProgramError
from garaphpy.scheduler import decisions

from references import run_engine, run_engine_quietly, sssp_scipy, sswp_heap, weighted_chain
from helpers import Hops


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    return garaphpy.Graph.load("grid:60x50", store=tmp_path_factory.mktemp("grid") / "s",
                               progress=False)


@pytest.fixture(scope="module")
def wide_grid(tmp_path_factory):
    """Large enough for the whole-frontier iterations to read each edge many
    times over (grid:200x200: 12x |E| against 3.6x in buckets)."""
    return garaphpy.Graph.load("grid:200x200", store=tmp_path_factory.mktemp("wide") / "s",
                               progress=False)


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    return weighted_chain(tmp_path_factory.mktemp("chain") / "s", 2000, 5)


def bucketed(result) -> int:
    return sum("value_priority" in record.decisions for record in result.iterations)


def edges_read(result) -> int:
    return sum(record.edges_processed for record in result.iterations)


def run_priority(graph, name, sources, on: bool, monkeypatch, quietly=False, push=True,
                 **options):
    """A run on the CPU alone, its buckets taken step by step (the rounds on kept
    threads, the plan's ``push_rounds``, are test_push_rounds.py's), in buckets
    where ``on``, their small steps pushed where ``push``."""
    options.setdefault("threads", 2)
    turned_off = {"push_rounds"} | (set() if on else {"value_priority"}) \
        | (set() if push else {"priority_push"})
    run = run_engine_quietly if quietly else run_engine
    return run(graph, name, sources, mode="cpu", turned_off=turned_off, **options)


# -- the rules -----------------------------------------------------------------------------
def test_rule_needs_declaration_cpu_async_batches_and_low_skew():
    assert decisions.value_priority(True, "cpu", False, True, 1.0)
    assert not decisions.value_priority(False, "cpu", False, True, 1.0)
    assert decisions.value_priority(True, "hybrid", False, True, 1.0)    # the CPU's batches
    assert not decisions.value_priority(True, "gpu", False, True, 1.0)
    assert not decisions.value_priority(True, "cpu", True, True, 1.0)     # synchronous
    assert not decisions.value_priority(True, "cpu", False, False, 1.0)   # pages streamed
    assert not decisions.value_priority(True, "cpu", False, True, 75.0, max_skew=4.0)


def test_in_degree_skew_of_regular_and_star_graphs():
    assert decisions.in_degree_skew(np.full(100, 4)) == pytest.approx(1.0)
    star = np.zeros(101, np.int64)
    star[0] = 100                       # 100 edges into one vertex of 101
    assert decisions.in_degree_skew(star) == pytest.approx(101.0)
    assert decisions.in_degree_skew(np.zeros(5, np.int64)) == 1.0


def _other_threads_cpu_ticks() -> int:
    """CPU clock ticks of this process's threads other than the calling one."""
    import os
    import threading

    own = str(threading.get_native_id())
    ticks = 0
    for task in os.listdir("/proc/self/task"):
        if task != own:
            with open(f"/proc/self/task/{task}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])     # utime, stime
    return ticks


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/task"),
                    reason="per-thread CPU times are read from Linux's /proc")
def test_the_skew_wakes_no_blas_threads():
    """A run's choices read the skew beside its own threads: a BLAS product
    would wake OpenBLAS's pool, whose threads then spin against the run's
    parallel loops (100-160 ms of set-up measured on the 16-core host)."""
    import time

    degrees = np.random.default_rng(3).integers(0, 50, 4_000_000)
    time.sleep(0.3)                     # other threads' spinning after earlier tests ends
    before = _other_threads_cpu_ticks()
    for _ in range(20):
        decisions.in_degree_skew(degrees)
    time.sleep(0.2)
    assert _other_threads_cpu_ticks() - before <= 2


def test_bucket_width_rule():
    assert decisions.bucket_width(None, 128.0, 4.0) == 32.0       # GAPBS's grid delta
    assert decisions.bucket_width(None, None, 4.0) == 1.0          # no edge values read
    assert decisions.bucket_width(None, 0.0, 4.0) == 1.0
    assert decisions.bucket_width(None, 6.0, 0.5) == 6.0           # degree below one
    assert decisions.bucket_width(2.5, 128.0, 4.0) == 2.5          # configured


def test_a_power_law_graph_takes_its_frontier_whole(snap, monkeypatch):
    assert decisions.in_degree_skew(snap.store.in_degree) > config.CPU_PRIORITY_MAX_SKEW
    result = run_priority(snap, "sssp", [0], True, monkeypatch)
    assert bucketed(result) == 0
    np.testing.assert_allclose(result.values, sssp_scipy(snap, [0]), rtol=1e-12)


def test_bad_configured_width_is_refused(grid, monkeypatch):
    monkeypatch.setattr(config, "CPU_BUCKET_WIDTH", -1.0)
    with pytest.raises(ValueError, match="CPU_BUCKET_WIDTH"):
        run_priority(grid, "sssp", [0], True, monkeypatch)


# -- the values ----------------------------------------------------------------------------
@pytest.mark.parametrize("threads", [1, 2])
def test_grid_sssp_equals_dijkstra_with_less_work(wide_grid, threads, monkeypatch):
    grid = wide_grid
    on = run_priority(grid, "sssp", [201], True, monkeypatch, threads=threads)
    off = run_priority(grid, "sssp", [201], False, monkeypatch, threads=threads)
    expected = sssp_scipy(grid, [grid.internal_ids([201])[0]])
    np.testing.assert_allclose(on.values, expected, rtol=1e-12)
    np.testing.assert_array_equal(on.values, off.values)
    assert bucketed(on) == len(on.iterations) and bucketed(off) == 0
    assert on.converged and on.stop_reason == "no active vertex"
    assert edges_read(on) < edges_read(off) / 2
    width = on.iterations[0].decisions["value_priority"]["bucket_width"]
    _, _, weights = grid.store.csc()
    assert width == pytest.approx(weights.mean() / (grid.num_edges / grid.num_vertices))


@pytest.mark.parametrize("width, steps", [(0.001, 256), (7.0, 3), (1e9, 256)],
                         ids=["far-bin", "short-batches", "one-bucket"])
def test_widths_and_batch_lengths_change_no_value(grid, width, steps, monkeypatch):
    """0.001: nearly every value lies past the bins and is sorted out again
    from the far one; 1e9: one bucket, the whole frontier each step."""
    monkeypatch.setattr(config, "CPU_BUCKET_WIDTH", width)
    monkeypatch.setattr(config, "CPU_SPARSE_BATCH_STEPS", steps)
    result = run_priority(grid, "sssp", [61, 2900], True, monkeypatch)
    expected = sssp_scipy(grid, grid.internal_ids([61, 2900]))
    np.testing.assert_allclose(result.values, expected, rtol=1e-12)
    assert bucketed(result) == len(result.iterations)


def test_sswp_takes_larger_values_first(grid, monkeypatch):
    on = run_priority(grid, "sswp", [61], True, monkeypatch)
    source = grid.internal_ids([61])[0]
    np.testing.assert_array_equal(on.values, sswp_heap(grid, [source]))
    assert on.iterations[0].decisions["value_priority"]["larger_first"] is True


def test_chain_iteration_limit_and_checkpoints(chain, tmp_path, monkeypatch):
    limited = run_priority(chain, "sssp", [0], True, monkeypatch, quietly=True,
                           max_iterations=700)
    assert len(limited.iterations) == 700 and not limited.converged
    expected = sssp_scipy(chain, [0])
    reached = np.isfinite(limited.values)
    np.testing.assert_array_equal(limited.values[reached], expected[reached])
    assert reached.sum() == 701

    class Crash(Exception):
        pass

    def crash_at(record):
        if record.iteration == 1200:
            raise Crash

    directory = tmp_path / "ck"
    with pytest.raises(Crash):
        run_priority(chain, "sssp", [0], True, monkeypatch, checkpoint_dir=directory,
                     checkpoint_every=500, on_iteration=crash_at)
    resumed = run_priority(chain, "sssp", [0], True, monkeypatch, checkpoint_dir=directory,
                           checkpoint_every=500, resume=True)
    assert resumed.iterations[0].iteration == 0 and resumed.converged
    np.testing.assert_array_equal(resumed.values, expected)


# -- a user's program ----------------------------------------------------------------------
def test_a_user_program_in_buckets_equals_dijkstra(grid, monkeypatch):
    result = run_priority(grid, Hops(), [61], True, monkeypatch)
    assert bucketed(result) == len(result.iterations)
    np.testing.assert_allclose(result.values, sssp_scipy(grid, grid.internal_ids([61])),
                               rtol=1e-12)


@pytest.mark.parametrize("changes, message", [
    ({"sum": "add"}, "needs sum 'min' or 'max'"),
    ({"execution": "sync"}, "execution = 'async'"),
    ({"value_dtype": np.bool_}, "numeric values"),
    ({"value_priority": 1}, "expected True or False"),
])
def test_false_declarations_are_refused_at_definition(changes, message):
    with pytest.raises(ProgramError, match=message):
        type("Wrong", (Hops,), dict(changes))


# -- pushed steps (apply_keeps_best) -------------------------------------------------------
def test_the_push_rule_needs_the_declaration():
    assert decisions.cpu_priority_push(True)
    assert not decisions.cpu_priority_push(False)


@pytest.mark.parametrize("name", ["sssp", "sswp"])
@pytest.mark.parametrize("width", [None, 0.001, 1e9])
def test_pushed_steps_equal_notify_pulled_ones_with_fewer_edges(grid, name, width,
                                                                 monkeypatch):
    monkeypatch.setattr(config, "CPU_BUCKET_WIDTH", width)
    runs = {}
    for push in (True, False):
        runs[push] = run_priority(grid, name, [61, 2900], True, monkeypatch, push=push)
        assert runs[push].iterations[0].decisions["value_priority"]["push"] is push
    np.testing.assert_array_equal(runs[True].values, runs[False].values)
    if name == "sssp":
        np.testing.assert_allclose(runs[True].values,
                                   sssp_scipy(grid, grid.internal_ids([61, 2900])), rtol=1e-12)
    assert edges_read(runs[True]) < edges_read(runs[False])


def test_steps_for_many_threads_still_notify_and_pull(grid, monkeypatch):
    # every step takes the parallel kernels (on one thread: asynchronous parallel pulls
    # on more would read each other's updates in varying order, and vary the counts)
    monkeypatch.setattr(config, "CPU_SERIAL_STEP_EDGES", 0)
    runs = {}
    for push in (True, False):
        runs[push] = run_priority(grid, "sssp", [61], True, monkeypatch, threads=1, push=push)
    np.testing.assert_array_equal(runs[True].values, runs[False].values)
    assert [r.edges_processed for r in runs[True].iterations] == \
        [r.edges_processed for r in runs[False].iterations]


class HopsThatKeepTheSum(Hops):
    """Declares apply_keeps_best, but apply takes the sum even when it is worse."""

    apply_keeps_best = True

    def apply(value, accum):
        return accum


def test_a_false_keeps_best_declaration_is_refused_before_the_push(grid, monkeypatch):
    with pytest.raises(ProgramError, match="apply_keeps_best"):
        run_priority(grid, HopsThatKeepTheSum(), [61], True, monkeypatch)


def test_a_user_program_that_keeps_the_best_is_pushed(grid, monkeypatch):
    class KeepsBest(Hops):
        apply_keeps_best = True

    result = run_priority(grid, KeepsBest(), [61], True, monkeypatch)
    assert result.iterations[0].decisions["value_priority"]["push"] is True
    np.testing.assert_allclose(result.values, sssp_scipy(grid, grid.internal_ids([61])),
                               rtol=1e-12)
