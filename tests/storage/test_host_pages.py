"""Cached and streamed pages of a run larger than its host budget (Garaph section 2.2).

:class:`~garaphpy.storage.host_pages.HostPages` keeps a prefix of the pages
in host memory and streams the others from the storage directories;
:class:`~garaphpy.storage.host_pages.PageCursor` walks an iteration's pages.
Every page handed out must equal ``Store.read_page`` whatever the walk
(in order, passing over pages and coming back to them, subsets, repeats),
cached pages are read once, streamed ones once per walk, and the buffers of
manual walks come back to the pool.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from garaphpy import config
from garaphpy.errors import StoreError
from garaphpy.progress import human_bytes
from garaphpy.storage.host_budget import plan_host_cache
from garaphpy.storage.host_pages import PageCursor
from garaphpy.storage.page_io import aligned_empty
from garaphpy.storage.store import Store
from helpers import CACHED_PAGES, PAGES_AHEAD, build_compressed_store, make_pages
from helpers import HOST_PAGES_READ_RATIO as K
from helpers import build_striped_store as build

def assert_same_page(store: Store, index: int, page) -> None:
    expected = store.read_page(index)
    assert page.info.index == index
    np.testing.assert_array_equal(page.sources, expected.sources)
    np.testing.assert_array_equal(page.idxoff, expected.idxoff)
    np.testing.assert_array_equal(page.weights, expected.weights)
    assert page.sources.dtype == expected.sources.dtype
    assert page.weights.dtype == expected.weights.dtype


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return build(tmp_path_factory.mktemp("host-pages"))


@pytest.fixture(scope="module")
def expected(store):
    """Each page's arrays by Store.read_page (a plain read, no reader threads)."""
    return {i: store.read_page(i) for i in range(len(store.pages))}


@pytest.fixture
def pages(store):
    paged = make_pages(store)
    yield paged
    paged.close()


@pytest.fixture
def fresh(tmp_path):
    """A store the test may damage."""
    return build(tmp_path)


def same(expected, page) -> bool:
    reference = expected[page.info.index]
    return (np.array_equal(reference.sources, page.sources)
            and np.array_equal(reference.idxoff, page.idxoff)
            and np.array_equal(reference.weights, page.weights))


def test_the_test_store_has_many_pages_over_three_directories(store):
    assert len(store.pages) >= 12
    assert all(info.num_blocks >= 2 for info in store.pages)
    assert set(np.unique(store.blocks["directory"]).tolist()) == {0, 1, 2}
    assert len({info.nbytes for info in store.pages}) > 1     # pages of different sizes


# ------------------------------------------------------------------ walks --
def walk(store):
    n = len(store.pages)
    return {
        "in order": list(range(n)),
        "reversed": list(range(n))[::-1],
        "streamed only": list(range(CACHED_PAGES, n)),
        "cached only": list(range(CACHED_PAGES)),
        "subset": [1, 4, 5, 9, n - 1],
        "shuffled": np.random.default_rng(3).permutation(n).tolist(),
        "repeats": [4, 4, 5, 0, 0, 5, n - 1, 4],
    }


@pytest.mark.parametrize("name", ["in order", "reversed", "streamed only", "cached only",
                                  "subset", "shuffled", "repeats"])
def test_cursor_pages_equal_store_pages(store, expected, pages, name):
    order = walk(store)[name]
    cursor = pages.cursor(order)
    try:
        for index in order:
            page = cursor.get(index)
            assert page.info.index == index
            assert same(expected, page), f"page {index} of walk {order}"
    finally:
        cursor.close()
    # cached pages asked for stay in host memory, the others do not
    cached = {i for i in order if i < CACHED_PAGES}
    assert pages.cached_bytes == sum(store.pages[i].nbytes for i in cached)


def test_cursor_page_equals_store_page_array_by_array(store, pages):
    cursor = pages.cursor(range(len(store.pages)))
    for index in range(len(store.pages)):
        assert_same_page(store, index, cursor.get(index))
    cursor.close()


