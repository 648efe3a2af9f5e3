"""Out-of-core page I/O: the PageReader, the host-memory budget, the read ratio k."""

from __future__ import annotations

import errno
import json
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from garaphpy import config
from garaphpy.errors import ConfigError, StoreCorruptError, StoreError
from garaphpy.storage import page_io, read_ratio
from garaphpy.storage.builder import BuildOptions, build_store
from garaphpy.storage.host_budget import (HostCachePlan, host_cache_budget, plan_host_cache,
                                          store_array_bytes)
from garaphpy.storage.page_io import PageReader, aligned_empty
from garaphpy.storage.readers import from_arrays
from garaphpy.storage.store import Store


def build(directory: Path, extra_dirs: int) -> Store:
    """A weighted store of many small pages, each of several 4 KiB blocks
    (the last one partial), spread over 1 + ``extra_dirs`` directories."""
    rng = np.random.default_rng(11)
    src, dst = rng.integers(0, 2000, 20000), rng.integers(0, 2000, 20000)
    ssds = []
    for i in range(extra_dirs):
        ssds.append(directory / f"ssd{i + 1}")
        ssds[-1].mkdir(parents=True)
    return build_store(from_arrays(src, dst, rng.integers(1, 100, 20000)), directory / "store",
                       BuildOptions(block_bytes=4096, max_page_bytes=20000, compress=False,
                                    storage_dirs=[str(d) for d in ssds]), progress=False)


@pytest.fixture(scope="module")
def one_dir(tmp_path_factory):
    return build(tmp_path_factory.mktemp("one"), 0)


@pytest.fixture(scope="module")
def three_dirs(tmp_path_factory):
    return build(tmp_path_factory.mktemp("three"), 2)


@pytest.fixture
def fresh(tmp_path):
    """A store of three directories the test may damage."""
    return build(tmp_path, 2)


def same_page(store: Store, index: int, page) -> bool:
    expected = store.read_page(index)
    return (np.array_equal(expected.image, page.image)
            and np.array_equal(expected.sources, page.sources)
            and np.array_equal(expected.idxoff, page.idxoff)
            and np.array_equal(expected.weights, page.weights))


def test_test_stores_have_many_multi_block_pages(one_dir, three_dirs):
    for store in (one_dir, three_dirs):
        assert len(store.pages) > 10
        assert all(info.num_blocks >= 2 for info in store.pages)
        assert any(info.nbytes % 4096 for info in store.pages)
    assert set(np.unique(three_dirs.blocks["directory"])) == {0, 1, 2}


# ---------------------------------------------------------------- streaming --
@pytest.mark.parametrize("direct", [None, False])
@pytest.mark.parametrize("pages_ahead", [1, 3, None])
@pytest.mark.parametrize("name", ["one_dir", "three_dirs"])
def test_streamed_pages_equal_read_page(request, name, pages_ahead, direct):
    store = request.getfixturevalue(name)
    probe = PageReader(store)
    readahead = None if pages_ahead is None else pages_ahead * probe.buffer_bytes
    probe.close()
    with PageReader(store, readahead_bytes=readahead, direct=direct) as reader:
        assert len(reader.direct_io) == len(store.storage_dirs)
        if direct is False:
            assert reader.direct_io == [False] * len(store.storage_dirs)
        seen = []
        for index, page in reader.stream():
            assert same_page(store, index, page)
            seen.append(index)
        assert seen == list(range(len(store.pages)))
        assert reader.bytes_read == sum(info.nbytes for info in store.pages)
        assert reader.outstanding_bytes == 0


def test_stream_follows_the_order_asked(three_dirs):
    order = [5, 0, 5, len(three_dirs.pages) - 1, 2]
    with PageReader(three_dirs) as reader:
        got = []
        for index, page in reader.stream(order):
            assert same_page(three_dirs, index, page)
            got.append(index)
    assert got == order


