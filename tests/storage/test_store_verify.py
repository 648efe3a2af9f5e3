"""Levels of a store's check when it is opened (``full``, ``quick``, ``sizes``,
``none``, ``auto``): ``auto`` reads every block's CRC-32 unless a full check
(or the build) recorded these very files, and a changed file brings the
full check back.  Values are checked against SciPy's BFS."""

from __future__ import annotations

import os

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

import garaphpy
from garaphpy.errors import ConfigError, StoreCorruptError
from garaphpy.storage import verify_levels
from garaphpy.storage.store import Store

SOURCES = np.array([0, 0, 1, 2, 3, 4, 5, 5])
TARGETS = np.array([1, 2, 3, 3, 4, 5, 0, 6])


@pytest.fixture
def store_path(tmp_path, monkeypatch):
    monkeypatch.setattr(verify_levels, "_CHECKED", {})
    path = tmp_path / "g"
    garaphpy.Graph.from_arrays(SOURCES, TARGETS, num_vertices=7, store=path)
    return path


@pytest.fixture
def full_checks(monkeypatch):
    calls = []
    real = Store.verify_blocks

    def counted(store):
        calls.append(store.path)
        return real(store)

    monkeypatch.setattr(Store, "verify_blocks", counted)
    return calls


def _damage_a_block_keeping_its_mtime(path) -> None:
    blocks = path / "blocks.dat"
    before = os.stat(blocks)
    data = bytearray(blocks.read_bytes())
    data[0] ^= 0xFF
    blocks.write_bytes(bytes(data))
    os.utime(blocks, ns=(before.st_atime_ns, before.st_mtime_ns))


def _bfs_depths() -> np.ndarray:
    matrix = csr_matrix((np.ones(SOURCES.size), (SOURCES, TARGETS)), shape=(7, 7))
    depth = shortest_path(matrix, unweighted=True, indices=0)
    return np.where(np.isinf(depth), -1, depth).astype(np.int64)


def test_a_built_store_opens_with_the_cheap_check_and_runs(store_path, full_checks):
    graph = garaphpy.Graph.open(store_path)             # auto
    assert full_checks == []
    result = garaphpy.run(graph, "bfs", sources=[0], mode="cpu", threads=1)
    np.testing.assert_array_equal(result.values, _bfs_depths())


def test_auto_checks_fully_when_a_file_changed(store_path, full_checks):
    blocks = store_path / "blocks.dat"
    os.utime(blocks, ns=(os.stat(blocks).st_atime_ns, os.stat(blocks).st_mtime_ns + 10**9))
    Store.open(store_path)
    assert full_checks == [store_path]
    Store.open(store_path)                              # recorded again: cheap
    assert full_checks == [store_path]


def test_auto_checks_fully_without_a_record_and_after_it_expired(store_path, full_checks,
                                                                  monkeypatch):
    (store_path / verify_levels.STAMP).unlink()
    monkeypatch.setattr(verify_levels, "_CHECKED", {})     # as a new process
    Store.open(store_path)
    assert len(full_checks) == 1
    monkeypatch.setattr(verify_levels, "_CHECKED", {})
    monkeypatch.setattr(verify_levels.config, "STORE_FULL_CHECK_VALID_S", -1.0)
    Store.open(store_path)
    assert len(full_checks) == 2


def test_full_finds_damage_that_the_cheap_levels_leave_to_the_reads(store_path):
    _damage_a_block_keeping_its_mtime(store_path)
    for level in ("auto", "sizes", "none", "quick"):
        store = Store.open(store_path, verify=level)
        with pytest.raises(StoreCorruptError, match="checksum mismatch"):
            store.read_page(0)
        store.close()
    with pytest.raises(StoreCorruptError, match="checksum mismatch"):
        Store.open(store_path, verify="full")


def test_sizes_finds_a_truncated_block_file_and_none_does_not(store_path):
    blocks = store_path / "blocks.dat"
    blocks.write_bytes(blocks.read_bytes()[:16])
    with pytest.raises(StoreCorruptError, match="truncated"):
        Store.open(store_path, verify="sizes")
    Store.open(store_path, verify="none").close()


def test_an_unknown_level_is_refused_naming_it(store_path):
    with pytest.raises(ConfigError, match="verify='most'"):
        Store.open(store_path, verify="most")


def test_the_console_flag(tmp_path, capsys):
    from garaphpy import console

    graph, store = str(tmp_path / "g.el"), tmp_path / "s"
    (tmp_path / "g.el").write_text("".join(f"{s} {t}\n" for s, t in zip(SOURCES, TARGETS)))
    arguments = ["bfs", graph, "--store", str(store), "--source", "0", "-q",
                 "-o", str(tmp_path / "d.txt")]
    assert console.main(arguments) == 0
    _damage_a_block_keeping_its_mtime(store)
    assert console.main(arguments + ["--store-verify", "full"]) == 1
    assert "checksum mismatch" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        console.main(arguments + ["--store-verify", "most"])
    assert "--store-verify" in capsys.readouterr().err


def test_the_config_key(tmp_path, capsys):
    from garaphpy.cli import main

    config = tmp_path / "run.toml"
    config.write_text('graph = "grid:4x3"\n[store]\npath = "s"\nverify = "full"\n')
    assert main([str(config), "-q"]) == 0
    _damage_a_block_keeping_its_mtime(tmp_path / "s")
    assert main([str(config), "-q"]) == 1
    assert "checksum mismatch" in capsys.readouterr().err
    assert main([str(config), "-q", "--set", "store.verify='most'"]) == 2
    assert "store.verify" in capsys.readouterr().err


