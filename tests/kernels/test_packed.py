"""Packed pages, without a GPU.

Every page of real stores (int and float values, with and without values,
split vertices) packs and unpacks back to its image (the NumPy reference
the GPU's decoder is checked against in test_streamed_gpu.py); the widths
and value codes are the narrowest exact ones; a page whose IdxOff is not
sorted is refused; residency plans with packed pages never exceed their
budget and keep pages packed before any as it is.
"""

from __future__ import annotations

import numpy as np
import pytest

import garaphpy
from garaphpy.kernels import packed
from garaphpy.scheduler import decisions
from garaphpy.scheduler.gpu import transfer
from garaphpy.scheduler.gpu_engine import plan_pages


def small_pages(name: str, weighted: bool = True, **generator):
    return garaphpy.Graph.load(name, progress=False, max_shard_edges=256,
                               max_page_bytes=8192,
                               generator_options={"weighted": weighted, "seed": 5,
                                                  **generator}).store


@pytest.fixture(scope="module")
def int_weights():
    return small_pages("rmat:11")


def roundtrip(store, weights_of=lambda page: page.weights):
    """Pack and unpack every page of ``store``; returns (raw bytes, packed bytes)."""
    raw = packed_total = 0
    for info in store.pages:
        page = store.read_page(info.index)
        shards = store.page_shards(info.index)
        weights = weights_of(page)
        layout, image = packed.pack_page(page.sources, page.idxoff, weights, shards,
                                         store.num_vertices)
        sources, idxoff, back = packed.unpack_page(
            layout, image, shards, store.vertex_dtype,
            None if weights is None else weights.dtype)
        np.testing.assert_array_equal(sources, page.sources)
        np.testing.assert_array_equal(idxoff, page.idxoff)
        if weights is None:
            assert back is None and layout.weight_code == packed.WEIGHT_NONE
        else:
            np.testing.assert_array_equal(back, weights)
        # every edge is still where its shard says: IdxOff within the shard's vertices
        for row in shards:
            lo, hi = int(row["edge_begin"]) - info.edge_begin, int(row["edge_end"]) - info.edge_begin
            assert np.all(idxoff[lo:hi] < row["num_vertices"])
        raw += info.nbytes if weights is not None else info.weights_offset
        packed_total += layout.nbytes
    return raw, packed_total


def test_integer_values_pack_to_a_byte_and_back(int_weights):
    assert int_weights.weight_dtype.kind == "i"
    raw, packed_bytes = roundtrip(int_weights)
    assert packed_bytes < 0.5 * raw


def test_pages_without_values_on_the_wire(int_weights):
    raw, packed_bytes = roundtrip(int_weights, lambda page: None)
    assert packed_bytes < 0.6 * raw


def test_split_vertices_are_among_the_packed(int_weights):
    split = int_weights.shards["split"] == 1
    assert split.any()      # roundtrip covers them: a split shard holds one vertex
    assert np.all(int_weights.shards["num_vertices"][split] == 1)


def test_float_values_pack_as_they_must():
    store = small_pages("rmat:10")
    for info in store.pages[:4]:
        page = store.read_page(info.index)
        shards = store.page_shards(info.index)
        for values, code in ((page.weights.astype(np.float32), packed.WEIGHT_UINT8),
                             (page.weights.astype(np.float64) * 200, packed.WEIGHT_UINT16),
                             (page.weights.astype(np.float32) + 0.5, packed.WEIGHT_RAW),
                             (-page.weights.astype(np.float64), packed.WEIGHT_RAW)):
            layout, image = packed.pack_page(page.sources, page.idxoff, values, shards,
                                             store.num_vertices)
            assert layout.weight_code == code
            back = packed.unpack_page(layout, image, shards, store.vertex_dtype,
                                      values.dtype)[2]
            np.testing.assert_array_equal(back, values)


