"""The hybrid engine (Garaph sections 4.1, 5.1): hybrid results equal CPU-only results.

Every test here needs a GPU (``pytest -m gpu`` on the GPU machine).  Policies
written for the tests force the paths a default run may not take on small
graphs: both processors pulling pages of one iteration (a page split between
them, vertices cut between a CPU page and a GPU page), iterations alternating
between the CPU alone and both processors (each copy of the vertex data
brought up to date in turn), and GPU-only hybrid iterations.  The policy
decisions on synthetic measurements are tested without a GPU in
``tests/scheduler/test_dispatcher.py``.
"""

from __future__ import annotations


import numpy as np
import pytest

import garaphpy
from garaphpy.programs import BUILTIN_PROGRAMS
from garaphpy.scheduler.policy import HybridPolicy

import references as ref
from helpers import (ITERATIVE, SHARED_DATA, SMALL_GRAPHS, GpuAlonePolicy, SplitPolicy,
                     sources_of, with_pages)
from helpers import gpu_program as program_for

pytestmark = pytest.mark.gpu

EXACT = ref.EXACT_PROGRAMS
PROGRAMS = list(BUILTIN_PROGRAMS)


class AlternatingPolicy(SplitPolicy):
    """CPU alone on even iterations, both processors on odd ones."""

    def decide(self, iteration, active_fraction, rho):
        decision = super().decide(iteration, active_fraction, rho)
        if iteration % 2 == 0:
            decision.mode = "cpu"
        return decision


run_quietly = ref.run_engine_like_gpu
assert_matches = ref.assert_program_values


@pytest.fixture(scope="module")
def small():
    return {name: build() for name, build in SMALL_GRAPHS.items()}


@pytest.fixture(scope="module")
def paged_rmat():
    """rmat:12, weighted, cut into many small pages: a hybrid iteration splits it
    between the processors, and heavy vertices are cut between pages."""
    graph = garaphpy.Graph.load("rmat:12", progress=False,
                                generator_options={"weighted": True, "seed": 11},
                                max_shard_edges=512, max_page_bytes=16384, compress=False)
    assert len(graph.store.pages) > 8
    assert (graph.store.shards["split"] == 1).any()
    return graph


def iterative_options(name):
    return {"max_iterations": 60} if name in ITERATIVE else {}


@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_hybrid_equals_cpu_with_pages_split_between_processors(paged_rmat, name, execution):
    program = program_for(name)
    sources = np.array([0, 7], np.int64) if program.needs_sources else ()
    options = dict(execution=execution, **iterative_options(name))
    cpu = run_quietly(paged_rmat, program, sources, mode="cpu", **options)
    policy = with_pages(SplitPolicy(0.5), paged_rmat, program)
    hybrid = run_quietly(paged_rmat, program, sources, mode="hybrid", policy=policy,
                         **options)
    assert hybrid.mode == "hybrid"
    first = hybrid.iterations[0]
    assert first.mode == "hybrid" and first.cpu_pages > 0 and first.gpu_pages > 0
    assert first.cpu_pages + first.gpu_pages == first.pages
    assert first.cpu_edges + first.gpu_edges == paged_rmat.num_edges or program.needs_undirected
    assert first.bytes_to_host > 0 and first.bytes_to_device > 0
    ref.assert_run_matches(name, execution, hybrid, cpu)


@pytest.mark.parametrize("name", ["pagerank", "sssp", "bfs", "cc", "nn", "hs"])
def test_switching_between_cpu_alone_and_both_keeps_both_copies_current(paged_rmat, name):
    program = program_for(name)
    sources = np.array([3], np.int64) if program.needs_sources else ()
    options = iterative_options(name)
    cpu = run_quietly(paged_rmat, program, sources, mode="cpu", **options)
    policy = with_pages(AlternatingPolicy(0.3), paged_rmat, program)
    hybrid = run_quietly(paged_rmat, program, sources, mode="hybrid", policy=policy,
                         **options)
    modes = [record.mode for record in hybrid.iterations]
    assert modes[:2] == ["cpu", "hybrid"]
    assert_matches(name, hybrid.values, cpu.values)
    # the CPU worker's thread team ends whenever the run goes on without it
    released = ["worker_team_released" in record.decisions for record in hybrid.iterations]
    worker_used = [True] + [record.cpu_pages > 0 and record.mode == "hybrid"
                            for record in hybrid.iterations[:-1]]
    assert released == [mode == "cpu" and used for mode, used in zip(modes, worker_used)]
    alone = run_quietly(paged_rmat, program, sources, mode="hybrid", policy=GpuAlonePolicy(),
                        **options)
    assert all(r.cpu_pages == 0 and r.gpu_pages == r.pages for r in alone.iterations)
    assert ["worker_team_released" in record.decisions for record in alone.iterations] == \
        [True] + [False] * (alone.num_iterations - 1)
    assert_matches(name, alone.values, cpu.values)


