"""The GPU's decoder of compressed pages (garaphpy.kernels.gpu_codec) against
the CPU's (garaphpy.storage.page_codec).

Each page is encoded on the host, decoded on the device, and its sources and
IdxOff must equal the plain arrays and the CPU decoder's: uniform and
power-law in-degrees (a destination's edges over many blocks), an rmat
graph's CSC, one-edge pages, and pages cut at every edge of a small graph (a
destination's edges cut by the page's start or end, zero-degree vertices
around the cuts).  A stream whose block table is damaged leaves the blocks
undecoded and counts them.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

import garaphpy
from garaphpy.kernels import gpu_codec
from garaphpy.storage.page_codec import BLOCK_EDGES, decode_sources, encode_sources, stream_words

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cupy():
    import cupy

    return cupy


def csc_of(num_vertices: int, src: np.ndarray, dst: np.ndarray):
    """(in_offsets, sources): the CSC of the edges, each destination's sources sorted."""
    order = np.lexsort((src, dst))
    in_offsets = np.zeros(num_vertices + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=num_vertices), out=in_offsets[1:])
    return in_offsets, src[order].astype(np.int32)


def random_csc(seed: int, num_vertices: int, num_edges: int, skewed: bool):
    rng = np.random.default_rng(seed)
    if skewed:
        weights = 1.0 / np.arange(1, num_vertices + 1) ** 1.2
        dst = rng.choice(num_vertices, num_edges, p=weights / weights.sum())
    else:
        dst = rng.integers(0, num_vertices, num_edges)
    return csc_of(num_vertices, rng.integers(0, num_vertices, num_edges), dst)


class Decoder:
    """One CSC's index on the device, and the decode of any of its edge ranges."""

    def __init__(self, cupy, in_offsets, sources):
        self.cupy, self.in_offsets, self.sources = cupy, in_offsets, sources
        self.device_offsets = gpu_codec.device_offsets(cupy, in_offsets)
        self.kernel = gpu_codec.decode_kernel(np.int32, self.device_offsets.dtype)

    def page(self, edge_begin: int, edge_end: int, shard_every: int = 7):
        """Encode edges ``edge_begin .. edge_end - 1`` (shards of ``shard_every``
        destinations), decode them on both processors, compare, and return
        the device's error count."""
        cupy, in_offsets = self.cupy, self.in_offsets
        first = int(np.searchsorted(in_offsets, edge_begin, side="right")) - 1
        end = max(int(np.searchsorted(in_offsets, edge_end, side="left")), first + 1)
        n = edge_end - edge_begin
        plain = self.sources[edge_begin:edge_end]
        stream = encode_sources(plain, in_offsets, edge_begin, first, end)
        assert stream is not None
        image = stream.view(np.uint8)
        # shards: every shard_every-th destination starts one (the page's first, too)
        shard_first = np.arange(first, end, shard_every, dtype=np.int64)
        shard_edge = np.maximum(in_offsets[shard_first], edge_begin) - edge_begin
        cpu_sources = np.full(n, -1, np.int32)
        cpu_idxoff = np.zeros(n, np.uint16)
        decode_sources(image, in_offsets, edge_begin, first, end, cpu_sources,
                       idxoff=cpu_idxoff, shard_first=shard_first)
        np.testing.assert_array_equal(cpu_sources, plain)
        info = types.SimpleNamespace(edge_begin=edge_begin, num_edges=n, first_vertex=first,
                                     end_vertex=end, first_shard=0,
                                     num_shards=len(shard_first))
        sources = cupy.full(max(n, 1), -1, np.int32)
        idxoff = cupy.full(max(n, 1), 0xFFFF, np.uint16)
        errors = cupy.zeros(1, np.uint32)
        gpu_codec.launch_decode(self.kernel, cupy.asarray(stream),
                                stream_words(image, n), self.device_offsets, info,
                                cupy.asarray(shard_first), cupy.asarray(shard_edge),
                                sources, idxoff, errors)
        np.testing.assert_array_equal(sources.get()[:n], plain)
        np.testing.assert_array_equal(idxoff.get()[:n], cpu_idxoff)
        # the IdxOff by its definition: each edge's destination less its shard's first
        destinations = np.repeat(np.arange(len(in_offsets) - 1), np.diff(in_offsets))
        shard = np.searchsorted(shard_edge, np.arange(n), side="right") - 1
        np.testing.assert_array_equal(
            idxoff.get()[:n], destinations[edge_begin:edge_end] - shard_first[shard])
        return int(errors.get()[0])


