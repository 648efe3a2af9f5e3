"""One page source whether the pages sit in memory or stream from storage (Garaph section 2.2).

:class:`~garaphpy.storage.page_source.InMemoryPages` (the CPU's pages as
views of one CSC, a GPU's as page images in its own buffers) and
:class:`~garaphpy.storage.host_pages.HostPages` answer the same calls with
the same arrays: each page by index or through a cursor, and the in-edges
of a set of vertices for a notify-pull.
"""

from __future__ import annotations


import numpy as np
import pytest

from garaphpy import config
from garaphpy.kernels import cpu as kernels
from garaphpy.storage.host_budget import plan_host_cache
from garaphpy.storage.host_pages import HostPages
from garaphpy.storage.page_source import InMemoryPages, open_page_source
from helpers import HOST_PAGES_READ_RATIO as K
from helpers import build_striped_store as build
from helpers import make_pages


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return build(tmp_path_factory.mktemp("page-source"))


@pytest.fixture
def sources(store):
    """Both kinds of source over the same store."""
    made = {"memory": InMemoryPages(store), "storage": make_pages(store)}
    yield made
    for source in made.values():
        source.close()


def test_open_page_source_chooses_by_the_plan(store):
    sizes = [info.nbytes for info in store.pages]
    everything = plan_host_cache(sizes, 1000, 4096, 1000 + 4096 + sum(sizes))
    assert everything.all_cached
    calls = []

    def read_ratio():
        calls.append(1)
        return K

    in_memory = open_page_source(store, everything, read_ratio)
    assert isinstance(in_memory, InMemoryPages) and not in_memory.reads_storage
    assert in_memory.rho == config.RHO_IN_MEMORY and calls == []    # no storage measured
    some = plan_host_cache(sizes, 1000, 4096, 1000 + 4096 + sizes[0])
    out_of_core = open_page_source(store, some, read_ratio, readahead_bytes=8192)
    try:
        assert isinstance(out_of_core, HostPages) and out_of_core.reads_storage
        assert out_of_core.rho == K and calls == [1]
    finally:
        out_of_core.close()


@pytest.mark.parametrize("kind", ["memory", "storage"])
def test_pages_by_index_and_by_cursor_equal_the_store(store, sources, kind):
    source = sources[kind]
    cursor = source.cursor(range(len(store.pages)), "cpu")
    try:
        for info in store.pages:
            expected = store.read_page(info.index)
            for page in (source.read_page(info.index, "cpu"), cursor.get(info.index)):
                assert page.info.index == info.index
                np.testing.assert_array_equal(page.sources, expected.sources)
                np.testing.assert_array_equal(page.weights, expected.weights)
                assert page.sources.dtype == expected.sources.dtype
    finally:
        cursor.close()


def test_in_memory_cpu_pages_are_views_of_one_csc(store):
    source = InMemoryPages(store)
    first, second = (source.read_page(i) for i in (0, 1))
    _, csc_sources, csc_weights = source.csc()
    assert np.shares_memory(first.sources, csc_sources)
    assert np.shares_memory(second.weights, csc_weights)
    assert source.read_page(0) is first            # made once, not per call
    assert source.bytes_read == 0


def test_in_memory_images_for_a_consumer_with_an_allocator(store):
    source = InMemoryPages(store)
    allocated = []

    def allocator(nbytes):
        allocated.append(nbytes)
        return np.empty(nbytes, np.uint8)

    source.use_allocator("gpu", allocator)
    one_off = source.read_page(0, "gpu")           # not held: nothing allocated
    assert allocated == [] and one_off.image is not None
    source.load("gpu")
    assert len(allocated) == len(store.pages)
    held = source.cached_page(2, "gpu")
    np.testing.assert_array_equal(held.image, store.read_page(2).image)
    assert source.read_page(2, "gpu") is held and len(allocated) == len(store.pages)


def test_vertex_in_edges_agree_between_sources(store, sources):
    rng = np.random.default_rng(3)
    vertices = rng.choice(store.num_vertices, 300, replace=False).astype(np.int64)
    no_weights = np.zeros(1, np.float64)
    gathered = {}
    for kind, source in sources.items():
        arranged = source.arrange_vertices(vertices)
        prefix = kernels.degree_prefix(arranged, store.in_offsets)
        edges, weights, starts, pages_read = source.vertex_in_edges(
            arranged, prefix, store.in_offsets, kernels.gather_vertex_edges, no_weights)
        per_vertex = {}
        for i, vertex in enumerate(arranged.tolist()):
            count = int(prefix[i + 1] - prefix[i])
            span = slice(int(starts[i]), int(starts[i]) + count)
            per_vertex[vertex] = (edges[span].tolist(), weights[span].tolist())
        gathered[kind] = per_vertex
        if kind == "memory":
            assert pages_read == 0
        else:
            assert np.all(np.diff(arranged) > 0) and pages_read > 0
    assert gathered["memory"] == gathered["storage"]
