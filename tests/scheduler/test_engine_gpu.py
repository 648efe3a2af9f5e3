"""The GPU engine (Garaph sections 3, 5.2): results equal the CPU engine's and the references.

Tests marked ``gpu`` run where cupy sees a CUDA device (``pytest -m gpu`` on
the GPU machine) and are skipped elsewhere.  Without a GPU, the page plan,
the error paths and the mode checks are still tested here; the translated
CUDA code itself is tested in ``tests/kernels/test_cuda_translate.py``.

The stress graphs follow the GPU issue: one vertex with 10^6 in-edges (split
over 16 shards whose partial sums meet in a global atomic), shards at the
16-bit IdxOff limit (65,536 vertices, accumulators larger than the card's
shared memory, kept in global memory), pages of one shard, and a GPU budget
that forces streaming.
"""

from __future__ import annotations


import numpy as np
import pytest

import garaphpy
from garaphpy import api, config
from garaphpy.errors import ConfigError
from garaphpy.programs import BUILTIN_PROGRAMS
from garaphpy.scheduler.gpu_engine import GpuEngine, GpuMemoryError, plan_pages

import references as ref
from helpers import (ITERATIVE, SMALL_GRAPHS, Crash, gpu_program, gpu_reference, program_for,
                     sources_of)

#: Programs whose results are exact (integer arithmetic, min/max of sums of
#: integer weights); the others sum floats in a different order on the GPU.
EXACT = ref.EXACT_PROGRAMS
PROGRAMS = list(BUILTIN_PROGRAMS)


def cupy_missing() -> bool:
    try:
        import cupy  # noqa: F401
    except ImportError:
        return True
    return False


run_quietly = ref.run_engine_like_gpu


def iterative_options(name):
    return {"tolerance": 1e-13, "max_iterations": 100_000} if name in ITERATIVE else {}


assert_matches = ref.assert_program_values


def assert_gpu_matches_cpu(graph, names, sources, max_iterations, same_iterations=False):
    """Run each program on both engines (from ``sources`` where it needs them);
    with ``same_iterations``, the exact programs must also take as many
    iterations on both."""
    for name in names:
        program = gpu_program(name)
        chosen = np.asarray(sources, np.int64) if program.needs_sources else ()
        cpu = run_quietly(graph, program, chosen, mode="cpu", max_iterations=max_iterations)
        gpu = run_quietly(graph, program, chosen, mode="gpu", max_iterations=max_iterations)
        assert_matches(name, gpu.values, cpu.values)
        if same_iterations and name in EXACT:
            assert gpu.num_iterations == cpu.num_iterations


# ------------------------------------------------------------ without a GPU --
def test_page_plan_resident_streamed_and_too_small():
    assert plan_pages([100, 100], 50, 1000, 4).resident
    streamed = plan_pages([400, 400, 400], 100, 1000, 4)
    assert not streamed.resident and streamed.n_streams == 2  # 100 + 2 * 400 <= 1000
    assert plan_pages([400, 400, 400], 100, 600, 4).n_streams == 1
    with pytest.raises(GpuMemoryError, match="cannot hold the vertex data"):
        plan_pages([400, 400], 100, 450, 4)
    with pytest.raises(ConfigError, match="n_streams"):
        plan_pages([1], 1, 10, 0)


@pytest.mark.gpu
def test_the_vertex_data_is_what_its_arrays_hold_in_the_pool(monkeypatch):
    """The plan's vertex bytes come from the engine's arrays, so that memory
    freed meanwhile (an earlier run's arrays collected) cannot shrink them."""
    import gc

    import cupy

    from garaphpy.scheduler import cpu_engine
    from garaphpy.scheduler.gpu_engine import POOL_BLOCK_BYTES, pooled_bytes

    a, b = cupy.empty(1000, np.int64), cupy.empty(3, np.uint8)
    assert pooled_bytes(a, b) == 8192 + POOL_BLOCK_BYTES
    assert pooled_bytes(a, a[10:], b) == 8192 + POOL_BLOCK_BYTES    # a view: once
    graph = garaphpy.Graph.load("rmat:10", progress=False)
    program = BUILTIN_PROGRAMS["pagerank"]()
    first = GpuEngine(graph, program, np.zeros(0, np.int64), synchronous=True).plan.vertex_bytes
    garbage = [cupy.empty(1 << 20, np.uint8) for _ in range(8)]
    cycle = [garbage]
    cycle.append(cycle)         # freed only by a collection
    del garbage, cycle
    attributes = cpu_engine.vertex_attributes

    def collecting(*args, **kwargs):     # the collection in the middle of the set-up
        gc.collect()
        return attributes(*args, **kwargs)

    monkeypatch.setattr(cpu_engine, "vertex_attributes", collecting)
    engine = GpuEngine(graph, program, np.zeros(0, np.int64), synchronous=True)
    assert engine.plan.vertex_bytes == first > 0


