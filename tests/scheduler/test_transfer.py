"""Streamed pages' plans and per-page transfer choices, without a GPU.

The host kernels (the frontier's edges per page, the compacted active
subgraph, edge values in out-edge order) are checked against slow NumPy
references on real stores; partial residency plans under many budgets never
exceed the budget; the cost model's choices follow from synthetic rates.
"""

from __future__ import annotations

import contextlib

import numba
import numpy as np
import pytest

import garaphpy
from garaphpy import config
from garaphpy.errors import ConfigError
from garaphpy.kernels import gpu_subgraph as subgraph
from garaphpy.scheduler import decisions
from garaphpy.scheduler.gpu import transfer
from garaphpy.scheduler.gpu_engine import GpuMemoryError, plan_pages
from garaphpy.scheduler.gpu.transfer import COMPACT, COPY, RESIDENT, SKIP, ZERO_COPY


@pytest.fixture(scope="module")
def paged():
    """rmat:11, weighted, in many small pages (split vertices included)."""
    return garaphpy.Graph.load("rmat:11", progress=False, max_shard_edges=256,
                               max_page_bytes=8192, compress=False,
                               generator_options={"weighted": True, "seed": 5}).store


def page_ranges(store):
    return (np.array([p.first_vertex for p in store.pages], np.int64),
            np.array([p.end_vertex for p in store.pages], np.int64))


def edges_in_pages(store):
    """(source, destination, page, value) of every edge, from the pages' images."""
    rows = []
    shards = store.shards
    for info in store.pages:
        page = store.read_page(info.index)
        for shard in shards[info.first_shard:info.first_shard + info.num_shards]:
            lo = int(shard["edge_begin"]) - info.edge_begin
            hi = int(shard["edge_end"]) - info.edge_begin
            for e in range(lo, hi):
                rows.append((int(page.sources[e]),
                             int(shard["first_vertex"]) + int(page.idxoff[e]), info.index,
                             float(page.weights[e])))
    return rows


def test_pages_cover_every_vertex_in_order(paged):
    first, end = page_ranges(paged)
    assert first[0] == 0 and end[-1] == paged.num_vertices
    assert np.all(first[1:] >= first[:-1]) and np.all(first[1:] <= end[:-1])
    assert np.any(first[1:] < end[:-1])     # some vertex's in-edges span two pages


def test_page_active_edges_counts_every_page_an_edge_may_reach(paged):
    first, end = page_ranges(paged)
    rng = np.random.default_rng(1)
    for size in (0, 1, 17, 400, paged.num_vertices):
        frontier = np.sort(rng.choice(paged.num_vertices, size, replace=False)).astype(np.int64)
        lookup = subgraph.PageLookup(first, end, paged.num_vertices)
        counts = subgraph.page_active_edges(frontier, paged.out_offsets, paged.out_targets,
                                            lookup, 3)
        expected = np.zeros(len(paged.pages), np.int64)
        for u in frontier.tolist():
            for v in paged.out_targets[paged.out_offsets[u]:paged.out_offsets[u + 1]].tolist():
                expected[(first <= v) & (v < end)] += 1
        np.testing.assert_array_equal(counts, expected)
        # a page whose count is zero holds no edge from the frontier
        active = set(frontier.tolist())
        reached = {page for src, _dst, page, _w in edges_in_pages(paged) if src in active} \
            if size in (1, 17) else None
        if reached is not None:
            assert reached <= set(np.flatnonzero(counts).tolist())


def test_out_edge_values_line_up_with_the_targets(paged):
    values = subgraph.store_out_edge_values(paged)
    expected = {}
    for src, dst, _page, weight in edges_in_pages(paged):
        expected.setdefault(src, []).append((dst, weight))
    for u in range(paged.num_vertices):
        lo, hi = paged.out_offsets[u], paged.out_offsets[u + 1]
        got = list(zip(paged.out_targets[lo:hi].tolist(), values[lo:hi].tolist()))
        assert got == expected.get(u, [])


@pytest.mark.parametrize("threads", [1, 2])
def test_out_edge_values_on_several_threads_equal_a_stable_sort(monkeypatch, threads):
    """Each thread places the values of one range of sources, reading every
    edge: the result is the values stably sorted by source, page after page."""
    import numba

    monkeypatch.setattr(subgraph, "PARALLEL_PLACE_EDGES", 1)
    rng = np.random.default_rng(11)
    num_vertices = 500
    sources = rng.integers(0, num_vertices, 20_000)
    sources[:3_000] = 7                    # a hub: its range holds more edges
    values = rng.random(sources.size)
    out_offsets = np.concatenate(([0], np.cumsum(np.bincount(sources,
                                                             minlength=num_vertices))))
    pages = [(sources[a:b].astype(np.int32), values[a:b])
             for a, b in ((0, 6_000), (6_000, 6_001), (6_001, 20_000))]
    previous = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        placed = subgraph.out_edge_values(out_offsets, pages, np.float64)
    finally:
        numba.set_num_threads(previous)
    np.testing.assert_array_equal(placed, values[np.argsort(sources, kind="stable")])