@pytest.mark.parametrize("skewed", [False, True])
def test_random_pages_decode_on_the_device(cupy, skewed):
    in_offsets, sources = random_csc(3, 4000, 60000, skewed)
    decoder = Decoder(cupy, in_offsets, sources)
    assert decoder.device_offsets.dtype == np.uint32
    for begin, end in [(0, 60000), (1, 59999), (BLOCK_EDGES * 7, BLOCK_EDGES * 100 + 5),
                       (31000, 31001), (12345, 12345 + BLOCK_EDGES)]:
        assert decoder.page(begin, end) == 0


def test_an_rmat_graphs_pages_decode_on_the_device(cupy):
    graph = garaphpy.Graph.load("rmat:14", progress=False, generator_options={"seed": 2})
    store = graph.store
    in_offsets, sources, _ = store.csc()
    decoder = Decoder(cupy, np.asarray(in_offsets, np.int64), np.asarray(sources, np.int32))
    m = store.num_edges
    for begin, end in [(0, m), (0, m // 3), (m // 3, m), (m // 2 - 1000, m // 2 + 77)]:
        assert decoder.page(begin, end, shard_every=64) == 0


def test_pages_cut_at_every_edge_decode_on_the_device(cupy):
    # 60 destinations, some of no in-edges, one of many: pages cut at every edge
    in_offsets, sources = random_csc(5, 60, 700, skewed=True)
    decoder = Decoder(cupy, in_offsets, sources)
    m = int(in_offsets[-1])
    for cut in range(m):
        assert decoder.page(cut, min(cut + 2 * BLOCK_EDGES + 3, m), shard_every=3) == 0
        assert decoder.page(0, cut + 1, shard_every=5) == 0
        assert decoder.page(cut, cut + 1) == 0          # one edge


def test_values_of_no_width_decode_on_the_device(cupy):
    # every edge a self-loop, three times: heads of zero distance, gaps of zero
    destinations = np.repeat(np.arange(100), 3)
    in_offsets, sources = csc_of(100, destinations.copy(), destinations)
    decoder = Decoder(cupy, in_offsets, sources)
    for begin, end in [(0, 300), (5, 6), (299, 300), (0, 1), (BLOCK_EDGES, 2 * BLOCK_EDGES)]:
        assert decoder.page(begin, end) == 0


def test_an_empty_page_launches_nothing(cupy):
    in_offsets, sources = random_csc(1, 10, 50, skewed=False)
    info = types.SimpleNamespace(edge_begin=50, num_edges=0, first_vertex=9, end_vertex=10,
                                 first_shard=0, num_shards=1)
    decoder = Decoder(cupy, in_offsets, sources)
    errors = cupy.zeros(1, np.uint32)
    untouched = cupy.full(4, -1, np.int32)
    gpu_codec.launch_decode(decoder.kernel, cupy.zeros(4, np.uint32), 3,
                            decoder.device_offsets, info, cupy.zeros(1, np.int64),
                            cupy.zeros(1, np.int64), untouched, cupy.zeros(4, np.uint16), errors)
    assert int(errors.get()[0]) == 0 and (untouched.get() == -1).all()


def test_a_damaged_block_table_is_counted_not_followed(cupy):
    in_offsets, sources = random_csc(2, 500, 5000, skewed=False)
    decoder = Decoder(cupy, in_offsets, sources)
    first, end = 0, 500
    stream = encode_sources(sources, in_offsets, 0, first, end)
    words = stream_words(stream.view(np.uint8), 5000)
    stream[2] = stream[3]           # block 1 starts where it ends
    stream[2 + 5] = words + 99      # block 5 ends past the stream (block 6 starts there)
    info = types.SimpleNamespace(edge_begin=0, num_edges=5000, first_vertex=first,
                                 end_vertex=end, first_shard=0, num_shards=1)
    errors = cupy.zeros(1, np.uint32)
    out = cupy.full(5000, -1, np.int32)
    gpu_codec.launch_decode(decoder.kernel, cupy.asarray(stream), words,
                            decoder.device_offsets, info, cupy.zeros(1, np.int64),
                            cupy.zeros(1, np.int64), out, cupy.zeros(5000, np.uint16), errors)
    assert int(errors.get()[0]) >= 2
    decoded = out.get()
    np.testing.assert_array_equal(decoded[:BLOCK_EDGES], sources[:BLOCK_EDGES])
    assert (decoded[BLOCK_EDGES:2 * BLOCK_EDGES] == -1).all()
