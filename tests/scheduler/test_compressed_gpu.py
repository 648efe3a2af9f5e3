"""GPU runs on a store of compressed pages give the plain store's values.

The same graph is stored plain and compressed; each program runs on the GPU
on both, resident and with a GPU budget of a quarter of the pages, every
page in host memory.  Streamed, the compressed pages cross the bus as stored
and the GPU decodes them (garaphpy.kernels.gpu_codec) where the plan's rule
says it pays.  BFS, SSSP and CC must agree exactly, PageRank within 1e-12 relative
at the same iterations (the pages decode to the same arrays); PageRank moves
fewer bytes to the device.
"""

from __future__ import annotations

import numpy as np
import pytest

import garaphpy
import references as ref
from garaphpy.storage.page_codec import BLOCK_EDGES
from helpers import budget_for
from helpers import gpu_program as program_for

pytestmark = pytest.mark.gpu

SOURCES = np.array([0, 7], np.int64)


def rmat_graph(compress: bool):
    return garaphpy.Graph.load("rmat:12", progress=False, max_shard_edges=512,
                               max_page_bytes=16384,
                               generator_options={"weighted": True, "seed": 11},
                               compress=compress)


@pytest.fixture(scope="module")
def graphs():
    return rmat_graph(False), rmat_graph(True)


def run(graph, name, **options):
    program = program_for(name)
    sources = SOURCES if program.needs_sources else ()
    return ref.run_engine_like_gpu(graph, program, sources, mode="gpu", max_iterations=40,
                                   execution="sync", **options)


@pytest.mark.parametrize("fraction", [None, 0.25])
@pytest.mark.parametrize("name", ["pagerank", "bfs", "sssp", "cc"])
def test_a_gpu_run_on_compressed_pages_gives_the_plain_values(graphs, name, fraction):
    plain, packed = graphs
    assert all(info.compressed for info in packed.store.pages)
    options = {} if fraction is None else {
        "gpu_memory": budget_for(plain, program_for(name), fraction)}
    expected = run(plain, name, **options)
    result = run(packed, name, **options)
    if name == "pagerank":
        np.testing.assert_allclose(result.values, expected.values, rtol=1e-12, atol=0)
    else:
        np.testing.assert_array_equal(result.values, expected.values)
    assert result.num_iterations == expected.num_iterations
    entries = [record.decisions.get("compressed_pages") for record in result.iterations]
    if fraction is None:        # resident: every page decoded on the host once
        assert entries[0] is None
        return
    assert entries[0] is not None
    moved = [sum(record.bytes_to_device for record in r.iterations) for r in (result, expected)]
    if entries[0]["choice"] and name == "pagerank":
        # every streamed page copied every iteration (the frontier programs choose per
        # page by the bytes, and may push a page's active edges instead)
        assert 0 < moved[0] < 0.8 * moved[1], moved
    elif not entries[0]["choice"]:   # values the program reads that the compressed page holds as stored
        assert entries[0]["compressed_bytes"] + entries[0]["index_bytes"] \
            > 0.9 * entries[0]["other_bytes"]


