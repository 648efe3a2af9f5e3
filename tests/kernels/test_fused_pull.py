"""Pulls that also prepare the next one: on the CPU alone, a
synchronous pull with precomputed source-side gathers writes each vertex's
gather for the next pull and its share of the next iteration's aggregates as
it writes the vertex's new value (GAPBS's PageRank loop), so the next pull
makes no pass of its own over every vertex.  Checked against SciPy and the
pure-Python reference, against the same runs with the fusion off, and where
the values change between two pulls (a notify-pull, a resumed checkpoint).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import garaphpy
from garaphpy import VertexProgram, api, config
from garaphpy.kernels import cpu as kernels
from garaphpy.programs import PageRank
from garaphpy.programs.pagerank import dangling_mass
from garaphpy.scheduler import decisions
from garaphpy.storage.host_budget import run_fixed_bytes
from references import out_of_core_rmat, pagerank_power, run_engine, run_naive


class LazyRank(VertexProgram):
    """A user's PageRank with an aggregate, whose vertices go quiet once settled."""

    constants = {"damping": 0.85}
    execution = "sync"
    aggregates = {"dangling": ("add", dangling_mass)}

    def init(num_vertices):
        return 1.0 / num_vertices

    def gather(src, src_out_degree):
        return src / src_out_degree

    def apply(accum, num_vertices, dangling):
        return (1.0 - damping) / num_vertices + damping * (accum + dangling / num_vertices)

    def activate(new, old):
        return abs(new - old) > 1e-6 * old


def highest_score(value, out_degree):
    return value


def lowest_source_score(value, out_degree):
    return value if out_degree > 0 else 1.0


class SpreadRank(VertexProgram):
    """Three aggregates, one per monoid, that apply reads: the running tuple of
    the fused pull must fold each with its own monoid, in declaration order."""

    constants = {"damping": 0.85}
    execution = "sync"
    aggregates = {"dangling": ("add", dangling_mass), "peak": ("max", highest_score),
                  "floor": ("min", lowest_source_score)}

    def init(num_vertices):
        return 1.0 / num_vertices

    def gather(src, src_out_degree):
        return src / src_out_degree

    def apply(accum, num_vertices, dangling, peak, floor):
        return (1.0 - damping) / num_vertices + damping * (accum + dangling / num_vertices) \
            + 0.01 * (peak - 2.0 * floor)

    def activate(new, old):
        return True


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    base = tmp_path_factory.mktemp("fused")
    rng = np.random.default_rng(7)
    src = rng.integers(0, 400, 3000)
    dst = rng.integers(0, 500, 3000)    # vertices 400..499 have no out-edge: dangling mass
    return {
        "dangling": garaphpy.Graph.from_arrays(src, dst, num_vertices=500,
                                               store=base / "dangling", progress=False),
        "grid": garaphpy.Graph.load("grid:40x30", store=base / "grid", progress=False),
        "pages": garaphpy.Graph.load("rmat:11", store=base / "pages", progress=False,
                                     max_shard_edges=512, max_page_bytes=16384,
                                     generator_options={"seed": 5}),
    }


def _run(graph, program, fused: bool, monkeypatch, turned_off=(), **options):
    options = {"mode": "cpu", "threads": 2,
               "turned_off": set(turned_off) | (set() if fused else {"fused_pull"}),
               **options}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", garaphpy.NotConvergedWarning)
        return run_engine(graph, program, **options)


def test_the_rule():
    assert decisions.fused_pull("cpu")
    assert not decisions.fused_pull("hybrid")
    assert not decisions.fused_pull("gpu")


