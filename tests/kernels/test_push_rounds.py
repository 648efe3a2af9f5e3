"""Buckets pushed in rounds on threads kept across rounds (delta-stepping).

A program declaring ``value_priority`` and ``apply_keeps_best`` (SSSP, SSWP),
run asynchronously on the CPU alone with two threads or more, pushes every
bucket in parallel rounds (:func:`garaphpy.kernels.cpu.priority_push_rounds`):
its threads meet at a rendezvous and a barrier per round
(:mod:`garaphpy.kernels.atomics`), and relax edges by compare-and-swap.
The values must be those of SciPy's Dijkstra (SSSP) and a heap reference
(SSWP) whatever the width, the rounds per call, the threads and the graph's
skew; where the threads do not meet, the run goes on step by step.
"""

from __future__ import annotations

import time

import numba
import numpy as np
import pytest

import garaphpy
from garaphpy import _numba_setup, config
from garaphpy.kernels import atomics
from garaphpy.scheduler import decisions
from garaphpy.scheduler.cpu import team

from references import run_engine, run_engine_quietly, sssp_scipy, sswp_heap, weighted_chain
from helpers import Hops


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    return garaphpy.Graph.load("grid:60x50", store=tmp_path_factory.mktemp("grid") / "s",
                               progress=False)


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    return weighted_chain(tmp_path_factory.mktemp("chain") / "s", 2000, 5)


@pytest.fixture
def rounds_on(monkeypatch):
    """Rounds allowed, on a machine taken as not loaded."""
    monkeypatch.setattr(_numba_setup, "WAIT_POLICY", "default (spin, then sleep)")


def run_rounds(graph, program, sources, quietly=False, **options):
    options.setdefault("threads", 2)
    run = run_engine_quietly if quietly else run_engine
    return run(graph, program, sources, mode="cpu", **options)


def in_rounds(result) -> bool:
    return all(record.decisions["value_priority"]["rounds"] for record in result.iterations)


# -- the atomics ---------------------------------------------------------------------------
@numba.njit(parallel=True)
def _count_rounds(sync, team, rounds, seen):
    met = np.zeros(team, np.bool_)
    for t in numba.prange(team):
        met[t] = atomics.team_rendezvous(sync, team)
        if met[t]:
            for r in range(rounds):
                atomics.atomic_add(sync, atomics.FIRST_FREE_SLOT, 1)
                atomics.team_barrier(sync, team)
                seen[t, r] = atomics.atomic_load(sync, atomics.FIRST_FREE_SLOT)
                atomics.team_barrier(sync, team)
    return met


def test_barrier_holds_every_thread_until_all_arrive():
    team = numba.get_num_threads()
    seen = np.zeros((team, 200), np.int64)
    met = _count_rounds(atomics.sync_slots(1), team, 200, seen)
    assert met.all()
    # after round r's barrier every thread sees every thread's r + 1 increments
    np.testing.assert_array_equal(seen, np.tile(team * np.arange(1, 201), (team, 1)))


def test_rendezvous_of_more_threads_than_run_fails_for_all():
    team = numba.get_num_threads() + 1      # one member never comes
    sync = atomics.sync_slots(1)
    started = time.perf_counter()
    met = _count_rounds(sync, team, 5, np.zeros((team, 5), np.int64))
    assert not met.any()
    assert sync[atomics.FIRST_FREE_SLOT] == 0           # nobody worked
    assert time.perf_counter() - started < 30


@numba.njit
def _swap(array, expected, new):
    return atomics.compare_and_swap(array, 0, expected, new)


@numba.njit(parallel=True)
def _concurrent_min(values, candidates):
    for i in numba.prange(candidates.shape[0]):
        while True:
            old = atomics.atomic_load(values, 0)
            if candidates[i] >= old or atomics.compare_and_swap(values, 0, old, candidates[i]):
                break


def test_compare_and_swap_compares_bits():
    values = np.array([1.5])
    assert _swap(values, 1.5, 2.5) and values[0] == 2.5
    assert not _swap(values, 1.5, 3.5) and values[0] == 2.5
    zero = np.array([0.0])
    assert not _swap(zero, -0.0, 7.0) and zero[0] == 0.0    # -0.0 == 0.0, not bit for bit
    integers = np.array([5], np.int32)
    assert _swap(integers, 5, 9) and integers[0] == 9


def test_concurrent_compare_and_swap_keeps_the_minimum():
    candidates = np.random.default_rng(3).random(200_000)
    values = np.array([np.inf])
    _concurrent_min(values, candidates)
    assert values[0] == candidates.min()