def test_a_page_passed_over_is_read_again_on_its_own(store, expected, pages):
    n = len(store.pages)
    order = list(range(n))
    cursor = pages.cursor(order)
    page = cursor.get(8)                 # passes over 3..7 (0..2 are cached)
    assert same(expected, page)
    kept = page.sources.copy()
    before = pages.bytes_read
    again = cursor.get(5)               # passed over: a separate read
    assert same(expected, again)
    assert pages.bytes_read - before >= store.pages[5].nbytes
    assert np.array_equal(page.sources, kept)   # the separate read used its own buffer
    assert same(expected, cursor.get(1))        # cached, never passed over
    assert same(expected, cursor.get(9))        # the stream goes on after 8
    assert same(expected, cursor.get(8))        # handed out already: on its own
    for index in range(10, n):
        assert same(expected, cursor.get(index))
    cursor.close()


def test_a_page_not_in_the_order_is_read_on_its_own(store, expected, pages):
    n = len(store.pages)
    cursor = pages.cursor([n - 1, n - 2])
    assert same(expected, cursor.get(5))        # not in the order at all
    assert same(expected, cursor.get(n - 1))
    assert same(expected, cursor.get(n - 2))
    assert same(expected, cursor.get(0))        # cached, not in the order
    cursor.close()


def test_a_page_from_read_page_outside_a_cursor(store, expected, pages):
    for index in (0, 5, len(store.pages) - 1):
        assert same(expected, pages.read_page(index))
    assert pages.read_page(0) is pages.cached_page(0)
    assert pages.read_page(5) is not pages.read_page(5)    # a new buffer each time


# --------------------------------------------------------- bytes and cache --
def test_cached_pages_are_read_once_streamed_pages_every_walk(store, pages):
    sizes = [info.nbytes for info in store.pages]
    total, cached = sum(sizes), sum(sizes[:CACHED_PAGES])
    assert pages.plan.cached_bytes == cached and pages.plan.streamed_bytes == total - cached
    assert pages.bytes_read == 0 and pages.cached_bytes == 0    # nothing read up front
    assert [pages.is_cached(i) for i in range(len(sizes))] == \
        [i < CACHED_PAGES for i in range(len(sizes))]
    for walk_number in range(3):
        before = pages.bytes_read
        cursor = pages.cursor(range(len(sizes)))
        for index in range(len(sizes)):
            cursor.get(index)
        cursor.close()
        # the first walk reads everything; later ones only the streamed pages
        assert pages.bytes_read - before == (total if walk_number == 0 else total - cached)
        assert pages.cached_bytes == cached
    first = pages.cached_page(1)
    assert pages.cached_page(1) is first            # the same host buffer, not re-read
    before = pages.bytes_read
    pages.cached_page(2)
    assert pages.bytes_read == before


def test_cached_pages_are_shared_by_consumers(store, expected, pages):
    before = pages.bytes_read
    a = pages.cached_page(0, "cpu")
    b = pages.cached_page(0, "gpu")
    assert a is b and same(expected, a)
    assert pages.bytes_read - before == store.pages[0].nbytes


def test_close_drops_the_cache(store):
    pages = make_pages(store)
    pages.cached_page(0)
    pages.cached_page(1)
    assert pages.cached_bytes == store.pages[0].nbytes + store.pages[1].nbytes
    reader = pages.reader("cpu")
    pages.close()
    assert pages.cached_bytes == 0
    assert not any(thread.is_alive() for thread in reader._threads)