@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_default_hybrid_equals_references_on_small_graphs(small, name, execution):
    for graph_name, graph in small.items():
        if name == "cc" and graph_name == "random":
            continue
        sources = sources_of(graph, graph_name)
        program = program_for(name)
        used = sources if program.needs_sources else ()
        options = {"tolerance": 1e-13, "max_iterations": 100_000} if name in ITERATIVE else {}
        cpu = run_quietly(graph, program, used, mode="cpu", execution=execution, **options)
        hybrid = run_quietly(graph, program, used, execution=execution, **options)
        assert hybrid.mode == "hybrid"
        if execution == "sync" or name in EXACT:
            assert_matches(name, hybrid.values, cpu.values)
        forced = run_quietly(graph, program, used, mode="hybrid", execution=execution,
                             policy=with_pages(SplitPolicy(0.5), graph, program), **options)
        if execution == "sync" or name in EXACT:
            assert_matches(name, forced.values, cpu.values)


SNAP_FILES = ["ca-HepPh.txt.gz", "soc-Slashdot0811.txt.gz", "web-NotreDame.txt.gz"]


@pytest.fixture(scope="module")
def snap_graphs(tmp_path_factory):
    """A SNAP file's graph in 1 MB pages, the same graph with weights 1..100, and
    its hub: made once per file and worker (a program's case is then its runs)."""
    made = {}

    def graphs_of(file):
        if file not in made:
            path = SHARED_DATA / file
            if not path.exists():
                pytest.skip(f"{path} is not here")
            graph = garaphpy.Graph.load(path, store=tmp_path_factory.mktemp("snap") / "store",
                                        progress=False, max_page_bytes=1 << 20)
            in_offsets, sources, _ = graph.store.csc()
            destinations = np.repeat(np.arange(graph.num_vertices), np.diff(in_offsets))
            weights = np.random.default_rng(7).integers(1, 101, sources.size)
            weighted = garaphpy.Graph.from_arrays(sources, destinations, weights,
                                                  num_vertices=graph.num_vertices,
                                                  max_page_bytes=1 << 20)
            hub = np.array([int(np.argmax(graph.store.out_degree))], np.int64)
            made[file] = graph, weighted, hub
        return made[file]

    return graphs_of


@pytest.mark.parametrize("name", PROGRAMS)
@pytest.mark.parametrize("file", SNAP_FILES)
def test_hybrid_equals_cpu_on_snap_graphs(file, name, snap_graphs):
    graph, weighted, hub = snap_graphs(file)
    program = program_for(name)
    on = weighted if program.needs_weights else graph
    used = hub if program.needs_sources else ()
    options = iterative_options(name)
    cpu = run_quietly(on, program, used, mode="cpu", **options)
    default = run_quietly(on, program, used, mode="hybrid", **options)
    assert_matches(name, default.values, cpu.values)
    split = run_quietly(on, program, used, mode="hybrid",
                        policy=with_pages(SplitPolicy(0.5), on, program), **options)
    assert_matches(name, split.values, cpu.values)


def test_streamed_pages_in_hybrid_iterations(paged_rmat):
    from garaphpy.scheduler.gpu_engine import GpuEngine

    program = program_for("pagerank")
    sizing = GpuEngine(paged_rmat, program, np.zeros(0, np.int64), synchronous=True)
    page_bytes = sum(page.nbytes for page in paged_rmat.store.pages)
    # a third of the pages' stored bytes, less where it holds more than a third of them
    # packed: the GPU's half of the pages then streams some
    for share in (3, 6, 12, 24, 48):
        budget = sizing.plan.vertex_bytes + page_bytes // share
        kept = GpuEngine(paged_rmat, program, np.zeros(0, np.int64), synchronous=True,
                         gpu_memory=budget).kept_pages
        if kept.sum() <= kept.size // 3:
            break
    assert kept.sum() <= kept.size // 3
    cpu = run_quietly(paged_rmat, program, mode="cpu", max_iterations=20)
    hybrid = run_quietly(paged_rmat, program, mode="hybrid", max_iterations=20,
                         gpu_memory=budget, policy=with_pages(SplitPolicy(0.5), paged_rmat,
                                                              program))
    assert hybrid.iterations[0].copy_seconds > 0
    assert_matches("pagerank", hybrid.values, cpu.values)


