"""The iteration driver with one processor or two (CPU-only and
GPU-only runs are the same driver with one processor).

A run of each mode must be driven by :class:`~garaphpy.scheduler.driver.Driver`;
with one processor its values and records must be those of the engine
iterated on its own (the loop of ``api._iterate`` over a bare CpuEngine or
GpuEngine, as every run was before the driver) and those of an independent
reference (SciPy's Dijkstra).  The failure paths: a driver with neither
engine, or a policy for one processor, is refused with an error naming it.

GPU tests (marker ``gpu``): ``test_gpu_run_is_the_driver_with_the_gpu_alone``,
``test_gpu_alone_driver_equals_the_gpu_engine_iterated_directly``,
``test_gpu_alone_checkpoint_and_resume_through_the_driver``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph

import garaphpy
from garaphpy import api
from garaphpy.errors import ConfigError
from garaphpy.programs import SSSP, PageRank
from garaphpy.scheduler import decisions
from garaphpy.scheduler import driver as driver_module
from garaphpy.scheduler.cpu_engine import CpuEngine
from garaphpy.scheduler.cpu_state import GraphArrays, RunState
from garaphpy.scheduler.plan import CPU_CHOICES, plan_cpu
from garaphpy.scheduler.policy import HybridPolicy
from garaphpy.scheduler.processors import CpuProcessor, GpuProcessor

from helpers import untimed


@pytest.fixture(scope="module")
def graph():
    rng = np.random.default_rng(5)
    n, m = 2000, 16000
    src = rng.integers(0, n, m)
    dst = rng.integers(0, n, m)
    dst[: m // 6] = 3   # a vertex whose in-edges are cut between pages
    weights = rng.integers(1, 30, m).astype(np.float64)
    return garaphpy.Graph.from_arrays(src, dst, weights, max_shard_edges=400,
                                      max_page_bytes=30_000)


def dijkstra(graph, source: int) -> np.ndarray:
    in_offsets, sources, weights = graph.store.csc()
    destinations = np.repeat(np.arange(graph.num_vertices), np.diff(in_offsets))
    matrix = sp.csr_matrix((weights.astype(np.float64), (sources, destinations)),
                           shape=(graph.num_vertices, graph.num_vertices))
    return csgraph.dijkstra(matrix, indices=source)


def iterate_engine(engine, program, direction="auto"):
    """The iteration loop of ``garaphpy.run`` over a bare engine."""
    records, converged, _ = api._iterate(engine, program, program.max_iterations,
                                         program.tolerance, direction, None)
    return program.finalize(engine.values_to_host()), records, converged


#: The plan choices a bare engine keeps: the pull's own.
BARE_CHOICES = {"source_precompute", "float32_contributions", "fused_pull", "sparse_batches"}


def bare_cpu_engine(graph, program, sources, direction="auto", threads=2, **plan_changes):
    """A CPU engine made as ``garaphpy.run`` makes it, without the driver, with
    the plan choices of a pull alone (:data:`BARE_CHOICES`) and ``plan_changes``."""
    source_vertices = api._source_vertices(graph, program, sources)
    compiled = api._compiled_program(program, parallel=threads > 1)
    pages = api.page_source(graph.store, "cpu")
    arrays = GraphArrays.from_graph(graph, source_vertices,
                                    "weighted_in_degree" in api._uses(program), pages)
    plan = plan_cpu(program, compiled, arrays, mode="cpu", synchronous=True, threads=threads,
                    tolerance=program.tolerance, symmetric=not graph.directed,
                    turned_off=set(CPU_CHOICES) - BARE_CHOICES)
    state = RunState(arrays, compiled, synchronous=True)
    state.frontier = (np.arange(graph.num_vertices, dtype=np.int64)
                      if program.initially_active == "all" else source_vertices.copy())
    engine = CpuEngine(arrays, compiled, state, dataclasses.replace(plan, **plan_changes))
    engine.warm_up(None if direction == "auto" else (direction,))
    return engine


# -- the CPU alone ------------------------------------------------------------------------
def test_cpu_run_is_the_driver_with_the_cpu_alone(graph, built_drivers):
    garaphpy.run(graph, SSSP(), mode="cpu", sources=[0], threads=2)
    [driver] = built_drivers
    assert driver.mode == "cpu" and isinstance(driver, driver_module.SingleDriver)
    assert isinstance(driver.alone, CpuProcessor) and driver.cpu is driver.alone
    assert isinstance(driver.alone.engine, CpuEngine)
    assert driver.gpu is None
    # nothing of the two-processor machinery: no policy, copies, thread or calibration
    assert driver.policy is None and driver.vertex_state is None and driver.worker is None


@pytest.mark.parametrize("direction", ["auto", "pull", "notify-pull"])
def test_cpu_alone_driver_equals_the_cpu_engine_iterated_directly(graph, direction):
    result = garaphpy.run(graph, SSSP(), mode="cpu", sources=[0], threads=2,
                          direction=direction, execution="sync")
    engine = bare_cpu_engine(graph, SSSP(), [0], direction)
    values, records, converged = iterate_engine(engine, SSSP(), direction)

    assert result.converged and converged
    np.testing.assert_array_equal(result.values, values)
    assert untimed(result.iterations) == untimed(records)
    assert {r.mode for r in result.iterations} == {"cpu"}
    if direction == "auto":     # Garaph's switch took both directions, as recorded
        assert {r.direction for r in result.iterations} == {"pull", "notify-pull"}
    np.testing.assert_allclose(result.values, dijkstra(graph, 0), rtol=1e-12)


def test_cpu_alone_driver_pagerank_records_equal_the_engines(graph):
    result = garaphpy.run(graph, PageRank(), mode="cpu", threads=2)
    values, records, converged = iterate_engine(bare_cpu_engine(graph, PageRank(), None),
                                                PageRank())
    assert result.converged == converged
    np.testing.assert_array_equal(result.values, values)
    assert untimed(result.iterations) == untimed(records)


def test_cpu_alone_checkpoint_and_resume_through_the_driver(graph, tmp_path):
    whole = garaphpy.run(graph, SSSP(), mode="cpu", sources=[0], threads=2, execution="sync")

    def stop_after_four(record):
        if record.iteration == 4:
            raise RuntimeError("stopped")

    with pytest.raises(RuntimeError, match="stopped"):
        garaphpy.run(graph, SSSP(), mode="cpu", sources=[0], threads=2, execution="sync",
                     checkpoint_dir=tmp_path, checkpoint_every=2, keep_checkpoints=True,
                     on_iteration=stop_after_four)
    resumed = garaphpy.run(graph, SSSP(), mode="cpu", sources=[0], threads=2, execution="sync",
                           checkpoint_dir=tmp_path, checkpoint_every=2, resume=True)
    assert resumed.resumed_from is not None
    np.testing.assert_array_equal(resumed.values, whole.values)
    assert untimed(resumed.iterations) == untimed(whole.iterations)


# -- failure paths ------------------------------------------------------------------------
def test_a_driver_without_an_engine_is_refused():
    with pytest.raises(ConfigError, match="a CPU engine, a GPU engine or both; got neither"):
        driver_module.Driver()


def test_a_policy_for_one_processor_is_refused(graph):
    engine = bare_cpu_engine(graph, SSSP(), [0])
    with pytest.raises(ConfigError, match=r"policy: .* on the CPU alone takes none"):
        driver_module.Driver(engine, policy=HybridPolicy())
    driver = driver_module.Driver(engine)
    assert driver.mode == "cpu"
    driver.close()      # nothing to stop; closing twice is harmless
    driver.close()


# -- the GPU alone ------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_run_is_the_driver_with_the_gpu_alone(graph, built_drivers):
    from garaphpy.scheduler.gpu_engine import GpuEngine

    garaphpy.run(graph, SSSP(), mode="gpu", sources=[0])
    [driver] = built_drivers
    assert driver.mode == "gpu" and isinstance(driver, driver_module.SingleDriver)
    assert isinstance(driver.alone, GpuProcessor) and driver.gpu is driver.alone
    assert isinstance(driver.alone.engine, GpuEngine)
    assert driver.cpu is None
    assert driver.policy is None and driver.vertex_state is None and driver.worker is None


@pytest.mark.gpu
def test_gpu_alone_driver_equals_the_gpu_engine_iterated_directly(graph):
    from garaphpy.scheduler.gpu_engine import GpuEngine

    result = garaphpy.run(graph, SSSP(), mode="gpu", sources=[0], execution="sync")
    program = SSSP()
    source_vertices = api._source_vertices(graph, program, [0])
    pages = api.page_source(graph.store, "gpu")
    try:
        engine = GpuEngine(graph, program, source_vertices, True, page_source=pages)
        engine.set_frontier(source_vertices.copy())
        values, records, converged = iterate_engine(engine, program)
    finally:
        pages.close()
    assert result.converged and converged
    np.testing.assert_array_equal(result.values, values)
    assert untimed(result.iterations) == untimed(records)
    # pulls over every shard, and sparse passes in the device loop
    assert {r.mode for r in result.iterations} == {"gpu"}
    assert {r.direction for r in result.iterations} <= {"pull", "notify-pull", "push"}
    assert all(r.gpu_idle_seconds == 0.0 and r.dispatch_seconds == 0.0
               for r in result.iterations)
    np.testing.assert_allclose(result.values, dijkstra(graph, 0), rtol=1e-12)


@pytest.mark.gpu
def test_gpu_alone_checkpoint_and_resume_through_the_driver(graph, tmp_path):
    whole = garaphpy.run(graph, SSSP(), mode="gpu", sources=[0])

    def stop_after_four(record):
        if record.iteration == 4:
            raise RuntimeError("stopped")

    with pytest.raises(RuntimeError, match="stopped"):
        garaphpy.run(graph, SSSP(), mode="gpu", sources=[0], checkpoint_dir=tmp_path,
                     checkpoint_every=2, keep_checkpoints=True, on_iteration=stop_after_four)
    resumed = garaphpy.run(graph, SSSP(), mode="gpu", sources=[0], checkpoint_dir=tmp_path,
                           checkpoint_every=2, resume=True)
    assert resumed.resumed_from is not None
    np.testing.assert_array_equal(resumed.values, whole.values)
    assert untimed(resumed.iterations) == untimed(whole.iterations)


def test_cpu_engine_may_batch_follows_the_sparse_batch_rule_and_buckets(graph):
    """What a hybrid run asks before handing the CPU a batch
    (:meth:`CpuEngine.may_batch`): the sparse-batch rule on the frontier's
    out-edges, every iteration once steps in buckets of values are on, and
    nothing where the run does not batch (aggregates)."""
    engine = bare_cpu_engine(graph, SSSP(), [0])
    arrays = engine.arrays
    assert engine.batches
    for edges in (0, 10, arrays.num_edges // 50, arrays.num_edges):
        assert engine.may_batch(edges) == decisions.sparse_batch(
            edges, arrays.num_edges, arrays.num_vertices, engine.rho)
    assert engine.may_batch(10) and not engine.may_batch(arrays.num_edges)
    in_buckets = bare_cpu_engine(graph, SSSP(), [0], value_priority=True)
    assert in_buckets.may_batch(arrays.num_edges)
    pagerank = bare_cpu_engine(graph, PageRank(), ())
    assert not pagerank.batches and not pagerank.may_batch(10)