def test_buffers_are_recycled_within_the_budget(three_dirs):
    made = []

    def allocator(nbytes):
        made.append(nbytes)
        return aligned_empty(nbytes)

    with PageReader(three_dirs, allocator=allocator) as probe:
        budget = 2 * probe.buffer_bytes + probe.buffer_bytes // 2  # room for two buffers
    with PageReader(three_dirs, readahead_bytes=budget, allocator=allocator) as reader:
        made.clear()
        addresses = set()
        for index, page in reader.stream(list(range(len(three_dirs.pages))) * 2):
            time.sleep(0.002)  # a slow consumer: the reader runs ahead to the budget
            assert reader.outstanding_bytes <= budget
            assert same_page(three_dirs, index, page)
            addresses.add(page.image.ctypes.data)
        assert reader.max_buffers == 2
        assert len(made) == 2 and len(addresses) == 2
        assert reader.allocated_bytes <= budget
        assert reader.peak_outstanding_bytes == 2 * reader.buffer_bytes


@pytest.mark.parametrize("release", ["auto", "manual"])
def test_kept_pages_land_in_the_callers_buffers_within_the_budget(three_dirs, release):
    """A stream's ``keep`` gives the buffers of the pages its caller keeps: they
    are read ahead like the others, each holding a place of the read-ahead
    until handed over and none after (no release, whatever the mode); the
    pool's buffers serve the rest."""
    count = len(three_dirs.pages)
    kept_pages = {1, 2, 5}
    buffers = {}

    def keep(index):
        if index not in kept_pages:
            return None
        buffers[index] = aligned_empty(three_dirs.pages[index].nbytes)
        return buffers[index]

    with PageReader(three_dirs) as probe:
        budget = 2 * probe.buffer_bytes
    with PageReader(three_dirs, readahead_bytes=budget) as reader:
        held = []
        for index, page in reader.stream(range(count), release=release, keep=keep):
            time.sleep(0.002)       # a slow consumer: the reader runs ahead to the budget
            assert reader.outstanding_bytes <= budget
            assert same_page(three_dirs, index, page)
            assert (index in kept_pages) == np.shares_memory(page.image,
                                                             buffers.get(index, page.image[:0]))
            if index in kept_pages:
                held.append((index, page))
            elif release == "manual":
                reader.release(page)
        assert set(buffers) == kept_pages and reader.max_buffers == 2
        assert reader.allocated_bytes <= budget and reader.outstanding_bytes == 0
        for index, page in held:    # still intact: the pool never read into them
            assert same_page(three_dirs, index, page)


def test_readahead_below_one_page_is_an_error(one_dir):
    with PageReader(one_dir) as reader:
        size = reader.buffer_bytes
    with pytest.raises(ConfigError, match="readahead_bytes"):
        PageReader(one_dir, readahead_bytes=size - 1)
    with pytest.raises(ConfigError, match="release"):
        with PageReader(one_dir) as reader:
            reader.stream(release="later")
    with pytest.raises(IndexError, match="out of range"):
        with PageReader(one_dir) as reader:
            reader.stream([0, len(one_dir.pages)])


def test_manual_release(three_dirs):
    with PageReader(three_dirs) as probe:
        budget = 2 * probe.buffer_bytes
    with PageReader(three_dirs, readahead_bytes=budget) as reader:
        pages = reader.stream([0, 1, 2, 3], release="manual")
        held = [next(pages), next(pages)]
        with pytest.raises(RuntimeError, match="held by the consumer"):
            next(pages)
        for index, page in held:  # still intact: nothing was read into them
            assert same_page(three_dirs, index, page)
        with pytest.raises(ValueError, match="release"):
            reader.release(three_dirs.read_page(0))

        pages = reader.stream([2, 3], release="manual")
        reader.release(held[0][1])
        index, page = next(pages)
        assert index == 2 and same_page(three_dirs, 2, page)
        assert page.image.ctypes.data == held[0][1].image.ctypes.data  # the recycled buffer
        reader.release(page)
        reader.release(held[1][1])
        assert [i for i, _ in pages] == [3]
        assert reader.outstanding_bytes == reader.buffer_bytes  # page 3 still held