def test_records_and_decisions_of_a_default_run(paged_rmat):
    policy = HybridPolicy(per_run=False)      # every iteration by alpha
    result = run_quietly(paged_rmat, program_for("sssp"), np.array([0], np.int64),
                         mode="hybrid", policy=policy)
    decided = policy.per_iteration()
    assert [iteration for iteration, _ in decided] == list(range(result.num_iterations))
    assert policy.decisions[0].ratio_source == "probe" and policy.decisions[0].ratio > 0
    for record, (_, decision) in zip(result.iterations, decided):
        assert record.mode == decision.mode and record.alpha == decision.alpha
        assert record.dispatch_seconds >= 0
        if record.mode == "cpu":
            assert record.gpu_pages == 0
    assert "CPU-only" in result.summary()
    # the GPU's sparse passes are priced (a prior from the GPU engine's transfer rates,
    # then what its sparse iterations took), and a tail iteration on the GPU costs
    # less than a dense pass
    assert policy.gpu_sparse_overhead is not None and policy.gpu_sparse_overhead > 0
    assert policy.gpu_sparse_seconds_per_edge is not None
    assert policy.gpu_iteration_seconds(0.0) <= policy.t_gpu


def test_hybrid_checkpoint_and_resume_give_the_uninterrupted_result(paged_rmat, tmp_path):
    program = program_for("sssp")
    sources = np.array([0], np.int64)
    policy = lambda: with_pages(AlternatingPolicy(0.5), paged_rmat, program)  # noqa: E731
    whole = run_quietly(paged_rmat, program, sources, mode="hybrid", policy=policy())
    assert whole.num_iterations > 3

    class Crash(Exception):
        pass

    def crash(record):
        if record.iteration == 2:
            raise Crash

    options = dict(mode="hybrid", checkpoint_dir=tmp_path / "c", checkpoint_every=1)
    with pytest.raises(Crash):
        run_quietly(paged_rmat, program, sources, on_iteration=crash, policy=policy(),
                    **options)
    resumed = run_quietly(paged_rmat, program, sources, resume=True, policy=policy(),
                          **options)
    np.testing.assert_array_equal(resumed.values, whole.values)


class PhasePolicy(GpuAlonePolicy):
    """The CPU alone on the first ``cpu_iterations`` of every ``period``
    iterations, the GPU alone (the CPU takes no page) on the others: each
    copy brought up to date in turn, the GPU's sparse passes starting from
    the activity the CPU's iterations left.  Without ``batches``, one
    iteration at a time: no CPU batch, no device loop."""

    def __init__(self, period: int = 6, cpu_iterations: int = 3, batches: bool = True):
        super().__init__()
        self.period, self.cpu_iterations, self.batches = period, cpu_iterations, batches

    def decide(self, iteration, active_fraction, rho):
        decision = super().decide(iteration, active_fraction, rho)
        if iteration % self.period < self.cpu_iterations:
            decision.mode = "cpu"
        return decision


@pytest.fixture(scope="module")
def weighted_grid():
    """A 60x60 grid, weighted: SSSP in buckets of values on the CPU, and many
    sparse iterations."""
    return garaphpy.Graph.load("grid:60x60", progress=False, compress=False,
                               generator_options={"weighted": True, "seed": 5})


