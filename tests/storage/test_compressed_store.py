"""Stores built with ``compress``: pages on disk compressed, read back plain.

Every way a page is read (``Store.read_page``, ``Store.csc``, the
``PageReader``'s streams and single reads) must give the arrays of the same
page in a plain store of the same graph; damage to a compressed page's
bytes is still found by the checksums; plain stores, older ones included,
still open, and a page format this version does not know is refused.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from garaphpy import config
from garaphpy.errors import StoreCorruptError, StoreError
from garaphpy.options import BuildOptions
from garaphpy.storage.builder import build_store
from garaphpy.storage.host_budget import plan_run_pages, run_fixed_bytes
from garaphpy.storage.page_io import (
    DECODERS, PageReader, page_buffer_bytes, staging_buffer_bytes)
from garaphpy.storage.readers import from_arrays
from garaphpy.storage.store import Store, read_manifest, write_manifest

EDGES = 30000

#: the readers that hand out plain pages (``"stored"`` gives them as stored)
DECODING = [decode for decode in DECODERS if decode != "stored"]


def build(directory: Path, compress: bool, weighted: bool = True) -> Store:
    """A graph of skewed in-degrees, some vertices split over shards, in
    small pages of several 4 KiB blocks over two storage directories."""
    rng = np.random.default_rng(7)
    dst = np.minimum(rng.zipf(1.6, EDGES) - 1, 2999)
    src = rng.integers(0, 3000, EDGES)
    weights = rng.integers(1, 100, EDGES) if weighted else None
    ssd = directory / "ssd"
    ssd.mkdir(parents=True, exist_ok=True)
    return build_store(from_arrays(src, dst, weights, num_vertices=3000),
                       directory / "store",
                       BuildOptions(block_bytes=4096, max_page_bytes=24000, max_shard_edges=900,
                                    storage_dirs=[str(ssd)], compress=compress),
                       progress=False)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    base = tmp_path_factory.mktemp("compressed")
    return build(base / "plain", False), build(base / "packed", True)


def assert_same_page(page, expected):
    np.testing.assert_array_equal(page.sources, expected.sources)
    np.testing.assert_array_equal(page.idxoff, expected.idxoff)
    np.testing.assert_array_equal(page.weights, expected.weights)
    assert page.sources.dtype == expected.sources.dtype
    assert page.image.nbytes == expected.image.nbytes


def test_the_store_records_its_compressed_pages(stores):
    plain, packed = stores
    assert packed.manifest["format_version"] == config.COMPRESSED_STORE_FORMAT_VERSION
    assert packed.page_codec == "gap-bp128" and plain.page_codec == "plain"
    assert plain.manifest["format_version"] == config.STORE_FORMAT_VERSION
    assert len(packed.pages) == len(plain.pages) > 5
    # a vertex split over shards, and a page starting inside its in-edges
    assert packed.shards["split"].any()
    assert any(info.edge_begin > packed.in_offsets[info.first_vertex] for info in packed.pages)
    assert all(info.compressed for info in packed.pages)
    assert not any(info.compressed for info in plain.pages)
    for mine, theirs in zip(packed.pages, plain.pages):
        assert (mine.nbytes, mine.idxoff_offset, mine.num_edges) == \
            (theirs.nbytes, theirs.idxoff_offset, theirs.num_edges)
        assert mine.disk_bytes < 0.8 * theirs.disk_bytes
    assert packed.blocks["nbytes"].sum() == sum(info.stored_nbytes for info in packed.pages)
    per_edge = packed.blocks["nbytes"].sum() / packed.num_edges
    assert f"pages stored gap-bp128: {len(packed.pages)} pages of {len(packed.pages)} " \
        f"compressed" in packed.describe()
    assert f"({per_edge:.2f} bytes an edge)" in packed.describe()
    assert "pages stored" not in plain.describe()


@pytest.mark.parametrize("decode", DECODING)
def test_every_read_gives_the_plain_pages(stores, decode):
    plain, packed = stores
    expected = [plain.read_page(i) for i in range(len(plain.pages))]
    for i, page in enumerate(expected):
        assert_same_page(packed.read_page(i), page)
    with PageReader(packed, check=True, decode=decode) as reader:
        order = list(range(len(expected)))[::-1] + [0, 2]
        for index, page in reader.stream(order):
            assert_same_page(page, expected[index])
        assert reader.bytes_read == sum(packed.pages[i].stored_nbytes for i in order)
        assert reader.bytes_delivered == reader.bytes_read
        for i in (1, 3):
            assert_same_page(reader.read_page(i), expected[i])
    for mine, theirs in zip(packed.csc(), plain.csc()):
        np.testing.assert_array_equal(mine, theirs)


def test_a_range_of_a_pages_edges_reads_as_the_page_holds_them(stores):
    """``Store.read_edges`` (a partition's share of a page): the sources and
    values of the page's edges in range, from a plain store's blocks that
    hold them alone and from a compressed page decoded."""
    plain, packed = stores
    for index in range(len(plain.pages)):
        info = plain.pages[index]
        page = plain.read_page(index)
        for first, last in ((0, info.num_edges), (1, 700), (info.num_edges // 2 + 3,
                                                            info.num_edges - 1), (5, 5)):
            for store in (plain, packed):
                sources = np.full(last - first, -1, plain.vertex_dtype)
                weights = np.zeros(last - first, plain.weight_dtype)
                store.read_edges(index, info.edge_begin + first, info.edge_begin + last,
                                 sources, weights)
                np.testing.assert_array_equal(sources, page.sources[first:last])
                np.testing.assert_array_equal(weights, page.weights[first:last])
    with pytest.raises(ValueError, match="not in page 0"):
        plain.read_edges(0, 0, plain.pages[0].num_edges + 1, np.empty(0, np.int32))


@pytest.mark.parametrize("decode", DECODING)
def test_unweighted_and_buffered_reads(tmp_path, decode):
    plain, packed = build(tmp_path / "plain", False, False), build(tmp_path / "packed", True,
                                                                  False)
    with PageReader(packed, direct=False, readahead_bytes=PageReader(packed).buffer_bytes,
                    decode=decode) as reader:
        for index, page in reader.stream():
            expected = plain.read_page(index)
            assert page.weights is None
            np.testing.assert_array_equal(page.sources, expected.sources)
            np.testing.assert_array_equal(page.idxoff, expected.idxoff)


def test_int64_ids_stay_plain(tmp_path, monkeypatch, stores):
    """The codec packs int32 ids: a store of int64 ids is written plain."""
    plain, _ = stores
    monkeypatch.setattr(config, "INT32_VERTEX_LIMIT", 100)
    wide = build(tmp_path, True)
    assert wide.vertex_dtype == np.int64
    assert not any(info.compressed for info in wide.pages)
    assert wide.manifest["format_version"] == config.STORE_FORMAT_VERSION
    for mine, theirs in zip(wide.csc(), plain.csc()):
        np.testing.assert_array_equal(mine, theirs)


def damage(store: Store, page: int) -> None:
    """Flip one byte in the middle of the first block of ``page`` on disk."""
    block = store.blocks[store.pages[page].first_block]
    path = store.block_files[int(block["directory"])]
    offset = int(block["offset"]) + int(block["nbytes"]) // 2
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x5A
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("decode", DECODERS)
def test_a_damaged_compressed_page_is_found(tmp_path, decode):
    store = build(tmp_path, True)
    damage(store, 2)
    store = Store.open(store.path, verify="none")
    with pytest.raises(StoreCorruptError, match="checksum"):
        store.read_page(2)
    with pytest.raises(StoreCorruptError, match="checksum"):
        store.csc()
    with PageReader(store, decode=decode) as reader:
        with pytest.raises(StoreCorruptError, match="checksum mismatch in block 0 of page 2"):
            for _ in reader.stream():
                pass
    with pytest.raises(StoreCorruptError, match="checksum"):
        Store.open(store.path, verify="full")


@pytest.mark.parametrize("decode", DECODING)
def test_a_page_that_does_not_decode_is_refused_unchecked(tmp_path, decode):
    """Without checksums the decoder still refuses a stream that contradicts
    its page (here: its block table's length word)."""
    store = build(tmp_path, True)
    block = store.blocks[store.pages[1].first_block]
    path = store.block_files[int(block["directory"])]
    data = bytearray(path.read_bytes())
    data[int(block["offset"])] ^= 0xFF             # the stream's block count
    path.write_bytes(bytes(data))
    store = Store.open(store.path, verify="none")
    with pytest.raises(StoreCorruptError, match="page 1"):
        store.read_page(1, check=False)
    with PageReader(store, check=False, decode=decode) as reader:
        with pytest.raises(StoreCorruptError, match="page 1"):
            reader.read_page(1)
        with pytest.raises(StoreCorruptError, match="page 1"):
            for _ in reader.stream([0, 1, 2]):
                pass
        # the reader serves on: the pages after the bad one
        assert_same_page(reader.read_page(2), store.read_page(2))


@pytest.mark.parametrize("weighted", [True, False])
def test_a_stored_reader_gives_compressed_pages_as_stored(tmp_path, stores, weighted):
    """decode="stored": a compressed page's image as stored (its blocks
    checked), the bytes ``Store.read_stored`` gives, in streams, read-ahead
    and single reads; a plain store's pages come plain through it."""
    plain, packed = stores if weighted else (build(tmp_path / "plain", False, False),
                                             build(tmp_path / "packed", True, False))
    count = len(packed.pages)
    order = list(range(count))[::-1] + [0, 2]
    with PageReader(packed, decode="stored",
                    readahead_bytes=2 * PageReader(packed, decode="stored").buffer_bytes
                    ) as reader:
        # every page is compressed: a buffer holds the largest stored image
        assert reader.buffer_bytes == staging_buffer_bytes(packed) < page_buffer_bytes(packed)
        for index, page in reader.stream(order):
            assert page.stored and page.sources is None and page.weights is None
            np.testing.assert_array_equal(page.image, packed.read_stored(index))
        assert reader.bytes_read == sum(packed.pages[i].stored_nbytes for i in order)
        page = reader.read_page(1)
        assert page.stored
        np.testing.assert_array_equal(page.image, packed.read_stored(1))
        out = np.zeros(packed.pages[3].disk_bytes, np.uint8)
        assert reader.read_page(3, out=out).image.ctypes.data == out.ctypes.data
        np.testing.assert_array_equal(out, packed.read_stored(3))
        with pytest.raises(Exception, match="at least"):
            reader.read_page(3, out=np.zeros(packed.pages[3].disk_bytes - 1, np.uint8))
    with PageReader(plain, decode="stored") as reader:
        for index, page in reader.stream():
            assert not page.stored
            np.testing.assert_array_equal(page.sources, plain.read_page(index).sources)


def test_the_consumer_decodes_only_what_it_takes_and_keeps_its_staging(stores):
    """decode="consumer": no page is decoded before the consumer takes it (a
    read-ahead dropped unused costs no decode), and every staging buffer
    comes back, however the streams end."""
    plain, packed = stores
    decoded = []
    with PageReader(packed, decode="consumer") as reader:
        original = packed.decode_page

        def counting(info, *args, **kwargs):
            decoded.append(info.index)
            return original(info, *args, **kwargs)

        packed.decode_page = counting
        try:
            for rounds in range(3):
                for taken, (index, page) in enumerate(reader.stream()):
                    assert_same_page(page, plain.read_page(index))
                    if taken == 1:
                        break           # the read-ahead beyond page 1 is dropped
            assert decoded == [0, 1] * 3
            assert reader.bytes_dropped > 0
            assert len(reader._decoder.staging) <= reader.max_buffers + 1
            reader.prefetch([3, 4])
            reader.cancel_prefetch()
            assert decoded == [0, 1] * 3
            for index, page in reader.stream([4, 3]):
                assert_same_page(page, plain.read_page(index))
        finally:
            del packed.decode_page
    assert decoded == [0, 1] * 3 + [4, 3]
    assert len(reader._decoder.staging) <= reader.max_buffers + 1


def test_a_plain_store_of_before_compression_still_opens(tmp_path, stores):
    """A store written before compressed pages existed: no ``compress``
    option, no page format, no codec in the page rows."""
    plain, _ = stores
    store = build(tmp_path, False)
    manifest = read_manifest(store.path)
    manifest["options"].pop("compress")
    assert "page_codec" not in manifest["layout"]
    assert all("codec" not in row for row in manifest["pages"])
    write_manifest(store.path, manifest)
    old = Store.open(store.path, verify="full")
    assert old.page_codec == "plain"
    for i in range(len(old.pages)):
        assert_same_page(old.read_page(i), plain.read_page(i))


def test_the_host_budget_pays_for_the_staging_buffers(stores):
    """A compressed page in flight holds a page buffer and a staging buffer."""
    plain, packed = stores
    stored = max(info.stored_nbytes for info in packed.pages)
    staging = -(-stored // config.BLOCK_ALIGNMENT) * config.BLOCK_ALIGNMENT
    assert staging_buffer_bytes(packed) == staging and staging_buffer_bytes(plain) == 0
    pages = sum(info.nbytes for info in packed.pages)
    ahead = page_buffer_bytes(packed)
    for readers in (1, 2):
        plan, readahead = plan_run_pages(packed, readers, run_fixed_bytes(packed) + pages, ahead)
        assert plan.all_cached and readahead == ahead       # it all fits: nothing paid
        small = run_fixed_bytes(packed) + readers * (ahead + 2 * staging) + pages // 4
        plan, _ = plan_run_pages(packed, readers, small, ahead)
        plain_plan, _ = plan_run_pages(plain, readers, small, ahead)
        assert not plan.all_cached and len(plan.cached) < len(plain_plan.cached)
        assert plain_plan.readahead_bytes == readers * ahead
        assert plan.readahead_bytes == readers * (ahead + 2 * staging)
        with PageReader(packed, readahead_bytes=ahead) as reader:
            for index in (0, 1):
                reader.read_page(index)
            for _ in reader.stream():
                pass
            assert len(reader._decoder.staging) <= 2


def test_the_option_keys_a_store_only_when_set():
    assert "compress" not in BuildOptions().content_options()
    assert BuildOptions(compress=True).content_options()["compress"] is True


@pytest.mark.parametrize("where", ["layout", "page"])
def test_an_unknown_page_format_is_refused(tmp_path, where):
    store = build(tmp_path, True)
    manifest = json.loads((store.path / "manifest.json").read_text())
    if where == "layout":
        manifest["layout"]["page_codec"] = "zstd-9"
    else:
        manifest["pages"][3]["codec"] = "zstd-9"
    write_manifest(store.path, manifest)
    with pytest.raises(StoreError, match="zstd-9"):
        Store.open(store.path)


def test_a_newer_store_version_is_refused(tmp_path):
    store = build(tmp_path, True)
    manifest = read_manifest(store.path)
    manifest["format_version"] = max(config.READABLE_STORE_FORMAT_VERSIONS) + 1
    write_manifest(store.path, manifest)
    with pytest.raises(StoreError, match="format version"):
        Store.open(store.path)


def test_a_consumer_decode_inside_a_parallel_section_goes_on(stores, monkeypatch):
    """Without a thread-safe numba layer parallel launches are serialized by a
    lock; a walk inside one's section (a pull over pages) decodes its pages in
    the same thread, so the lock must let it in again, not hang."""
    from garaphpy import _numba_setup

    plain, packed = stores
    monkeypatch.setattr(_numba_setup, "THREADSAFE", False)
    taken = []

    def walk():
        with PageReader(packed, decode="consumer") as reader, _numba_setup.parallel_section():
            for index, page in reader.stream():
                assert_same_page(page, plain.read_page(index))
                taken.append(index)

    thread = threading.Thread(target=walk, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive() and taken == list(range(len(packed.pages)))
