"""Runs larger than the host budget on the GPU and in hybrid mode (Garaph section 2.2).

A host budget below the store's size leaves most pages on the storage
directories: the GPU engine streams them from disk into pinned buffers every
iteration, and in hybrid iterations the CPU reads its pages from the back
of the queue while the GPU reads from the front.  Results must equal the
in-memory CPU run (exact for BFS, SSSP, CC, SSWP; 1e-4 for float sums).
The CPU-only out-of-core runs are tested without a GPU in
``tests/scheduler/test_out_of_core.py``.
"""

from __future__ import annotations


import numpy as np
import pytest

from garaphpy import config
from garaphpy.programs import BUILTIN_PROGRAMS
from garaphpy.scheduler.gpu import transfer

import references as ref
from helpers import SplitPolicy, budget_for, host_budget, with_pages
from helpers import gpu_program as program_for

pytestmark = pytest.mark.gpu

EXACT = ref.EXACT_PROGRAMS
PROGRAMS = list(BUILTIN_PROGRAMS)
ITERATIONS = {"max_iterations": 40}


run_quietly = ref.run_engine_like_gpu
assert_matches = ref.assert_program_values


@pytest.fixture(scope="module")
def disk_rmat(tmp_path_factory):
    graph = ref.out_of_core_rmat(tmp_path_factory.mktemp("out-of-core"))
    assert len(graph.store.pages) > 8
    return graph


def streaming_gpu_memory(graph, program) -> int:
    """A GPU budget that holds the vertex data and a few pages, not all of them."""
    from garaphpy.scheduler.gpu_engine import GpuEngine

    graph_run = graph.as_undirected() if program.needs_undirected else graph
    sources = np.array([0], np.int64) if program.needs_sources else np.zeros(0, np.int64)
    sizing = GpuEngine(graph_run, program, sources, synchronous=True)
    largest = max(page.nbytes for page in graph_run.store.pages)
    return sizing.plan.vertex_bytes + config.N_STREAMS * largest + 1


@pytest.mark.parametrize("name", PROGRAMS)
def test_gpu_streaming_from_disk_equals_cpu_in_memory(disk_rmat, name):
    program = program_for(name)
    sources = np.array([0, 7], np.int64) if program.needs_sources else ()
    cpu = run_quietly(disk_rmat, program, sources, mode="cpu", **ITERATIONS)
    budget = host_budget(disk_rmat, program, readers=1, cached_fraction=0.25)
    gpu = run_quietly(disk_rmat, program, sources, mode="gpu", **budget, read_ratio=8.0,
                      gpu_memory=streaming_gpu_memory(disk_rmat, program),
                      **ITERATIONS)
    assert_matches(name, gpu.values, cpu.values)
    if name in EXACT:
        assert gpu.num_iterations == cpu.num_iterations
    store = (disk_rmat.as_undirected() if program.needs_undirected else disk_rmat).store
    total = sum(page.nbytes for page in store.pages)
    reads_values = "weight" in type(program).functions["gather"].parameters
    wire = total if reads_values else sum(page.weights_offset for page in store.pages)
    for record in gpu.iterations[1:]:
        # the pages the budget does not keep on the device, without their values
        # where the program does not read them
        assert 0 < record.bytes_to_device <= wire
        # the host caches about a quarter of the pages, none of those the GPU keeps
        # (read-ahead dropped unused counts in bytes_read, and not here)
        taken = record.bytes_read - record.bytes_dropped
        assert 0 < taken <= 0.75 * total + max(p.nbytes for p in store.pages)


@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_hybrid_from_disk_equals_cpu_in_memory(disk_rmat, name, execution):
    program = program_for(name)
    sources = np.array([0, 7], np.int64) if program.needs_sources else ()
    options = dict(execution=execution, **ITERATIONS)
    cpu = run_quietly(disk_rmat, program, sources, mode="cpu", **options)
    budget = host_budget(disk_rmat, program, readers=2, cached_fraction=0.25)
    policy = with_pages(SplitPolicy(0.5), disk_rmat, program)
    hybrid = run_quietly(disk_rmat, program, sources, mode="hybrid", policy=policy,
                         **budget, read_ratio=8.0,
                         gpu_memory=streaming_gpu_memory(disk_rmat, program), **options)
    first = hybrid.iterations[0]
    assert first.mode == "hybrid" and first.cpu_pages > 0 and first.gpu_pages > 0
    assert all(record.rho == 8.0 for record in hybrid.iterations)
    assert sum(record.bytes_read for record in hybrid.iterations) > 0
    ref.assert_run_matches(name, execution, hybrid, cpu)


