"""A hybrid run's first choice: whether setting the GPU up can pay at all.

The GPU's set-up (cupy, the CUDA context, its pages copied) costs about a
second before its first iteration; a run the CPU alone finishes sooner than
that goes to the CPU alone before anything of the GPU is set up
(:func:`garaphpy.scheduler.set_up_choice.gpu_set_up_pays`), and runs as a
``mode="cpu"`` run would.  The rest of the suite does not weigh the set-up
(tests/conftest.py); these tests weigh it as a run does.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import warnings

import numpy as np
import pytest

import garaphpy
from garaphpy import api, config
from garaphpy.kernels import gpu as gpu_kernels
from garaphpy.scheduler import set_up_choice
from garaphpy.scheduler.policy import HybridPolicy
from helpers import WEIGHED_GPU_SET_UP

SHIPPED_BYTES_PER_SECOND = config.HYBRID_GPU_SET_UP_BYTES_PER_SECOND


@pytest.fixture
def priced(monkeypatch):
    """The GPU's set-up priced as a fresh process prices it, and no GPU to
    set up: a run that tries to import cupy finds none."""
    monkeypatch.setattr(api, "_gpu_set_up_choice", WEIGHED_GPU_SET_UP)
    monkeypatch.setattr(api, "_GPU_SET_UPS", set_up_choice.MeasuredSetUps())
    monkeypatch.setattr(config, "HYBRID_GPU_SET_UP_BYTES_PER_SECOND", SHIPPED_BYTES_PER_SECOND)
    asked = []

    def unavailable():
        asked.append(True)
        raise gpu_kernels.GpuUnavailableError("no device (test)")

    monkeypatch.setattr(gpu_kernels, "cupy_module", unavailable)
    monkeypatch.setattr(api, "_FALLBACK_WARNED", False)
    return asked


@pytest.fixture(scope="module")
def graph():
    rng = np.random.default_rng(11)
    src, dst = rng.integers(0, 400, 4000), rng.integers(0, 400, 4000)
    return garaphpy.Graph.from_arrays(src, dst, max_shard_edges=300, max_page_bytes=8_000,
                                      compress=False)


# -- the rule -------------------------------------------------------------------------------
@pytest.mark.parametrize("cpu, set_up, margin, pays", [
    (0.5, 1.0, 0.8, False),     # the CPU finishes in half the set-up
    (0.79, 1.0, 0.8, False),
    (0.8, 1.0, 0.8, True),      # not clearly sooner: the GPU is set up
    (3.0, 1.0, 0.8, True),
    (0.0, 0.0, 0.8, True),      # a set-up that costs nothing always pays
    (0.0, 0.1, 0.8, False),     # a run with no edges
    (0.5, 1.0, 0.4, True),      # a stricter margin
])
def test_the_gpu_is_set_up_unless_the_cpu_clearly_finishes_first(cpu, set_up, margin, pays):
    assert set_up_choice.gpu_set_up_pays(cpu, set_up, margin) is pays


def test_the_default_margin_is_the_per_run_choices():
    margin = config.HYBRID_RUN_SWITCH_MARGIN
    assert set_up_choice.gpu_set_up_pays(margin * 0.99, 1.0) is False
    assert set_up_choice.gpu_set_up_pays(margin * 1.01, 1.0) is True


def test_the_estimates_are_passes_over_the_edges_and_a_fixed_part_and_a_copy():
    # 20 pulls of 128M edges on 16 threads of 1.8e8 edges a second each, 1 ms an iteration
    assert set_up_choice.cpu_run_seconds(128_000_000, 16, 20, 1.8e8,
                                     iteration_seconds=1e-3) == pytest.approx(
        20 * 128e6 / 16 / 1.8e8 + 20e-3)
    assert set_up_choice.cpu_run_seconds(1000, 0, 1, 1e3, iteration_seconds=0.0) == \
        pytest.approx(1.0)                                                      # >= 1 thread
    # more iterations than passes: a frontier program's rounds over weighted edges
    assert set_up_choice.cpu_run_seconds(1000, 1, 2, 1e3, iterations=30,
                                     iteration_seconds=0.1) == pytest.approx(2.0 + 3.0)
    assert set_up_choice.cpu_run_seconds(0, 4, 5, iterations=None) == pytest.approx(
        5 * config.HYBRID_CPU_ITERATION_SECONDS)
    assert set_up_choice.gpu_set_up_seconds(int(0.77e9), 0.9, 1.8e9) == pytest.approx(
        0.9 + 0.77 / 1.8)
    assert set_up_choice.gpu_set_up_seconds(10**9) == pytest.approx(
        config.HYBRID_GPU_FIRST_SET_UP_SECONDS + 1e9 / config.HYBRID_GPU_SET_UP_BYTES_PER_SECOND)
    assert set_up_choice.gpu_set_up_seconds(10**9, 0.25, math.inf) == 0.25


# -- in a run -------------------------------------------------------------------------------
def test_a_small_hybrid_run_goes_to_the_cpu_alone_without_cupy(graph, priced):
    cpu = garaphpy.run(graph, "pagerank", mode="cpu", threads=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hybrid = garaphpy.run(graph, "pagerank", threads=2)
    assert not priced                            # the GPU was never asked for
    assert not caught                            # nor is its absence worth a warning
    entry = hybrid.plan.gpu_set_up
    assert entry["choice"] is False and hybrid.mode == "cpu"
    assert entry["passes"] == hybrid.max_iterations           # a program with a tolerance
    assert entry["cpu_seconds"] == pytest.approx(
        entry["passes"] * graph.num_edges / (2 * config.HYBRID_CPU_EDGES_PER_SECOND_PER_THREAD)
        + entry["passes"] * config.HYBRID_CPU_ITERATION_SECONDS)
    page_bytes = sum(page.nbytes for page in graph.store.pages)
    assert entry["gpu_set_up_seconds"] == pytest.approx(
        config.HYBRID_GPU_FIRST_SET_UP_SECONDS + page_bytes / SHIPPED_BYTES_PER_SECOND)
    assert entry["gpu_seconds"] == pytest.approx(            # its iterations beside
        entry["gpu_set_up_seconds"] + entry["iterations"] * config.HYBRID_GPU_ITERATION_SECONDS
        + entry["passes"] * graph.num_edges / config.HYBRID_GPU_EDGES_PER_SECOND)
    # the CPU alone's own run: its plan, its iterations, its values
    assert hybrid.plan.cpu == cpu.plan.cpu
    assert all(record.mode == "cpu" for record in hybrid.iterations)
    assert hybrid.num_iterations == cpu.num_iterations
    np.testing.assert_array_equal(hybrid.values, cpu.values)
    assert "hybrid on the CPU alone" in hybrid.plan.describe()
    assert "the CPU alone, the run expected to end before the GPU's" in hybrid.summary()
    assert "GPU's set-up" not in cpu.summary()
    assert hybrid.plan.as_dict()["gpu_set_up"]["choice"] is False


def test_a_run_long_enough_sets_the_gpu_up(graph, priced):
    # a million PageRank iterations at most: the CPU alone could take longer than the set-up
    with pytest.warns(garaphpy.GpuFallbackWarning, match="no device"):
        result = garaphpy.run(graph, "pagerank", threads=2, tolerance=1e-6,
                              max_iterations=1_000_000)
    assert priced                                 # the GPU was asked for
    assert result.plan.gpu_set_up["choice"] is True
    assert result.mode == "cpu"                   # and there was none


def test_a_frontier_program_is_priced_by_its_expected_iterations(graph, priced):
    bfs = garaphpy.run(graph, "bfs", sources=0, threads=2)
    entry = bfs.plan.gpu_set_up
    assert 1.0 <= entry["iterations"] < 50       # log |V| / log mean degree, not 1e9
    assert entry["passes"] == 1.0                # final once set: each vertex pulled once
    with pytest.warns(garaphpy.NotConvergedWarning):
        capped = garaphpy.run(graph, "bfs", sources=0, threads=2, max_iterations=1)
    assert capped.plan.gpu_set_up["iterations"] == 1.0
    assert entry["choice"] is False and bfs.mode == "cpu"
    assert entry["sparse_levels"] == 0.0         # not a mesh


def test_a_program_over_weighted_edges_is_priced_by_more_rounds_than_levels(priced):
    rng = np.random.default_rng(12)
    src, dst = rng.integers(0, 400, 4000), rng.integers(0, 400, 4000)
    weighted = garaphpy.Graph.from_arrays(src, dst, rng.integers(1, 256, 4000).astype(np.float64),
                                          compress=False)
    sssp = garaphpy.run(weighted, "sssp", sources=int(src[0]), threads=2)
    bfs = garaphpy.run(weighted, "bfs", sources=int(src[0]), threads=2)
    entry = sssp.plan.gpu_set_up
    assert entry["iterations"] == pytest.approx(
        bfs.plan.gpu_set_up["iterations"] * config.HYBRID_WEIGHTED_ROUNDS_PER_LEVEL)
    assert entry["passes"] == entry["iterations"]    # every round a pull: values not final
    assert entry["cpu_seconds"] > bfs.plan.gpu_set_up["cpu_seconds"]
    with pytest.warns(garaphpy.NotConvergedWarning):
        capped = garaphpy.run(weighted, "sssp", sources=int(src[0]), threads=2,
                              max_iterations=3)
    assert capped.plan.gpu_set_up["iterations"] == 3.0
    np.testing.assert_array_equal(sssp.values, garaphpy.run(
        weighted, "sssp", sources=int(src[0]), threads=2, mode="cpu").values)


@pytest.mark.parametrize("case, expected", [
    # PageRank's tolerance: its iterations, each a whole pull
    (dict(has_tolerance=True, max_iterations=20, levels=5.0), (20.0, 20.0, 0.0)),
    # CC's union-find start on a symmetric graph: the start and the pull that checks it
    (dict(has_tolerance=False, max_iterations=10**6, levels=2000.0, union_find=True),
     ("uf", 1.0, 0.0)),
    # BFS on a power-law graph: few levels, each vertex pulled once
    (dict(has_tolerance=False, max_iterations=10**6, levels=5.5, final_once_set=True),
     (1.0, 5.5, 0.0)),
    # SSSP on a power-law graph: rounds of whole pulls
    (dict(has_tolerance=False, max_iterations=10**6, levels=5.5, weighted=True),
     ("2x", "2x", 0.0)),
    # BFS and SSSP on a mesh: sparse levels, the edges passed over once a round
    (dict(has_tolerance=False, max_iterations=10**6, levels=2000.0, final_once_set=True),
     (1.0, 0.0, 2000.0)),
    (dict(has_tolerance=False, max_iterations=10**6, levels=2000.0, weighted=True),
     ("r", 0.0, "2x")),
    # capped by max_iterations
    (dict(has_tolerance=False, max_iterations=100, levels=2000.0, weighted=True),
     ("r", 0.0, 100.0)),
])
def test_the_expected_work_by_program_and_shape(case, expected):
    rounds = config.HYBRID_WEIGHTED_ROUNDS_PER_LEVEL
    resolve = {"uf": config.HYBRID_UNION_FIND_PULLS + 1.0, "2x": case["levels"] * rounds,
               "r": rounds}
    work = set_up_choice.expected_work(**case)
    assert (work.passes, work.iterations, work.sparse_levels) == pytest.approx(
        tuple(resolve.get(x, x) for x in expected))


def test_a_mesh_weighs_the_levels_on_both_processors():
    """grid:2000x2000 on the H200 host (2026-12-04): BFS 0.12 s on the CPU
    alone against 0.24 s on the GPU (0.18 of it set-up): the CPU; SSSP 0.38
    against 0.28 s: the GPU, whose levels cost a fifth of the CPU's."""
    edges, threads, levels = 16_000_000, 16, 2000.0

    def choice(work, set_up, weighted=False):
        cpu = set_up_choice.cpu_run_seconds(edges, threads, work.passes,
                                            iterations=work.iterations,
                                            sparse_levels=work.sparse_levels,
                                            weighted=weighted)
        gpu = set_up_choice.gpu_run_seconds(set_up, work.sparse_levels)
        return "gpu" if set_up_choice.gpu_set_up_pays(cpu, gpu) else "cpu"

    bfs = set_up_choice.expected_work(has_tolerance=False, max_iterations=10**6,
                                      levels=levels, final_once_set=True)
    sssp = set_up_choice.expected_work(has_tolerance=False, max_iterations=10**6,
                                       levels=levels, weighted=True)
    cc = set_up_choice.expected_work(has_tolerance=False, max_iterations=10**6,
                                     levels=levels, union_find=True)
    assert choice(bfs, 0.18) == "cpu"
    assert choice(sssp, 0.18, weighted=True) == "gpu"
    assert choice(cc, 0.1) == "cpu"
    assert set_up_choice.gpu_run_seconds(0.1, 1000) == pytest.approx(
        0.1 + 1000 * config.HYBRID_LOOP_ITERATION_SECONDS)


