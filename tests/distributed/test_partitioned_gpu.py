"""Partitioned runs with a GPU worker beside CPU workers, against the one-process run.

A worker started with ``resources={"GPU": 1}`` pulls its partition on its
GPU (garaphpy.distributed.gpu_worker); the others pull on their CPU threads.
The gpu-marked tests run a cluster of one GPU worker and one or two CPU
worker processes and compare with the one-process CPU run: BFS, SSSP, CC and
SSWP exactly, PageRank within 1e-9 relative at the same iteration count
(the one-process reference keeps its contributions in float64, as the
workers do).  The others check, without a GPU, the interface's refusals
(one line, naming the worker or the scheduler), ``mode='cpu'`` keeping a GPU
worker on its CPU, the records' processors, and that the GPU worker's
translation unit compiles with nvcc for the built-in programs.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import garaphpy
from garaphpy.api import execute
from garaphpy.scheduler import decisions

from helpers import gpu_available

# dask.distributed: a bare "distributed" would find tests/distributed where dask is missing
distributed = pytest.importorskip("dask.distributed")


def mixed_cluster(cpu_workers: int, gpu_workers: int, processes: bool = True):
    """A cluster of ``cpu_workers`` workers and ``gpu_workers`` workers whose
    resources name a GPU, one thread each (worker processes under nannies, or
    in this process)."""
    kind = distributed.Nanny if processes else distributed.Worker
    workers = {f"cpu-{i}": {"cls": kind, "options": {"nthreads": 1, "dashboard": False}}
               for i in range(cpu_workers)}
    workers.update({f"gpu-{i}": {"cls": kind, "options": {"nthreads": 1, "dashboard": False,
                                                          "resources": {"GPU": 1}}}
                    for i in range(gpu_workers)})
    return distributed.SpecCluster(
        workers=workers, scheduler={"cls": distributed.Scheduler,
                                    "options": {"dashboard": False}})


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    """rmat in many pages of a few shards (vertices split between pages,
    partitions cutting pages) with hashed weights, and a weighted grid."""
    root = tmp_path_factory.mktemp("partitioned-gpu")
    return {"rmat": garaphpy.Graph.load("rmat:10", weights="hash", store=root / "rmat",
                                        max_page_bytes=2048, max_shard_edges=128,
                                        progress=False),
            "grid": garaphpy.Graph.load("grid:24x20", store=root / "grid", progress=False)}


def _source(graph) -> int:
    return int(graph.original_ids(np.array([np.argmax(graph.store.out_degree)]))[0])


# -- without a GPU ----------------------------------------------------------------------
def test_a_worker_pulls_on_its_gpu_unless_the_run_asks_for_the_cpu():
    assert decisions.partition_processor("hybrid", 1) == "gpu"
    assert decisions.partition_processor("gpu", 2) == "gpu"
    assert decisions.partition_processor("hybrid", 0) == "cpu"
    assert decisions.partition_processor("cpu", 1) == "cpu"


def test_mode_gpu_without_a_gpu_worker_is_one_line_naming_the_scheduler(graphs):
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None) \
            as cluster, distributed.Client(cluster) as client:
        with pytest.raises(garaphpy.GaraphError,
                           match=r"^mode='gpu': no worker of the Dask cluster at \S+ has a GPU "
                                 r"resource") as caught:
            garaphpy.run(graphs["grid"], "bfs", sources=[0], client=client, mode="gpu")
    assert "\n" not in str(caught.value)


def test_a_gpu_worker_without_a_usable_gpu_is_one_line_naming_it(graphs):
    if gpu_available() is None:
        pytest.skip("a GPU is usable here")
    from garaphpy.distributed.worker import WorkerError

    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=None,
                                  resources={"GPU": 1}) as cluster, \
            distributed.Client(cluster) as client:
        with pytest.raises(WorkerError, match=r"^worker inproc://\S+: its resources name a GPU "
                                              r"for partition 0, and it cannot use one: ") \
                as caught:
            garaphpy.run(graphs["grid"], "bfs", sources=[0], client=client)
    assert "\n" not in str(caught.value)


def test_mode_cpu_keeps_a_gpu_worker_on_its_cpu_and_records_say_so(graphs):
    graph = graphs["rmat"]
    source = _source(graph)
    alone = garaphpy.run(graph, "sssp", mode="cpu", sources=[source])
    with mixed_cluster(1, 1) as cluster, distributed.Client(cluster) as client:
        spread = garaphpy.run(graph, "sssp", sources=[source], client=client, mode="cpu")
    np.testing.assert_array_equal(spread.values, alone.values)
    assert spread.mode == spread.plan.mode == "cpu"
    assert [p["processor"] for p in spread.plan.distributed["partitions"]] == ["cpu", "cpu"]
    for record in spread.iterations:
        assert record.mode == "cpu"
        assert record.decisions["partitions"]["processors"] == ["cpu", "cpu"]
        assert record.gpu_edges == 0 and record.cpu_edges == record.edges_processed


def test_the_gpu_workers_kernels_compile_with_nvcc(tmp_path):
    """The translation unit a GPU worker compiles (the program's functions,
    the prelude, pull.cu and partition.cu), for every built-in program, with
    4- and 8-byte vertex ids, through nvcc (NVRTC takes the same source)."""
    from garaphpy.kernels.cuda_program import translate_program
    from garaphpy.kernels.gpu import kernel_source
    from garaphpy.programs import BUILTIN_PROGRAMS

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH")
    compilations = []
    for name, program in BUILTIN_PROGRAMS.items():
        for vertex_dtype, weight_dtype in ((np.int32, np.float64), (np.int64, np.float32)):
            translated = translate_program(program(), weight_dtype=weight_dtype,
                                           degree_dtype=np.int32)
            source = tmp_path / f"{name}-{np.dtype(vertex_dtype).name}.cu"
            source.write_text(kernel_source(translated, vertex_dtype, "partition"))
            assert "gp_partition_pull" in source.read_text()
            compilations.append((source.name, subprocess.Popen(
                [nvcc, "-arch=sm_90", "-std=c++17", "-diag-suppress", "550", "--ptx",
                 "-o", str(source.with_suffix(".ptx")), str(source)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
            if len(compilations) % 2 == 0:      # two at a time
                compilations[-2][1].wait()
                compilations[-1][1].wait()
    for name, process in compilations:
        _, stderr = process.communicate()
        assert process.returncode == 0, (name, stderr[-6000:])
        assert "warning" not in stderr.lower(), (name, stderr[-6000:])
        ptx = (tmp_path / name).with_suffix(".ptx").read_text()
        for kernel in ("gp_partition_pull", "gp_partition_commit", "gp_partition_aggregates"):
            assert f".entry {kernel}" in ptx, (name, kernel)


# -- with a GPU -------------------------------------------------------------------------
@pytest.fixture(scope="module", params=[1, 2], ids=lambda cpu: f"gpu+{cpu}cpu")
def mixed_client(request):
    """One GPU worker beside one or two CPU workers (processes), and a client."""
    if gpu_available() is not None:
        pytest.skip(f"GPU test: {gpu_available()}")
    with mixed_cluster(request.param, 1) as cluster, distributed.Client(cluster) as client:
        yield client


EXACT = [("bfs", True), ("sssp", True), ("cc", False), ("sswp", True)]


def _processors(result) -> list:
    return [p["processor"] for p in result.plan.distributed["partitions"]]


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["rmat", "grid"])
@pytest.mark.parametrize("program, sourced", EXACT)
def test_a_gpu_worker_beside_cpu_workers_gives_the_exact_values(mixed_client, graphs, name,
                                                                program, sourced):
    graph = graphs[name]
    sources = [_source(graph)] if sourced else None
    alone = garaphpy.run(graph, program, mode="cpu", sources=sources)
    spread = garaphpy.run(graph, program, sources=sources, client=mixed_client)
    assert spread.converged and alone.converged
    np.testing.assert_array_equal(spread.values, alone.values)
    assert sorted(set(_processors(spread))) == ["cpu", "gpu"]
    assert spread.mode == "hybrid"
    for record in spread.iterations:
        processors = record.decisions["partitions"]["processors"]
        assert "gpu" in processors and "cpu" in processors
        assert record.gpu_edges > 0 and record.cpu_edges + record.gpu_edges == \
            record.edges_processed


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["rmat", "grid"])
def test_a_gpu_worker_beside_cpu_workers_gives_pagerank_within_1e_9(mixed_client, graphs,
                                                                    name):
    graph = graphs[name]
    alone = execute(graph, "pagerank", mode="cpu", turned_off={"float32_contributions"})
    spread = garaphpy.run(graph, "pagerank", client=mixed_client)
    assert spread.num_iterations == alone.num_iterations
    np.testing.assert_allclose(spread.values, alone.values, rtol=1e-9, atol=0)
    for mine, theirs in zip(spread.iterations, alone.iterations):
        assert mine.l1_change == pytest.approx(theirs.l1_change, rel=1e-9)
    assert "gpu" in _processors(spread)


@pytest.mark.gpu
@pytest.mark.parametrize("program", ["pagerank", "sssp", "cc"])
def test_mode_gpu_puts_every_partition_on_the_gpu_worker(mixed_client, graphs, program):
    """Two partitions on the one GPU worker (one iteration a call), none on
    the CPU workers."""
    graph = graphs["rmat"]
    sources = [_source(graph)] if program == "sssp" else None
    # partitions iterate synchronously: so does the reference (SSSP's default is async)
    alone = execute(graph, program, mode="cpu", sources=sources,
                    execution="sync" if program == "sssp" else None,
                    turned_off={"float32_contributions"} if program == "pagerank" else set())
    spread = garaphpy.run(graph, program, sources=sources, client=mixed_client, mode="gpu",
                          partitions=2)
    assert _processors(spread) == ["gpu", "gpu"] and spread.mode == "gpu"
    assert len({p["worker"] for p in spread.plan.distributed["partitions"]}) == 1
    assert spread.num_iterations == alone.num_iterations
    if program == "pagerank":
        np.testing.assert_allclose(spread.values, alone.values, rtol=1e-9, atol=0)
    else:
        np.testing.assert_array_equal(spread.values, alone.values)
