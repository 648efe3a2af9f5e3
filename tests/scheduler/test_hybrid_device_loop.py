"""Hybrid runs hand the iterations the GPU runs alone to its device loop.

Without a GPU: the rule (:func:`decisions.hybrid_device_loop`), the policy's
cost of a looped iteration (``T_loop`` in place of ``T_GPU``), its update
from measured loops, and the decisions that cover a batch.  With one
(``pytest -m gpu``): hybrid runs on a grid equal the CPU in sync and async
execution, with the policy leaving the GPU alone (looped iterations, each
with its covering decision) and with the default policy; a policy that
decides every iteration (``batches=False``, or a ``decide`` without the
``gpu_loop`` keyword) loops nothing; a stop at ``max_iterations`` inside a
loop stops there; connected components shortcut their labels in the GPU's
own iterations of a hybrid run and not in those whose pages both processors
pull.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import garaphpy
from garaphpy import api, config
from garaphpy.scheduler import decisions
from garaphpy.scheduler.policy import HybridPolicy, Observation

import references as ref
from helpers import GpuAlonePolicy, SplitPolicy, policy_with_costs

FRONTIER_PROGRAMS = ["bfs", "sssp", "cc", "sswp"]


@pytest.fixture(autouse=True)
def loop_from_the_first_iteration(monkeypatch):
    """The loop and the label shortcut may take any iteration here."""
    monkeypatch.setattr(config, "GPU_LOOP_AFTER_ITERATIONS", 0)
    monkeypatch.setattr(config, "GPU_SHORTCUT_LABELS_AFTER", 0)


# -- the rule and the policy, without a GPU ------------------------------------------------
@pytest.mark.parametrize("mode", ["cpu", "hybrid"])
@pytest.mark.parametrize("cpu_joins", [False, True])
@pytest.mark.parametrize("loop_takes", [False, True])
@pytest.mark.parametrize("batches", [False, True])
@pytest.mark.parametrize("forced", ["auto", "pull", "notify-pull"])
def test_the_loop_takes_only_what_the_gpu_alone_would_run(mode, cpu_joins, loop_takes,
                                                           batches, forced):
    expected = (mode == "hybrid" and not cpu_joins and loop_takes and batches
                and forced == "auto")
    assert decisions.hybrid_device_loop(mode, cpu_joins, loop_takes, batches,
                                        forced) is expected


def test_a_looped_iteration_costs_the_gpu_t_loop():
    policy = policy_with_costs(4.0, 2.0)
    policy.cpu_overhead = 0.5
    policy.t_loop = 0.25
    # CPU: c_0 0.5 + min(2 f, 1) T_pull = 0.5 + 2 * 0.0625 * 4 = 1.0 s
    pulled = policy.decide(3, 0.0625, 1.0)
    assert (pulled.gpu_seconds, pulled.alpha, pulled.mode) == (2.0, 0.5, "cpu")
    assert pulled.gpu_loop is False
    looped = policy.decide(3, 0.0625, 1.0, gpu_loop=True, gpu_sync_seconds=0.25)
    assert (looped.gpu_seconds, looped.alpha, looped.mode) == (0.5, 2.0, "hybrid")
    assert looped.gpu_loop is True and looped.entry()["gpu_loop"] is True
    # T_loop above T_GPU: a loop never costs more than the pull it replaces
    policy.t_loop = 8.0
    assert policy.decide(4, 0.0625, 1.0, gpu_loop=True).gpu_seconds == 2.0


def test_measured_loops_update_t_loop_alone():
    policy = policy_with_costs(4.0, 2.0, smoothing=0.5)
    assert policy.t_loop == config.HYBRID_LOOP_ITERATION_SECONDS
    before = (policy.t_pull, policy.t_gpu, policy.ratio, policy.cpu_seconds_per_edge,
              policy.gpu_seconds_per_edge, policy.cpu_overhead)
    policy.t_loop = 1.0
    policy.observe(Observation("hybrid", "device-loop", 0.01, 1.0, 1024,
                               gpu_iteration_seconds=0.5))
    assert policy.t_loop == 0.75
    assert (policy.t_pull, policy.t_gpu, policy.ratio, policy.cpu_seconds_per_edge,
            policy.gpu_seconds_per_edge, policy.cpu_overhead) == before
    policy.observe(Observation("hybrid", "device-loop", 0.01, 1.0, 1024))
    assert policy.t_loop == 0.75        # no time measured: nothing learnt


def test_one_decision_covers_a_batch_and_expands_per_iteration():
    policy = policy_with_costs(4.0, 2.0)
    before = policy.decide(4, 0.5, 1.0)
    decision = policy.decide(5, 0.001, 1.0, gpu_loop=True)
    policy.cover(decision, 3)
    after = policy.decide(8, 0.5, 1.0)
    assert policy.decisions == [before, decision, after]
    assert [d.covers for d in policy.decisions] == [1, 3, 1]
    assert decision.entry()["covers"] == 3
    assert policy.per_iteration() == [(4, before), (5, decision), (6, decision),
                                      (7, decision), (8, after)]


# -- runs, with a GPU ---------------------------------------------------------------------
def gpu_alone(batches: bool = True) -> GpuAlonePolicy:
    """Every iteration hybrid, and the CPU takes no page: the GPU's own iterations."""
    policy = GpuAlonePolicy()
    policy.batches = batches
    return policy


