"""Shards and pages (Garaph sections 2.1 and 3.2) against direct computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from garaphpy import config
from garaphpy.errors import StoreError
from garaphpy.storage import layout

#: Accumulator slots of a shard cut with the default sizes.
DEFAULT_SLOTS = config.SHARD_SHARED_MEMORY_BYTES // config.SHARD_SLOT_BYTES


def equation_2(num_edges: int, num_vertices: int) -> int:
    """R_i = 2^min(ceil(log2(|E_i|/|V_i|) - 0.5), 5), at least 1, written out."""
    if num_edges == 0:
        return 1
    exponent = math.ceil(math.log2(num_edges / num_vertices) - 0.5)
    return 2 ** max(0, min(exponent, 5))


@pytest.mark.parametrize("edges,vertices", [(0, 10), (5, 10), (10, 10), (14, 10), (15, 10),
                                            (16, 10), (40, 10), (1000, 10), (10**6, 1)])
def test_replication_factor_is_equation_2(edges, vertices):
    assert layout.replication_factor(edges, vertices) == equation_2(edges, vertices)


def offsets_of(degrees) -> np.ndarray:
    offsets = np.zeros(len(degrees) + 1, np.int64)
    np.cumsum(degrees, out=offsets[1:])
    return offsets


def check_shards(shards, offsets, slots, max_vertices, max_edges):
    num_vertices = offsets.size - 1
    # vertex ranges tile 0..n-1 (a split vertex repeats in consecutive shards)
    assert shards["first_vertex"][0] == 0
    ends = shards["first_vertex"] + shards["num_vertices"]
    assert ends[-1] == num_vertices
    split = shards["split"].astype(bool)
    for i in range(1, shards.size):
        if split[i] and split[i - 1] and shards["first_vertex"][i] == shards["first_vertex"][i - 1]:
            continue
        assert shards["first_vertex"][i] == ends[i - 1]
    # edge ranges tile 0..E-1: every edge in exactly one shard
    assert shards["edge_begin"][0] == 0 and shards["edge_end"][-1] == offsets[-1]
    assert np.array_equal(shards["edge_begin"][1:], shards["edge_end"][:-1])
    for shard in shards:
        edges = int(shard["edge_end"] - shard["edge_begin"])
        vertices = int(shard["num_vertices"])
        assert edges <= max_edges
        assert 1 <= vertices <= max_vertices
        assert int(shard["replication"]) == equation_2(edges, vertices)
        assert vertices * int(shard["replication"]) <= slots or vertices == 1
        if not shard["split"]:
            first = int(shard["first_vertex"])
            assert shard["edge_begin"] == offsets[first]
            assert shard["edge_end"] == offsets[first + vertices]


@pytest.mark.parametrize("seed", range(4))
def test_shards_cover_everything_within_budget(seed):
    rng = np.random.default_rng(seed)
    degrees = rng.zipf(1.8, 5000).clip(0, 3000) * rng.integers(0, 2, 5000)
    offsets = offsets_of(degrees)
    shards = layout.cut_shards(offsets, shared_memory_bytes=4096, slot_bytes=4,
                               max_vertices=700, max_edges=1000)
    check_shards(shards, offsets, 1024, 700, 1000)
    assert shards["split"].any()  # some vertex has more than 1000 in-edges


def test_heavy_vertex_is_split_into_pieces():
    degrees = np.array([3, 2500, 1, 0, 4])
    shards = layout.cut_shards(offsets_of(degrees), max_edges=1000)
    pieces = shards[shards["split"] == 1]
    assert list(pieces["first_vertex"]) == [1, 1, 1]
    assert list(pieces["edge_end"] - pieces["edge_begin"]) == [1000, 1000, 500]
    check_shards(shards, offsets_of(degrees), DEFAULT_SLOTS, 1 << 16, 1000)


def test_sparse_graph_gets_r1_shards_at_the_offset_limit():
    offsets = offsets_of(np.zeros(200_000, np.int64))
    shards = layout.cut_shards(offsets, shared_memory_bytes=1 << 20, slot_bytes=4)
    assert shards["num_vertices"].max() == 1 << 16  # 16-bit IdxOff bound
    assert set(shards["replication"]) == {1}


def test_dense_shards_use_high_replication():
    offsets = offsets_of(np.full(10_000, 64))
    shards = layout.cut_shards(offsets)
    assert set(shards["replication"]) == {32}
    assert shards["num_vertices"].max() == DEFAULT_SLOTS // 32


@pytest.mark.parametrize("fixed", [1, 2, 4, 8, 16, 32])
def test_fixed_replication_gives_every_shard_that_factor(fixed):
    rng = np.random.default_rng(fixed)
    degrees = rng.zipf(1.8, 5000).clip(0, 3000) * rng.integers(0, 2, 5000)
    offsets = offsets_of(degrees)
    slots = 4096 // 4
    shards = layout.cut_shards(offsets, shared_memory_bytes=4096, slot_bytes=4,
                               max_vertices=700, max_edges=1000, fixed_replication=fixed)
    assert set(shards["replication"]) == {fixed}
    # the same shared memory budget: |V_i| * R fits the slots, split pieces included
    assert np.all(shards["num_vertices"].astype(np.int64) * fixed <= slots)
    assert shards["num_vertices"].max() <= min(slots // fixed, 700)
    # vertex and edge ranges tile everything exactly once
    assert shards["first_vertex"][0] == 0
    assert (shards["first_vertex"] + shards["num_vertices"])[-1] == offsets.size - 1
    assert shards["edge_begin"][0] == 0 and shards["edge_end"][-1] == offsets[-1]
    assert np.array_equal(shards["edge_begin"][1:], shards["edge_end"][:-1])
    assert np.all(shards["edge_end"] - shards["edge_begin"] <= 1000)
    covered = np.zeros(offsets[-1], np.int64)
    for shard in shards:
        covered[shard["edge_begin"]:shard["edge_end"]] += 1
    assert np.all(covered == 1)
    # vertices with more than max_edges in-edges are still split, at R as well
    pieces = shards[shards["split"] == 1]
    heavy = np.flatnonzero(degrees > 1000)
    assert heavy.size and set(pieces["first_vertex"]) == set(heavy)
    for vertex in heavy:
        mine = pieces[pieces["first_vertex"] == vertex]
        assert mine["edge_begin"][0] == offsets[vertex]
        assert mine["edge_end"][-1] == offsets[vertex + 1]
        assert np.all(mine["num_vertices"] == 1)


def test_fixed_replication_cuts_ranges_by_its_factor():
    offsets = offsets_of(np.ones(100_000, np.int64))  # Equation 2 would give R = 1
    default = layout.cut_shards(offsets)
    assert set(default["replication"]) == {1} and default["num_vertices"].max() == DEFAULT_SLOTS
    fixed = layout.cut_shards(offsets, fixed_replication=16)
    assert set(fixed["replication"]) == {16}
    assert fixed["num_vertices"].max() == DEFAULT_SLOTS // 16
    # with fixed R equal to Equation 2's factor everywhere, the cut is the default one
    dense = offsets_of(np.full(10_000, 64))
    assert np.array_equal(layout.cut_shards(dense, fixed_replication=32),
                          layout.cut_shards(dense))


def contention_factor(degrees, first, end, rule, edges_per_thread) -> int:
    """R of the vertex range [first, end) under ``rule``, written out."""
    d = np.asarray(degrees[first:end], np.float64)
    if d.sum() == 0:
        return 1
    contention = (d * d).sum() / d.sum() if rule == "edge-weighted" else d.sum() / d.size
    exponent = math.ceil(math.log2(contention / edges_per_thread) - 0.5)
    return 2 ** max(0, min(exponent, 5))


@pytest.mark.parametrize("rule", ["mean", "edge-weighted"])
@pytest.mark.parametrize("edges_per_thread", [1, 8])
@pytest.mark.parametrize("seed", range(3))
def test_replication_rules_give_each_shard_its_own_factor(rule, edges_per_thread, seed):
    rng = np.random.default_rng(seed)
    degrees = rng.zipf(1.6, 6000).clip(0, 3000) * rng.integers(0, 2, 6000)
    offsets = offsets_of(degrees)
    slots = 4096 // 4
    shards = layout.cut_shards(offsets, shared_memory_bytes=4096, slot_bytes=4,
                               max_vertices=700, max_edges=1000, replication_rule=rule,
                               edges_per_thread=edges_per_thread)
    assert shards["edge_begin"][0] == 0 and shards["edge_end"][-1] == offsets[-1]
    assert np.array_equal(shards["edge_begin"][1:], shards["edge_end"][:-1])
    for shard in shards:
        first, vertices = int(shard["first_vertex"]), int(shard["num_vertices"])
        if shard["split"]:
            edges = int(shard["edge_end"] - shard["edge_begin"])
            expected = contention_factor([edges], 0, 1, "mean", edges_per_thread)
        else:
            expected = contention_factor(degrees, first, first + vertices, rule,
                                         edges_per_thread)
        assert int(shard["replication"]) == expected
        assert vertices * expected <= slots or vertices == 1
    boundaries = ["first_vertex", "num_vertices", "edge_begin", "edge_end", "split"]
    one_edge = layout.cut_shards(offsets, shared_memory_bytes=4096, slot_bytes=4,
                                 max_vertices=700, max_edges=1000, replication_rule=rule)
    assert np.array_equal(shards[boundaries], one_edge[boundaries])  # the divisor cuts nothing
    if rule == "mean" and edges_per_thread == 1:  # the published Equation 2, unchanged
        assert np.array_equal(shards, layout.cut_shards(
            offsets, shared_memory_bytes=4096, slot_bytes=4, max_vertices=700,
            max_edges=1000))


def test_edge_weighted_rule_replicates_a_hub_among_light_vertices():
    degrees = np.array([1] * 300 + [600] + [1] * 300)
    offsets = offsets_of(degrees)
    mean = layout.cut_shards(offsets)
    assert mean.size == 1 and mean["replication"][0] == 2  # 1200 edges / 601 vertices
    weighted = layout.cut_shards(offsets, replication_rule="edge-weighted")
    hub = weighted[(weighted["first_vertex"] <= 300)
                   & (weighted["first_vertex"] + weighted["num_vertices"] > 300)]
    assert hub["replication"][0] == 32  # (600^2 + 600) / 1200 edges share its destination
    # the light vertices before the hub keep a shard of their own, unreplicated
    assert weighted["first_vertex"][0] == 0 and weighted["replication"][0] == 1
    assert weighted["num_vertices"][0] >= 256


def test_edges_per_thread_divide_the_contention():
    dense = offsets_of(np.full(1000, 16))
    assert set(layout.cut_shards(dense)["replication"]) == {16}
    for rule in layout.REPLICATION_RULES:
        assert set(layout.cut_shards(dense, replication_rule=rule,
                                     edges_per_thread=8)["replication"]) == {2}


def test_replication_rule_and_edges_per_thread_are_checked():
    offsets = offsets_of([1, 2])
    with pytest.raises(StoreError, match="replication_rule"):
        layout.cut_shards(offsets, replication_rule="max")
    for bad in (0, -1, 2.0, True):
        with pytest.raises(StoreError, match="edges_per_thread"):
            layout.cut_shards(offsets, edges_per_thread=bad)


def test_fixed_replication_must_be_an_allowed_power_of_two():
    offsets = offsets_of([1, 2])
    for bad in (0, 3, 64, 2.0, True):
        with pytest.raises(StoreError, match="fixed_replication"):
            layout.cut_shards(offsets, fixed_replication=bad)
    with pytest.raises(StoreError, match="fixed_replication"):
        layout.cut_shards(offsets, max_replication=8, fixed_replication=16)


def test_invalid_shard_parameters_are_named():
    offsets = offsets_of([1, 2])
    with pytest.raises(StoreError, match="shared_memory_bytes"):
        layout.cut_shards(offsets, shared_memory_bytes=64, slot_bytes=4)
    with pytest.raises(StoreError, match="max_vertices"):
        layout.cut_shards(offsets, max_vertices=70000)


def test_pages_respect_their_budget():
    rng = np.random.default_rng(7)
    offsets = offsets_of(rng.integers(0, 50, 20000))
    shards = layout.cut_shards(offsets)
    sizing = layout.PageSizing(source_bytes=4, weight_bytes=4, page_bytes=200_000)
    counts = layout.group_pages(shards, sizing)
    assert counts.sum() == shards.size and len(counts) > 1
    assert np.all(np.diff(shards["page"]) >= 0)
    start = 0
    for count in counts:
        page = shards[start:start + count]
        edges = int(page["edge_end"][-1] - page["edge_begin"][0])
        assert layout.page_array_offsets(edges, sizing)["nbytes"] <= sizing.page_bytes
        start += count


def test_one_shard_larger_than_a_page_is_an_error():
    shards = layout.cut_shards(offsets_of([60_000]))
    with pytest.raises(StoreError, match="GPU memory budget"):
        layout.group_pages(shards, layout.PageSizing(4, 0, 100_000))


def test_page_budget_leaves_room_for_vertices_and_streams():
    assert layout.page_budget(1000, 4, 200, max_page_bytes=10**9) == 200
    assert layout.page_budget(10**12, 4, 0) == layout.page_budget(10**12, 1, 0)  # capped
    with pytest.raises(StoreError, match="vertex data"):
        layout.page_budget(100, 4, 200)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("rule", layout.REPLICATION_RULES)
def test_small_graphs_cut_and_group_interpreted_as_compiled(seed, rule, monkeypatch):
    # a small graph's shards and pages come from the kernels run as Python
    # (nothing compiled on a first build): the same tables as compiled
    from numba.core import event

    rng = np.random.default_rng(seed)
    degrees = rng.zipf(1.8, 2000).clip(0, 100) * rng.integers(0, 2, 2000)
    degrees[rng.integers(0, 2000)] = 2500                 # a vertex split into pieces
    offsets = offsets_of(degrees)
    sizing = layout.PageSizing(source_bytes=4, weight_bytes=0, page_bytes=40_000)
    compiled_before = []
    listener = type("Compiles", (event.Listener,), {
        "on_start": lambda self, e: compiled_before.append(e.data["dispatcher"].py_func),
        "on_end": lambda self, e: None})()
    keywords = dict(max_edges=1000, max_vertices=300, replication_rule=rule)
    with event.install_listener("numba:compile", listener):
        small = layout.cut_shards(offsets, **keywords)
        small_pages = layout.group_pages(small, sizing)
    assert layout._interprets(offsets) and small["split"].any() and len(small_pages) > 1
    assert not [f for f in compiled_before if f.__module__ == layout.__name__]
    monkeypatch.setattr(config, "INTERPRET_MAX_ITEMS", -1)
    large = layout.cut_shards(offsets, **keywords)
    large_pages = layout.group_pages(large, sizing)
    np.testing.assert_array_equal(small, large)
    np.testing.assert_array_equal(small_pages, large_pages)
    if rule == "mean":          # the factors check_shards expects
        check_shards(small, offsets, DEFAULT_SLOTS, 300, 1000)