def test_allocators_of_consumers_and_of_the_cache(store, expected):
    made = {"gpu": 0}

    def counting(nbytes):
        made["gpu"] += 1
        return aligned_empty(nbytes)

    pages = make_pages(store)
    try:
        pages.use_allocator("gpu", counting, cache=True)
        assert same(expected, pages.cached_page(0, "cpu"))   # the cache's allocator
        assert made["gpu"] == 1
        cursor = pages.cursor(range(CACHED_PAGES, len(store.pages)), "gpu")
        for index in range(CACHED_PAGES, len(store.pages)):
            assert same(expected, cursor.get(index))
        cursor.close()
        assert made["gpu"] == 1 + PAGES_AHEAD                # the pool: reused buffers
        cursor = pages.cursor(range(CACHED_PAGES, len(store.pages)), "cpu")
        for index in range(CACHED_PAGES, len(store.pages)):
            assert same(expected, cursor.get(index))
        cursor.close()
        assert made["gpu"] == 1 + PAGES_AHEAD                # the CPU's own allocator
    finally:
        pages.close()


def test_two_consumers_walk_from_the_two_ends(store, expected, pages):
    """A hybrid iteration: the GPU's cursor from the front, the CPU's from the back."""
    n = len(store.pages)
    gpu = pages.cursor(range(n), "gpu")
    cpu = pages.cursor(range(n - 1, -1, -1), "cpu")
    front, back = 0, n - 1
    while front <= back:
        assert same(expected, gpu.get(front))
        front += 1
        if front <= back:
            assert same(expected, cpu.get(back))
            back -= 1
    gpu.close()
    cpu.close()
    # each streamed page was read by one consumer, plus at most a read-ahead
    # window of pages the other consumer took
    streamed = pages.plan.streamed_bytes
    window = 2 * PAGES_AHEAD * max(info.nbytes for info in store.pages)
    assert streamed <= pages.bytes_read - pages.cached_bytes <= streamed + window


def walk_from_two_threads(pages, num_pages: int, check, seconds: float = 60) -> list:
    """Three walks over every page by the GPU's consumer (in order) and the CPU's
    (reversed), each in a thread at once, ``check(index, page)`` on each page;
    the errors raised."""
    errors = []

    def consume(consumer, order):
        try:
            for _ in range(3):
                cursor = pages.cursor(order, consumer)
                for index in order:
                    check(index, cursor.get(index))
                cursor.close()
        except BaseException as error:  # pragma: no cover - reported by the caller
            errors.append(error)

    order = list(range(num_pages))
    threads = [threading.Thread(target=consume, args=("gpu", order)),
               threading.Thread(target=consume, args=("cpu", order[::-1]))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds)
    return errors


def test_concurrent_consumers_in_threads(store, expected, pages):
    def check(index, page):
        assert same(expected, page), index

    assert walk_from_two_threads(pages, len(store.pages), check) == []
    assert pages.cached_bytes == pages.plan.cached_bytes


# ---------------------------------------------------------- manual release --
def test_manual_release_counts_held_pages(store, expected, pages):
    n = len(store.pages)
    cursor = pages.cursor(range(n), release="manual")
    assert cursor.max_held == PAGES_AHEAD
    assert cursor.held == 0
    cached = cursor.get(0)
    assert cursor.held == 0                          # cached pages are never held
    first = cursor.get(CACHED_PAGES)
    second = cursor.get(CACHED_PAGES + 1)
    assert cursor.held == 2
    # held pages stay intact while the reader could go on
    assert same(expected, first) and same(expected, second) and same(expected, cached)
    with pytest.raises(RuntimeError, match="held by the consumer"):
        cursor.get(CACHED_PAGES + 2)                 # every buffer is held
    cursor.release(first)
    assert cursor.held == 1
    cursor.release(first)                            # twice: ignored
    cursor.release(cached)                           # cached: ignored
    assert cursor.held == 1
    cursor.close()
    assert cursor.held == 0
    assert pages.reader("cpu").outstanding_bytes == 0