def test_unaligned_buffers_are_read_through_staging(three_dirs):
    def unaligned(nbytes):
        return aligned_empty(nbytes + 8)[8:]

    with PageReader(three_dirs, allocator=unaligned) as reader:
        for index, page in reader.stream():
            assert page.image.ctypes.data % 4096 == 8
            assert same_page(three_dirs, index, page)
        out = aligned_empty(three_dirs.pages[4].nbytes + 3)[3:]
        assert same_page(three_dirs, 4, reader.read_page(4, out=out))
        assert same_page(three_dirs, 6, reader.read_page(6))


def test_bad_allocator_is_named(one_dir):
    with PageReader(one_dir, allocator=lambda n: np.empty(n, np.float32)) as reader:
        with pytest.raises(ConfigError, match="allocator"):
            next(reader.stream())
        assert reader.outstanding_bytes == 0


def test_early_exit_releases_buffers(three_dirs):
    with PageReader(three_dirs) as reader:
        pages = reader.stream()
        for _ in range(3):
            next(pages)
        pages.close()
        assert reader.outstanding_bytes == 0
        assert [i for i, _ in reader.stream([1, 0])] == [1, 0]


def test_one_stream_at_a_time_and_closed_reader(one_dir):
    reader = PageReader(one_dir)
    first = reader.stream()
    next(first)
    with pytest.raises(RuntimeError, match="one stream at a time"):
        next(reader.stream())
    reader.close()  # with a stream in progress: must not hang
    assert not any(thread.is_alive() for thread in reader._threads)
    with pytest.raises(RuntimeError, match="closed"):
        next(first)
    with pytest.raises(RuntimeError, match="closed"):
        reader.stream()
    reader.close()


# ------------------------------------------------------------------- errors --
def test_missing_storage_directory_is_named(fresh, tmp_path):
    os.rename(tmp_path / "ssd2", tmp_path / "elsewhere")
    with pytest.raises(StoreError, match=r"ssd2: storage directory 2 .* is missing"):
        PageReader(fresh)


def test_missing_block_file_is_named(fresh):
    path = fresh.block_files[1]
    path.unlink()
    with pytest.raises(StoreError, match=f"{path}: block file .* is missing"):
        PageReader(fresh)


def test_truncated_block_file_is_named(fresh):
    path = fresh.block_files[2]
    os.truncate(path, path.stat().st_size - 4096)
    with pytest.raises(StoreCorruptError, match=f"{path}: truncated"):
        PageReader(fresh)


@pytest.mark.parametrize("direct", [None, False])
def test_short_read_names_file_and_offset(fresh, direct):
    mine = fresh.blocks[fresh.blocks["directory"] == 1]
    last = mine[np.argmax(mine["offset"])]
    path = fresh.block_files[1]
    with PageReader(fresh, direct=direct) as reader:
        os.truncate(path, int(last["offset"]))  # after the reader checked the sizes
        with pytest.raises(StoreCorruptError,
                           match=f"{path}: short read at offset {int(last['offset'])}"):
            for _ in reader.stream():
                pass
        assert reader.outstanding_bytes == 0


def test_damaged_block_fails_its_checksum(fresh):
    block = fresh.blocks[fresh.blocks["directory"] == 2][3]
    path = fresh.block_files[2]
    with open(path, "r+b") as handle:
        handle.seek(int(block["offset"]) + 10)
        byte = handle.read(1)
        handle.seek(int(block["offset"]) + 10)
        handle.write(bytes([byte[0] ^ 0xFF]))
    with PageReader(fresh) as reader:
        with pytest.raises(StoreCorruptError, match=f"checksum mismatch in block "
                                                    f"{int(block['index'])} of page "
                                                    f"{int(block['page'])}"):
            for _ in reader.stream():
                pass
    with PageReader(fresh, check=False) as reader:
        assert len(list(reader.stream())) == len(fresh.pages)