@pytest.mark.parametrize("name", ["pagerank", "sssp", "cc"])
def test_default_hybrid_policy_with_resident_gpu_pages_and_pages_on_disk(disk_rmat, name):
    """The GPU holds every page; the host holds almost none: the CPU's pages of
    hybrid iterations and its CPU-only iterations read from disk."""
    program = program_for(name)
    sources = np.array([0], np.int64) if program.needs_sources else ()
    cpu = run_quietly(disk_rmat, program, sources, mode="cpu", **ITERATIONS)
    budget = host_budget(disk_rmat, program, readers=2, cached_fraction=0.0)
    hybrid = run_quietly(disk_rmat, program, sources, mode="hybrid", **budget,
                         read_ratio=8.0, **ITERATIONS)
    assert_matches(name, hybrid.values, cpu.values)


def test_gpu_kept_pages_leave_the_host_cache_to_other_pages(disk_rmat):
    """Three tiers, no page in two: the host caches pages the GPU does not keep,
    and an iteration reads from disk only the pages in neither budget."""
    from garaphpy import api
    from garaphpy.scheduler.gpu_engine import GpuEngine
    from garaphpy.storage.host_budget import cache_beside

    program = program_for("pagerank")
    store = disk_rmat.store
    sizes = [page.nbytes for page in store.pages]
    options = host_budget(disk_rmat, program, readers=1, cached_fraction=0.25)
    gpu_memory = budget_for(disk_rmat, program, 0.25)
    pages = api.page_source(store, "gpu", options["host_memory"], 8.0,
                            options["readahead_bytes"])
    try:
        sizing = GpuEngine(disk_rmat, program, np.zeros(0, np.int64), synchronous=True,
                           gpu_memory=gpu_memory, page_source=pages)
        kept = set(np.flatnonzero(sizing.kept_pages).tolist())
        before = pages.plan
    finally:
        pages.close()
    assert kept and not before.all_cached
    after = cache_beside(before, sizes, kept)
    must_move = sum(sizes[k] for k in range(len(sizes))
                    if k not in kept and k not in after.cached)
    cpu = run_quietly(disk_rmat, program, (), mode="cpu", max_iterations=6, tolerance=0.0)
    gpu = run_quietly(disk_rmat, program, (), mode="gpu", **options, read_ratio=8.0,
                      gpu_memory=gpu_memory, max_iterations=6, tolerance=0.0)
    assert_matches("pagerank", gpu.values, cpu.values)
    records = gpu.iterations
    for before, record in zip(records, records[1:]):
        # the host's pages may only grow into room the prefix left (every page is
        # asked for as often): never more read than with the pages first placed
        taken = record.bytes_read - record.bytes_dropped    # less read-ahead dropped
        assert taken <= must_move
        placed = before.decisions["host_pages"]
        assert placed["gpu_pages"] == len(kept)
        if not placed["choice"]:
            assert taken == placed["disk_bytes"]