def test_manual_walk_releasing_each_page_after_the_next(store, expected, pages):
    """The GPU's pattern: a page is released once the next one is in hand."""
    n = len(store.pages)
    cursor = pages.cursor(range(n), release="manual")
    previous = None
    for index in range(n):
        page = cursor.get(index)
        if previous is not None:
            assert same(expected, previous)          # not overwritten by the read-ahead
            cursor.release(previous)
        assert same(expected, page)
        previous = page
        assert cursor.held <= cursor.max_held
    cursor.release(previous)
    assert cursor.held == 0
    cursor.close()
    reader = pages.reader("cpu")        # only the next walk's first pages, read ahead
    assert reader.outstanding_bytes <= reader.max_buffers * reader.buffer_bytes


def test_close_releases_held_pages_no_buffer_leaks_over_walks(store, expected, pages):
    n = len(store.pages)
    streamed = pages.plan.streamed_bytes
    for walk_number in range(20):
        cursor = pages.cursor(range(n), release="manual")
        held = [cursor.get(CACHED_PAGES + i) for i in range(PAGES_AHEAD)]
        assert cursor.held == PAGES_AHEAD == cursor.max_held
        assert all(same(expected, page) for page in held)
        cursor.close()                               # releases what is still held
        assert cursor.held == 0
        # every page can be streamed again afterwards
        before = pages.bytes_read
        cursor = pages.cursor(range(n))
        for index in range(n):
            page = cursor.get(index)
            if index % 5 == walk_number % 5:
                assert same(expected, page)
        cursor.close()
        # the streamed pages, and the cached ones the first time they are needed
        first_time = pages.plan.cached_bytes if walk_number == 0 else 0
        assert pages.bytes_read - before == streamed + first_time
    reader = pages.reader("cpu")
    assert reader.outstanding_bytes <= PAGES_AHEAD * reader.buffer_bytes   # read ahead
    assert reader.allocated_bytes <= PAGES_AHEAD * reader.buffer_bytes


def test_auto_walks_abandoned_midway_leak_nothing(store, expected, pages):
    n = len(store.pages)
    for stop in range(CACHED_PAGES, n, 2):
        cursor = pages.cursor(range(n))
        for index in range(stop):
            cursor.get(index)
        cursor.close()
        assert pages.reader("cpu").outstanding_bytes == 0
    cursor = pages.cursor(range(n))
    assert all(same(expected, cursor.get(i)) for i in range(n))
    cursor.close()


def test_bad_release_mode(pages):
    with pytest.raises(ValueError, match="release"):
        pages.cursor([0], release="later")
    assert isinstance(pages.cursor([0]), PageCursor)


# ---------------------------------------------------------------- the plan --
def test_rho_is_k_when_pages_are_streamed(store, pages):
    assert not pages.plan.all_cached
    assert pages.rho == K == pages.plan.rho(K)
    sizes = [info.nbytes for info in store.pages]
    everything = plan_host_cache(sizes, 1000, 4096, 1000 + sum(sizes))
    assert everything.all_cached and everything.streamed == ()
    assert everything.rho(K) == config.RHO_IN_MEMORY == 1.0
    one_byte_short = plan_host_cache(sizes, 1000, 0, 1000 + sum(sizes) - 1)
    assert not one_byte_short.all_cached and one_byte_short.rho(K) == K
    assert one_byte_short.streamed == (len(sizes) - 1,)


def test_describe_mentions_the_budget_and_rho(store, pages):
    text = pages.describe()
    assert f"host budget {human_bytes(pages.plan.budget_bytes)}" in text
    assert f"{CACHED_PAGES} pages cached" in text
    assert f"{len(store.pages) - CACHED_PAGES} streamed" in text
    assert "rho = k = 6" in text


def test_nothing_cached(store, expected):
    pages = make_pages(store, cached=0, pages_ahead=1)
    try:
        assert pages.plan.cached == () and not pages.is_cached(0)
        cursor = pages.cursor(range(len(store.pages)))
        assert cursor.max_held == 1
        assert all(same(expected, cursor.get(i)) for i in range(len(store.pages)))
        cursor.close()
        assert pages.cached_bytes == 0
        assert pages.bytes_read == sum(info.nbytes for info in store.pages)
    finally:
        pages.close()