@pytest.mark.parametrize("piece_edges", [7, subgraph.PIECE_EDGES])
def test_gather_active_edges_against_numpy(paged, piece_edges):
    """Short pieces are walked edge by edge, long ones (sorted) page by page."""
    first, end = page_ranges(paged)
    values = subgraph.store_out_edge_values(paged)
    rng = np.random.default_rng(2)
    for size, pages in ((1, [0]), (50, [1, 2, 5]), (300, list(range(0, len(paged.pages), 2))),
                        (paged.num_vertices, list(range(len(paged.pages))))):
        frontier = np.sort(rng.choice(paged.num_vertices, size, replace=False)).astype(np.int64)
        range_first, range_end = transfer.pushed_ranges(first, end, np.array(pages))
        pushed = np.zeros(len(paged.pages), bool)
        pushed[pages] = True
        lookup = subgraph.PageLookup(first, end, paged.num_vertices)

        def allocate(sizes):
            return {"sources": np.empty(sizes["sources"], np.int64),
                    "offsets": np.empty(sizes["offsets"], np.int64),
                    "targets": np.empty(sizes["targets"], paged.vertex_dtype),
                    "weights": np.empty(sizes["weights"], paged.weight_dtype)}

        pieces = subgraph.frontier_pieces(frontier, paged.out_offsets, piece_edges=piece_edges)
        sub = subgraph.gather_active_edges(frontier, paged.out_offsets, paged.out_targets,
                                           values, lookup, pushed, allocate, 4, pieces)
        inside = np.zeros(paged.num_vertices, bool)
        for lo, hi in zip(range_first.tolist(), range_end.tolist()):
            inside[lo:hi] = True
        # each vertex's kept edges, its pieces joined in order
        got_targets, got_weights = {}, {}
        for i, u in enumerate(sub["sources"].tolist()):
            a, b = sub["offsets"][i], sub["offsets"][i + 1]
            got_targets.setdefault(u, []).extend(sub["targets"][a:b].tolist())
            got_weights.setdefault(u, []).extend(sub["weights"][a:b].tolist())
        total = 0
        for u in frontier.tolist():
            lo, hi = paged.out_offsets[u], paged.out_offsets[u + 1]
            keep = inside[paged.out_targets[lo:hi]]
            assert got_targets.get(u, []) == paged.out_targets[lo:hi][keep].tolist()
            assert got_weights.get(u, []) == values[lo:hi][keep].tolist()
            total += int(keep.sum())
        assert set(got_targets) <= set(frontier.tolist())
        assert sub["edges"] == total == sub["offsets"][-1]
        without = subgraph.gather_active_edges(frontier, paged.out_offsets, paged.out_targets,
                                               None, lookup, pushed, allocate, 2)
        assert without["weights"] is None
        np.testing.assert_array_equal(without["targets"], sub["targets"])


def test_frontier_pieces_cut_hubs():
    offsets = np.array([0, 3, 3, 20, 21], np.int64)
    vertex, begin, end = subgraph.frontier_pieces(np.array([0, 1, 2, 3]), offsets, piece_edges=8)
    assert vertex.tolist() == [0, 2, 2, 2, 3]       # vertex 1 has no out-edge
    assert begin.tolist() == [0, 3, 11, 19, 20]
    assert end.tolist() == [3, 11, 19, 20, 21]


def test_page_lookup_finds_every_page_of_a_vertex(paged):
    first, end = page_ranges(paged)
    for buckets in (1 << 16, 16, 1):
        lookup = subgraph.PageLookup(first, end, paged.num_vertices, buckets)
        assert lookup.shift > 0 or buckets > 16
        for v in range(paged.num_vertices):
            p = int(lookup.table[v >> lookup.shift])
            while p + 1 < first.size and first[p + 1] <= v:
                p += 1
            assert p == np.searchsorted(first, v, side="right") - 1


def test_pushed_ranges_merge_neighbours():
    first = np.array([0, 10, 19, 30, 40])
    end = np.array([10, 20, 30, 40, 50])
    got = transfer.pushed_ranges(first, end, np.array([0, 1, 2, 4]))
    np.testing.assert_array_equal(got[0], [0, 40])
    np.testing.assert_array_equal(got[1], [30, 50])
    assert transfer.pushed_ranges(first, end, np.array([], np.int64))[0].size == 0