@pytest.mark.skipif(not cupy_missing(), reason="cupy is installed here")
def test_gpu_mode_without_cupy_says_how_to_install():
    graph = garaphpy.Graph.from_arrays([0, 1], [1, 2])
    from garaphpy.kernels.gpu import GpuUnavailableError

    with pytest.raises(GpuUnavailableError, match=r"pip install garaphpy\[gpu\]"):
        garaphpy.run(graph, "pagerank", mode="gpu")


def test_an_edges_per_thread_not_offered_is_refused():
    from garaphpy.kernels.cuda_program import translate_program
    from garaphpy.kernels.gpu import compile_kernels

    program = translate_program(program_for("pagerank"), weight_dtype=np.float64,
                                degree_dtype=np.int32)
    for bad in (3, 0, 32, True):
        with pytest.raises(ConfigError, match="edges_per_thread"):
            compile_kernels(program, np.int32, bad)


@pytest.mark.gpu
def test_notify_pull_is_refused_where_the_gpu_cannot_loop():
    graph = garaphpy.Graph.from_arrays([0, 1], [1, 2])
    with pytest.raises(ConfigError, match="device loop is off"):
        api.execute(graph, "bfs", mode="gpu", sources=[0], direction="notify-pull",
                    turned_off={"device_loop"})
    with pytest.raises(ConfigError, match=r"PageRank\.apply reads \['dangling'\]"):
        garaphpy.run(graph, "pagerank", mode="gpu", direction="notify-pull")


# ------------------------------------------------------------------ on a GPU --
@pytest.fixture(scope="module")
def small():
    return {name: build() for name, build in SMALL_GRAPHS.items()}


@pytest.fixture(scope="module")
def rmat():
    """rmat:12, weighted (integer weights 1..255), directed."""
    return garaphpy.Graph.load("rmat:12", progress=False, generator_options={"weighted": True})


@pytest.mark.gpu
@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_gpu_equals_references_on_small_graphs(small, name, execution):
    for graph_name, graph in small.items():
        if name == "cc" and graph_name == "random":
            continue  # cc symmetrizes; tiny and undirected cover it
        sources = sources_of(graph, graph_name)
        program = gpu_program(name)
        used_sources = sources if program.needs_sources else ()
        result = run_quietly(graph, program, used_sources, mode="gpu", execution=execution,
                             **iterative_options(name))
        assert result.mode == "gpu" and result.iterations[0].mode == "gpu"
        assert result.converged, (graph_name, result.stop_reason)
        expected = gpu_reference(name, graph, sources)
        if name == "nn" and execution == "async":
            report = result.program.verify(result.graph, result)
            assert report.ok, str(report)
            continue
        assert_matches(name, result.values, expected)
        report = result.program.verify(result.graph, result)
        assert report.ok, (graph_name, str(report))


@pytest.mark.gpu
@pytest.mark.parametrize("name", PROGRAMS)
def test_gpu_equals_cpu_on_rmat(rmat, name):
    program = gpu_program(name)
    sources = np.array([0, 7], np.int64) if program.needs_sources else ()
    options = {"max_iterations": 50} if name in ITERATIVE else {}
    cpu = run_quietly(rmat, program, sources, mode="cpu", **options)
    gpu = run_quietly(rmat, program, sources, mode="gpu", **options)
    assert gpu.num_iterations == cpu.num_iterations or name not in EXACT
    assert_matches(name, gpu.values, cpu.values)
    assert gpu.iterations[0].gather_precomputed == (
        name in ("pagerank", "delta_pagerank") and gpu.execution == "sync")


@pytest.mark.gpu
def test_the_run_plan_holds_the_gpu_choices_its_records_share(rmat):
    from garaphpy.scheduler.gpu.plan import GpuPlan

    result = run_quietly(rmat, "pagerank", (), mode="gpu", execution="sync", max_iterations=5)
    plan = result.plan.gpu
    assert isinstance(plan, GpuPlan) and plan.resident and plan.precompute
    for record in result.iterations:
        assert record.decisions["gpu_precompute"] is plan.entry("gpu_precompute")
        assert record.decisions["fused_launch"] is plan.fused_launch_entry(False)
    off = run_quietly(rmat, "pagerank", (), mode="gpu", execution="sync", max_iterations=5,
                      turned_off={"gpu_precompute"})
    assert not off.plan.gpu.precompute and off.plan.gpu.turned_off == {"gpu_precompute"}
    assert off.iterations[0].decisions["gpu_precompute"]["enabled"] is False
    np.testing.assert_allclose(off.values, result.values, rtol=1e-6)