def test_gpu_bfs_from_disk_skips_the_pages_it_has_settled(tmp_path):
    """A page whose destinations were all reached is neither read, copied,
    pushed nor pulled again: BFS over a band graph from disk (each vertex
    linked to the next 64 both ways: pages settle one after another, and
    their bytes outweigh every room of the GPU budget that could keep them).
    A page with active in-edges is always transferred one way or another
    (which way follows the rates the run measures, so the bytes read do
    too).  The frontiers are the same with the rule off, so on each iteration
    where both runs counted the frontier's edges per page (or neither did:
    whether to count follows the measured rates too), the skipping run
    transfers exactly the settled pages fewer, with the same depths."""
    import garaphpy

    n, band = 4000, 64
    first = np.repeat(np.arange(n, dtype=np.int64), band)
    second = first + np.tile(np.arange(1, band + 1, dtype=np.int64), n)
    keep = second < n
    first, second = first[keep], second[keep]
    graph = garaphpy.Graph.from_arrays(np.concatenate([first, second]),
                                       np.concatenate([second, first]), num_vertices=n,
                                       store=tmp_path / "store", max_shard_edges=256,
                                       max_page_bytes=4096, compress=False,
                                       storage_dirs=[str(tmp_path / "ssd1")])
    assert len(graph.store.pages) > 16
    program = program_for("bfs")
    sources = np.array([0], np.int64)
    cpu = run_quietly(graph, program, sources, mode="cpu", max_iterations=1000)
    gpu_memory = budget_for(graph, program, 0.1, "sync")
    options = dict(host_budget(graph, program, readers=1, cached_fraction=0.0),
                   read_ratio=8.0, gpu_memory=gpu_memory, execution="sync",
                   max_iterations=1000)
    skipping = run_quietly(graph, program, sources, mode="gpu", **options)
    reading = run_quietly(graph, program, sources, mode="gpu", **options,
                          turned_off={"settled_pages"})
    for result in (skipping, reading):
        np.testing.assert_array_equal(result.values, cpu.values)
    assert not skipping.plan.gpu.resident and skipping.plan.gpu.selective
    assert skipping.plan.gpu.settled_pages and not reading.plan.gpu.settled_pages

    def per_iteration(result) -> dict:
        """Iteration -> (counted, pages transferred, settled pages skipped)."""
        return {r.iteration: (entry["counted"],
                              sum(entry[name] for name in transfer.TRANSFER_NAMES
                                  if name != "skip"),
                              entry["settled_pages"])
                for r in result.iterations if (entry := r.decisions.get("page_transfer"))}

    skipped, read = per_iteration(skipping), per_iteration(reading)
    assert set(skipped) == set(read)
    alike = [i for i in skipped if skipped[i][0] == read[i][0]]
    assert sum(skipped[i][2] for i in alike) > 0
    for i in alike:
        assert skipped[i][1] == read[i][1] - skipped[i][2], i


@pytest.mark.parametrize("name", ["bfs", "sssp"])
def test_gpu_frontier_from_disk_reads_no_more_than_copies_priced_at_the_bus(disk_rmat, name,
                                                                           monkeypatch):
    """Three tiers for a frontier program: the GPU's sparse iterations price a
    page's read from disk before its copy (skip, push or copy), so the run
    reads no more than with reads priced at nothing; every page is in one
    tier; the values are the CPU's in memory.  Both runs are synchronous
    and keep the transfer rates' priors (nothing learnt), so that their
    choices differ by the pricing alone: rates measured while 16 test
    workers shared the GPU had the unpriced run read 0.5-1% less."""
    from garaphpy.scheduler.gpu import selective

    monkeypatch.setattr(transfer.TransferRates, "learn", lambda *args, **kwargs: False)

    program = program_for(name)
    sources = np.array([0, 7], np.int64)
    cpu = run_quietly(disk_rmat, program, sources, mode="cpu", **ITERATIONS)
    budget = host_budget(disk_rmat, program, readers=1, cached_fraction=0.25)
    options = dict(mode="gpu", **budget, read_ratio=8.0, execution="sync",
                   gpu_memory=budget_for(disk_rmat, program, 0.25), **ITERATIONS)
    priced = run_quietly(disk_rmat, program, sources, **options)
    assert_matches(name, priced.values, cpu.values)
    for record in priced.iterations:
        placed = record.decisions["host_pages"]
        assert placed["gpu_pages"] + placed["host_pages"] + placed["disk_pages"] == \
            len(disk_rmat.store.pages)
    monkeypatch.setattr(selective, "page_read_seconds",
                        lambda page_store, pages, speed: np.zeros(len(pages)))
    unpriced = run_quietly(disk_rmat, program, sources, **options)
    assert_matches(name, unpriced.values, cpu.values)
    read = sum(record.bytes_read for record in priced.iterations)
    assert read <= sum(record.bytes_read for record in unpriced.iterations)