@pytest.mark.parametrize("parts", [1, 2, 3, 7, 64])
def test_balanced_vertex_starts_match_numpy(parts):
    rng = np.random.default_rng(parts)
    degrees = rng.integers(0, 50, 1000) * (rng.random(1000) < 0.7)
    in_offsets = np.concatenate([[0], np.cumsum(degrees)]).astype(np.int64)
    starts = kernels.balanced_vertex_starts(in_offsets, parts)
    n = in_offsets.size - 1
    cost = in_offsets[:-1] + np.arange(n)     # edges and vertices before v
    total = int(in_offsets[-1]) + n
    expected = [0] + [int(np.searchsorted(cost, total * t // parts, side="left"))
                      for t in range(1, parts)] + [n]
    assert starts.tolist() == expected
    assert kernels.balanced_vertex_starts(np.zeros(1, np.int64), 3).tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("name", ["dangling", "grid", "pages"])
@pytest.mark.parametrize("threads", [1, 2])
def test_pagerank_fused_matches_scipy_and_unfused(graphs, name, threads, monkeypatch):
    graph = graphs[name]
    fused = _run(graph, PageRank(), True, monkeypatch, threads=threads, tolerance=1e-12)
    plain = _run(graph, PageRank(), False, monkeypatch, threads=threads, tolerance=1e-12)
    pulls = [r for r in fused.iterations if r.direction == "pull"]
    assert pulls and all(r.decisions["cpu_fused_pull"]["choice"] for r in pulls)
    assert not any(r.decisions["cpu_fused_pull"]["choice"] for r in plain.iterations
                   if r.direction == "pull")
    assert fused.num_iterations == plain.num_iterations
    np.testing.assert_allclose(fused.values, plain.values, rtol=1e-12, atol=0)
    np.testing.assert_allclose(fused.values, pagerank_power(graph), rtol=1e-8, atol=1e-12)
    assert abs(fused.values.sum() - 1.0) < 1e-9


def test_a_user_program_with_an_aggregate_matches_the_reference(graphs, monkeypatch):
    graph = graphs["dangling"]
    result = _run(graph, LazyRank(), True, monkeypatch, direction="pull", max_iterations=12,
                  tolerance=0)
    reference = run_naive(graph, LazyRank(), direction="pull", execution="sync",
                          max_iterations=12, tolerance=None)
    assert result.iterations[-1].decisions["cpu_fused_pull"]["choice"]
    np.testing.assert_allclose(result.values, reference.values, rtol=1e-12, atol=0)


@pytest.mark.parametrize("threads", [1, 2])
def test_aggregates_of_each_monoid_match_the_reference(graphs, threads, monkeypatch):
    graph = graphs["dangling"]
    result = _run(graph, SpreadRank(), True, monkeypatch, threads=threads, direction="pull",
                  max_iterations=7, tolerance=0)
    plain = _run(graph, SpreadRank(), False, monkeypatch, threads=threads, direction="pull",
                 max_iterations=7, tolerance=0)
    reference = run_naive(graph, SpreadRank(), direction="pull", execution="sync",
                          max_iterations=7, tolerance=None)
    assert all(r.decisions["cpu_fused_pull"]["choice"] for r in result.iterations)
    np.testing.assert_allclose(result.values, reference.values, rtol=1e-12, atol=0)
    np.testing.assert_allclose(plain.values, reference.values, rtol=1e-12, atol=0)


@pytest.mark.parametrize("parts_per_thread", [1, 3, 16, 400])
def test_parts_taken_by_free_threads_match_the_reference(graphs, parts_per_thread,
                                                          monkeypatch):
    """The fused pull's parts go to whichever thread is free: every part is
    pulled once whatever their number (400 per thread: more parts than
    vertices, most of them empty), aggregates of every monoid included."""
    monkeypatch.setattr(config, "CPU_FUSED_PULL_PARTS_PER_THREAD", parts_per_thread)
    graph = graphs["dangling"]
    result = _run(graph, SpreadRank(), True, monkeypatch, threads=2, direction="pull",
                  max_iterations=7, tolerance=0)
    reference = run_naive(graph, SpreadRank(), direction="pull", execution="sync",
                          max_iterations=7, tolerance=None)
    assert all(r.decisions["cpu_fused_pull"]["choice"] for r in result.iterations)
    np.testing.assert_allclose(result.values, reference.values, rtol=1e-12, atol=0)
    ranks = _run(graphs["pages"], PageRank(), True, monkeypatch, threads=2, tolerance=1e-12)
    np.testing.assert_allclose(ranks.values, pagerank_power(graphs["pages"]), rtol=1e-8,
                               atol=1e-12)


def test_aggregates_made_apart_equal_the_pulls_bit_for_bit(graphs, monkeypatch):
    """Each iteration's aggregates carried from the fused pull equal, bit for
    bit, those :meth:`CpuEngine.aggregates` makes over the same values (as a
    resumed run's first iteration does): both sum over the pull's parts."""
    from garaphpy.scheduler.cpu_engine import CpuEngine

    real = CpuEngine.aggregates
    compared = []

    def checked(self, iteration):
        carried = real(self, iteration)
        if self.carried_iteration == iteration:
            self.carried_iteration = -1
            try:
                made = real(self, iteration)
            finally:
                self.carried_iteration = iteration
            compared.append(bool(np.array_equal(carried, made)))
        return carried

    monkeypatch.setattr(CpuEngine, "aggregates", checked)
    graph = graphs["dangling"]
    for program in (PageRank(), SpreadRank()):
        _run(graph, program, True, monkeypatch, threads=2, direction="pull", max_iterations=8,
             tolerance=0)
    assert len(compared) == 14 and all(compared)


def test_vertex_ids_and_touch_match_numpy():
    for n in (0, 1, 7, 100_003):
        assert np.array_equal(kernels.vertex_ids(np.empty(n, np.int64)), np.arange(n))
        for dtype in (np.float64, np.float32, np.int64):
            assert not kernels.touch(np.full(n, 5, dtype)).any()


def test_only_the_first_of_consecutive_pulls_makes_contributions(graphs, monkeypatch):
    compiled = api._compiled_program(PageRank(), parallel=True)
    calls = {"source_contributions": 0, "compute_aggregates": 0}

    def counted(name):
        real = getattr(compiled.kernels, name)

        def kernel(values, *arguments):
            calls[name] += values.size > 0      # the warm-up's calls read no vertex
            return real(values, *arguments)
        return kernel

    for name in calls:
        monkeypatch.setattr(compiled.kernels, name, counted(name))
    counts = {}
    for fused in (True, False):
        calls.update(dict.fromkeys(calls, 0))
        result = _run(graphs["dangling"], PageRank(), fused, monkeypatch, max_iterations=6,
                      tolerance=0)
        assert result.num_iterations == 6
        counts[fused] = dict(calls)
    # fused: the first pull's contributions only; plain: each pull's
    assert counts[True]["source_contributions"] == 1
    assert counts[False]["source_contributions"] == 6
    # the aggregates of iterations 1..5 come with the pulls before them
    assert counts[False]["compute_aggregates"] - counts[True]["compute_aggregates"] == 5


def test_values_changed_between_pulls_are_not_carried(graphs, monkeypatch):
    """Pulls and notify-pulls alternate: a notify-pull changes the values the
    last pull's contributions were made from, so the next pull makes its own."""
    def alternate(f, rho=1.0, forced="auto", notify_pull=True):
        return "pull" if alternate.calls.append(1) or len(alternate.calls) % 2 else \
            "notify-pull"

    runs = {}
    for fused in (True, False):
        alternate.calls = []
        monkeypatch.setattr(decisions, "choose_direction", alternate)
        runs[fused] = _run(graphs["dangling"], PageRank(), fused, monkeypatch,
                           max_iterations=9, tolerance=0)
    directions = [r.direction for r in runs[True].iterations]
    assert directions == [r.direction for r in runs[False].iterations]
    assert len(directions) == 9 and all(a != b for a, b in zip(directions, directions[1:]))
    np.testing.assert_allclose(runs[True].values, runs[False].values, rtol=1e-12, atol=0)


def test_pages_read_from_storage_are_not_fused(tmp_path, monkeypatch):
    graph = out_of_core_rmat(tmp_path)
    largest = max(page.nbytes for page in graph.store.pages)
    # the vertex arrays and two page buffers: every pull reads the pages
    host_memory = run_fixed_bytes(graph.store) + 2 * largest + 2 * config.BLOCK_ALIGNMENT
    streamed = _run(graph, PageRank(), True, monkeypatch, host_memory=host_memory,
                    read_ratio=2.0, max_iterations=4, tolerance=0)
    in_memory = _run(graph, PageRank(), True, monkeypatch, max_iterations=4, tolerance=0)
    assert any(r.bytes_read for r in streamed.iterations)
    assert not any(r.decisions["cpu_fused_pull"]["choice"] for r in streamed.iterations)
    assert all(r.decisions["cpu_fused_pull"]["choice"] for r in in_memory.iterations)
    np.testing.assert_allclose(streamed.values, in_memory.values, rtol=1e-12, atol=0)


# -- contributions held in float32 where the tolerance allows it -----------------------------
def test_the_float32_rule():
    bound = PageRank().float32_gather_tolerance
    assert bound == pytest.approx(3 * 2.0 ** -24 * 0.85 / 0.15) and 9e-7 < bound < 1.1e-6
    assert decisions.float32_contributions(bound, 1e-4, "cpu")
    assert decisions.float32_contributions(bound, bound, "cpu")
    assert not decisions.float32_contributions(bound, bound / 2, "cpu")
    assert not decisions.float32_contributions(bound, 0.0, "cpu")     # run to a limit
    assert not decisions.float32_contributions(bound, None, "cpu")
    assert not decisions.float32_contributions(None, 1e-4, "cpu")
    assert not decisions.float32_contributions(bound, 1e-4, "hybrid")
    # a damping closer to 1 amplifies the rounding: a larger bound
    assert PageRank(damping=0.99).float32_gather_tolerance == pytest.approx(
        3 * 2.0 ** -24 * 0.99 / 0.01)


@pytest.mark.parametrize("name", ["dangling", "grid", "pages"])
@pytest.mark.parametrize("fused", [True, False])
def test_pagerank_in_float32_contributions_passes_its_verifier(graphs, name, fused,
                                                               monkeypatch):
    graph = graphs[name]
    bound = PageRank().float32_gather_tolerance
    for tolerance, dtype in ((1e-4, "float32"), (bound, "float32"), (bound / 2, "float64")):
        result = _run(graph, PageRank(), fused, monkeypatch, tolerance=tolerance)
        pulls = [r for r in result.iterations if r.direction == "pull"]
        assert pulls and all(r.decisions["cpu_precompute"]["contribution_dtype"] == dtype
                             for r in pulls)
        assert result.converged and result.program.verify(graph, result).ok
        exact = pagerank_power(graph)
        assert np.abs(result.values - exact).sum() < 10 * tolerance


def test_float32_contributions_stay_within_their_bound_of_float64(graphs, monkeypatch):
    """The same 30 steps with contributions in float32 and in float64: the
    rounding moves each step by at most d * 2^-24 in L1, and the difference
    contracts by d per step, so it stays below d 2^-24 / (1 - d)."""
    graph = graphs["dangling"]
    steps = {}
    for allowed in (True, False):
        steps[allowed] = _run(graph, PageRank(), True, monkeypatch, tolerance=1e-4,
                              max_iterations=30, raise_on_nonconvergence=False,
                              turned_off=() if allowed else {"float32_contributions"})
    assert steps[True].iterations[1].decisions["cpu_precompute"]["contribution_dtype"] == \
        "float32"
    assert steps[False].iterations[1].decisions["cpu_precompute"]["contribution_dtype"] == \
        "float64"
    assert 0 < np.abs(steps[True].values - steps[False].values).sum() < \
        0.85 * 2.0 ** -24 / 0.15


def test_float32_gather_tolerance_is_checked():
    with pytest.raises(garaphpy.program.ProgramError, match="float32_gather_tolerance = -1"):
        class Negative(VertexProgram):
            float32_gather_tolerance = -1

            def init():
                return 0.0

            def gather(src):
                return src

            def apply(accum):
                return accum

            def activate(new, old):
                return new != old
    with pytest.raises(garaphpy.program.ProgramError, match="needs an 'add' sum of floats"):
        class Minimum(VertexProgram):
            sum = "min"
            float32_gather_tolerance = 1e-3

            def init():
                return 0.0

            def gather(src):
                return src

            def apply(accum):
                return accum

            def activate(new, old):
                return new != old