# ------------------------------------------------------------------ errors --
def test_missing_block_file_is_named_at_open_and_at_the_first_read(fresh, tmp_path):
    pages = make_pages(fresh)          # made while every file is there: no reader yet
    path = fresh.block_files[1]
    path.unlink()
    with pytest.raises(StoreError, match=f"{path}: block file .* is missing"):
        pages.cursor(range(len(fresh.pages))).get(0)
    with pytest.raises(StoreError, match=f"{path}: block file .* is missing"):
        pages.read_page(len(fresh.pages) - 1)
    pages.close()
    with pytest.raises(StoreError, match=f"{path}: block file .* is missing"):
        Store.open(tmp_path / "store", verify="quick")


def test_removed_storage_directory_is_named(fresh, tmp_path):
    pages = make_pages(fresh)
    os.rename(tmp_path / "ssd2", tmp_path / "moved")
    with pytest.raises(StoreError, match=f"{tmp_path / 'ssd2'}: storage directory 2 .* "
                                         "is missing"):
        cursor = pages.cursor(range(len(fresh.pages)))
        cursor.get(len(fresh.pages) - 1)
    pages.close()
    with pytest.raises(StoreError, match=f"{tmp_path / 'ssd2'}.*is missing"):
        Store.open(tmp_path / "store", verify="quick")