# -- residency -----------------------------------------------------------------------
@pytest.mark.parametrize("order", ["edges", "order"])
def test_partial_residency_never_exceeds_the_budget(order):
    rng = np.random.default_rng(3)
    sizes = rng.integers(1000, 5000, 40).tolist()
    edges = [s // rng.integers(4, 12) for s in sizes]
    vertex_bytes, streams = 20_000, 4
    for budget in range(vertex_bytes + streams * max(sizes), vertex_bytes + sum(sizes) + 5000,
                        1777):
        plan = plan_pages(sizes, vertex_bytes, budget, streams, page_edges=edges,
                          selective_bytes=3000, order=order)
        used = vertex_bytes + plan.page_bytes + plan.selective_bytes
        assert used <= budget
        if plan.resident:
            assert plan.resident_pages.all()
        else:
            kept = np.asarray(sizes)[plan.resident_pages].sum()
            assert plan.page_bytes == streams * max(sizes) + kept
            # greedy: what is left fits no page that was passed over
            left = budget - used
            assert all(s > left for s, r in zip(sizes, plan.resident_pages) if not r)


def test_residency_by_edges_per_byte_and_in_order():
    sizes, edges = [100, 100, 100, 100], [10, 40, 30, 20]
    np.testing.assert_array_equal(transfer.resident_pages(sizes, edges, 200, "edges"),
                                  [False, True, True, False])
    np.testing.assert_array_equal(transfer.resident_pages(sizes, edges, 200, "order"),
                                  [True, True, False, False])
    with pytest.raises(ConfigError, match="GPU_RESIDENT_ORDER"):
        transfer.resident_pages(sizes, edges, 200, "degree")


def test_selective_arrays_that_do_not_fit_leave_plain_streaming():
    plan = plan_pages([400, 400, 400], 100, 1000, 2, selective_bytes=500)
    assert not plan.resident and plan.selective_bytes == 0 and plan.n_streams == 2
    plan = plan_pages([400, 400, 400], 100, 1000, 2, selective_bytes=50)
    assert plan.selective_bytes == 50 and plan.streamed_pages == 3
    with pytest.raises(GpuMemoryError):
        plan_pages([400, 400], 100, 450, 2)


# -- the choice -------------------------------------------------------------------------
RATES = transfer.TransferRates(bus=20e9, gather=1e9, zero_copy=8e9)
BYTES = transfer.edge_bytes(4, 4)


def choose(active, **options):
    page_bytes = np.full(len(active), 64 << 20)
    resident = np.zeros(len(active), bool)
    resident[options.pop("resident", [])] = True
    return transfer.choose_transfers(np.array(active), page_bytes, resident, RATES,
                                     exact=options.pop("exact", True), bytes_per_edge=BYTES,
                                     **options)


def test_unreached_pages_are_skipped_and_full_ones_copied():
    choices, summary = choose([0, 50_000_000, 10, 0], resident=[3])
    assert choices[0] == SKIP and choices[1] == COPY and choices[3] == SKIP
    assert choices[2] in (COMPACT, ZERO_COPY)
    assert summary["skip"] == 2 and summary["copy"] == 1
    assert summary["seconds"] > (64 << 20) / RATES.bus


def test_few_active_edges_go_compacted_or_zero_copy_by_the_rates():
    # gathering is slow next to zero-copy reads: zero-copy
    slow_gather = transfer.TransferRates(bus=20e9, gather=1e7, zero_copy=8e9)
    choices, _ = transfer.choose_transfers(np.array([1000, 2000]), np.full(2, 64 << 20),
                                           np.zeros(2, bool), slow_gather, exact=True,
                                           bytes_per_edge=BYTES)
    assert (choices == ZERO_COPY).all()
    # zero-copy slow: compacted
    slow_reads = transfer.TransferRates(bus=20e9, gather=1e9, zero_copy=1e6)
    choices, _ = transfer.choose_transfers(np.array([1000, 2000]), np.full(2, 64 << 20),
                                           np.zeros(2, bool), slow_reads, exact=True,
                                           bytes_per_edge=BYTES)
    assert (choices == COMPACT).all()


def test_zero_copy_pays_for_reading_every_active_target():
    fast = transfer.TransferRates(bus=20e9, gather=1e6, zero_copy=8e9)
    cheap = transfer.choose_transfers(np.array([1000, 0]), np.full(2, 1 << 20),
                                      np.zeros(2, bool), fast, exact=True, bytes_per_edge=BYTES,
                                      total_active_edges=1000)[0]
    assert cheap[0] == ZERO_COPY
    # the frontier's other edges (into resident pages) are read too: a copy is cheaper
    costly = transfer.choose_transfers(np.array([1000, 0]), np.full(2, 1 << 20),
                                       np.zeros(2, bool), fast, exact=True, bytes_per_edge=BYTES,
                                       total_active_edges=10_000_000)[0]
    assert costly[0] == COPY


def test_the_compacted_buffer_takes_the_pages_that_save_most():
    choices, _ = choose([1000, 100, 5000], forced="compact", compact_capacity=5100)
    assert choices.tolist() == [COPY, COMPACT, COMPACT] or \
        choices.tolist() == [COMPACT, COMPACT, COPY]
    assert int(np.array([1000, 100, 5000])[choices == COMPACT].sum()) <= 5100


@pytest.mark.parametrize("forced,code", [("compact", COMPACT), ("zero-copy", ZERO_COPY),
                                         ("skip", COPY)])
def test_forced_choices(forced, code):
    choices, _ = choose([0, 30, 50_000_000], resident=[], forced=forced)
    assert choices.tolist() == [SKIP, code, code]


def test_copy_forced_or_a_program_that_is_not_exact_copies_every_page():
    for options in ({"forced": "copy"}, {"exact": False}):
        choices, _ = choose([0, 30, 5], resident=[1], **options)
        assert choices.tolist() == [COPY, RESIDENT, COPY]
    with pytest.raises(ConfigError, match="GPU_TRANSFER"):
        choose([1], forced="sometimes")


def test_uncounted_frontier_copies_every_streamed_page():
    choices, _ = transfer.choose_transfers(None, np.full(3, 100), np.array([True, False, False]),
                                           RATES, exact=True)
    assert choices.tolist() == [RESIDENT, COPY, COPY]


def test_counting_pays_only_for_a_small_frontier():
    bus, gather = 20e9, 1e9
    streamed = 1 << 30
    assert decisions.count_active_edges(1000, streamed, bus, gather)
    assert not decisions.count_active_edges(100_000_000, streamed, bus, gather)
    assert decisions.count_active_edges(100_000_000, streamed, bus, gather, forced="compact")
    assert not decisions.count_active_edges(10, streamed, bus, gather, forced="copy")
    # a frontier of too many vertices is never counted, forced or not
    assert not decisions.count_active_edges(10, streamed, bus, gather, forced="compact",
                                            active_vertices=101, most_vertices=100)
    assert decisions.count_active_edges(10, streamed, bus, gather, active_vertices=100,
                                        most_vertices=100)


def test_selective_transfers_only_for_exact_programs_on_the_gpu_alone():
    assert decisions.selective_transfers(True, False)
    assert not decisions.selective_transfers(False, False)
    assert not decisions.selective_transfers(True, True)
    assert not decisions.selective_transfers(True, False, forced="copy")


def test_resident_pages_choose_per_page_only_without_room_for_the_device_loop():
    # the loop's arrays fit: it runs the sparse iterations
    assert not decisions.resident_selective(loop_bytes=100, selective_bytes=10, free_bytes=100)
    # they do not, the selective arrays do
    assert decisions.resident_selective(loop_bytes=101, selective_bytes=10, free_bytes=100)
    assert decisions.resident_selective(loop_bytes=101, selective_bytes=100, free_bytes=100)
    # neither fits, or the program has no selective arrays
    assert not decisions.resident_selective(loop_bytes=101, selective_bytes=101, free_bytes=100)
    assert not decisions.resident_selective(loop_bytes=101, selective_bytes=0, free_bytes=100)


def test_rates_learn_from_long_enough_measurements():
    rates = transfer.TransferRates(bus=10e9)
    assert not rates.learn("bus", 1e6, 1e-6)
    assert rates.bus == 10e9
    assert rates.learn("bus", 30e9, 1.0, smoothing=0.5)
    assert rates.bus == pytest.approx(20e9)
    assert set(rates.as_dict()) == {"bus", "gather", "zero_copy", "count", "pull",
                                    "packed_pull"}
    assert config.GPU_TRANSFER in transfer.FORCED_CHOICES


def test_the_pinned_out_edges_are_the_stores_and_made_once(paged, monkeypatch):
    """:func:`pinned_out_edges` with host memory standing for pinned memory."""
    from garaphpy.kernels import gpu as gpu_kernels
    from garaphpy.scheduler import gpu_engine

    monkeypatch.setattr(gpu_kernels, "pinned_empty", lambda nbytes: np.empty(nbytes, np.uint8))
    offsets, targets, values = gpu_engine.pinned_out_edges(paged, with_values=False)
    assert values is None
    np.testing.assert_array_equal(offsets, paged.out_offsets)
    np.testing.assert_array_equal(targets, paged.out_targets)
    again = gpu_engine.pinned_out_edges(paged, with_values=True)
    assert again[0] is offsets and again[1] is targets      # kept for the store
    np.testing.assert_array_equal(again[2], subgraph.store_out_edge_values(paged))
    assert gpu_engine.pinned_out_edges(paged, with_values=True)[2] is again[2]


def test_kept_pages_push_a_sparse_frontier_and_pull_a_dense_one():
    """A page kept on the device is pulled unless pushing its active edges
    costs less (given its pull's price); unreached, it is skipped."""
    rates = transfer.TransferRates(bus=10e9, gather=1e9, zero_copy=10e9)
    kept = np.array([True, True, True, False])
    page_bytes = np.full(4, 10 ** 8, np.int64)
    pull = np.array([1e-3, 1e-3, 1e-3, 0.0])
    active = np.array([100, 10 ** 8, 0, 100], np.int64)
    choices, predicted = transfer.choose_transfers(active, page_bytes, kept, rates, exact=True,
                                                   pull_seconds=pull)
    assert choices[0] in (COMPACT, ZERO_COPY)       # 100 edges: less than its pull
    assert choices[1] == RESIDENT                   # 10^8 edges: the pull is cheaper
    assert choices[2] == SKIP
    assert choices[3] in (COMPACT, ZERO_COPY)
    assert predicted["seconds"] >= 1e-3             # the pull it keeps is priced
    # without the pulls' prices, kept pages are pulled whenever reached (as before)
    choices = transfer.choose_transfers(active, page_bytes, kept, rates, exact=True)[0]
    assert choices[:3].tolist() == [RESIDENT, RESIDENT, SKIP]
    # a forced choice leaves kept pages to their pull
    for forced, code in (("compact", COMPACT), ("zero-copy", ZERO_COPY)):
        choices = transfer.choose_transfers(active, page_bytes, kept, rates, exact=True,
                                            forced=forced, pull_seconds=pull)[0]
        assert choices.tolist() == [RESIDENT, RESIDENT, SKIP, code]


def test_counting_pays_for_the_kept_pages_pulls_too():
    # nothing streams: counting is worth it only for the pulls it may spare
    assert not decisions.count_active_edges(10 ** 6, 0, 10e9, 1e9)
    assert decisions.count_active_edges(10 ** 6, 0, 10e9, 1e9, kept_pull_seconds=0.01)
    assert not decisions.count_active_edges(10 ** 6, 0, 10e9, 1e9, kept_pull_seconds=0.001)


def test_counts_walk_sorted_pieces_page_by_page_and_unsorted_ones_edge_by_edge(paged):
    first, end = page_ranges(paged)
    lookup = subgraph.PageLookup(first, end, paged.num_vertices)
    offsets = np.asarray(paged.out_offsets, np.int64)
    targets = np.asarray(paged.out_targets)
    assert subgraph.targets_sorted(offsets, targets)
    degree = np.diff(offsets)
    assert degree.max() >= 4 * subgraph.SORTED_RUN_EDGES      # hubs' pieces go page by page
    rng = np.random.default_rng(4)
    shuffled = targets.copy()
    for u in np.flatnonzero(degree > 1).tolist():
        rng.shuffle(shuffled[offsets[u]:offsets[u + 1]])
    assert not subgraph.targets_sorted(offsets, shuffled)
    for size in (1, 30, paged.num_vertices):
        frontier = np.union1d(rng.choice(paged.num_vertices, size, replace=False),
                              np.argsort(-degree)[:3]).astype(np.int64)
        expected = np.zeros(len(paged.pages), np.int64)
        for u in frontier.tolist():
            for v in targets[offsets[u]:offsets[u + 1]].tolist():
                expected[(first <= v) & (v < end)] += 1
        for csr, flag in ((targets, True), (targets, None), (shuffled, None),
                          (targets, False)):
            counts = subgraph.page_active_edges(frontier, offsets, csr, lookup, 3,
                                                sorted_targets=flag)
            np.testing.assert_array_equal(counts, expected)


def test_count_work_caps_each_sorted_vertex_at_a_few_steps_per_page(paged):
    offsets = np.asarray(paged.out_offsets, np.int64)
    degree = np.diff(offsets)
    frontier = np.argsort(-degree)[:50].astype(np.int64)
    pages = len(paged.pages)
    cap = subgraph.PAGE_STEPS * pages
    per_vertex = subgraph.VERTEX_STEPS * frontier.size
    assert degree[frontier].max() > cap
    assert subgraph.count_work(frontier, offsets, pages, True) == \
        int(np.minimum(degree[frontier], cap).sum()) + per_vertex
    assert subgraph.count_work(frontier, offsets, pages, False) == \
        int(degree[frontier].sum()) + per_vertex
    # vertices without edges still cost their steps
    isolated = np.flatnonzero(degree == 0)[:7].astype(np.int64)
    assert subgraph.count_work(isolated, offsets, pages, True) == \
        subgraph.VERTEX_STEPS * isolated.size


def test_frontier_pieces_reuse_their_buffers(paged):
    offsets = np.asarray(paged.out_offsets, np.int64)
    buffers = subgraph.PieceBuffers()
    rng = np.random.default_rng(5)
    for size in (40, 400, 10, 0, 400):
        frontier = np.sort(rng.choice(paged.num_vertices, size, replace=False)).astype(np.int64)
        expected = subgraph.frontier_pieces(frontier, offsets, piece_edges=3)
        got = subgraph.frontier_pieces(frontier, offsets, piece_edges=3, buffers=buffers,
                                       chunks=7)
        for a, b in zip(expected, got):
            np.testing.assert_array_equal(a, b)


def test_the_counts_are_compiled_for_the_runs_types_at_set_up(paged):
    first, end = page_ranges(paged)
    lookup = subgraph.PageLookup(first, end, paged.num_vertices)
    # targets of a type no other count uses: compiled here, not at a first iteration
    targets = np.asarray(paged.out_targets).astype(np.uint16)
    subgraph.compile_counts(np.asarray(paged.out_offsets, np.int64), targets, lookup, True)
    assert any(str(signature[2]).startswith("array(uint16")
               for signature in subgraph._page_counts.signatures)
    assert subgraph._frontier_work.signatures and subgraph._chunk_pieces.signatures
    # a graph without vertices has nothing to count
    subgraph.compile_counts(np.zeros(1, np.int64), targets[:0], lookup, True)


@pytest.mark.parametrize("size", [1, 13, subgraph.SERIAL_PIECES, subgraph.SERIAL_PIECES + 1])
def test_small_counts_run_on_one_thread_and_agree(paged, size, monkeypatch):
    first, end = page_ranges(paged)
    lookup = subgraph.PageLookup(first, end, paged.num_vertices)
    frontier = np.arange(min(size, paged.num_vertices), dtype=np.int64)
    threads_seen = []
    original = subgraph._threads_for

    @contextlib.contextmanager
    def watched(items):
        with original(items):
            threads_seen.append(numba.get_num_threads())
            yield

    monkeypatch.setattr(subgraph, "_threads_for", watched)
    before = numba.get_num_threads()
    counts = subgraph.page_active_edges(frontier, paged.out_offsets, paged.out_targets, lookup, 3)
    work = subgraph.count_work(frontier, paged.out_offsets, len(paged.pages), True)
    assert numba.get_num_threads() == before
    # frontier_pieces and count_work by vertices; page_active_edges by pieces (one or
    # more a vertex with out-edges, none for the others)
    assert len(threads_seen) == 3
    pieces = int(np.sum(-(-np.diff(paged.out_offsets)[frontier] // subgraph.PIECE_EDGES)))
    by_vertices = 1 if size <= subgraph.SERIAL_PIECES else before
    assert threads_seen == [by_vertices, 1 if pieces <= subgraph.SERIAL_PIECES else before,
                            by_vertices]
    expected = np.zeros(len(paged.pages), np.int64)
    for u in frontier.tolist():
        for v in paged.out_targets[paged.out_offsets[u]:paged.out_offsets[u + 1]].tolist():
            expected[(first <= v) & (v < end)] += 1
    np.testing.assert_array_equal(counts, expected)
    assert work >= subgraph.VERTEX_STEPS * frontier.size


def test_selective_arrays_deferred_only_when_they_would_displace_kept_pages():
    assert decisions.defer_selective_arrays("auto", packed_streams=True, displaced_bytes=1)
    assert not decisions.defer_selective_arrays("auto", packed_streams=True, displaced_bytes=0)
    # a forced choice is studied as it was planned; a page that streams unpacked
    # has no packed host image to stream from once released
    assert not decisions.defer_selective_arrays("compact", packed_streams=True,
                                                displaced_bytes=1)
    assert not decisions.defer_selective_arrays("auto", packed_streams=False,
                                                displaced_bytes=1)
    assert not decisions.defer_selective_arrays("auto", True, 1, enabled=False)
    assert decisions.make_selective_arrays(active_vertices=100, most_vertices=100)
    assert not decisions.make_selective_arrays(active_vertices=101, most_vertices=100)


def test_selective_arrays_made_when_a_pass_would_not_save_never():
    # a selective pass dearer than the dense one: no rent, never made
    assert decisions.selective_pays(1e-3, 2e-3, 0.0, rent=0.0, tail=True) == (False, 0.0)
    assert decisions.selective_pays(1e-3, 1e-3, 0.0, rent=5.0, tail=False) == (False, 5.0)


def test_selective_arrays_made_at_once_in_the_tail():
    """Once the frontier has been larger than it is, no dense iteration is
    expected: any saving pays for the released pages."""
    make, rent = decisions.selective_pays(2e-3, 1.5e-3, released_seconds=1.0, rent=0.0,
                                          tail=True, dense_iterations=2)
    assert make and rent == pytest.approx(0.5e-3)


@pytest.mark.parametrize("saving, released, expected_day", [
    (1.0, 3.0, 6),       # 2 dense iterations of 3 s: six savings of 1 s buy it
    (0.8, 2.0, 5),       # 4 / 0.8
    (10.0, 2.0, 1),      # a saving larger than the price: at once
    (0.5, 0.0, 1),       # nothing released: at once
])
def test_selective_arrays_rent_until_the_savings_forgone_buy_them(saving, released,
                                                                  expected_day):
    """Before the tail: the arrays are made at the first sparse iteration at
    which the savings forgone so far reach the released pages' copies in the
    dense iterations expected, never later, and with what a slower rise
    forgoes adding up; so the run pays at most about twice what the better
    choice in hindsight costs."""
    rent, day = 0.0, 0
    made = False
    while not made:
        day += 1
        made, rent = decisions.selective_pays(1.0 + saving, 1.0, released, rent, tail=False,
                                              dense_iterations=2)
        assert rent == pytest.approx(day * saving)
        assert day <= 100
    assert day == expected_day
    price = 2 * released
    forgone = (day - 1) * saving
    assert forgone < price or price == 0
    # what was paid (the savings forgone, then the price) against either choice alone
    assert forgone + price <= 2 * max(price, saving) + saving


@pytest.mark.parametrize("seed", range(4))
def test_pages_kept_until_sparse_are_streamed_ones_in_the_room(seed):
    rng = np.random.default_rng(seed)
    count = 30
    packed_sizes = rng.integers(1000, 3000, count)
    edges = rng.integers(100, 1000, count)
    kept = rng.random(count) < 0.4
    for room in [-1, 0, 999, 5000, 20_000, int(packed_sizes.sum())]:
        extra = transfer.pages_kept_until_sparse(kept, packed_sizes, edges, room)
        assert not np.any(extra & kept)
        assert packed_sizes[extra].sum() <= max(room, 0)
        streamed = np.flatnonzero(~kept)
        # the same as the resident choice over the streamed pages alone
        expected = transfer.resident_pages(packed_sizes[streamed], edges[streamed], room) \
            if room > 0 else np.zeros(streamed.size, bool)
        assert np.array_equal(extra[streamed], expected)
        left_out = ~kept & ~extra
        if left_out.any() and room > 0:  # greedy: what is left out did not fit
            assert packed_sizes[left_out].min() > room - packed_sizes[extra].sum()


@pytest.mark.parametrize("budget_share", [0.3, 0.45, 0.6, 0.8])
def test_a_deferred_plan_is_the_plan_with_the_arrays_room_once_released(budget_share):
    """The engine's steps: the plan made with the selective arrays' room, the
    pages kept packed in that room until the arrays are made; before, the
    budget holds them; after their release, the plan is the one made with
    the arrays' room, and the arrays fit."""
    rng = np.random.default_rng(3)
    sizes = rng.integers(3000, 5000, 24).tolist()
    packed_sizes = [int(size * 0.55) for size in sizes]
    edges = rng.integers(500, 1000, 24).tolist()
    vertex, selective = 20_000, 9_000
    budget = int(vertex + budget_share * sum(sizes))
    plan = plan_pages(sizes, vertex, budget, 4, selective_bytes=selective, page_edges=edges,
                      packed_sizes=packed_sizes, raw_buffers=False)
    kept = plan.resident_pages | plan.packed_pages
    room = plan.budget - plan.vertex_bytes - plan.page_bytes
    extra = transfer.pages_kept_until_sparse(kept, packed_sizes, edges, room)
    extra_bytes = int(np.asarray(packed_sizes)[extra].sum())
    if plan.selective_bytes and not kept.all():
        assert extra.any()
        assert room >= selective
    # before: more kept, within the budget; after: the arrays beside the plan's pages
    assert plan.vertex_bytes + plan.page_bytes + extra_bytes <= budget
    assert plan.vertex_bytes + plan.page_bytes + plan.selective_bytes <= budget


# -- the next iteration's copies queued ahead -------------------------------------------------
class _Pages:
    """A page source that holds the pages ``cached`` in pinned host memory."""

    def __init__(self, cached):
        self.cached = set(cached)

    def is_cached(self, k):
        return k in self.cached


def _queueing_engine(kept, packed_host, cached, streams=3):
    """A page store without a GPU, with what :meth:`PageStore.prefetch_next_copies`
    reads; its copies are recorded, not made."""
    from types import SimpleNamespace

    from garaphpy.scheduler.gpu.page_store import PageStore

    pages = PageStore.__new__(PageStore)
    pages.cupy = SimpleNamespace(cuda=SimpleNamespace(Event=object))
    pages.streams = [object()] * streams
    pages.plan = SimpleNamespace(resident=False)
    pages.resident_images = {k: None for k in kept}
    pages.packed_images = {}
    pages.packed_host = {k: None for k in packed_host}
    pages.page_source = _Pages(cached)
    pages.queued = []
    pages.queue_copy = lambda k, slot, timing, start, end: pages.queued.append((k, slot))
    return pages


def test_the_next_iterations_first_copy_of_each_buffer_is_queued_ahead():
    from garaphpy.scheduler.gpu_engine import interleave, stream_slots

    kept = [1, 4, 6]
    copied = [k for k in range(10) if k not in kept]
    engine = _queueing_engine(kept, packed_host=copied[::2], cached=range(10))
    is_kept = np.isin(np.arange(10), kept)
    order = interleave(copied, kept)
    slots = stream_slots(order, is_kept, 3)
    engine.prefetch_next_copies(order, slots)
    # the copied pages in launch order take the buffers in turn: the first three
    first = [(k, s) for k, s in zip(order, slots) if k in copied][:3]
    assert engine.queued == first and [s for _, s in first] == [0, 1, 2]
    assert {slot: timing.page for slot, timing in engine.prefetched.items()} == {
        s: k for k, s in first}


def test_queueing_ahead_stops_at_a_page_read_from_storage():
    from garaphpy.scheduler.gpu_engine import stream_slots

    order = [0, 1, 2, 3]
    slots = stream_slots(order, np.zeros(4, bool), 4)
    # page 1 streams as stored and is not held in host memory: its copy waits for a read
    engine = _queueing_engine([], packed_host=[2], cached=[0, 3], streams=4)
    engine.prefetch_next_copies(order, slots)
    assert engine.queued == [(0, 0)]
    # a packed page is in pinned host memory whatever the page source holds
    engine = _queueing_engine([], packed_host=[0, 1, 2, 3], cached=[], streams=4)
    engine.prefetch_next_copies(order, slots)
    assert engine.queued == [(0, 0), (1, 1), (2, 2), (3, 3)]


# ---------------------------------------------------- pages read from disk first --
def test_a_copy_from_disk_costs_its_read():
    """A page of many active edges is copied from the host's memory, but pushed
    from the out-edges in host memory when its copy must wait for a read from
    disk that takes longer than the push (by hand: 50M edges at 1 GB/s of
    gather and 8 bytes over the bus take 0.07 s; 64 MiB at 20 GB/s 3.4 ms, at
    a disk of 0.5 GB/s 0.13 s more)."""
    active = [0, 50_000_000, 50_000_000]
    read = np.array([0.0, 0.0, (64 << 20) / 0.5e9])
    choices, summary = choose(active, read_seconds=read, pushes=(COMPACT,))
    assert choices.tolist() == [SKIP, COPY, COMPACT]
    plain, _ = choose(active, pushes=(COMPACT,))
    assert plain.tolist() == [SKIP, COPY, COPY]
    # a page unreached is skipped whatever its read would cost
    skipped, _ = choose([0, 0], read_seconds=np.array([1.0, 1.0]))
    assert (skipped == SKIP).all()


def test_the_count_pays_where_it_spares_reads_from_disk():
    """10M edges counted at 1G a second take 10 ms: not worth it against copies of
    1 ms over the bus, worth it where 100 ms of reads from disk may be spared."""
    assert not decisions.count_active_edges(10 ** 7, 10 ** 7, 10e9, 1e9)
    assert decisions.count_active_edges(10 ** 7, 10 ** 7, 10e9, 1e9, read_seconds=0.1)
    assert not decisions.count_active_edges(10 ** 7, 10 ** 7, 10e9, 1e9, read_seconds=0.005)


class _Source:
    """A page source from disk holding the pages ``cached`` in its host budget."""

    reads_storage = True

    def __init__(self, cached, count):
        self.cached = set(cached)
        self.count = count

    def is_cached(self, k):
        return k in self.cached

    def cached_mask(self):
        return np.isin(np.arange(self.count), list(self.cached))


def _read_store(count, resident=False, kept=(), packed_kept=(), packed_host=(), cached=()):
    """A page store without a GPU, with what :func:`page_read_seconds` reads."""
    from types import SimpleNamespace

    from garaphpy.scheduler.gpu.page_store import PageStore

    pages = PageStore.__new__(PageStore)
    pages.pages = [None] * count
    pages.plan = SimpleNamespace(resident=resident)
    pages.resident_images = dict.fromkeys(kept)
    pages.packed_images = dict.fromkeys(packed_kept)
    pages.packed_host = dict.fromkeys(packed_host)
    pages.page_source = _Source(cached, count)
    return pages


def _read_seconds_one_by_one(page_store, disk_bytes, disk_speed):
    """The reference: page by page, through ``copied`` and ``is_cached``."""
    seconds = np.zeros(len(disk_bytes))
    for k in range(len(disk_bytes)):
        if page_store.copied(k) and k not in page_store.packed_host \
                and not page_store.page_source.is_cached(k):
            seconds[k] = disk_bytes[k] / disk_speed
    return seconds


def test_only_pages_in_neither_budget_wait_for_a_read():
    from garaphpy.scheduler.gpu.selective import page_read_seconds

    disk_bytes = 1000.0 * np.arange(1, 7)
    store = _read_store(6, kept={2}, packed_host={3}, cached={1})
    seconds = page_read_seconds(store, disk_bytes, 1e6)
    # 0, 4 and 5 come from disk; 1 the host caches, 2 the GPU keeps, 3 is packed in pinned memory
    np.testing.assert_allclose(seconds, [1e-3, 0, 0, 0, 5e-3, 6e-3])
    assert not page_read_seconds(store, disk_bytes, None).any()


@pytest.mark.parametrize("seed", range(6))
def test_read_seconds_are_the_page_by_page_rule(seed):
    from garaphpy.scheduler.gpu.selective import page_read_seconds

    rng = np.random.default_rng(seed)
    count = int(rng.integers(1, 40))

    def some(share):
        return set(np.flatnonzero(rng.random(count) < share).tolist())

    store = _read_store(count, resident=bool(seed == 5), kept=some(0.3),
                        packed_kept=some(0.2), packed_host=some(0.2), cached=some(0.3))
    assert store.copied_mask().tolist() == [store.copied(k) for k in range(count)]
    disk_bytes = rng.integers(1, 10**6, count).astype(np.float64)
    np.testing.assert_array_equal(page_read_seconds(store, disk_bytes, 3e8),
                                  _read_seconds_one_by_one(store, disk_bytes, 3e8))