class PaperInputsOnly(GpuAlonePolicy):
    """A policy whose ``decide`` takes the paper's inputs alone."""

    def decide(self, iteration, active_fraction, rho):
        return super().decide(iteration, active_fraction, rho)


class CpuFirst(GpuAlonePolicy):
    """The CPU alone for the first ``cpu_iterations``, then the GPU alone."""

    def __init__(self, cpu_iterations: int):
        super().__init__()
        self.cpu_iterations = cpu_iterations

    def decide(self, iteration, active_fraction, rho, gpu_loop=False, **inputs):
        decision = super().decide(iteration, active_fraction, rho, gpu_loop=gpu_loop, **inputs)
        if iteration < self.cpu_iterations:
            decision.mode = "cpu"
        return decision


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """A weighted 60x50 grid in many small pages (a hybrid iteration can split them)."""
    graph = garaphpy.Graph.load("grid:60x50", store=tmp_path_factory.mktemp("grid") / "s",
                                max_shard_edges=512, max_page_bytes=16384, compress=False,
                                progress=False)
    assert len(graph.store.pages) > 4
    return graph


def looped(result) -> list[int]:
    """The iterations of a run that the device loop ran."""
    return [r.iteration for r in result.iterations if "device_loop" in r.decisions]


def sources_of(name):
    return np.array([0], np.int64) if name in ("bfs", "sssp", "sswp") else ()