def test_reader_thread_error_reaches_the_consumer(three_dirs, monkeypatch):
    original = page_io._BlockFile.read_into
    failing_page = 4

    def read_into(self, buffer, start, nbytes, offset, bounce):
        if threading.current_thread().name.startswith("garaphpy-page-reader") and \
                any(int(b["offset"]) == offset and int(b["page"]) == failing_page
                    and str(self.path) == str(three_dirs.block_files[b["directory"]])
                    for b in three_dirs.blocks):
            raise RuntimeError("disk on fire")
        return original(self, buffer, start, nbytes, offset, bounce)

    monkeypatch.setattr(page_io._BlockFile, "read_into", read_into)
    with PageReader(three_dirs) as reader:
        got = []
        with pytest.raises(RuntimeError, match="disk on fire"):
            for index, page in reader.stream():
                got.append(index)
        assert got == list(range(failing_page))
        assert reader.outstanding_bytes == 0
        # the threads keep serving
        assert [i for i, _ in reader.stream([0, 1])] == [0, 1]
    assert not any(thread.is_alive() for thread in reader._threads)


def test_os_errors_name_the_file_and_offset(three_dirs, monkeypatch):
    def broken(fd, buffers, offset):
        raise OSError(errno.EIO, "Input/output error")

    with PageReader(three_dirs) as reader:
        monkeypatch.setattr(page_io.os, "preadv", broken)
        with pytest.raises(StoreError, match=r"blocks.dat: read of \d+ bytes at offset \d+ "
                                             r"failed \(Input/output error\)"):
            reader.read_page(0)


def test_a_dead_reader_thread_does_not_hang_the_consumer(one_dir, monkeypatch):
    monkeypatch.setattr(PageReader, "_serve", lambda self, directory, slot: None)
    with PageReader(one_dir) as reader:
        with pytest.raises(RuntimeError, match="stopped before page 0"):
            next(reader.stream())


# ------------------------------------------------------------------ O_DIRECT --
def test_o_direct_refused_at_open_falls_back(three_dirs, monkeypatch):
    real_open = os.open

    def no_direct(path, flags, *args):
        if flags & getattr(os, "O_DIRECT", 0):
            raise OSError(errno.EINVAL, "Invalid argument", path)
        return real_open(path, flags, *args)

    monkeypatch.setattr(page_io.os, "open", no_direct)
    with PageReader(three_dirs) as reader:
        assert reader.direct_io == [False, False, False]
        assert all(same_page(three_dirs, i, page) for i, page in reader.stream())
    with pytest.raises(StoreError, match="refuses O_DIRECT"):
        PageReader(three_dirs, direct=True)


@pytest.mark.skipif(not hasattr(os, "O_DIRECT"), reason="no O_DIRECT on this platform")
def test_o_direct_refused_at_read_falls_back(three_dirs, tmp_path, monkeypatch):
    try:
        fd, direct = page_io.open_for_streaming(three_dirs.block_files[0])
        os.close(fd)
    except OSError:
        direct = False
    if not direct:
        pytest.skip("the file system of the test store refuses O_DIRECT")
    real_preadv = os.preadv
    with PageReader(three_dirs) as reader:
        refused = {reader._files[1].fd}

        def preadv(fd, buffers, offset):
            if fd in refused:
                raise OSError(errno.EINVAL, "Invalid argument")
            return real_preadv(fd, buffers, offset)

        monkeypatch.setattr(page_io.os, "preadv", preadv)
        assert all(same_page(three_dirs, i, page) for i, page in reader.stream())
        assert reader.direct_io == [True, False, True]


# ----------------------------------------------------------- host budget --
def test_every_page_fits():
    plan = plan_host_cache([100] * 10, fixed_bytes=100, readahead_bytes=500, budget=1100)
    assert plan.all_cached and plan.cached == tuple(range(10)) and plan.streamed == ()
    assert plan.readahead_bytes == 0 and plan.used_bytes == 1100
    assert plan.rho(k=12.0) == config.RHO_IN_MEMORY


def test_a_prefix_of_pages_fits():
    plan = plan_host_cache([100] * 10, fixed_bytes=300, readahead_bytes=200, budget=1000)
    assert plan.cached == (0, 1, 2, 3, 4) and plan.streamed == (5, 6, 7, 8, 9)
    assert (plan.cached_bytes, plan.streamed_bytes) == (500, 500)
    assert plan.used_bytes <= plan.budget_bytes and plan.readahead_bytes == 200
    assert plan.rho(k=12.0) == 12.0 and "5 pages cached" in plan.describe()
    # the prefix ends at the first page that does not fit
    plan = plan_host_cache([100, 300, 100], fixed_bytes=0, readahead_bytes=50, budget=400)
    assert plan.cached == (0,) and plan.streamed == (1, 2)
    # room for no page: everything streamed
    plan = plan_host_cache([100] * 3, fixed_bytes=900, readahead_bytes=100, budget=1000)
    assert plan.cached == () and plan.cached_bytes == 0 and plan.streamed == (0, 1, 2)