def test_a_walk_goes_on_after_a_damaged_page_is_repaired(fresh):
    """A read error ends the cursor's stream; the next ``get`` starts a new one
    (no bare StopIteration from the dead stream)."""
    pages = make_pages(fresh, cached=0)
    order = list(range(len(fresh.pages)))
    damaged = order[len(order) // 2]
    block = fresh.blocks[fresh.pages[damaged].first_block]
    path = fresh.block_files[int(block["directory"])]
    original = path.read_bytes()
    flipped = bytearray(original)
    flipped[int(block["offset"]) + 10] ^= 0xFF
    path.write_bytes(bytes(flipped))
    cursor = pages.cursor(order)
    for index in order[:damaged]:
        assert_same_page(fresh, index, cursor.get(index))
    with pytest.raises(StoreError, match="checksum|CRC"):
        cursor.get(damaged)
    path.write_bytes(original)
    for index in order[damaged:]:
        assert_same_page(fresh, index, cursor.get(index))
    cursor.close()
    pages.close()


def test_a_complete_walk_reads_ahead_for_the_next_one(store, expected, pages):
    """After a walk that took every streamed page, the reader goes on with the
    same pages for the next walk; the next walk of that order takes them, one
    of another order drops them; bytes_read counts the pages handed out."""
    n = len(store.pages)
    reader_of = pages.reader("cpu")
    for _ in range(2):          # the second walk's first pages come from the read-ahead
        before = pages.bytes_read
        cursor = pages.cursor(range(n))
        assert all(same(expected, cursor.get(i)) for i in range(n))
        cursor.close()
        first_time = pages.plan.cached_bytes if before == 0 else 0
        assert pages.bytes_read - before == pages.plan.streamed_bytes + first_time
    reader_of._state.queued[0].done.wait(10)
    assert reader_of.bytes_read > reader_of.bytes_delivered     # read for a walk to come
    assert reader_of.outstanding_bytes > 0
    # another order: the read-ahead is dropped, every page still right
    cursor = pages.cursor(reversed(range(n)))
    assert all(same(expected, cursor.get(i)) for i in reversed(range(n)))
    cursor.close()
    # a walk abandoned midway reads nothing ahead and leaks nothing
    cursor = pages.cursor(range(n))
    cursor.get(n - 2)
    cursor.close()
    assert reader_of.outstanding_bytes == 0


def test_pages_held_elsewhere_leave_the_cache_to_the_next_pages(store, expected, pages):
    sizes = [info.nbytes for info in store.pages]
    pages.cached_page(0)                            # read before the GPU said it keeps it
    held = {0, 2}
    room = pages.plan.budget_bytes - pages.plan.fixed_bytes - pages.plan.readahead_bytes
    pages.hold_elsewhere(held)
    plan = pages.plan
    others = [k for k in range(len(sizes)) if k not in held]
    fits = 0
    while fits < len(others) and sum(sizes[k] for k in others[:fits + 1]) <= room:
        fits += 1
    assert plan.cached == tuple(others[:fits]) and fits >= CACHED_PAGES
    assert not held & set(plan.cached) and plan.held_elsewhere == (0, 2)
    assert set(plan.cached) | set(plan.streamed) == set(range(len(sizes)))
    assert plan.cached_bytes == sum(sizes[k] for k in plan.cached) <= room
    assert pages.cached_bytes == 0                  # page 0's image was dropped
    assert "held by the GPU instead" in plan.describe()
    cursor = pages.cursor(range(len(sizes)))
    for index in range(len(sizes)):
        assert same(expected, cursor.get(index))
    cursor.close()
    before = pages.bytes_read
    cursor = pages.cursor(others)
    for index in others:
        cursor.get(index)
    cursor.close()
    # a second walk over the pages not held elsewhere reads only the uncached ones
    assert pages.bytes_read - before == sum(sizes[k] for k in others[fits:])


def test_nothing_held_elsewhere_or_everything_cached_keeps_the_plan(store):
    from garaphpy.storage.host_budget import cache_beside

    sizes = [info.nbytes for info in store.pages]
    partial = plan_host_cache(sizes, 100, 10, 100 + 10 + sum(sizes[:2]))
    assert cache_beside(partial, sizes, ()) is partial
    everything = plan_host_cache(sizes, 100, 10, 10 * sum(sizes))
    assert cache_beside(everything, sizes, {0, 1}) is everything
    moved = cache_beside(partial, sizes, {0})
    assert moved.cached == (1, 2) and moved.streamed[0] == 0


# ------------------------------------------------------------ compressed pages --
def test_compressed_pages_decoded_by_each_consumer_in_its_own_way(tmp_path):
    """The CPU's reader decodes its pages itself, in parallel, when it takes
    them; the GPU's reader in decoder threads ahead of it.  Both walking at
    once, from two threads, get the plain pages."""
    store = build_compressed_store(tmp_path)
    paged = make_pages(store)
    try:
        assert paged.reader("cpu").decode == "consumer"
        assert paged.reader("gpu").decode == "threads"
        errors = walk_from_two_threads(
            paged, len(store.pages), lambda index, page: assert_same_page(store, index, page),
            seconds=120)
        assert errors == []
    finally:
        paged.close()


def test_the_consumer_that_takes_stored_pages_gets_them_from_cache_and_disk(tmp_path):
    """After ``take_stored("gpu")`` the GPU's walks give every compressed page
    as stored, cached or streamed, its bytes those ``Store.read_stored``
    gives, and the same room caches more pages; the CPU's walks still give
    plain pages (a cached one decoded from the cached image, read from disk
    no more); bytes read before count on."""
    store = build_compressed_store(tmp_path, seed=9)
    count = len(store.pages)
    paged = make_pages(store)
    try:
        order = list(range(count))
        cursor = paged.cursor(order, "gpu")
        for index in order:
            assert_same_page(store, index, cursor.get(index))
        cursor.close()
        before = paged.bytes_read
        assert before == sum(info.disk_bytes for info in store.pages)
        paged.take_stored("gpu")
        assert paged.reader("gpu").decode == "stored"
        # the same room holds more pages, counted in their stored bytes
        assert paged.plan.cached == tuple(range(len(paged.plan.cached)))
        assert len(paged.plan.cached) > CACHED_PAGES
        assert paged.placement.host_bytes == paged.plan.cached_bytes == sum(
            store.pages[k].disk_bytes for k in paged.plan.cached)
        for _ in range(2):
            cursor = paged.cursor(order, "gpu", release="manual")
            for index in order:
                page = cursor.get(index)
                assert page.stored, index
                np.testing.assert_array_equal(page.image, store.read_stored(index))
                cursor.release(page)
            cursor.close()
        # the cache's pages were read once more, as stored; the others twice
        streamed = sum(store.pages[k].disk_bytes for k in order if not paged.is_cached(k))
        cached = sum(store.pages[k].disk_bytes for k in order if paged.is_cached(k))
        assert paged.bytes_read - before >= cached + 2 * streamed
        before = paged.bytes_read
        cursor = paged.cursor(order[::-1], "cpu")
        for index in order[::-1]:
            assert_same_page(store, index, cursor.get(index))
        cursor.close()
        assert paged.bytes_read - before == streamed   # the cached pages from memory
        assert paged.cached_page(0, "gpu").stored
        assert paged.cached_bytes <= sum(info.nbytes for info in store.pages[:CACHED_PAGES])
    finally:
        paged.close()


def test_an_iteration_records_the_bytes_it_asked_for_in_each_tier(store, pages):
    """The first walk fills the host's cache and reads the disk's pages: its
    record's asked bytes are the disk bytes of every page it asked for."""
    sizes = [info.disk_bytes for info in store.pages]
    asked = [0, 1, CACHED_PAGES, CACHED_PAGES + 2]
    cursor = pages.cursor(asked)
    for index in asked:
        cursor.get(index)
    cursor.close()
    read = pages.bytes_read         # before the iteration's end may read ahead for the next
    entry = pages.end_iteration()
    assert entry["asked_pages"] == len(asked)
    assert entry["asked_host_bytes"] == sizes[0] + sizes[1]
    assert entry["asked_disk_bytes"] == sizes[CACHED_PAGES] + sizes[CACHED_PAGES + 2]
    assert read == sum(sizes[k] for k in asked)


# ------------------------------------------------- the cache filled by walks --
def test_a_first_walk_reads_the_cached_pages_ahead_into_the_cache(store, expected, pages,
                                                                   monkeypatch):
    """The CPU's first walk reads the pages the host caches in its stream, ahead
    of it like the streamed ones (none on its own), into the cache's buffers:
    each read once, the read-ahead's bound kept; the next walk takes them
    from the cache."""
    n = len(store.pages)
    reader = pages.reader("cpu")
    alone = []
    monkeypatch.setattr(reader, "read_page", lambda index, out=None: alone.append(index))
    cursor = pages.cursor(range(n))
    first = cursor.get(0)
    assert same(expected, first)
    reader._state.queued[0].done.wait(10)
    assert reader._state.queued[0].info.index == 1       # the pages after it read ahead
    held = {0: first}
    for index in range(1, n):
        page = cursor.get(index)
        assert same(expected, page)
        if index < CACHED_PAGES:
            held[index] = page
    cursor.close()
    assert alone == []
    assert pages.bytes_read == sum(info.disk_bytes for info in store.pages)
    assert pages.cached_bytes == sum(store.pages[k].nbytes for k in range(CACHED_PAGES))
    assert reader.peak_outstanding_bytes <= reader.readahead_bytes
    assert all(pages.cached_page(k) is held[k] for k in range(CACHED_PAGES))
    before = pages.bytes_read
    cursor = pages.cursor(range(n))
    assert all(cursor.get(k) is held[k] for k in range(CACHED_PAGES))
    assert all(same(expected, cursor.get(k)) for k in range(CACHED_PAGES, n))
    cursor.close()
    assert pages.bytes_read - before == pages.plan.streamed_bytes
    assert alone == []


def test_a_cached_page_read_ahead_and_passed_over_is_cached(store, expected, pages):
    """A walk that passes over pages the host caches keeps them all the same:
    asked for later they come from the cache, read once."""
    n = len(store.pages)
    cursor = pages.cursor(range(n))
    assert same(expected, cursor.get(CACHED_PAGES))      # passes over 0..CACHED_PAGES-1
    read = pages.bytes_read
    assert read == sum(store.pages[k].disk_bytes for k in range(CACHED_PAGES + 1))
    assert all(same(expected, cursor.get(k)) for k in range(CACHED_PAGES))
    assert pages.bytes_read == read
    cursor.close()
    assert pages.cached_bytes == sum(store.pages[k].nbytes for k in range(CACHED_PAGES))


def test_a_manual_walk_leaves_the_cached_pages_to_cached_page(store, expected, pages):
    """The GPU's walks (release ``manual``) take cached pages from
    ``cached_page`` outside the walk: their streams read the others only."""
    n = len(store.pages)
    cursor = pages.cursor(range(n), "gpu", release="manual")
    assert cursor.streamed == list(range(CACHED_PAGES, n))
    for index in range(n):
        page = cursor.get(index)
        assert same(expected, page)
        cursor.release(page)
    cursor.close()
    assert pages.bytes_read == sum(info.disk_bytes for info in store.pages)


@pytest.mark.parametrize("order", ["same", "other"])
def test_a_prefetched_walk_takes_the_reads_begun_before_it(store, expected, pages, order):
    """``prefetch`` starts a walk's reads, the cached pages' too, before the
    walk: the walk of that order takes them (nothing read twice or dropped);
    one of another order keeps the reads of its first pages and drops the
    others (counted)."""
    n = len(store.pages)
    assert pages.prefetch(range(n))
    reader = pages.reader("cpu")
    reader._state.queued[-1].done.wait(10)
    assert reader.bytes_read > 0 and pages.cached_bytes == 0
    walk_order = list(range(n)) if order == "same" else [0, 1, 5, 2] + list(range(6, n))
    cursor = pages.cursor(walk_order)
    assert all(same(expected, cursor.get(k)) for k in walk_order)
    cursor.close()
    asked = sum(store.pages[k].disk_bytes for k in set(walk_order))
    if order == "same":
        assert pages.bytes_read == asked and pages.bytes_dropped == 0
    else:
        assert pages.bytes_read - pages.bytes_dropped == asked
    assert pages.cached_bytes == sum(store.pages[k].nbytes for k in range(CACHED_PAGES))
    assert reader.outstanding_bytes == 0 or reader._prefetched is not None


def test_a_prefetch_no_walk_takes_is_dropped_and_counted(store, expected, pages):
    n = len(store.pages)
    assert pages.prefetch(range(n))
    reader = pages.reader("cpu")
    reader._state.queued[0].done.wait(10)
    pages.cancel_prefetch()
    assert pages.bytes_read == pages.bytes_dropped > 0
    assert reader.outstanding_bytes == 0 and pages.cached_bytes == 0
    assert not pages._filling
    cursor = pages.cursor(range(n))      # a walk after it reads every page again
    assert all(same(expected, cursor.get(k)) for k in range(n))
    cursor.close()
    assert pages.bytes_read - pages.bytes_dropped == sum(info.disk_bytes
                                                         for info in store.pages)


def test_a_compressed_first_walk_fills_the_cache_with_plain_pages(tmp_path):
    """Compressed pages read ahead into the cache are decoded there by the
    CPU's walk: the cache holds the plain pages, read once."""
    store = build_compressed_store(tmp_path)
    paged = make_pages(store)
    try:
        n = len(store.pages)
        for _ in range(2):
            cursor = paged.cursor(range(n))
            for index in range(n):
                assert_same_page(store, index, cursor.get(index))
            cursor.close()
        assert paged.cached_bytes == sum(store.pages[k].nbytes for k in range(CACHED_PAGES))
        streamed = sum(store.pages[k].disk_bytes for k in range(CACHED_PAGES, n))
        assert paged.bytes_read == sum(info.disk_bytes for info in store.pages) + streamed
        for k in range(CACHED_PAGES):
            assert_same_page(store, k, paged.cached_page(k))
    finally:
        paged.close()