def _page_blocks(store, info):
    return store.blocks[info.first_block:info.first_block + info.num_blocks]


def test_the_csc_reads_sources_and_weights_of_many_blocks_as_the_pages_hold_them(tmp_path):
    rng = np.random.default_rng(5)
    src, dst = rng.integers(0, 3000, 20000), rng.integers(0, 3000, 20000)
    weights = rng.random(20000)
    graph = garaphpy.Graph.from_arrays(src, dst, weights, num_vertices=3000,
                                       store=tmp_path / "g", block_bytes=4096,
                                       max_page_bytes=64 * 4096)
    store = graph.store
    assert len(store.pages) > 1 and all(info.num_blocks > 3 for info in store.pages)
    pages = [store.read_page(info.index) for info in store.pages]
    offsets, sources, csc_weights = store.csc()
    np.testing.assert_array_equal(sources, np.concatenate([p.sources for p in pages]))
    np.testing.assert_array_equal(csc_weights, np.concatenate([p.weights for p in pages]))
    # and they are the edges given, grouped by destination
    order = np.lexsort((src, dst))
    kept = np.ones(order.size, bool)
    kept[1:] = (np.diff(dst[order]) != 0) | (np.diff(src[order]) != 0)
    np.testing.assert_array_equal(np.repeat(np.arange(3000), np.diff(offsets)),
                                  dst[order][kept])


def test_the_csc_finds_damage_in_what_it_reads_and_skips_idxoff_only_blocks(tmp_path):
    rng = np.random.default_rng(6)
    src, dst = rng.integers(0, 3000, 20000), rng.integers(0, 3000, 20000)
    path = tmp_path / "g"
    store = garaphpy.Graph.from_arrays(src, dst, num_vertices=3000, store=path,
                                       block_bytes=4096, compress=False).store
    info = store.pages[0]
    sources_end = info.num_edges * store.vertex_dtype.itemsize
    blocks = _page_blocks(store, info)
    block_bytes = store.manifest["layout"]["block_bytes"]
    idxoff_only = [b for b in blocks if int(b["index"]) * block_bytes >= sources_end]
    assert idxoff_only
    data = bytearray((path / "blocks.dat").read_bytes())
    data[int(idxoff_only[-1]["offset"])] ^= 0xFF           # IdxOff only: the CSC skips it
    (path / "blocks.dat").write_bytes(bytes(data))
    reopened = Store.open(path, verify="none")
    reopened.csc()
    with pytest.raises(StoreCorruptError, match="checksum mismatch"):
        reopened.read_page(0)
    data[int(blocks[0]["offset"]) + 5] ^= 0xFF              # a source id
    (path / "blocks.dat").write_bytes(bytes(data))
    reopened = Store.open(path, verify="none")
    with pytest.raises(StoreCorruptError, match="checksum mismatch in block 0 of page 0"):
        reopened.csc()


@pytest.mark.parametrize("num_vertices", [2000, 2001, 4099])
def test_the_csc_of_a_page_in_one_block_with_idxoff_and_padding_between(tmp_path, num_vertices):
    """A weighted chain whose page is one block: sources, then IdxOff (not
    read), then weights, then the block's padding (not read); both skipped
    stretches must keep their own bytes for the block's checksum."""
    src = np.arange(num_vertices - 1)
    weights = 1.0 + src % 7
    store = garaphpy.Graph.from_arrays(src, src + 1, weights, num_vertices=num_vertices,
                                       store=tmp_path / "g").store
    assert [info.num_blocks for info in store.pages] == [1]
    offsets, sources, csc_weights = store.csc()
    page = store.read_page(0)
    np.testing.assert_array_equal(sources, page.sources)
    np.testing.assert_array_equal(csc_weights, page.weights)
    np.testing.assert_array_equal(np.diff(offsets), np.r_[0, np.ones(num_vertices - 1, int)])


def _damage_out_targets_keeping_size(path) -> None:
    targets = path / "vertices" / "out_targets.bin"
    before = os.stat(targets)
    data = bytearray(targets.read_bytes())
    data[0] ^= 0x01
    targets.write_bytes(bytes(data))
    os.utime(targets, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_the_out_edge_csr_is_mapped_not_read_and_still_checked(store_path):
    store = Store.open(store_path, verify="sizes")
    for array in (store.out_targets, store.out_offsets):
        assert isinstance(array.base, np.memmap) and array.flags.writeable
    expected = np.sort(TARGETS[SOURCES == 5])
    row = store.out_targets[store.out_offsets[5]:store.out_offsets[6]]
    np.testing.assert_array_equal(np.sort(row), expected)
    store.close()
    _damage_out_targets_keeping_size(store_path)
    for level in ("quick", "full"):
        with pytest.raises(StoreCorruptError, match="out_targets.bin: checksum mismatch"):
            Store.open(store_path, verify=level)
    Store.open(store_path, verify="sizes").close()


def test_a_store_replaced_after_opening_keeps_its_mapped_out_edges(store_path):
    graph = garaphpy.Graph.open(store_path)
    before = graph.store.out_targets.copy()
    garaphpy.Graph.from_arrays(TARGETS, SOURCES, num_vertices=7, store=store_path)
    assert not np.array_equal(Store.open(store_path).out_targets, before)
    np.testing.assert_array_equal(graph.store.out_targets, before)
    result = garaphpy.run(graph, "bfs", sources=[0], mode="cpu", threads=1)
    np.testing.assert_array_equal(result.values, _bfs_depths())