@pytest.mark.parametrize("vertices, edges, program, measured", [
    # the CPU mode's whole calls, 16 threads (the modes bench), seconds
    (4_000_000, 15_992_000, "bfs", 0.092),      # grid:2000x2000, H200 host
    (4_000_000, 15_992_000, "sssp", 0.256),
    (1_524_453, 3_868_020, "bfs", 0.045),       # road NE, H100 host
    (1_524_453, 3_868_020, "sssp", 0.100),
    (1_524_453, 3_868_020, "sssp", 0.214),      # road NE, H200 host
])
def test_a_mesh_run_on_the_cpu_is_priced_near_its_measured_call(vertices, edges, program,
                                                                 measured):
    """BFS's sparse levels are priced apart from SSSP's weighted rounds (each
    2-3x dearer a level), so the CPU alone's estimate of a mesh's whole call
    is 0.65-1.55x the call measured on either host (2026-12-05; the hosts'
    road SSSP calls differ 2.1x); one price for both had BFS at 1.37x its
    grid call and 1.68x its road call."""
    from garaphpy.scheduler import decisions

    weighted = program == "sssp"
    work = set_up_choice.expected_work(
        has_tolerance=False, max_iterations=10**6, weighted=weighted,
        levels=decisions.expected_iterations(vertices, edges, 1.0),
        final_once_set=not weighted)
    cpu = set_up_choice.cpu_run_seconds(edges, 16, work.passes, iterations=work.iterations,
                                        sparse_levels=work.sparse_levels, weighted=weighted)
    assert 0.65 < cpu / measured < 1.55


