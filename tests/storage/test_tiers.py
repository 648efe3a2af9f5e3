"""Three tiers of pages, one placement (Garaph section 2.2): GPU, host budget, disk.

:func:`~garaphpy.storage.tiers.place_pages` puts each page in one tier: the
GPU's kept pages never in the host's budget, the host's room filled with
the others (a prefix in page order, or the pages of highest reuse), and
never over its room.  :class:`~garaphpy.storage.host_pages.HostPages`
revises its pages between iterations by the pages asked for, so a moving
frontier's pages come to stay in memory, and an iteration reads from disk
only the pages it asks for that are in neither budget, each once.  The
references are brute force over the pages and the edges (NumPy, loops).
"""

from __future__ import annotations

import itertools
import threading
import time

import numpy as np
import pytest

from garaphpy import config
from garaphpy.storage import decisions
from garaphpy.storage.host_budget import cache_beside, plan_host_cache
from garaphpy.storage.page_source import InMemoryPages
from garaphpy.storage.tiers import DISK, GPU, HOST, PageReuse, place_pages, revised_placement

from references import notified_vertices, pages_with_active_in_edges
from helpers import make_pages
from helpers import build_striped_store as build


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return build(tmp_path_factory.mktemp("tiers"))


@pytest.fixture
def pages(store):
    paged = make_pages(store)
    yield paged
    paged.close()


# -------------------------------------------------------------- the placement --
SIZES = [300, 500, 200, 400, 100, 600, 250, 350]


@pytest.mark.parametrize("room", [0, 99, 100, 700, 1000, 1500, 10_000])
@pytest.mark.parametrize("kept", [(), (0,), (1, 4), (0, 1, 2, 3, 4, 5, 6, 7)])
def test_without_reuse_the_host_holds_the_prefix_the_gpu_does_not_keep(room, kept):
    placement = place_pages(SIZES, room, kept)
    assert set(placement.pages(GPU).tolist()) == set(kept)
    host = placement.pages(HOST).tolist()
    assert not set(host) & set(kept)
    assert placement.host_bytes <= room
    # the reference: the longest prefix of the others that fits, by hand
    others = [k for k in range(len(SIZES)) if k not in kept]
    prefix, used = [], 0
    for k in others:
        if used + SIZES[k] > room:
            break
        prefix.append(k)
        used += SIZES[k]
    assert host == prefix
    assert sorted(placement.pages(DISK).tolist()) == [k for k in others if k not in prefix]


def test_without_reuse_the_placement_is_the_host_cache_beside_the_gpu():
    """The same pages as cache_beside, which the run's plan used before."""
    fixed, readahead = 1000, 300
    for room in (0, 450, 900, 2000):
        plan = plan_host_cache(SIZES, fixed, readahead, fixed + readahead + room)
        for kept in ((), (0, 2), (5,)):
            beside = cache_beside(plan, SIZES, kept)
            placement = place_pages(SIZES, room, kept)
            assert placement.pages(HOST).tolist() == list(beside.cached)