def test_budget_below_vertex_data_and_readahead_is_an_error():
    with pytest.raises(ConfigError, match="too small.*vertex arrays"):
        plan_host_cache([100] * 10, fixed_bytes=900, readahead_bytes=200, budget=1000)
    with pytest.raises(ConfigError, match="host_memory"):
        plan_host_cache([100], fixed_bytes=0, readahead_bytes=0, budget=0)
    with pytest.raises(ConfigError, match=r"page_sizes\[1\]"):
        plan_host_cache([100, -1], fixed_bytes=0, readahead_bytes=0, budget=10)


def test_default_budget_is_a_fraction_of_available_memory(monkeypatch, one_dir):
    monkeypatch.setattr(config, "available_host_memory", lambda: 1000)
    monkeypatch.setattr(config, "HOST_CACHE_FRACTION", 0.25)
    assert host_cache_budget() == 250
    assert host_cache_budget(4096) == 4096
    plan = plan_host_cache([100, 100, 100], fixed_bytes=50, readahead_bytes=100)
    assert isinstance(plan, HostCachePlan) and plan.budget_bytes == 250
    assert plan.cached == (0,)
    arrays = store_array_bytes(one_dir)
    assert arrays >= one_dir.out_targets.nbytes + one_dir.in_offsets.nbytes > 0


# ------------------------------------------------------------------ read ratio --
@pytest.fixture
def small_measurement(monkeypatch):
    monkeypatch.setattr(config, "READ_RATIO_FILE_BYTES", 1 << 20)
    monkeypatch.setattr(config, "READ_RATIO_RANDOM_READS", 64)


def test_read_ratio_is_measured_once_and_cached(tmp_path, small_measurement, monkeypatch):
    k = read_ratio.measure_read_ratio(tmp_path)
    assert k >= 1.0
    assert list(tmp_path.iterdir()) == []  # the temporary file is gone
    cache = Path(os.environ["GARAPHPY_CACHE"]) / read_ratio.CACHE_FILE
    entry = json.loads(cache.read_text())[str(tmp_path.resolve())]
    assert entry["sequential_bytes_per_s"] > 0 and entry["random_bytes_per_s"] > 0

    def no_measuring(*args):
        raise AssertionError("measured again")

    monkeypatch.setattr(read_ratio, "_sequential", no_measuring)
    assert read_ratio.measure_read_ratio(tmp_path) == k
    assert read_ratio.storage_read_ratio([tmp_path, str(tmp_path)]) == pytest.approx(k)
    with pytest.raises(AssertionError, match="measured again"):
        read_ratio.measure_read_ratio(tmp_path, refresh=True)


def test_read_ratio_survives_an_unwritable_cache(tmp_path, small_measurement, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("GARAPHPY_CACHE", str(blocker / "cache"))
    data = tmp_path / "data"
    data.mkdir()
    assert read_ratio.measure_read_ratio(data) >= 1.0


def test_read_ratio_configured_or_given(tmp_path, monkeypatch):
    assert read_ratio.storage_read_ratio(tmp_path / "not-measured", k=7) == 7.0
    monkeypatch.setattr(config, "READ_RATIO", 3.5)
    assert read_ratio.storage_read_ratio([tmp_path / "not-measured"]) == 3.5
    with pytest.raises(ConfigError, match="k=0.5"):
        read_ratio.storage_read_ratio(tmp_path, k=0.5)
    monkeypatch.setattr(config, "READ_RATIO", "fast")
    with pytest.raises(ConfigError, match="config.READ_RATIO"):
        read_ratio.storage_read_ratio(tmp_path)
    with pytest.raises(StoreError, match="no such directory"):
        read_ratio.measure_read_ratio(tmp_path / "missing")