def test_the_gpu_alone_pays_its_iterations_and_the_pages_beyond_its_budget():
    """H200 host, 2026-12-05, whole calls of PageRank's 20 iterations: on
    ca-HepPh (237K edges) the CPU alone 7.0 ms against the GPU's 11.6 (7.0
    of it set-up); on kron22 0.86 s against 0.05.  At a GPU budget of a
    quarter of kron22's pages the GPU still wins 20 iterations (0.44 s
    against 0.95)."""
    def choice(edges, iterations, set_up, streamed=0):
        work = set_up_choice.expected_work(has_tolerance=True, max_iterations=iterations,
                                           levels=5.0)
        cpu = set_up_choice.cpu_run_seconds(edges, 16, work.passes,
                                            iterations=work.iterations)
        gpu = set_up_choice.gpu_run_seconds(set_up, work.sparse_levels, work.iterations,
                                            work.passes, edges, streamed)
        return "gpu" if set_up_choice.gpu_set_up_pays(cpu, gpu) else "cpu"

    assert choice(237_010, 20, 0.0069) == "cpu"
    assert choice(1_497_134, 20, 0.0091) == "gpu"               # web-NotreDame
    assert choice(128_313_763, 20, 0.025) == "gpu"
    assert choice(128_313_763, 20, 0.242, streamed=388 * 10**6) == "gpu"
    assert set_up_choice.gpu_run_seconds(0.1, 0, 2, 3, 10**6, 10**6) == pytest.approx(
        0.1 + 2 * config.HYBRID_GPU_ITERATION_SECONDS
        + 3 * (1e6 / config.HYBRID_GPU_EDGES_PER_SECOND + 1e6 / config.GPU_BUS_BYTES_PER_SECOND))