@pytest.mark.gpu
def test_one_vertex_with_a_million_in_edges():
    n = 1_000_001
    src = np.arange(1, n, dtype=np.int64)
    dst = np.zeros(n - 1, np.int64)
    # a path 1 -> 2 -> ... gives the sources distinct depths and ranks
    src = np.concatenate([src, np.arange(1, 1000)])
    dst = np.concatenate([dst, np.arange(2, 1001)])
    weights = (1 + src % 7).astype(np.float64)
    graph = garaphpy.Graph.from_arrays(src, dst, weights, num_vertices=n,
                                       weight_dtype="float64")
    split = graph.store.shards["split"] == 1
    assert split.sum() >= 15  # 10^6 in-edges over shards of 2^16
    assert_gpu_matches_cpu(graph, ("pagerank", "sssp", "bfs", "sswp"), sources=[1],
                           max_iterations=30)


@pytest.mark.gpu
def test_shards_at_the_16_bit_offset_limit():
    """Shards of 65,536 vertices: IdxOff reaches 65,535, and float64 accumulators
    (512 KiB) exceed any card's shared memory, so they stay in global memory."""
    n = 200_000
    src = np.arange(n, dtype=np.int64)
    dst = (src * 7919 + 1) % n
    graph = garaphpy.Graph.from_arrays(src, dst, num_vertices=n, min_shards=1,
                                       shared_memory_bytes=4 << 16, slot_bytes=4)
    shards = graph.store.shards
    assert shards["num_vertices"].max() == 1 << 16
    assert_gpu_matches_cpu(graph, ("pagerank", "bfs", "cc"), sources=[3], max_iterations=20)


@pytest.mark.gpu
def test_pages_of_one_shard_and_streaming_give_the_resident_result(monkeypatch):
    monkeypatch.setattr(config, "GPU_TRANSFER", "copy")    # every other page, every iteration
    ref.gpu_engine_options(monkeypatch, packed_pages=False)  # pages as stored (test_packed)
    graph = garaphpy.Graph.load("rmat:12", progress=False,
                                generator_options={"weighted": True, "seed": 5},
                                max_shard_edges=512, max_page_bytes=8192, compress=False)
    for name in ("pagerank", "sssp", "cc"):
        program = program_for(name)
        sources = np.array([0], np.int64) if program.needs_sources else ()
        graph_run = graph.as_undirected() if program.needs_undirected else graph
        store = graph_run.store
        shards_per_page = [page.num_shards for page in store.pages]
        assert max(shards_per_page) <= 2 and shards_per_page.count(1) > len(store.pages) // 2
        page_bytes = sum(page.nbytes for page in store.pages)
        resident = run_quietly(graph, program, sources, mode="gpu", max_iterations=20)
        assert resident.iterations[0].bytes_to_device == 0
        sizing = GpuEngine(graph_run, program, np.asarray(sources, np.int64), synchronous=True)
        budget = sizing.plan.vertex_bytes + page_bytes // 2
        engine = GpuEngine(graph_run, program, np.asarray(sources, np.int64),
                           synchronous=True, gpu_memory=budget, packed_pages=False)
        plan, wire = engine.plan, engine.page_wire_bytes     # values only where read
        kept = sum(size for size, kept in zip(wire, plan.resident_pages) if kept)
        assert not plan.resident and 0 < kept < sum(wire)   # partial residency
        streamed = run_quietly(graph, program, sources, mode="gpu", max_iterations=20,
                               gpu_memory=budget)
        record = streamed.iterations[0]
        assert record.bytes_to_device == sum(wire) - kept
        assert record.copy_seconds > 0 and record.kernel_seconds > 0
        assert_matches(name, streamed.values, resident.values)
        cpu = run_quietly(graph, program, sources, mode="cpu", max_iterations=20)
        assert_matches(name, streamed.values, cpu.values)