@pytest.mark.parametrize("name", ["pagerank", "sssp"])
def test_the_gpu_decodes_what_the_rule_chose(graphs, name):
    plain, packed = graphs
    program = program_for(name)
    budget = budget_for(plain, program, 0.25)
    from garaphpy.scheduler.gpu_engine import GpuEngine

    engine = GpuEngine(packed, program, np.zeros(1, np.int64), synchronous=True,
                       gpu_memory=budget, turned_off={"packed_pages"})
    pages = engine.page_store
    assert pages.compressed_entry["choice"] and pages.compressed_pages
    assert "compressed, decoded on the device" in pages.describe()
    # the buffer of decoded edges holds a part of a page: several groups of shards each
    assert any(len(chunks) > 1 for chunks in pages.decode_chunks.values())
    # kept compressed on the device, or streamed compressed: each group decoded into
    # the stream's buffer gives the page's edges
    store, stream, block = packed.store, pages.streams[0], BLOCK_EDGES
    offsets, buffer = pages.decode_offsets, pages.decode_buffers[0]
    vertex_dtype = store.vertex_dtype
    checked = 0
    for k in sorted(pages.compressed_pages):
        if k in pages.packed_host:
            device = pages.device_packed[0]
            device[:pages.packed_layouts[k].nbytes].set(pages.packed_host[k])
        elif k in pages.packed_images:
            device = pages.packed_images[k]
        else:
            continue
        page = store.read_page(k)
        covered = 0
        for first_shard, num_shards, first_block, end_block in pages.decode_chunks[k]:
            buffer.fill(0xAB)
            engine.cupy.cuda.Device().synchronize()
            engine.launches.decode(k, device, 0, stream, (first_block, end_block))
            stream.synchronize()
            edges = slice(first_block * block, min(end_block * block, page.sources.size))
            count = edges.stop - edges.start
            decoded = buffer.get()
            np.testing.assert_array_equal(
                decoded[:count * vertex_dtype.itemsize].view(vertex_dtype), page.sources[edges])
            np.testing.assert_array_equal(
                decoded[offsets["idxoff"]:offsets["idxoff"] + 2 * count].view(np.uint16),
                page.idxoff[edges])
            if engine.reads_weights:
                size = store.weight_dtype.itemsize
                np.testing.assert_array_equal(
                    decoded[offsets["weights"]:offsets["weights"] + size * count].view(
                        store.weight_dtype), page.weights[edges])
            rows = store.shards[first_shard:first_shard + num_shards]
            assert rows["edge_begin"].min() >= info_begin(store, k) + edges.start
            assert rows["edge_end"].max() <= info_begin(store, k) + edges.stop
            covered += num_shards
        assert covered == store.pages[k].num_shards
        checked += 1
    assert checked and int(pages.decode_errors.get()[0]) == 0
    engine.close()


def info_begin(store, k: int) -> int:
    return store.pages[k].edge_begin


@pytest.fixture(scope="module")
def disk_graphs(tmp_path_factory):
    """The rmat graph plain and compressed, each on a storage directory of its own."""
    base = tmp_path_factory.mktemp("compressed-disk")

    def load(name: str, compress: bool):
        return garaphpy.Graph.load(
            "rmat:12", store=base / name / "store", progress=False, max_shard_edges=512,
            max_page_bytes=16384, generator_options={"weighted": True, "seed": 11},
            compress=compress, storage_dirs=[str(base / name / "ssd")])

    return load("plain", False), load("packed", True)


@pytest.mark.parametrize("mode", ["gpu", "hybrid"])
@pytest.mark.parametrize("name", ["pagerank", "bfs", "sssp", "cc"])
def test_pages_from_disk_cross_the_bus_as_stored(disk_graphs, name, mode):
    """Runs whose host budget holds a quarter of the pages: the compressed
    pages read from disk reach the GPU as stored and are decoded there (the
    hybrid's CPU decodes those it takes), with the values of the plain
    store's run and, for PageRank on the GPU (every page every iteration),
    under 0.6 of its bytes to the device."""
    from helpers import host_budget

    plain, packed = disk_graphs
    program = program_for(name)
    sources = SOURCES if program.needs_sources else ()
    options = dict(mode=mode, max_iterations=40, execution="sync", read_ratio=8.0,
                   gpu_memory=budget_for(plain, program, 0.05))
    runs = [ref.run_engine_like_gpu(graph, program, sources, **options,
                                    **host_budget(graph, program,
                                                  readers=1 if mode == "gpu" else 2,
                                                  cached_fraction=0.25))
            for graph in (plain, packed)]
    expected, result = runs
    assert sum(record.bytes_read for record in result.iterations) > 0
    if mode == "hybrid":        # each iteration's split between the processors is timed
        ref.assert_run_matches(name, "sync", result, expected)
        return
    if name == "pagerank":
        np.testing.assert_allclose(result.values, expected.values, rtol=1e-12, atol=0)
    else:
        np.testing.assert_array_equal(result.values, expected.values)
    assert result.num_iterations == expected.num_iterations
    assert result.iterations[0].decisions["compressed_pages"]["choice"]
    if name == "pagerank":
        moved = [sum(record.bytes_to_device for record in run.iterations[1:]) for run in runs]
        assert 0 < moved[1] < 0.6 * moved[0], moved