def test_a_budget_below_the_pages_prices_what_crosses_the_bus(graph, priced):
    budget = sum(page.disk_bytes for page in graph.store.pages) // 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", garaphpy.GpuFallbackWarning)
        small = garaphpy.run(graph, "pagerank", threads=2, gpu_memory=budget)
        whole = garaphpy.run(graph, "pagerank", threads=2, gpu_memory=10**12)
    streamed = 4 * budget - max(0, budget - set_up_choice.gpu_vertex_bytes(graph.num_vertices))
    entry, fits = small.plan.gpu_set_up, whole.plan.gpu_set_up
    assert entry["passes"] == fits["passes"]
    assert entry["gpu_seconds"] - entry["gpu_set_up_seconds"] == pytest.approx(
        fits["gpu_seconds"] - fits["gpu_set_up_seconds"]
        + entry["passes"] * streamed / config.GPU_BUS_BYTES_PER_SECOND, rel=1e-3)


def test_the_weighing_is_off_for_a_policy_that_does_not_choose_per_run_or_when_turned_off(
        graph, priced):
    for policy in (HybridPolicy(per_run=False), HybridPolicy(force="hybrid")):
        with pytest.warns(garaphpy.GpuFallbackWarning):
            result = garaphpy.run(graph, "pagerank", threads=2, policy=policy)
        assert result.plan.gpu_set_up is None
        api._FALLBACK_WARNED = False
    with pytest.warns(garaphpy.GpuFallbackWarning):
        off = api.execute(graph, "pagerank", threads=2, turned_off={"gpu_set_up"})
    assert off.plan.gpu_set_up is None and off.plan.turned_off == {"gpu_set_up"}


def test_a_mode_other_than_hybrid_is_not_weighed(graph, priced):
    assert garaphpy.run(graph, "pagerank", mode="cpu", threads=2).plan.gpu_set_up is None


def test_a_process_that_measured_a_set_up_prices_the_next_by_it(graph, priced, monkeypatch):
    monkeypatch.setattr(api, "_GPU_SET_UPS", set_up_choice.MeasuredSetUps(2, {"PageRank": 0.0}))
    monkeypatch.setattr(config, "HYBRID_GPU_SET_UP_BYTES_PER_SECOND", math.inf)
    with pytest.warns(garaphpy.GpuFallbackWarning):
        result = garaphpy.run(graph, "pagerank", threads=2)
    assert result.plan.gpu_set_up["set_up_fixed"] == 0.0
    assert result.plan.gpu_set_up["set_ups_before"] == 2
    assert result.plan.gpu_set_up["choice"] is True


def test_measured_set_ups_are_kept_per_program_after_the_first(monkeypatch):
    """The first set-up (cupy imported, the context made) is the prior's; a
    later one is kept for its program, less its pages' copy."""
    monkeypatch.setattr(config, "HYBRID_GPU_SET_UP_BYTES_PER_SECOND", 1e9)
    set_ups = set_up_choice.MeasuredSetUps()
    assert set_ups.fixed_seconds("BFS") == config.HYBRID_GPU_FIRST_SET_UP_SECONDS
    set_ups.note("PageRank", 1.5, 10**9)            # the first: not kept
    assert set_ups.fixed == {} and set_ups.count == 1
    assert set_ups.fixed_seconds("BFS") == config.HYBRID_GPU_SET_UP_SECONDS
    set_ups.note("PageRank", 0.05, 2 * 10**7)       # 20 ms of it the copy
    assert set_ups.fixed_seconds("PageRank") == pytest.approx(0.03)
    assert set_ups.fixed_seconds("BFS") == pytest.approx(0.03)      # the latest of any
    set_ups.note("BFS", 0.012, 0)
    assert set_ups.fixed_seconds("BFS") == pytest.approx(0.012)
    assert set_ups.fixed_seconds("PageRank") == pytest.approx(0.03)
    assert set_ups.fixed_seconds("SSSP") == pytest.approx(0.012)
    set_ups.note("SSSP", 0.001, 10**9)              # a copy faster than expected
    assert set_ups.fixed_seconds("SSSP") == 0.0 and set_ups.count == 4