@pytest.mark.parametrize("seed", range(6))
def test_with_reuse_the_host_holds_the_pages_most_likely_asked_for(seed):
    """Equal pages: the host holds exactly the ``room // size`` pages of
    highest score among those the GPU does not keep (ties in page order)."""
    rng = np.random.default_rng(seed)
    n, size = 20, 1000
    scores = rng.choice([0.0, 0.25, 0.5, 1.0], n)
    kept = rng.choice(n, 4, replace=False)
    room = int(rng.integers(0, n)) * size + int(rng.integers(0, size))
    placement = place_pages([size] * n, room, kept, reuse=scores)
    others = [k for k in range(n) if k not in set(kept.tolist())]
    expected = sorted(sorted(others, key=lambda k: (-scores[k], k))[:room // size])
    assert placement.pages(HOST).tolist() == expected
    assert set(placement.pages(GPU).tolist()) == set(kept.tolist())
    assert placement.host_bytes <= room


def test_with_reuse_a_page_too_large_is_passed_over_for_the_next():
    placement = place_pages([100, 900, 100, 100], 300, reuse=np.array([1.0, 1.0, 0.5, 0.0]))
    assert placement.pages(HOST).tolist() == [0, 2, 3]


def test_with_reuse_ties_keep_the_current_host_pages():
    sizes, scores = [100] * 6, np.ones(6)
    first = place_pages(sizes, 200, reuse=np.zeros(6))
    assert first.pages(HOST).tolist() == [0, 1]
    current = first.tiers.copy()
    current[:] = DISK
    current[[3, 5]] = HOST
    again = place_pages(sizes, 200, reuse=scores, current=current)
    assert again.pages(HOST).tolist() == [3, 5]


def test_with_reuse_the_saving_counts_disk_bytes():
    """A compressed page saves its stored bytes: of two pages asked as often,
    the one with more bytes on disk goes first."""
    placement = place_pages([100, 100], 100, reuse=np.ones(2), disk_bytes=[30, 90])
    assert placement.pages(HOST).tolist() == [1]


def test_bad_placements_are_refused():
    from garaphpy.errors import ConfigError

    with pytest.raises(ConfigError, match="host_room"):
        place_pages(SIZES, -1)
    with pytest.raises(ConfigError, match="gpu_kept"):
        place_pages(SIZES, 100, [len(SIZES)])
    with pytest.raises(ConfigError, match="decay"):
        PageReuse(3, decay=1.0)


def test_disk_reads_are_the_needed_pages_in_neither_budget():
    placement = place_pages(SIZES, 700, (1, 4), disk_bytes=[s // 2 for s in SIZES])
    needed = np.array([True, True, False, True, True, True, False, True])
    reads = placement.disk_reads(needed)
    expected = [k for k in range(len(SIZES)) if needed[k] and placement.tiers[k] == DISK]
    assert reads.tolist() == expected
    assert placement.must_move(needed) == sum(SIZES[k] // 2 for k in expected)
    assert placement.must_move() == sum(SIZES[k] // 2 for k in placement.pages(DISK))
    record = placement.record()
    assert record["gpu_pages"] + record["host_pages"] + record["disk_pages"] == len(SIZES)


# ----------------------------------------------------------- the revision rule --
def test_reuse_scores_follow_the_pages_asked_for():
    reuse = PageReuse(3, decay=0.5)
    reuse.note(np.array([True, False, False]))
    np.testing.assert_allclose(reuse.scores, [1, 0, 0])
    reuse.note(np.array([False, True, False]))
    np.testing.assert_allclose(reuse.scores, [0.5, 0.5, 0])
    reuse.note(np.array([False, True, False]))
    np.testing.assert_allclose(reuse.scores, [0.25, 0.75, 0])


def test_the_rule_revises_only_past_its_gain():
    assert decisions.revise_host_pages(1000, 1200, 100, 1)[0]
    assert not decisions.revise_host_pages(1000, 1050, 100, 1)[0]
    assert not decisions.revise_host_pages(1000, 5000, 100, 0)[0]     # nothing enters
    assert decisions.revise_host_pages(0, 11, 100, 1)[0]
    assert not decisions.revise_host_pages(0, 9, 100, 1)[0]
    choice, inputs = decisions.revise_host_pages(10, 30, 100, 2, min_gain=0.5)
    assert choice and inputs == {"kept_saving_bytes": 10.0, "revised_saving_bytes": 30.0,
                                 "min_gain": 0.5, "entering_pages": 2}


@pytest.mark.parametrize("room", [0, 650, 900, 1700])
def test_every_page_asked_every_iteration_moves_no_host_page_out(room):
    """A pull over every page (PageRank) asks each page as often: no host page
    leaves; a page enters only into room the prefix left, once."""
    placement = place_pages(SIZES, room, (2,))
    reuse = PageReuse(len(SIZES))
    for iteration in range(4):
        reuse.note(np.ones(len(SIZES), bool))
        revised, entry = revised_placement(placement, reuse)
        before = set(placement.pages(HOST).tolist())
        after = set(revised.pages(HOST).tolist())
        assert before <= after and revised.host_bytes <= room
        if iteration:
            assert revised is placement and entry["choice"] is False
        placement = revised


# ------------------------------------------------------- pages of a frontier --
@pytest.mark.parametrize("seed", range(4))
def test_pages_with_active_in_edges_against_every_edge(seed):
    rng = np.random.default_rng(seed)
    n, m = 300, 1500
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    order = np.argsort(src, kind="stable")
    out_offsets = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))])
    out_targets = dst[order]
    bounds = np.unique(np.concatenate([[0, n], rng.integers(1, n, 9)]))
    first, end = bounds[:-1], bounds[1:]
    frontier = np.unique(rng.integers(0, n, int(rng.integers(0, 30))))
    needed = pages_with_active_in_edges(frontier, out_offsets, out_targets, first, end)
    active = np.zeros(n, bool)
    active[frontier] = True
    expected = [any(active[u] and first[p] <= v < end[p] for u, v in zip(src, dst))
                for p in range(len(first))]
    assert needed.tolist() == expected


def test_no_frontier_needs_no_page():
    offsets = np.array([0, 1, 2])
    assert not pages_with_active_in_edges(np.array([], np.int64), offsets, np.array([1, 0]),
                                          np.array([0]), np.array([2])).any()


# -------------------------------------------------- HostPages between iterations --
def walk_pages(pages, asked):
    """One iteration that reads the pages ``asked`` in order; the bytes it read."""
    before = pages.bytes_read
    cursor = pages.cursor(asked)
    try:
        for k in asked:
            cursor.get(k)
    finally:
        cursor.close()
    return pages.bytes_read - before


def test_a_frontier_s_pages_come_to_stay_in_the_host(store, pages):
    count = len(store.pages)
    cached = list(pages.plan.cached)
    room = pages.placement.host_room
    # the frontier's pages: at the far end of the page order, as many as the room holds
    frontier, used = [], 0
    for k in range(count - 1, -1, -1):
        if used + store.pages[k].nbytes > room:
            break
        frontier.insert(0, k)
        used += store.pages[k].nbytes
    assert len(frontier) >= 2 and not set(frontier) & set(cached)
    disk = {k: store.pages[k].disk_bytes for k in range(count)}
    # first iteration: every asked page is on disk only
    assert walk_pages(pages, frontier) == sum(disk[k] for k in frontier)
    entry = pages.end_iteration()
    assert entry["choice"] is True and entry["asked_pages"] == len(frontier)
    assert set(pages.plan.cached) >= set(frontier)
    assert entry["host_pages"] == len(pages.plan.cached)
    # the entering pages are read once more (now into the host) and then stay
    assert walk_pages(pages, frontier) == sum(disk[k] for k in frontier)
    assert pages.end_iteration()["choice"] is False
    assert walk_pages(pages, frontier) == 0
    assert pages.cached_bytes <= room
    # the placement and the plan say the same; no page is in two tiers
    tiers = pages.placement.tiers
    assert set(np.flatnonzero(tiers == HOST).tolist()) == set(pages.plan.cached)
    assert set(pages.plan.cached).isdisjoint(pages.plan.streamed)


def test_each_iteration_reads_only_the_asked_pages_in_neither_budget(store, pages):
    """Against the placement's must-move bytes, iteration by iteration, as the
    frontier moves over the pages (and the host's pages with it)."""
    count = len(store.pages)
    pages.hold_elsewhere([1, 5])      # the GPU keeps two pages
    rng = np.random.default_rng(3)
    for _ in range(8):
        asked = sorted(rng.choice([k for k in range(count) if k not in (1, 5)],
                                  int(rng.integers(1, count - 2)), replace=False).tolist())
        needed = np.zeros(count, bool)
        needed[asked] = True
        # a host page not read yet is read once when asked: it counts as moving once
        unread = [k for k in asked if pages.is_cached(k) and k not in pages._cached]
        expected = pages.placement.must_move(needed) + sum(
            store.pages[k].disk_bytes for k in unread)
        # the last walk's read-ahead for a walk of its pages, dropped, counts too
        dropped = pages.bytes_dropped
        read = walk_pages(pages, asked)
        dropped = pages.bytes_dropped - dropped
        assert read - dropped == expected
        assert dropped <= pages.readahead_bytes
        pages.end_iteration()
        assert not {1, 5} & set(pages.plan.cached)
        assert pages.placement.host_bytes <= pages.placement.host_room


def test_pages_held_here_stay_in_the_host(store, pages):
    count = len(store.pages)
    assert store.pages[0].nbytes + store.pages[count - 1].nbytes <= pages.placement.host_room
    pages.hold_here([0])
    for _ in range(4):
        walk_pages(pages, [count - 1])
        pages.end_iteration()
    assert 0 in pages.plan.cached and count - 1 in pages.plan.cached
    assert 1 not in pages.plan.cached or store.pages[0].nbytes + store.pages[1].nbytes \
        + store.pages[count - 1].nbytes <= pages.placement.host_room


def test_switched_off_nothing_is_revised(store, pages, monkeypatch):
    pages.by_reuse = False
    before = pages.plan
    walk_pages(pages, [len(store.pages) - 1])
    assert pages.end_iteration() is None
    assert pages.plan is before


def test_notified_vertices_against_every_edge():
    rng = np.random.default_rng(5)
    n = 60
    sources, targets = rng.integers(0, n, 400), rng.integers(0, n, 400)
    order = np.argsort(sources, kind="stable")
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(sources, minlength=n), out=offsets[1:])
    frontier = np.flatnonzero(rng.random(n) < 0.2)
    expected = np.zeros(n + 1, bool)
    for u, v in zip(sources, targets):
        if u in frontier:
            expected[v] = True
    np.testing.assert_array_equal(
        notified_vertices(frontier, offsets, targets[order]), expected)


# ------------------------------------------------- what HostPages says of itself --
def test_cached_mask_is_is_cached_through_revisions(store, pages):
    count = len(store.pages)

    def agrees():
        mask = pages.cached_mask()
        assert mask.dtype == bool and mask.shape == (count,)
        assert mask.tolist() == [pages.is_cached(k) for k in range(count)]

    agrees()
    pages.hold_elsewhere([0])
    agrees()
    for _ in range(3):
        walk_pages(pages, [count - 2, count - 1])
        pages.end_iteration()
        agrees()
    assert pages.cached_mask()[count - 1]
    assert InMemoryPages(store).cached_mask().tolist() == [True] * count


def test_the_disk_speed_is_the_plans_else_measured(store, pages, monkeypatch):
    import dataclasses

    monkeypatch.setattr(config, "DISK_READ_BYTES_PER_SECOND", 123e6)
    assert pages.plan.disk_bytes_per_s is None
    assert pages.disk_bytes_per_s == 123e6
    pages._use_plan(dataclasses.replace(pages.plan, disk_bytes_per_s=456e6))
    pages._disk_speed = None
    assert pages.disk_bytes_per_s == 456e6
    assert InMemoryPages(store).disk_bytes_per_s is None


def test_a_page_asked_for_while_the_iteration_ends_is_not_lost(store, pages):
    """A reader thread marks a page as asked for while the iteration ends:
    the mark lands in one of the two iterations, never in neither."""
    entered, proceed = threading.Event(), threading.Event()

    class SlowMarks(np.ndarray):
        def __setitem__(self, key, value):
            entered.set()
            proceed.wait(0.5)       # the iteration ends meanwhile, unless it must wait
            super().__setitem__(key, value)

    pages._asked = np.zeros(len(store.pages), bool).view(SlowMarks)
    reader = threading.Thread(target=pages.read_page, args=(len(store.pages) - 1,))
    reader.start()
    assert entered.wait(5)
    first = pages.end_iteration()
    proceed.set()
    reader.join()
    second = pages.end_iteration()
    assert first["asked_pages"] + second["asked_pages"] == 1


def test_read_ahead_stopped_by_a_revision_counts_in_bytes_read(store, pages):
    """A walk over every streamed page reads them ahead for the next one; the
    host's pages revised, that read-ahead is stopped, and what it read from
    disk counts in bytes_read: every byte read is counted."""
    count = len(store.pages)
    walk_pages(pages, list(range(count)))
    reader = pages.reader("cpu")
    deadline = time.monotonic() + 10
    while reader.bytes_read <= reader.bytes_delivered and time.monotonic() < deadline:
        time.sleep(0.005)
    assert reader.bytes_read > reader.bytes_delivered      # the read-ahead has read
    pages.hold_elsewhere([0])                              # the host's pages change
    assert 0 < pages.bytes_dropped <= pages.readahead_bytes
    assert pages.bytes_read == reader.bytes_read


def test_a_stream_takes_the_read_ahead_of_its_first_pages(store):
    """A read-ahead for pages [a, b, c, ...] and a stream of [a, b, d]: a and b
    are taken as read, the rest is dropped and counted; the pages are the
    store's."""
    from garaphpy.storage.page_io import PageReader, page_buffer_bytes

    count = len(store.pages)
    ahead = [1, 2, 3, 4]        # three buffers: 1, 2 and 3 are read ahead
    order = [1, 2, count - 1]
    with PageReader(store, readahead_bytes=3 * page_buffer_bytes(store)) as reader:
        assert reader.prefetch(ahead)
        deadline = time.monotonic() + 10
        while reader.bytes_read < sum(store.pages[k].disk_bytes for k in ahead[:3]) \
                and time.monotonic() < deadline:
            time.sleep(0.005)
        for (index, page), expected in zip(reader.stream(order), order):
            assert index == expected
            np.testing.assert_array_equal(page.sources, store.read_page(index).sources)
        delivered = sum(store.pages[k].disk_bytes for k in order)
        assert reader.bytes_delivered == delivered
        assert reader.bytes_dropped == store.pages[3].disk_bytes   # 1, 2 taken; 3 dropped
        assert reader.bytes_read == delivered + reader.bytes_dropped