@numba.njit
def _adds_and_mins(array):
    old_add = atomics.atomic_add(array, 0, 5)
    old_min = atomics.atomic_min(array, 8, -3)
    kept = atomics.atomic_min(array, 8, 10)
    atomics.atomic_store(array, 16, 42)
    return old_add, old_min, kept, atomics.atomic_load(array, 16)


def test_add_min_store_and_load():
    array = np.zeros(24, np.int64)
    array[0], array[8] = 2, 4
    assert _adds_and_mins(array) == (2, 4, -3, 42)
    assert array[0] == 7 and array[8] == -3


# -- the rule ------------------------------------------------------------------------------
def test_rule_needs_push_two_threads_an_unloaded_machine_and_the_switch():
    assert decisions.cpu_push_rounds(True, 2, loaded=False)
    assert not decisions.cpu_push_rounds(False, 16, loaded=False)
    assert not decisions.cpu_push_rounds(True, 1, loaded=False)
    assert not decisions.cpu_push_rounds(True, 16, loaded=True)
    # rounds read no in-edges, yet buckets lose on a skewed graph all the same
    assert not decisions.value_priority(True, "cpu", False, True, 75.0, max_skew=4.0)


def test_a_loaded_machine_takes_its_buckets_step_by_step(grid, rounds_on, monkeypatch):
    monkeypatch.setattr(_numba_setup, "WAIT_POLICY", "PASSIVE")
    result = run_rounds(grid, "sssp", [61])
    assert not any(r.decisions["value_priority"]["rounds"] for r in result.iterations)
    np.testing.assert_allclose(result.values, sssp_scipy(grid, grid.internal_ids([61])),
                               rtol=1e-12)


# -- the values ----------------------------------------------------------------------------
@pytest.mark.parametrize("width, steps", [(None, 4096), (0.001, 4096), (7.0, 3), (1e9, 4096)],
                         ids=["rule", "far-bin", "short-calls", "one-bucket"])
def test_grid_sssp_equals_dijkstra(grid, width, steps, rounds_on, monkeypatch):
    """0.001: nearly every value lies past the bins, each call ends there and
    the next starts from the new lowest bucket; 3: calls of three rounds."""
    monkeypatch.setattr(config, "CPU_BUCKET_WIDTH", width)
    monkeypatch.setattr(config, "CPU_PUSH_ROUND_STEPS", steps)
    result = run_rounds(grid, "sssp", [61, 2900])
    assert in_rounds(result) and result.converged
    expected = sssp_scipy(grid, grid.internal_ids([61, 2900]))
    np.testing.assert_allclose(result.values, expected, rtol=1e-12)


def test_rounds_read_fewer_edges_than_whole_frontiers(grid, rounds_on, monkeypatch):
    rounds = run_rounds(grid, "sssp", [61])
    whole = run_rounds(grid, "sssp", [61], turned_off={"value_priority"})
    np.testing.assert_array_equal(rounds.values, whole.values)
    read = [sum(r.edges_processed for r in run.iterations) for run in (rounds, whole)]
    assert read[0] < read[1]
    assert all(r.decisions["dense_notify"]["choice"] is False for r in rounds.iterations)


def test_sswp_takes_larger_values_first(grid, rounds_on):
    result = run_rounds(grid, "sswp", [61])
    assert in_rounds(result)
    assert result.iterations[0].decisions["value_priority"]["larger_first"] is True
    np.testing.assert_array_equal(result.values, sswp_heap(grid, grid.internal_ids([61])))


def test_a_power_law_graph_takes_no_buckets_even_in_rounds(snap, rounds_on):
    assert decisions.in_degree_skew(snap.store.in_degree) > config.CPU_PRIORITY_MAX_SKEW
    result = run_rounds(snap, "sssp", [0])
    assert not any(r.decisions.get("value_priority", {}).get("rounds") for r in result.iterations)
    assert result.plan.cpu.push_rounds is False and result.plan.cpu.value_priority is False
    np.testing.assert_allclose(result.values, sssp_scipy(snap, [0]), rtol=1e-12)