def test_a_spike_in_one_set_up_is_priced_once(monkeypatch):
    """A program's first set-up on a machine compiles its kernels (0.85 s
    measured against 0.14 warm): the next runs are priced at the least of its
    last two, so the spike weighs on no run after the warm one."""
    monkeypatch.setattr(config, "HYBRID_GPU_SET_UP_BYTES_PER_SECOND", math.inf)
    set_ups = set_up_choice.MeasuredSetUps(1)
    set_ups.note("ConnectedComponents", 0.85, 0)       # compiled its kernels
    assert set_ups.fixed_seconds("ConnectedComponents") == pytest.approx(0.85)
    set_ups.note("ConnectedComponents", 0.14, 0)
    assert set_ups.fixed_seconds("ConnectedComponents") == pytest.approx(0.14)
    set_ups.note("ConnectedComponents", 0.5, 0)        # a cold read: the warm one still prices
    assert set_ups.fixed_seconds("ConnectedComponents") == pytest.approx(0.14)
    set_ups.note("ConnectedComponents", 0.45, 0)       # two alike: a bigger graph
    assert set_ups.fixed_seconds("ConnectedComponents") == pytest.approx(0.45)
    assert set_ups.fixed_seconds("BFS") == pytest.approx(0.45)      # the latest program's
    assert set_up_choice.MeasuredSetUps(2, {"BFS": 0.01}).fixed_seconds("BFS") == 0.01


@pytest.mark.gpu
def test_a_gpu_run_measures_the_set_up_the_next_hybrid_run_weighs(graph, monkeypatch):
    monkeypatch.setattr(api, "_gpu_set_up_choice", WEIGHED_GPU_SET_UP)
    monkeypatch.setattr(api, "_GPU_SET_UPS", set_up_choice.MeasuredSetUps())
    monkeypatch.setattr(config, "HYBRID_GPU_SET_UP_BYTES_PER_SECOND", SHIPPED_BYTES_PER_SECOND)
    garaphpy.run(graph, "pagerank", mode="gpu")
    assert api._GPU_SET_UPS.count == 1 and api._GPU_SET_UPS.fixed == {}
    garaphpy.run(graph, "pagerank", mode="gpu")
    [measured] = api._GPU_SET_UPS.fixed["PageRank"]
    assert 0.0 <= measured < 60.0
    hybrid = garaphpy.run(graph, "pagerank")
    assert hybrid.plan.gpu_set_up["set_up_fixed"] == measured
    assert "cupy" in sys.modules


# -- the GPU alone where every page fits --------------------------------------------------
@pytest.mark.parametrize("pages, vertices, budget, alone", [
    (100, 20, 200, True),
    (100, 100, 200, True),      # exactly the budget
    (100, 101, 200, False),
    (0, 0, 0, True),
    (10**9, 64 * 4_000_000, 2**30, False),
])
def test_the_gpu_runs_alone_where_every_page_fits_beside_the_vertex_data(
        pages, vertices, budget, alone):
    assert set_up_choice.gpu_alone(pages, vertices, budget) is alone


def test_the_vertex_data_is_estimated_per_vertex():
    assert set_up_choice.gpu_vertex_bytes(1000) == 1000 * config.HYBRID_GPU_VERTEX_BYTES
    assert set_up_choice.gpu_vertex_bytes(0) == 0


def test_a_hybrid_run_whose_pages_fit_is_the_gpus_and_says_so(graph, monkeypatch):
    page_bytes = sum(page.nbytes for page in graph.store.pages)
    vertex_bytes = set_up_choice.gpu_vertex_bytes(graph.num_vertices)
    entry = {"choice": True}
    monkeypatch.setattr(config, "gpu_budget", lambda asked, *rest, **named: asked)
    fits = api.RunOptions(gpu_memory=page_bytes + vertex_bytes)
    assert set_up_choice.gpu_alone_mode(graph, fits.gpu_memory, entry) == "gpu"
    assert entry == {"choice": True, "gpu_alone": True, "page_bytes": page_bytes,
                     "vertex_bytes": vertex_bytes, "gpu_budget": page_bytes + vertex_bytes,
                     "sharing_pays": False}
    short = api.RunOptions(gpu_memory=page_bytes + vertex_bytes - 1)
    assert set_up_choice.gpu_alone_mode(graph, short.gpu_memory, entry) == "hybrid"
    assert entry["gpu_alone"] is False and entry["sharing_pays"] is True