def run(graph, name, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", garaphpy.NotConvergedWarning)
        return garaphpy.run(graph, name, sources=sources_of(name), **options)


@pytest.mark.gpu
@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("name", FRONTIER_PROGRAMS)
def test_the_gpus_own_iterations_loop_and_equal_the_cpu(grid, name, execution):
    cpu = ref.run_engine_like_gpu(grid, name, sources_of(name), mode="cpu",
                                  execution=execution)
    policy = gpu_alone()
    hybrid = ref.run_engine_like_gpu(grid, name, sources_of(name), mode="hybrid",
                                     execution=execution, policy=policy)
    ref.assert_program_values(name, hybrid.values, cpu.values)
    loop = looped(hybrid)
    # connected components start with every vertex active: pulls, then the loop
    assert len(loop) > (0 if name == "cc" else 0.5 * hybrid.num_iterations)
    decided = policy.per_iteration()
    assert [iteration for iteration, _ in decided] == list(range(hybrid.num_iterations))
    batch_starts = [r.iteration for r in hybrid.iterations if "hybrid_device_loop" in r.decisions]
    assert batch_starts and set(batch_starts) <= set(loop)
    assert sorted(d.iteration for d in policy.decisions if d.covers > 1) == \
        [r.iteration for r in hybrid.iterations
         if r.decisions.get("hybrid_device_loop", {}).get("iterations", 1) > 1]
    for record, (iteration, decision) in zip(hybrid.iterations, decided):
        assert record.iteration == iteration
        assert record.mode == decision.mode == "hybrid"
        entry = record.decisions["mode"]
        assert entry["iteration"] == decision.iteration and entry["covers"] == decision.covers
        if record.iteration in loop:
            assert decision.gpu_loop
            assert decision.iteration in batch_starts
            assert entry.get("batch_of") == (None if record.iteration in batch_starts
                                             else decision.iteration)
        else:
            assert "batch_of" not in entry and decision.covers == 1
    first = hybrid.iterations[batch_starts[0]].decisions["hybrid_device_loop"]
    assert first["choice"] is True and first["iterations"] >= 1


@pytest.mark.gpu
@pytest.mark.parametrize("policy", [gpu_alone(batches=False), PaperInputsOnly()],
                         ids=["batches-off", "paper-inputs"])
def test_a_policy_that_decides_every_iteration_loops_nothing(grid, policy):
    cpu = ref.run_engine_like_gpu(grid, "bfs", sources_of("bfs"), mode="cpu",
                                  execution="sync")
    hybrid = ref.run_engine_like_gpu(grid, "bfs", sources_of("bfs"), mode="hybrid",
                                     execution="sync", policy=policy)
    np.testing.assert_array_equal(hybrid.values, cpu.values)
    assert looped(hybrid) == []
    assert [d.iteration for d in policy.decisions] == list(range(hybrid.num_iterations))
    assert all(d.covers == 1 for d in policy.decisions)


@pytest.mark.gpu
def test_the_default_policy_equals_the_cpu_and_covers_every_iteration(grid):
    cpu = ref.run_engine_like_gpu(grid, "sssp", sources_of("sssp"), mode="cpu",
                                  execution="sync")
    policy = HybridPolicy(per_run=False)      # every iteration by alpha
    hybrid = ref.run_engine_like_gpu(grid, "sssp", sources_of("sssp"), mode="hybrid",
                                     execution="sync", policy=policy)
    np.testing.assert_array_equal(hybrid.values, cpu.values)
    decided = policy.per_iteration()
    assert [iteration for iteration, _ in decided] == list(range(hybrid.num_iterations))
    for record, (_, decision) in zip(hybrid.iterations, decided):
        assert record.mode == decision.mode and record.alpha == decision.alpha


@pytest.mark.gpu
@pytest.mark.parametrize("limit", [1, 5, 37])
def test_a_stop_inside_a_loop_stops_exactly_there(grid, limit):
    cpu = run(grid, "bfs", mode="cpu", execution="sync", max_iterations=limit)
    hybrid = run(grid, "bfs", mode="hybrid", execution="sync", max_iterations=limit,
                 policy=gpu_alone())
    assert hybrid.num_iterations == min(limit, cpu.num_iterations)
    assert [r.iteration for r in hybrid.iterations] == list(range(hybrid.num_iterations))
    assert looped(hybrid)
    np.testing.assert_array_equal(hybrid.values, cpu.values)


@pytest.mark.gpu
@pytest.mark.parametrize("execution", ["sync", "async"])
def test_labels_jump_in_the_gpus_own_iterations_only(grid, execution, monkeypatch):
    # the pull, not the loop: the shortcut ends pulls over every shard
    ref.gpu_engine_options(monkeypatch, device_loop=False)
    symmetric = grid.as_undirected()
    cpu = ref.run_engine_like_gpu(symmetric, "cc", mode="cpu", execution=execution)
    # label propagation with shortcuts: without the GPU's union-find start
    alone = api.execute(symmetric, "cc", mode="hybrid", execution=execution,
                        policy=gpu_alone(), turned_off={"gpu_union_find_start"})
    np.testing.assert_array_equal(alone.values, cpu.values)
    jumped = [r for r in alone.iterations if "shortcut_labels" in r.decisions]
    assert jumped and jumped[0].iteration == 0
    if execution == "sync":     # in place, a sweep in vertex order carries labels far
        assert alone.num_iterations < cpu.num_iterations / 4
    # pages pulled by both processors: no jump (the host's copy would not see it)
    halves = SplitPolicy(0.5)
    halves.num_pages = len(symmetric.store.pages)
    both = run(symmetric, "cc", mode="hybrid", execution=execution,
               policy=halves)
    np.testing.assert_array_equal(both.values, cpu.values)
    assert any(r.cpu_pages and r.gpu_pages for r in both.iterations)
    assert not any("shortcut_labels" in r.decisions for r in both.iterations if r.cpu_pages)
    if execution == "sync":
        assert both.num_iterations == cpu.num_iterations


@pytest.mark.gpu
def test_the_frontiers_pull_edges_are_summed_on_the_device(grid, built_drivers):
    """p's numerator, summed over the GPU's active vertices in one pass, equals
    NumPy's sum of the out-neighbours' in-degrees over the frontier."""
    import cupy

    built = built_drivers
    in_offsets, sources, _ = grid.store.csc()
    in_degree = np.diff(in_offsets)
    # per vertex, the in-degrees of its out-neighbours: each in-edge (u -> v) gives u in_degree[v]
    expected_per_vertex = np.bincount(sources, weights=np.repeat(in_degree, in_degree),
                                      minlength=grid.num_vertices).astype(np.int64)
    checked = []

    def check(record):
        driver = built[0]
        np.testing.assert_array_equal(driver.cpu.neighbour_in_edges, expected_per_vertex)
        active = cupy.asnumpy(driver.gpu.engine.active[:grid.num_vertices]).astype(bool)
        assert driver.gpu.frontier_in_edges() == expected_per_vertex[active].sum()
        checked.append(int(active.sum()))

    run(grid, "bfs", mode="hybrid", execution="sync", policy=gpu_alone(batches=False),
        on_iteration=check)
    assert len(checked) > 10 and max(checked) > 1


@pytest.mark.gpu
@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("name", ["bfs", "sssp"])
def test_the_loop_after_cpu_iterations_starts_from_the_cpus_frontier(grid, name, execution):
    cpu = ref.run_engine_like_gpu(grid, name, sources_of(name), mode="cpu",
                                  execution=execution)
    policy = CpuFirst(5)
    hybrid = ref.run_engine_like_gpu(grid, name, sources_of(name), mode="hybrid",
                                     execution=execution, policy=policy)
    ref.assert_program_values(name, hybrid.values, cpu.values)
    # the CPU's iterations: 5, or more where its batch (buckets of values) covers them
    first_gpu = next(r.iteration for r in hybrid.iterations if r.mode != "cpu")
    assert first_gpu >= 5
    assert looped(hybrid)[0] == first_gpu
    assert hybrid.iterations[first_gpu].bytes_to_device > 0       # values and activity uploaded


@pytest.mark.gpu
@pytest.mark.parametrize("every", [1, 5])
def test_checkpoints_every_few_iterations_leave_the_answer_unchanged(grid, every, tmp_path):
    cpu = run(grid, "sssp", mode="cpu", execution="sync")
    hybrid = run(grid, "sssp", mode="hybrid", execution="sync", checkpoint_dir=tmp_path / "ck",
                 checkpoint_every=every)
    np.testing.assert_array_equal(hybrid.values, cpu.values)
    assert hybrid.num_iterations == cpu.num_iterations
