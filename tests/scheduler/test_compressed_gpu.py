"""GPU runs on a store of compressed pages give the plain store's values.

The same graph is stored plain and compressed; each program runs on the GPU
on both, resident and with a GPU budget of a quarter of the pages, every
page in host memory.  Streamed, the compressed pages cross the bus as stored
and the GPU decodes them (garaphpy.kernels.gpu_codec) where the plan's rule
says it pays: fewer bytes reach the device than the plain store's (packed)
pages.  BFS, SSSP and CC must agree exactly, PageRank within 1e-12 relative
at the same iterations (the pages decode to the same arrays).
"""

from __future__ import annotations

import numpy as np
import pytest

import garaphpy
import references as ref
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
    if entries[0]["choice"]:
        assert 0 < moved[0] < moved[1], moved
    else:   # values the program reads that the compressed page holds as stored
        assert entries[0]["compressed_bytes"] + entries[0]["index_bytes"] \
            > 0.9 * entries[0]["other_bytes"]


def test_the_gpu_decodes_what_the_rule_chose(graphs):
    plain, packed = graphs
    program = program_for("pagerank")
    budget = budget_for(plain, program, 0.25)
    from garaphpy.scheduler.gpu_engine import GpuEngine

    engine = GpuEngine(packed, program, np.zeros(0, np.int64), synchronous=True,
                       gpu_memory=budget)
    pages = engine.page_store
    assert pages.compressed_entry["choice"] and pages.compressed_pages
    assert "compressed, decoded on the device" in pages.describe()
    # kept compressed on the device, or streamed compressed: decode each into a buffer
    store, stream = packed.store, pages.streams[0]
    for k in sorted(pages.compressed_pages):
        if k in pages.packed_host:
            device = pages.device_packed[0]
            device[:pages.packed_layouts[k].nbytes].set(pages.packed_host[k])
        elif k in pages.packed_images:
            device = pages.packed_images[k]
        else:
            continue
        pages.device_pages[0].fill(0xAB)
        engine.cupy.cuda.Device().synchronize()
        engine.launches.decode(k, device, 0, stream)
        stream.synchronize()
        sources, idxoff, _ = (array.get() for array in pages.views(k, 0))
        page = store.read_page(k)
        np.testing.assert_array_equal(sources, page.sources)
        np.testing.assert_array_equal(idxoff, page.idxoff)
    assert int(pages.decode_errors.get()[0]) == 0
    engine.close()