@pytest.mark.parametrize("passes, cpu, gpu, vertices, pays", [
    (20, 0.0477, 0.0095, 4_194_304, False),    # kron22 PageRank at 25%: 32 ms < 168
    (10, 0.193, 0.050, 16_777_216, False),     # kron24 PageRank at 25%: 103 ms < 671
    (1000, 0.193, 0.050, 16_777_216, True),    # a long run pays the CPU's set-up
    (20, 0.010, 0.010, 1000, True),            # equal processors, a small graph
    (0, 1.0, 1.0, 10, False),
    (20, 1.0, 0.0, 10, False),
])
def test_sharing_pays_where_it_saves_more_than_the_cpus_set_up(passes, cpu, gpu, vertices,
                                                              pays):
    assert set_up_choice.sharing_pays(passes, cpu, gpu, vertices) is pays


def test_whole_pulls_over_pages_beyond_the_budget_stay_on_the_gpu_where_sharing_does_not_pay(
        graph, monkeypatch):
    page_bytes = sum(page.nbytes for page in graph.store.pages)
    vertex_bytes = set_up_choice.gpu_vertex_bytes(graph.num_vertices)
    monkeypatch.setattr(config, "gpu_budget", lambda asked, *rest, **named: asked)
    short = api.RunOptions(gpu_memory=page_bytes + vertex_bytes - 1)
    entry = {"choice": True, "whole_pulls": True, "passes": 20.0, "cpu_pass_seconds": 1e-3,
             "gpu_pass_seconds": 1e-6}
    assert set_up_choice.gpu_alone_mode(graph, short.gpu_memory, entry) == "gpu"
    assert entry["gpu_alone"] is True and entry["sharing_pays"] is False
    monkeypatch.setattr(config, "HYBRID_SHARING_SET_UP_SECONDS_PER_VERTEX", 0.0)
    assert set_up_choice.gpu_alone_mode(graph, short.gpu_memory, entry) == "hybrid"
    assert entry["sharing_pays"] is True
    monkeypatch.setattr(config, "HYBRID_SHARING_SET_UP_SECONDS_PER_VERTEX", 1.0)
    frontier = dict(entry, whole_pulls=False)       # a frontier program keeps both
    assert set_up_choice.gpu_alone_mode(graph, short.gpu_memory, frontier) == "hybrid"


def test_a_run_priced_before_set_up_records_each_pass_and_whole_pulls(graph, priced):
    budget = sum(page.disk_bytes for page in graph.store.pages) // 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", garaphpy.GpuFallbackWarning)
        pagerank = garaphpy.run(graph, "pagerank", threads=2, gpu_memory=budget)
        bfs = garaphpy.run(graph, "bfs", sources=0, threads=2, gpu_memory=budget)
    entry = pagerank.plan.gpu_set_up
    assert entry["whole_pulls"] is True and bfs.plan.gpu_set_up["whole_pulls"] is False
    assert entry["cpu_pass_seconds"] == pytest.approx(set_up_choice.cpu_run_seconds(
        graph.num_edges, 1, 1))
    assert entry["gpu_pass_seconds"] == pytest.approx(
        config.HYBRID_GPU_ITERATION_SECONDS + graph.num_edges / config.HYBRID_GPU_EDGES_PER_SECOND
        + set_up_choice.gpu_streamed_bytes(graph.store, budget)
        / config.GPU_BUS_BYTES_PER_SECOND)


def test_the_plan_and_summary_name_the_gpu_alone(graph):
    from garaphpy.scheduler.plan import RunPlan

    plan = RunPlan(mode="gpu", execution="sync", direction="auto", max_iterations=20,
                   tolerance=None, threads=2,
                   gpu_set_up={"choice": True, "gpu_alone": True, "page_bytes": 3 << 20,
                               "vertex_bytes": 1 << 20, "gpu_budget": 8 << 20})
    assert "hybrid on the GPU alone: every page fits its budget (4.0 of 8.0 MiB" \
        in plan.describe()
    short = dataclasses.replace(plan, gpu_set_up=dict(plan.gpu_set_up, gpu_budget=2 << 20))
    assert "hybrid on the GPU alone: sharing its pulls would save less than the CPU's " \
        "set-up (4.0 of 2.0 MiB" in short.describe()