@pytest.mark.gpu
@pytest.mark.parametrize("edges_per_thread", [1, 2, 4, 16])
def test_every_edges_per_thread_gives_the_cpu_result(rmat, edges_per_thread):
    """Runs of 1..16 edges per thread (the default, 8, runs everywhere else):
    runs straddle shard ends at every alignment, as shards start anywhere."""
    starts = rmat.store.shards["edge_begin"]
    assert len(set((starts % 16).tolist())) > 8
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(config, "GPU_EDGES_PER_THREAD", edges_per_thread)
        assert_gpu_matches_cpu(rmat, ("pagerank", "sssp", "cc", "bfs", "sswp", "hs"),
                               sources=[0, 7], max_iterations=50, same_iterations=True)


@pytest.mark.gpu
@pytest.mark.parametrize("lanes", [1, 8, 32])
@pytest.mark.parametrize("replication", [1, 2, 4, 8, 16, 32, 64])
def test_every_replication_factor_gives_the_cpu_result(replication, lanes, monkeypatch):
    """The replica merge at every R_i (64: above the default max_replication),
    with lane groups of one (every stride in shared memory), 8 (the default)
    and 32 (shuffles only, up to R_i = 32)."""
    monkeypatch.setattr(config, "GPU_MERGE_LANES", lanes)
    graph = garaphpy.Graph.load("rmat:12", progress=False,
                                generator_options={"weighted": True, "seed": 9},
                                fixed_replication=replication, max_replication=64)
    assert set(graph.store.shards["replication"].tolist()) == {replication}
    assert_gpu_matches_cpu(graph, ("pagerank", "sssp", "cc", "hs"), sources=[0, 7],
                           max_iterations=50)


@pytest.mark.gpu
def test_one_launch_over_resident_pages_equals_one_launch_per_page():
    graph = garaphpy.Graph.load("rmat:12", progress=False,
                                generator_options={"weighted": True, "seed": 3},
                                max_page_bytes=16384, compress=False)
    assert len(graph.store.pages) > 4
    for name in ("pagerank", "sssp", "cc"):
        program = program_for(name)
        sources = np.array([0], np.int64) if program.needs_sources else ()
        runs = {}
        for fuse in (True, False):
            # every iteration a pull over every shard (no sparse pass in the device loop)
            runs[fuse] = run_quietly(graph, program, sources, mode="gpu", max_iterations=30,
                                     direction="pull",
                                     turned_off=() if fuse else {"fused_launch"})
        assert_matches(name, runs[True].values, runs[False].values)
        graph_run = graph.as_undirected() if program.needs_undirected else graph
        for fused, per_page in zip(runs[True].iterations, runs[False].iterations):
            assert fused.pages == per_page.pages == len(graph_run.store.pages)
            assert fused.gpu_edges == per_page.gpu_edges == graph_run.num_edges
            assert fused.bytes_to_device == per_page.bytes_to_device == 0


@pytest.mark.gpu
def test_a_budget_too_small_for_one_page_is_a_clear_error(rmat):
    with pytest.raises(GpuMemoryError, match="raise the budget"):
        garaphpy.run(rmat, "pagerank", mode="gpu", gpu_memory=1 << 16)


def test_cli_gpu_mode(tmp_path, capsys):
    """``mode = "gpu"`` from the command line: runs and verifies on a GPU; without
    one, exits 1 naming what is missing."""
    from garaphpy.cli import main

    config = tmp_path / "run.toml"
    config.write_text('graph = "rmat:8"\n[input]\nweighted = true\n[store]\npath = "s"\n'
                      '[run]\nprogram = "sssp"\nsources = [0]\nmode = "gpu"\nverify = true\n')
    code = main([str(config), "--quiet"])
    captured = capsys.readouterr()
    if cupy_missing():
        assert code == 1
        assert "pip install garaphpy[gpu]" in captured.err
    else:
        from helpers import gpu_available

        if gpu_available() is not None:
            pytest.skip(gpu_available())
        assert code == 0, captured.err
        assert "(gpu, sync)" in captured.out and "verify: PASSED" in captured.out


@pytest.mark.gpu
def test_gpu_checkpoint_and_resume_give_the_uninterrupted_result(rmat, tmp_path):
    program = program_for("sssp")
    sources = np.array([0], np.int64)
    whole = run_quietly(rmat, program, sources, mode="gpu")
    assert whole.num_iterations > 3

    def crash_after_three(record):
        if record.iteration == 2:
            raise Crash

    options = dict(mode="gpu", checkpoint_dir=tmp_path / "c", checkpoint_every=1)
    with pytest.raises(Crash):
        run_quietly(rmat, program, sources, on_iteration=crash_after_three, **options)
    resumed = run_quietly(rmat, program, sources, resume=True, **options)
    np.testing.assert_array_equal(resumed.values, whole.values)
    assert resumed.num_iterations == whole.num_iterations