def streaming_budget(graph, program, share):
    """A GPU budget of the vertex data and 1/``share`` of the pages' bytes (at
    least two pages): the other pages stream."""
    from garaphpy.scheduler.gpu_engine import GpuEngine

    sizing = GpuEngine(graph, program, np.zeros(0, np.int64), synchronous=True)
    page_bytes = [page.nbytes for page in graph.store.pages]
    return sizing.plan.vertex_bytes + max(sum(page_bytes) // share, 2 * max(page_bytes))


# not CC asynchronous: it converges in the CPU's first iterations (two on the grid), before
# the GPU's turn
@pytest.mark.parametrize("name, execution", [("sssp", "sync"), ("sssp", "async"),
                                             ("bfs", "sync"), ("cc", "sync")])
@pytest.mark.parametrize("share", [None, 4])
def test_gpu_alone_after_cpu_iterations_starts_from_the_cpus_frontier(weighted_grid,
                                                                      paged_rmat, name,
                                                                      execution, share):
    """A GPU-alone iteration after CPU ones pulls from the CPU's frontier, not
    from the activity its own last iteration left on the device: its sparse
    pass (resident, and with pages streamed) picks pages and vertices by it."""
    program = program_for(name)
    for graph in (weighted_grid, paged_rmat):
        sources = np.array([0], np.int64) if program.needs_sources else ()
        budget = None if share is None else streaming_budget(graph, program, share)
        cpu = run_quietly(graph, program, sources, mode="cpu", execution=execution)
        hybrid = run_quietly(graph, program, sources, mode="hybrid", execution=execution,
                             policy=PhasePolicy(batches=False), gpu_memory=budget)
        assert_matches(name, hybrid.values, cpu.values)
        modes = [record.mode for record in hybrid.iterations]
        switches = [i for i in range(1, len(modes)) if modes[i - 1] == "cpu" != modes[i]]
        assert switches, modes
        values_bytes = hybrid.values.dtype.itemsize * graph.num_vertices
        for i in switches:
            # the values and the activity went up
            assert hybrid.iterations[i].bytes_to_device >= values_bytes + graph.num_vertices


@pytest.mark.parametrize("name, execution", [("sssp", "sync"), ("sssp", "async"),
                                             ("bfs", "sync")])
@pytest.mark.parametrize("share", [None, 4])
def test_cpu_batches_and_gpu_iterations_in_turn_equal_the_cpu(weighted_grid, paged_rmat,
                                                               name, execution, share):
    """Iterations the policy gives the CPU alone run in the CPU's own batches
    (sparse batches; buckets of values for SSSP run asynchronously), one
    decision covering each; the GPU alone runs the others, resident and
    streamed."""
    program = program_for(name)
    for graph in (weighted_grid, paged_rmat):
        sources = np.array([0], np.int64) if program.needs_sources else ()
        budget = None if share is None else streaming_budget(graph, program, share)
        cpu = run_quietly(graph, program, sources, mode="cpu", execution=execution)
        policy = PhasePolicy()
        hybrid = run_quietly(graph, program, sources, mode="hybrid", policy=policy,
                             execution=execution, gpu_memory=budget)
        assert_matches(name, hybrid.values, cpu.values)
        batches = [record for record in hybrid.iterations
                   if "hybrid_cpu_batch" in record.decisions]
        for record in batches:
            assert record.mode == "cpu"
            assert record.decisions["mode"]["choice"] == "cpu"
        # one decision per batch: the policy's decisions cover every iteration once
        assert [i for i, _ in policy.per_iteration()] == list(range(hybrid.num_iterations))
        if graph is weighted_grid:      # enough sparse iterations for a batch
            assert batches, "no CPU batch"
            assert "hybrid" in {record.mode for record in hybrid.iterations}
            buckets = any("value_priority" in record.decisions for record in batches)
            assert buckets == (execution == "async")


@pytest.mark.parametrize("share", [None, 4])
def test_bfs_cpu_iterations_after_the_gpus_skip_the_vertices_it_settled(weighted_grid,
                                                                         paged_rmat, share):
    """A hybrid BFS (values final once set) runs its CPU-alone iterations with
    early exit, as the CPU alone does: after the GPU's iterations the CPU
    finds the settled vertices again from the values (Beamer's rule then
    reads exactly the in-edges of the vertices not yet reached), and the
    pages it pulls beside the GPU it pulls in full."""
    program = program_for("bfs")
    for graph in (weighted_grid, paged_rmat):
        source = np.array([0], np.int64)
        depth = ref.bfs_scipy(graph, source)
        in_degree = np.diff(graph.store.csc()[0])
        budget = None if share is None else streaming_budget(graph, program, share)
        hybrid = run_quietly(graph, program, source, mode="hybrid", gpu_memory=budget,
                             policy=PhasePolicy(period=4, cpu_iterations=2, batches=False))
        np.testing.assert_array_equal(hybrid.values, depth)
        after_gpu = [record for previous, record in zip(hybrid.iterations,
                                                        hybrid.iterations[1:])
                     if previous.mode != "cpu" and record.mode == "cpu"]
        assert after_gpu, [r.mode for r in hybrid.iterations]
        for record in hybrid.iterations:
            if record.mode != "cpu":
                continue
            # settled: the depths up to the iteration's (a synchronous BFS sets depth i in
            # iteration i - 1)
            unsettled = (depth < 0) | (depth > record.iteration)
            entry = record.decisions["direction"]
            assert entry["unsettled_in_edges"] == int(in_degree[unsettled].sum()), \
                record.iteration
    # iterations of pages split between the processors, around the CPU's own
    joint = with_pages(AlternatingPolicy(0.5), paged_rmat, program)
    split = run_quietly(paged_rmat, program, source, mode="hybrid", policy=joint,
                        gpu_memory=None if share is None
                        else streaming_budget(paged_rmat, program, share))
    np.testing.assert_array_equal(split.values, ref.bfs_scipy(paged_rmat, source))
    assert any(r.mode == "hybrid" and r.cpu_pages > 0 for r in split.iterations)