@pytest.mark.gpu
def test_a_resident_hybrid_run_is_the_gpu_run(graph, monkeypatch):
    """Every page fits: the hybrid's run is the GPU's own (nothing of the CPU set
    up, the same records and values); pages beyond the budget: the hybrid's."""
    monkeypatch.setattr(api, "_gpu_set_up_choice", WEIGHED_GPU_SET_UP)
    monkeypatch.setattr(api, "_GPU_SET_UPS",     # the set-up always pays
                        set_up_choice.MeasuredSetUps(1, {"BFS": 0.0}))
    monkeypatch.setattr(config, "HYBRID_GPU_SET_UP_BYTES_PER_SECOND", math.inf)
    monkeypatch.setattr(config, "HYBRID_CPU_ITERATION_SECONDS", 1.0)
    gpu = garaphpy.run(graph, "bfs", sources=0, mode="gpu")
    hybrid = garaphpy.run(graph, "bfs", sources=0)
    assert hybrid.mode == "gpu" and hybrid.plan.gpu_set_up["gpu_alone"] is True
    assert hybrid.plan.cpu is None
    assert [r.mode for r in hybrid.iterations] == [r.mode for r in gpu.iterations]
    np.testing.assert_array_equal(hybrid.values, gpu.values)
    assert "the GPU alone, every page in its budget" in hybrid.summary()
    from garaphpy.programs import BFS
    from helpers import budget_for

    monkeypatch.setattr(config, "HYBRID_GPU_VERTEX_BYTES", 1 << 20)   # never fits
    streamed = garaphpy.run(graph, "bfs", sources=0, gpu_memory=budget_for(graph, BFS(), 0.5))
    assert streamed.mode == "hybrid" and streamed.plan.gpu_set_up["gpu_alone"] is False
    np.testing.assert_array_equal(streamed.values, gpu.values)


def test_a_policy_of_the_users_own_is_never_overruled_for_the_gpu_alone(graph, priced,
                                                                         monkeypatch):
    chosen = []
    monkeypatch.setattr(api, "_hybrid_or_fallback", lambda: "hybrid")
    monkeypatch.setattr(set_up_choice, "gpu_alone_mode",
                        lambda *arguments: chosen.append(True) or "cpu")
    monkeypatch.setattr(config, "HYBRID_CPU_ITERATION_SECONDS", 1.0)    # the set-up pays
    options = api.RunOptions(policy=HybridPolicy(), threads=2)
    assert api._validated(graph, "pagerank", options).mode == "hybrid" and not chosen
    forced = api.RunOptions(direction="pull", threads=2)
    assert api._validated(graph, "pagerank", forced).mode == "hybrid" and not chosen
    assert api._validated(graph, "pagerank", api.RunOptions(threads=2)).mode == "cpu"
    assert chosen == [True]


@pytest.mark.parametrize("in_degrees", [[3, 3, 3, 3], [1, 0, 0, 40], [0, 0, 0]])
def test_the_stores_in_degree_skew_is_the_decisions(in_degrees, tmp_path):
    """The skew the set-up choice reads from the store (computed once per store)
    is :func:`decisions.in_degree_skew` of its in-degrees."""
    from garaphpy.scheduler import decisions

    dst = np.repeat(np.arange(len(in_degrees)), in_degrees)
    src = (dst + 1) % len(in_degrees)
    graph = garaphpy.Graph.from_arrays(src, dst, num_vertices=len(in_degrees),
                                       store=tmp_path / "store")
    assert graph.store.in_degree_skew == pytest.approx(
        decisions.in_degree_skew(graph.store.in_degree))


# -- the storage tier -------------------------------------------------------------------------
@pytest.mark.parametrize("held, room, images, read", [
    (0, 0, [300] * 4, 400),             # neither tier holds a page: every pass reads them
    (200, 300, [300] * 4, 100),         # two pages on the GPU, one in the host's cache
    (250, 300, [300] * 4, 100),         # the budgets hold prefixes: part of a page is none
    (0, 1200, [300] * 4, 0),            # the host's cache holds every page
    (400, 0, [300] * 4, 0),             # the GPU's budget holds every page
    (100, 600, [300, 300, 700, 100], 200),  # a page too large for the cache ends its prefix
])
def test_the_gpu_alone_reads_the_pages_beyond_both_tiers(held, room, images, read):
    assert set_up_choice.gpu_alone_disk_bytes([100] * 4, images, held, room) == read


def test_the_reads_of_a_run_are_every_page_once_then_each_pass_its_own():
    reads = set_up_choice.StorageReads(first_bytes=1000, cpu_pass_bytes=600,
                                       gpu_pass_bytes=100, bytes_per_second=100.0)
    assert reads.seconds(5) == pytest.approx((10 + 4 * 6, 10 + 4 * 1))
    assert reads.seconds(0.5) == pytest.approx((10, 10))
    assert reads.pass_seconds() == pytest.approx((6, 1))


def test_a_run_whose_pages_fit_the_host_reads_nothing_from_storage(graph):
    assert set_up_choice.storage_reads(graph.store, None, None, None) is None


@pytest.fixture(scope="module")
def paged():
    """A graph of many small pages, and a host budget (with its read-ahead
    of one page buffer) that caches about a third of them."""
    from garaphpy.storage.host_budget import page_buffer_bytes, run_fixed_bytes

    rng = np.random.default_rng(12)
    src, dst = rng.integers(0, 600, 12_000), rng.integers(0, 600, 12_000)
    graph = garaphpy.Graph.from_arrays(src, dst, max_shard_edges=300, max_page_bytes=4_000,
                                       compress=False)
    store = graph.store
    buffer = page_buffer_bytes(store)
    host = run_fixed_bytes(store) + buffer + sum(page.nbytes for page in store.pages) // 3
    return graph, host, buffer


