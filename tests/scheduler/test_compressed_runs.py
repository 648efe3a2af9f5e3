"""CPU runs on a store of compressed pages give the plain store's values.

The same graph is stored plain and compressed (small pages over three
storage directories); each program runs on both with every page in host
memory and under a host budget that streams most pages from disk (the
PageReader decodes them).  BFS, SSSP and CC must agree exactly, PageRank
within 1e-12 relative (the pages decode to the same arrays, so the sums are
the same sums).
"""

from __future__ import annotations

import numba
import numpy as np
import pytest

import garaphpy
import references as ref
from garaphpy.programs import BUILTIN_PROGRAMS, get_program
from helpers import STREAMED_READ_RATIO as K
from helpers import budget

THREADS = min(2, numba.config.NUMBA_NUM_THREADS)
SOURCES = [0, 7]
LABELS_FROM_IDS = frozenset({"union_find_start"})


def rmat_store(base, compress: bool):
    return garaphpy.Graph.load(
        "rmat:12", store=base / "store", progress=False,
        generator_options={"weighted": True, "seed": 11}, max_shard_edges=512,
        max_page_bytes=16384, storage_dirs=[str(base / "ssd1"), str(base / "ssd2")],
        compress=compress)


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    return (rmat_store(tmp_path_factory.mktemp("plain"), False),
            rmat_store(tmp_path_factory.mktemp("packed"), True))


def run(graph, name, **options):
    sources = SOURCES if BUILTIN_PROGRAMS[name].needs_sources else ()
    return ref.run_engine_quietly(graph, get_program(name), sources, mode="cpu",
                                  threads=THREADS, max_iterations=40, execution="sync",
                                  **options)


def test_the_packed_graph_is_compressed(graphs):
    plain, packed = graphs
    assert all(info.compressed for info in packed.store.pages)
    assert len(packed.store.pages) > 8
    disk = sum(info.disk_bytes for info in packed.store.pages)
    assert disk < 0.6 * sum(info.disk_bytes for info in plain.store.pages)
    assert packed.as_undirected().store.page_codec == "gap-bp128"


@pytest.mark.parametrize("tier", ["memory", "disk"])
@pytest.mark.parametrize("name", ["pagerank", "bfs", "sssp", "cc"])
def test_a_run_on_compressed_pages_gives_the_plain_values(graphs, name, tier):
    plain, packed = graphs
    # on disk, CC starts from the ids (its union-find start would read no page)
    options = {} if tier == "memory" else {**budget(packed, name, 0.25), "read_ratio": K,
                                           "turned_off": LABELS_FROM_IDS}
    expected = run(plain, name, **options)
    result = run(packed, name, **options)
    read = [sum(record.bytes_read for record in r.iterations) for r in (result, expected)]
    if tier == "disk":
        assert 0 < read[0] < 0.6 * read[1]              # fewer bytes from disk
    else:
        assert read == [0, 0]
    if name == "pagerank":
        np.testing.assert_allclose(result.values, expected.values, rtol=1e-12, atol=0)
    else:
        np.testing.assert_array_equal(result.values, expected.values)
    assert result.num_iterations == expected.num_iterations