def test_widths_and_codes():
    assert packed.source_width(2, np.int32) == 1
    assert packed.source_width(256, np.int32) == 1
    assert packed.source_width(257, np.int32) == 2
    assert packed.source_width(1 << 24, np.int32) == 3
    assert packed.source_width((1 << 24) + 1, np.int32) == 4
    assert packed.source_width(1 << 40, np.int64) == 5
    assert packed.weight_code(None) == packed.WEIGHT_NONE
    assert packed.weight_code(np.array([0, 255], np.int32)) == packed.WEIGHT_UINT8
    assert packed.weight_code(np.array([256], np.int64)) == packed.WEIGHT_UINT16
    assert packed.weight_code(np.array([-1], np.int32)) == packed.WEIGHT_RAW
    assert packed.weight_code(np.array([70000], np.int32)) == packed.WEIGHT_RAW
    assert packed.weight_code(np.array([1.0, 255.0], np.float32)) == packed.WEIGHT_UINT8
    assert packed.weight_code(np.array([np.nan], np.float32)) == packed.WEIGHT_RAW
    assert packed.weight_code(np.array([1.0, 3e4], np.float16)) == packed.WEIGHT_RAW


def test_three_byte_sources_round_trip():
    """Ids above 2^16 in a synthetic page of two shards (one split vertex)."""
    rng = np.random.default_rng(3)
    num_vertices = 1 << 20
    shards = np.zeros(2, dtype=[("edge_begin", np.int64), ("edge_end", np.int64),
                                ("num_vertices", np.int32)])
    shards[0] = (1000, 1600, 50)
    shards[1] = (1600, 2000, 1)
    idxoff = np.concatenate([np.sort(rng.integers(0, 50, 600)),
                             np.zeros(400, np.int64)]).astype(np.uint16)
    sources = rng.integers(0, num_vertices, 1000).astype(np.int32)
    layout, image = packed.pack_page(sources, idxoff, None, shards, num_vertices)
    assert layout.source_bytes == 3 and layout.num_columns == 51
    back = packed.unpack_page(layout, image, shards, np.int32)
    np.testing.assert_array_equal(back[0], sources)
    np.testing.assert_array_equal(back[1], idxoff)
    # every 16th edge's IdxOff is kept for the pull, and checked by the reference
    kept = image[layout.keys_offset:layout.nbytes].view(np.uint16)
    np.testing.assert_array_equal(kept, idxoff[::1 << packed.KEY_SHIFT])
    assert kept.size == -(-1000 // 16) and layout.keys_offset % 16 == 0
    kept[3] += 1
    with pytest.raises(ValueError, match="kept IdxOff"):
        packed.unpack_page(layout, image, shards, np.int32)


def test_unsorted_or_outside_idxoff_is_refused():
    shards = np.zeros(1, dtype=[("edge_begin", np.int64), ("edge_end", np.int64),
                                ("num_vertices", np.int32)])
    shards[0] = (0, 4, 3)
    sources = np.arange(4, dtype=np.int32)
    with pytest.raises(ValueError, match="not sorted"):
        packed.pack_page(sources, np.array([0, 2, 1, 2], np.uint16), None, shards, 10)
    with pytest.raises(ValueError, match="not sorted"):
        packed.pack_page(sources, np.array([0, 1, 2, 3], np.uint16), None, shards, 10)


@pytest.mark.parametrize("seed", range(4))
def test_tiers_never_exceed_the_room_and_pack_first(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1000, 5000, 40)
    packed_sizes = (sizes * rng.uniform(0.3, 1.2, 40)).astype(np.int64)  # some do not shrink
    edges = rng.integers(100, 1000, 40)
    smaller = np.minimum(packed_sizes, sizes)
    for room in np.linspace(0, sizes.sum() * 1.1, 23).astype(np.int64):
        whole, kept_packed = transfer.resident_tiers(sizes, packed_sizes, edges, room)
        assert not np.any(whole & kept_packed)
        used = sizes[whole].sum() + smaller[kept_packed].sum()
        assert used <= room
        # pages that do not shrink are never kept packed
        assert not np.any(kept_packed & (packed_sizes >= sizes))
        kept = whole | kept_packed
        if room >= smaller.sum():
            assert kept.all()       # everything fits packed: nothing streams
        else:   # a page left out does not fit packed beside the others kept packed
            assert smaller[~kept].min() > room - smaller[kept].sum()
    whole, kept_packed = transfer.resident_tiers(sizes, packed_sizes, edges, sizes.sum())
    assert whole.all() and not kept_packed.any()


def test_plans_with_packed_pages_stay_within_budget():
    sizes = [4000] * 30
    packed_sizes = [1500] * 30
    vertex = 10_000
    for budget in range(vertex + 5500, vertex + 30 * 4000, 3000):
        plan = plan_pages(sizes, vertex, budget, 2, packed_sizes=packed_sizes)
        assert plan.vertex_bytes + plan.page_bytes <= budget
        buffers = plan.n_streams * 5500        # per stream a page and a packed page
        assert plan.page_bytes >= buffers
        kept = int(plan.resident_pages.sum()) + int(plan.packed_pages.sum())
        assert plan.streamed_pages == 30 - kept
        if budget - vertex - buffers >= 30 * 1500:
            assert plan.streamed_pages == 0
    assert plan_pages(sizes, vertex, vertex + 30 * 4000, 2, packed_sizes=packed_sizes).resident


def test_packing_decision():
    assert decisions.packed_pages(True, 1000, 500)
    assert not decisions.packed_pages(True, 1000, 950)     # saves too little
    assert not decisions.packed_pages(False, 1000, 500)


def test_compressed_pages_pay_with_their_index():
    assert decisions.compressed_pages(True, 400, 1000, 100)
    # the device's CSC index counts: 400 + 600 bytes save nothing against 1000
    assert not decisions.compressed_pages(True, 400, 1000, 600)
    assert not decisions.compressed_pages(False, 400, 1000, 100)
    assert decisions.selective_pushes(True, True) == ("compact", "zero-copy")
    assert decisions.selective_pushes(False, False) == ("compact",)
    assert decisions.selective_pushes(False, True) == ()


def test_interleave_spreads_the_kept_pages_among_the_copied():
    from garaphpy.scheduler.gpu_engine import interleave

    assert interleave([], [1, 2]) == [1, 2]
    assert interleave([3], []) == [3]
    assert interleave([0, 1], [5, 6, 7, 8]) == [0, 5, 6, 1, 7, 8]
    order = interleave(list(range(10)), list(range(100, 103)))
    assert sorted(order) == list(range(10)) + [100, 101, 102]
    assert order[-1] == 102 and order.index(100) > 2


def test_the_bytes_per_edge_bench(int_weights):
    from bench import packed_bytes

    sizes = packed_bytes.bytes_per_edge(int_weights)
    raw, packed_total = roundtrip(int_weights)
    assert sizes["stored"] == pytest.approx(raw / int_weights.num_edges)
    assert sizes["packed"] == pytest.approx(packed_total / int_weights.num_edges)
    assert sizes["packed, no values"] < sizes["stored, no values"]


def test_plans_without_buffers_for_unpacked_pages_keep_more():
    sizes = [4000] * 30
    packed_sizes = [1500] * 30
    vertex = 10_000
    for budget in range(vertex + 3100, vertex + 30 * 4000, 3000):
        lean = plan_pages(sizes, vertex, budget, 2, packed_sizes=packed_sizes,
                          raw_buffers=False)
        assert lean.vertex_bytes + lean.page_bytes <= budget
        assert lean.page_bytes >= lean.n_streams * 1500    # a packed page's buffer each
        if budget >= vertex + 5500 * 2:
            full = plan_pages(sizes, vertex, budget, 2, packed_sizes=packed_sizes)
            assert lean.n_streams == full.n_streams == 2
            assert lean.streamed_pages <= full.streamed_pages
            if budget - vertex - 2 * 1500 >= 30 * 1500:
                assert lean.streamed_pages == 0