def test_the_cpu_alone_reads_its_streamed_pages_and_the_gpu_alone_those_beyond_both(paged):
    from garaphpy.storage.host_budget import plan_run_pages

    graph, host, readahead = paged
    store = graph.store
    plan, _ = plan_run_pages(store, 1, host, readahead)
    assert plan.streamed and plan.cached
    stored = [page.disk_bytes for page in store.pages]
    reads = set_up_choice.storage_reads(store, host, readahead, None)
    assert reads.first_bytes == sum(stored)
    assert reads.cpu_pass_bytes == sum(stored[k] for k in plan.streamed)
    assert reads.gpu_pass_bytes == 0        # no budget given: the GPU holds every page
    vertex_bytes = set_up_choice.gpu_vertex_bytes(store.num_vertices)
    nothing = set_up_choice.storage_reads(store, host, readahead, vertex_bytes)
    assert nothing.gpu_pass_bytes == nothing.cpu_pass_bytes     # the same cache, no GPU page
    half = set_up_choice.storage_reads(store, host, readahead, vertex_bytes + sum(stored) // 2)
    assert 0 < half.gpu_pass_bytes < nothing.gpu_pass_bytes
    assert set_up_choice.storage_reads(store, host, readahead,
                                       vertex_bytes + sum(stored)).gpu_pass_bytes == 0


def test_a_hybrid_run_from_storage_prices_each_processors_reads(paged, priced, monkeypatch):
    graph, host, readahead = paged
    store = graph.store
    stored = sum(page.disk_bytes for page in store.pages)
    budget = set_up_choice.gpu_vertex_bytes(graph.num_vertices) + stored
    options = dict(threads=2, tolerance=0.0, max_iterations=20, gpu_memory=budget,
                   readahead_bytes=readahead)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", garaphpy.GpuFallbackWarning)
        warnings.simplefilter("ignore", garaphpy.NotConvergedWarning)
        in_memory = garaphpy.run(graph, "pagerank", **options).plan.gpu_set_up
        monkeypatch.setattr(config, "DISK_READ_BYTES_PER_SECOND", 1e5)   # a slow disk
        slow = garaphpy.run(graph, "pagerank", host_memory=host, **options).plan.gpu_set_up
    assert in_memory["storage_reads"] is None and in_memory["choice"] is False
    reads = set_up_choice.StorageReads(**slow["storage_reads"])
    assert reads.bytes_per_second == 1e5 and reads.gpu_pass_bytes == 0 < reads.cpu_pass_bytes
    cpu_reads, gpu_reads = reads.seconds(slow["passes"])
    assert slow["cpu_seconds"] == pytest.approx(in_memory["cpu_seconds"] + cpu_reads)
    assert slow["gpu_seconds"] == pytest.approx(in_memory["gpu_seconds"] + gpu_reads)
    assert slow["cpu_pass_seconds"] == pytest.approx(
        in_memory["cpu_pass_seconds"] + reads.cpu_pass_bytes / 1e5)
    assert slow["choice"] is True       # the CPU alone would read its streamed pages each pass


def test_kron24_pagerank_from_storage_goes_to_the_gpu_alone():
    """H200 host, 2026-12-05, kron24 compressed (1,212 MB stored), pages beyond a
    host budget of a quarter of them, five PageRank pulls: the CPU alone read
    770 MB a pass (570 ms against 248 in memory), the GPU alone nothing after
    its first (its budget and the host's cache held every page), 19.7 ms a
    pass; the hybrid, pricing no reads, ran the CPU alone."""
    edges, vertices, passes = 520_759_773, 16_777_216, 5.0
    reads = set_up_choice.StorageReads(first_bytes=1_212_400_000, cpu_pass_bytes=770_292_224,
                                       gpu_pass_bytes=0, bytes_per_second=2.26e9)
    cpu_reads, gpu_reads = reads.seconds(passes)
    cpu = cpu_reads + set_up_choice.cpu_run_seconds(edges, 16, passes, iterations=passes)
    gpu = gpu_reads + set_up_choice.gpu_run_seconds(
        set_up_choice.gpu_set_up_seconds(1_540_173_504, 0.3), 0.0, passes, passes, edges,
        streamed_bytes=0)
    assert set_up_choice.gpu_set_up_pays(cpu, gpu)
    assert set_up_choice.gpu_set_up_pays(cpu - cpu_reads, gpu - gpu_reads) is False
    cpu_pass_reads, gpu_pass_reads = reads.pass_seconds()
    assert not set_up_choice.sharing_pays(
        passes, cpu_pass_reads + set_up_choice.cpu_run_seconds(edges, 15, 1),
        gpu_pass_reads + set_up_choice.gpu_run_seconds(0.0, 0.0, 1, 1, edges), vertices)