def test_chain_iteration_limit_and_checkpoints(chain, tmp_path, rounds_on, monkeypatch):
    monkeypatch.setattr(config, "CPU_PUSH_ROUND_STEPS", 50)
    expected = sssp_scipy(chain, [0])
    limited = run_rounds(chain, "sssp", [0], quietly=True, max_iterations=7)
    assert len(limited.iterations) == 7 and in_rounds(limited)
    reached = np.isfinite(limited.values)
    # a value set is a path's length, never below the shortest
    assert (limited.values[reached] >= expected[reached]).all()

    class Crash(Exception):
        pass

    full = run_rounds(chain, "sssp", [0])

    def crash_at(record):
        if record.iteration == len(full.iterations) // 2:
            raise Crash

    directory = tmp_path / "ck"
    with pytest.raises(Crash):
        run_rounds(chain, "sssp", [0], checkpoint_dir=directory, checkpoint_every=3,
                   on_iteration=crash_at)
    resumed = run_rounds(chain, "sssp", [0], checkpoint_dir=directory, checkpoint_every=3,
                         resume=True)
    assert resumed.converged and resumed.iterations[0].iteration == 0
    np.testing.assert_array_equal(resumed.values, expected)
    np.testing.assert_array_equal(full.values, expected)


def test_a_user_program_that_keeps_the_best_is_pushed_in_rounds(grid, rounds_on):
    class KeepsBest(Hops):
        apply_keeps_best = True

    result = run_rounds(grid, KeepsBest(), [61])
    assert in_rounds(result)
    np.testing.assert_allclose(result.values, sssp_scipy(grid, grid.internal_ids([61])),
                               rtol=1e-12)


def test_a_program_without_keeps_best_is_not_pushed(grid, rounds_on):
    result = run_rounds(grid, Hops(), [61])
    assert not any(r.decisions["value_priority"]["rounds"] for r in result.iterations)


def test_threads_that_do_not_meet_leave_the_run_to_the_steps(grid, rounds_on, monkeypatch):
    """One team member more than the threads run: the rendezvous fails before any
    work, and the run goes on step by step, to the same values."""
    monkeypatch.setattr(team, "team_size", lambda: numba.get_num_threads() + 1)
    result = run_rounds(grid, "sssp", [61, 2900])
    entries = [r.decisions["value_priority"] for r in result.iterations]
    assert all(e["rounds_failed"] and not e["rounds"] for e in entries)
    np.testing.assert_allclose(result.values, sssp_scipy(grid, grid.internal_ids([61, 2900])),
                               rtol=1e-12)


def test_no_thread_shares_its_bins(grid, capsys):
    """numba moves an allocation of a size fixed in a parallel loop out of it
    (allocation hoisting): each thread's bins would be one array shared by
    all.  The kernel, compiled here for SSSP with its functions as arguments
    (not from the cache), must hoist none."""
    from garaphpy import api
    from garaphpy.kernels import cpu as cpu_kernels
    from garaphpy.programs.sssp import SSSP

    program = api._compiled_program(SSSP(), parallel=True).kernels
    kernel = numba.njit(parallel=True)(cpu_kernels.priority_push_rounds.py_func)
    n = 4
    offsets = np.array([0, 1, 2, 3, 3], np.int64)
    targets = np.array([1, 2, 3], np.int32)
    weights = np.ones(3, np.int32)
    values = np.array([0.0, np.inf, np.inf, np.inf])
    attrs = (np.ones(n, np.int32), np.ones(n, np.int32), np.ones(n), np.arange(n),
             np.zeros(n, np.bool_))
    left, rounds = kernel(program.gather_call, program.apply_call, program.activate_call,
                          np.array([0], np.int64), (offsets, targets, weights), values,
                          (attrs, np.zeros(1), n, 0), 100,
                          (np.zeros((100, 7), np.int64), np.zeros(100)), (1.0, False),
                          numba.get_num_threads())
    np.testing.assert_array_equal(values, [0.0, 1.0, 2.0, 3.0])
    assert rounds >= 1 and left.size == 0
    capsys.readouterr()
    kernel.parallel_diagnostics(level=4)
    report = capsys.readouterr().out
    assert "Allocation hoisting" in report
    assert "is hoisted out" not in report.split("Loop invariant code motion")[-1]


@pytest.mark.parametrize("rounds", [True, False], ids=["rounds", "steps"])
def test_a_tolerance_does_not_end_a_run_in_buckets_early(grid, rounds, rounds_on,
                                                         monkeypatch):
    """A bucket's change measures that bucket: a round or step that improves
    nothing while other buckets wait is no fixed point (the README's example,
    SSSP with tolerance 1e-6 on web-NotreDame, stopped after 16 rounds)."""
    graph = grid        # buckets, in rounds or steps, on low skew only
    result = run_rounds(graph, "sssp", [0], tolerance=1e-6,
                        turned_off=() if rounds else {"push_rounds"})
    assert any(r.decisions.get("value_priority", {}).get("rounds") is rounds
               for r in result.iterations)
    assert result.converged and result.stop_reason == "no active vertex"
    np.testing.assert_allclose(result.values, sssp_scipy(graph, graph.internal_ids([0])),
                               rtol=1e-12)
