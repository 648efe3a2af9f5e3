"""Preprocessing into a store: content, invariants, atomicity, reuse, corruption."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from garaphpy import config
from garaphpy.errors import GraphInputError, StoreCorruptError, StoreError
from garaphpy.storage import layout
from garaphpy.storage.builder import BuildOptions, block_directory, build_store
from garaphpy.storage.edges import EdgeChunk, EdgeSource
from garaphpy.storage.readers import from_arrays
from garaphpy.storage.store import Store

import naive

REPO = Path(__file__).resolve().parents[2]


def random_edges(seed, n=300, m=3000, id_scale=1, weighted=True, real=False):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, m) * id_scale + 5
    dst = rng.integers(0, n, m) * id_scale + 5
    dst[:50] = src[:50]  # self-loops
    src[50:150], dst[50:150] = src[150:250], dst[150:250]  # duplicates
    weight = None
    if weighted:
        weight = rng.random(m) * 10 if real else rng.integers(1, 100, m)
    return src, dst, weight


def store_edges(store: Store):
    """(u, v, w) of every stored edge, in CSC order, read through the pages."""
    in_offsets, sources, weights = store.csc()
    destinations = np.repeat(np.arange(store.num_vertices), np.diff(in_offsets))
    w = weights if weights is not None else [None] * sources.size
    return [(int(u), int(v), None if x is None else x.item())
            for u, v, x in zip(sources, destinations, w)]


def build(tmp_path, source, name="store", **options):
    return build_store(source, tmp_path / name, BuildOptions(**options), progress=False)


@pytest.mark.parametrize("duplicates", ["keep", "drop", "min", "max", "sum"])
@pytest.mark.parametrize("self_loops", ["keep", "drop"])
@pytest.mark.parametrize("directed", [True, False])
def test_store_holds_the_cleaned_graph(tmp_path, duplicates, self_loops, directed):
    src, dst, weight = random_edges(1, id_scale=1000)  # sparse ids: renumbered
    store = build(tmp_path, from_arrays(src, dst, weight), directed=directed,
                  self_loops=self_loops, duplicates=duplicates, max_shard_edges=200)
    expected = naive.clean_edges(src, dst, weight, directed=directed, self_loops=self_loops,
                                 duplicates=duplicates)
    assert store.num_vertices == expected["n"]
    assert np.array_equal(store.original_ids(), expected["original_ids"])
    assert store_edges(store) == expected["edges"]
    targets = naive.csr_targets(expected["n"], expected["edges"])
    for v in range(store.num_vertices):
        row = store.out_targets[store.out_offsets[v]:store.out_offsets[v + 1]]
        assert list(row) == targets[v]
    assert np.array_equal(store.in_degree, np.diff(store.in_offsets))
    assert np.array_equal(store.out_degree, np.diff(store.out_offsets))
    summary = store.summary
    assert summary["edges_read"] == len(src)
    assert summary["self_loops_found"] == int(np.sum(src == dst))
    assert summary["num_edges"] == len(expected["edges"]) == store.num_edges


@pytest.mark.parametrize("weights", ["none", "int", "float32"])
def test_interpreted_and_compiled_duplicate_merges_agree(tmp_path, monkeypatch, weights):
    # small builds run the merge kernels as Python (config.INTERPRET_MAX_ITEMS):
    # each policy must store the same graph either way
    rng = np.random.default_rng(11)
    src, dst = rng.integers(0, 40, 2000), rng.integers(0, 40, 2000)    # many duplicates
    weight = {"none": None, "int": rng.integers(-50, 50, 2000),
              "float32": rng.standard_normal(2000).astype(np.float32)}[weights]
    for duplicates in ["drop", "min", "max", "sum"]:
        stores = []
        for kernels, limit in [("interpreted", 1 << 20), ("compiled", -1)]:
            monkeypatch.setattr(config, "INTERPRET_MAX_ITEMS", limit)
            stores.append(build(tmp_path, from_arrays(src, dst, weight),
                                name=f"{duplicates}-{kernels}", duplicates=duplicates))
        interpreted, compiled = stores
        assert interpreted.summary["duplicates_removed"] > 0
        assert store_edges(interpreted) == store_edges(compiled)


def test_declared_vertices_keep_isolated_ones_and_ids(tmp_path):
    store = build(tmp_path, from_arrays([0, 2], [2, 5], num_vertices=9))
    assert store.num_vertices == 9
    assert store.summary["isolated_vertices"] == 6
    assert list(store.original_ids()) == list(range(9))
    assert store.manifest["id_mapping"] == {"kind": "offset", "base": 0}


def test_store_invariants(tmp_path):
    rng = np.random.default_rng(3)
    n = 5000
    dst = np.concatenate([rng.integers(0, n, 40000), np.full(3000, 17)])  # one heavy vertex
    src = rng.integers(0, n, dst.size)
    weight = rng.random(dst.size).astype(np.float32)   # arrays keep their precision
    store = build(tmp_path, from_arrays(src, dst, weight, num_vertices=n), max_shard_edges=1000,
                  gpu_memory=400_000, n_streams=2, max_page_bytes=150_000, block_bytes=8192)
    shards = store.shards
    # every edge in exactly one shard, shards in order
    assert shards["edge_begin"][0] == 0 and shards["edge_end"][-1] == store.num_edges
    assert np.array_equal(shards["edge_begin"][1:], shards["edge_end"][:-1])
    assert shards["split"].sum() >= 3  # vertex 17 has > 3000 in-edges
    slots = config.SHARD_SHARED_MEMORY_BYTES // config.SHARD_SLOT_BYTES
    for shard in shards:
        edges = int(shard["edge_end"] - shard["edge_begin"])
        assert shard["replication"] == layout.replication_factor(edges, int(shard["num_vertices"]))
        assert shard["num_vertices"] * shard["replication"] <= slots or shard["split"]
    page_bytes = store.manifest["layout"]["page_bytes"]
    assert page_bytes <= 150_000
    assert len(store.pages) > 3
    for info in store.pages:
        assert info.nbytes <= page_bytes
        page = store.read_page(info.index)
        page_shards = store.page_shards(info.index)
        assert np.all(page_shards["page"] == info.index)
        for shard in page_shards:
            lo = int(shard["edge_begin"]) - info.edge_begin
            hi = int(shard["edge_end"]) - info.edge_begin
            offsets = page.idxoff[lo:hi]
            assert offsets.size == 0 or offsets.max() < shard["num_vertices"]
            # idxoff + first vertex is the true destination
            first = int(shard["first_vertex"])
            expected_dst = np.repeat(np.arange(store.num_vertices),
                                     np.diff(store.in_offsets))[int(shard["edge_begin"]):
                                                                 int(shard["edge_end"])]
            assert np.array_equal(offsets.astype(np.int64) + first, expected_dst)
        assert page.sources.dtype == np.int32
        assert page.weights.dtype == np.float32


def test_out_of_core_build_is_identical(tmp_path, monkeypatch):
    src, dst, weight = random_edges(5, n=2000, m=30000, id_scale=7)
    monkeypatch.setattr(config, "READ_CHUNK_EDGES", 2500)
    for directed in (True, False):
        options = dict(directed=directed, duplicates="sum", max_shard_edges=500)
        in_memory = build(tmp_path, from_arrays(src, dst, weight), f"m{directed}", **options)
        out_of_core = build(tmp_path, from_arrays(src, dst, weight), f"o{directed}",
                            memory_budget=200_000, **options)
        assert in_memory.manifest["built_in_memory"]
        assert not out_of_core.manifest["built_in_memory"]
        assert store_edges(in_memory) == store_edges(out_of_core)
        for name in ("in_offsets", "out_offsets", "out_targets", "shards"):
            assert np.array_equal(getattr(in_memory, name), getattr(out_of_core, name)), name
        assert np.array_equal(in_memory.original_ids(), out_of_core.original_ids())
        assert in_memory.summary == out_of_core.summary


def oversized_bucket_shapes():
    """Inputs with one destination bucket (or source bucket) far larger than
    a group of 1,024 edges: (name, src, dst, weight)."""
    rng = np.random.default_rng(11)
    star = np.arange(1, 3001)
    hubs_src, hubs_dst = rng.integers(4, 2000, 9000), rng.integers(0, 4, 9000)
    copies = 5000
    # weights of many magnitudes: a sum regrouped in any other order rounds otherwise
    magnitudes = 10.0 ** rng.integers(-4, 16, copies)
    return [
        ("in-star", star, np.zeros_like(star), None),
        ("out-star", np.zeros_like(star), star, rng.integers(1, 50, star.size)),
        ("hubs", hubs_src, hubs_dst, rng.random(9000) * 10.0 ** rng.integers(-4, 16, 9000)),
        ("copies", np.r_[np.zeros(copies, np.int64), np.arange(2, 40)],
         np.r_[np.ones(copies, np.int64), np.arange(3, 41)],
         np.r_[rng.random(copies) * magnitudes, np.ones(38)]),
        ("mixed", np.r_[star, np.zeros(copies, np.int64), rng.integers(0, 3000, 6000)],
         np.r_[np.zeros_like(star), np.ones(copies, np.int64), rng.integers(0, 3000, 6000)],
         rng.integers(1, 1000, star.size + copies + 6000)),
    ]


def store_files(store: Store) -> dict:
    """Every array and block file of a store, with its bytes."""
    return {str(path.relative_to(store.path)): path.read_bytes()
            for path in sorted(store.path.rglob("*")) if path.suffix in (".bin", ".dat")}


@pytest.mark.parametrize("duplicates", ["keep", "drop", "sum", "min"])
@pytest.mark.parametrize("shape", oversized_bucket_shapes(), ids=lambda shape: shape[0])
def test_a_bucket_larger_than_the_budget_is_built_in_pieces_identically(
        tmp_path, monkeypatch, shape, duplicates):
    """A 1-byte budget (groups of 1,024 edges): a star's, hubs' or one edge's
    copies' bucket is split by (destination, source), recursively, and the
    copies of one edge passed on or merged piece by piece; the store is the
    in-memory build's, byte for byte, and so is the load summary."""
    from garaphpy.storage import bucket_split

    _, src, dst, weight = shape
    splits = []
    original = bucket_split._pieces_of

    def pieces_of(split, chunks, count, first_pair, end_pair):
        splits.append(count)
        yield from original(split, chunks, count, first_pair, end_pair)

    monkeypatch.setattr(bucket_split, "_pieces_of", pieces_of)
    options = dict(duplicates=duplicates, max_shard_edges=700)
    in_memory = build(tmp_path, from_arrays(src, dst, weight), "m", **options)
    assert in_memory.manifest["built_in_memory"] and not splits
    out_of_core = build(tmp_path, from_arrays(src, dst, weight), "o", memory_budget=1,
                        **options)
    assert not out_of_core.manifest["built_in_memory"]
    assert splits and max(splits) > 1024
    assert store_files(in_memory) == store_files(out_of_core)
    assert in_memory.summary == out_of_core.summary


@pytest.mark.parametrize("weight_dtype", ["float32", "auto", "none"])
def test_pages_written_in_windows_of_one_block_are_the_whole_images(tmp_path, monkeypatch,
                                                                    weight_dtype):
    """Page images built window by window (here one 4 KiB block at a time,
    cutting sources, IdxOff and weights anywhere) are the images built whole."""
    from garaphpy.storage import page_writer

    src, dst, weight = random_edges(12, n=3000, m=60000, real=True)
    options = dict(block_bytes=4096, max_page_bytes=150_000, max_shard_edges=2000,
                   weight_dtype=weight_dtype, compress=False)
    whole = build(tmp_path, from_arrays(src, dst, weight), "whole", **options)
    assert max(page.nbytes for page in whole.pages) <= page_writer.PAGE_WINDOW_BYTES
    monkeypatch.setattr(page_writer, "PAGE_WINDOW_BYTES", 4096)
    windows = build(tmp_path, from_arrays(src, dst, weight), "windows", **options)
    assert len(whole.pages) >= 3 and max(page.num_blocks for page in whole.pages) > 10
    assert store_files(whole) == store_files(windows)
    if weight_dtype != "float32":
        kept = None if weight_dtype == "none" else weight
        assert store_edges(windows) == naive.clean_edges(src, dst, kept)["edges"]


def test_int64_vertex_ids_layout(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "INT32_VERTEX_LIMIT", 100)
    src, dst, weight = random_edges(2, n=500, m=4000)
    store = build(tmp_path, from_arrays(src, dst, weight))
    assert store.vertex_dtype == np.int64
    assert store.read_page(0).sources.dtype == np.int64
    expected = naive.clean_edges(src, dst, weight)
    assert store_edges(store) == expected["edges"]


def test_weights_types(tmp_path):
    src, dst, weight = random_edges(4, weighted=True)
    assert build(tmp_path, from_arrays(src, dst, weight), "a").weight_dtype == np.int32
    big = weight * 2**40
    assert build(tmp_path, from_arrays(src, dst, big), "b").weight_dtype == np.int64
    real = weight / 3.0
    # arrays keep their precision under "auto"; narrowing is asked for
    assert build(tmp_path, from_arrays(src, dst, real), "c").weight_dtype == np.float64
    assert build(tmp_path, from_arrays(src, dst, real.astype(np.float32)),
                 "f").weight_dtype == np.float32
    assert build(tmp_path, from_arrays(src, dst, real), "d",
                 weight_dtype="float32").weight_dtype == np.float32
    assert not build(tmp_path, from_arrays(src, dst, real), "e", weight_dtype="none").weighted


def test_blocks_spread_over_storage_directories(tmp_path):
    ssds = [tmp_path / "ssd1", tmp_path / "ssd2"]
    for d in ssds:
        d.mkdir()
    src, dst, weight = random_edges(6, n=3000, m=60000)
    store = build(tmp_path, from_arrays(src, dst, weight), storage_dirs=[str(d) for d in ssds],
                  block_bytes=4096, max_page_bytes=65536, max_shard_edges=1000)
    directories = store.blocks["directory"]
    assert set(np.unique(directories)) == {0, 1, 2}
    for block in store.blocks:
        assert block["directory"] == block_directory(int(block["page"]), int(block["index"]), 3)
    assert store_edges(store) == naive.clean_edges(src, dst, weight)["edges"]
    # a missing storage directory is named
    moved = tmp_path / "elsewhere"
    os.rename(ssds[1], moved)
    with pytest.raises(StoreError, match="ssd2"):
        Store.open(store.path)


def corrupt(path: Path, offset: int) -> None:
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)
        handle.seek(offset)
        handle.write(bytes([byte[0] ^ 0x40]))


@pytest.mark.parametrize("target", ["blocks.dat", "vertices/out_targets.bin", "shards.bin",
                                    "manifest.json"])
def test_damaged_store_is_detected_on_open(tmp_path, target):
    src, dst, weight = random_edges(7)
    store = build(tmp_path, from_arrays(src, dst, weight))
    path = store.path / target
    corrupt(path, path.stat().st_size // 2)
    with pytest.raises(StoreCorruptError, match=Path(target).name.split(".")[0]):
        Store.open(store.path)


def test_truncated_block_file_is_detected(tmp_path):
    store = build(tmp_path, from_arrays(*random_edges(8)), compress=False)
    blocks = store.path / "blocks.dat"
    os.truncate(blocks, blocks.stat().st_size - 100)
    with pytest.raises(StoreCorruptError, match="truncated"):
        Store.open(store.path, verify="quick")


class FailingSource(EdgeSource):
    """Yields one good chunk, then fails like a malformed file would."""

    name = "failing.el"
    format = "el"

    def chunks(self, max_edges):
        yield EdgeChunk(np.arange(10), np.arange(1, 11))
        raise GraphInputError("malformed line", path=self.name, line=11)

    def identity(self):
        return {"name": self.name}


def test_failed_build_leaves_nothing(tmp_path):
    with pytest.raises(GraphInputError, match="failing.el:11"):
        build(tmp_path, FailingSource())
    assert list(tmp_path.iterdir()) == []


def test_failed_rebuild_keeps_the_old_store(tmp_path):
    good = build(tmp_path, from_arrays(*random_edges(9)))
    with pytest.raises(GraphInputError):
        build(tmp_path, FailingSource())
    assert Store.open(good.path).num_edges == good.num_edges
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


def test_empty_graph_is_an_error(tmp_path):
    with pytest.raises(GraphInputError, match="empty graph"):
        build(tmp_path, from_arrays(np.zeros(0, np.int64), np.zeros(0, np.int64)))
    assert list(tmp_path.iterdir()) == []


def test_up_to_date_store_is_reused(tmp_path, monkeypatch):
    src, dst, weight = random_edges(10)
    first = build(tmp_path, from_arrays(src, dst, weight))
    created = first.manifest["created"], (first.path / "blocks.dat").stat().st_mtime_ns
    from garaphpy.storage import builder

    def no_rebuild(*args, **kwargs):
        raise AssertionError("rebuilt an up-to-date store")

    monkeypatch.setattr(builder._Builder, "run", no_rebuild)
    again = build(tmp_path, from_arrays(src, dst, weight))
    assert (again.manifest["created"], (again.path / "blocks.dat").stat().st_mtime_ns) == created
    monkeypatch.undo()
    other = build(tmp_path, from_arrays(src, dst, weight), duplicates="keep")
    assert other.manifest["key"] != first.manifest["key"]
    assert other.num_edges > first.num_edges


def test_reusing_a_store_leaves_the_gpu_alone(tmp_path, monkeypatch):
    """Opening an up-to-date store asks for no GPU budget: a CPU run on a
    machine with a GPU neither imports cupy nor creates a CUDA context for it
    (about half a second on the H200 host), and a GPU run makes its context once."""
    src, dst, weight = random_edges(11)
    build(tmp_path, from_arrays(src, dst, weight))
    asked = []
    monkeypatch.setattr(config, "gpu_budget", lambda *args, **kwargs: asked.append(args)
                        or config.DEFAULT_GPU_MEMORY_BYTES)
    assert build(tmp_path, from_arrays(src, dst, weight)).reused
    assert asked == []
    build(tmp_path, from_arrays(src, dst, weight), duplicates="keep")
    assert len(asked) == 1


def test_fixed_replication_is_part_of_the_key_and_manifest(tmp_path):
    from garaphpy.errors import ConfigError
    from garaphpy.storage.builder import store_key

    src, dst, weight = random_edges(11, n=2000, m=40_000)
    default = build(tmp_path, from_arrays(src, dst, weight), name="default")
    fixed = build(tmp_path, from_arrays(src, dst, weight), name="fixed", fixed_replication=8)
    assert default.manifest["key"] != fixed.manifest["key"]
    # the default's key is the one stores had before the option existed
    identity = from_arrays(src, dst, weight).identity()
    assert "fixed_replication" not in BuildOptions().content_options()
    assert store_key(identity, BuildOptions()) == default.manifest["key"]
    assert fixed.manifest["layout"]["fixed_replication"] == 8
    assert fixed.manifest["options"]["fixed_replication"] == 8
    assert default.manifest["layout"]["fixed_replication"] is None
    assert set(fixed.shards["replication"]) == {8}
    assert store_edges(fixed) == store_edges(default)  # the same edges, other shards
    with pytest.raises(ConfigError, match="fixed_replication"):
        build(tmp_path, from_arrays(src, dst, weight), name="bad", fixed_replication=3)


def test_replication_rule_is_part_of_the_key_and_manifest(tmp_path):
    from garaphpy.errors import ConfigError
    from garaphpy.storage import layout

    src, dst, weight = random_edges(12, n=2000, m=40_000)
    default = build(tmp_path, from_arrays(src, dst, weight), name="default")
    content = BuildOptions().content_options()
    assert "replication_rule" not in content and "replication_edges_per_thread" not in content
    explicit = BuildOptions(replication_rule="mean", replication_edges_per_thread=1)
    assert explicit.content_options() == content  # the published rule keeps older keys
    weighted = build(tmp_path, from_arrays(src, dst, weight), name="weighted",
                     replication_rule="edge-weighted", replication_edges_per_thread=4)
    assert weighted.manifest["key"] != default.manifest["key"]
    assert weighted.manifest["layout"]["replication_rule"] == "edge-weighted"
    assert weighted.manifest["layout"]["replication_edges_per_thread"] == 4
    assert default.manifest["layout"]["replication_rule"] == "mean"
    in_offsets = weighted.csc()[0]
    expected = layout.cut_shards(in_offsets, replication_rule="edge-weighted", edges_per_thread=4,
                                 max_edges=layout.shard_edge_limit(
                                     int(in_offsets[-1]), BuildOptions().max_shard_edges,
                                     BuildOptions().min_shards))
    assert np.array_equal(weighted.shards["replication"], expected["replication"])
    assert store_edges(weighted) == store_edges(default)
    with pytest.raises(ConfigError, match="replication_rule"):
        build(tmp_path, from_arrays(src, dst, weight), name="bad", replication_rule="max")
    with pytest.raises(ConfigError, match="replication_edges_per_thread"):
        build(tmp_path, from_arrays(src, dst, weight), name="bad",
              replication_edges_per_thread=0)


def test_killed_build_leaves_no_store(tmp_path):
    """SIGKILL in the middle of a build: no store at the target path."""
    target = tmp_path / "store"
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(REPO)!r})
        from garaphpy.storage.builder import build_store, BuildOptions
        from garaphpy.storage.edges import EdgeChunk, EdgeSource
        import numpy as np

        class Slow(EdgeSource):
            name = "slow"
            def chunks(self, max_edges):
                rng = np.random.default_rng(0)
                for i in range(10_000):
                    if i == 3:
                        print("started", flush=True)
                    time.sleep(0.01)
                    yield EdgeChunk(rng.integers(0, 1000, 1000), rng.integers(0, 1000, 1000))
            def identity(self):
                return {{"slow": 1}}

        build_store(Slow(), {str(target)!r}, BuildOptions(), progress=False)
    """)
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "started"
        time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert not target.exists()
    with pytest.raises(StoreError, match="no garaphpy store"):
        Store.open(target)


def test_original_and_internal_ids(tmp_path):
    src = np.array([10**12, 5, 3, 5])
    dst = np.array([5, 3, 10**12, 7])
    store = build(tmp_path, from_arrays(src, dst))
    assert list(store.original_ids()) == [3, 5, 7, 10**12]
    assert list(store.internal_ids([7, 10**12])) == [2, 3]
    with pytest.raises(KeyError, match="6"):
        store.internal_ids([6])


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("duplicates", ["keep", "drop", "min", "max", "sum"])
@pytest.mark.parametrize("directed", [True, False])
def test_numpy_and_numba_sorts_build_identical_stores(tmp_path, monkeypatch, weighted,
                                                      duplicates, directed):
    """Small builds sort with numpy (config.NUMPY_SORT_MAX_EDGES), large ones
    with the numba kernels: both give the same store, byte for byte."""
    src, dst, weight = random_edges(11, n=700, m=6000, id_scale=3, weighted=weighted)
    options = dict(directed=directed, duplicates=duplicates, max_shard_edges=700)
    stores = {}
    for path, limit in (("numpy", 1 << 30), ("numba", 0)):
        monkeypatch.setattr(config, "NUMPY_SORT_MAX_EDGES", limit)
        stores[path] = build(tmp_path, from_arrays(src, dst, weight), path, **options)
    numpy_dir, numba_dir = tmp_path / "numpy", tmp_path / "numba"
    files = sorted(p.relative_to(numpy_dir) for p in numpy_dir.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(numba_dir) for p in numba_dir.rglob("*")
                           if p.is_file())
    for name in files:
        if name.suffix == ".json":
            continue
        assert (numpy_dir / name).read_bytes() == (numba_dir / name).read_bytes(), name
    assert store_edges(stores["numpy"]) == store_edges(stores["numba"])
    assert stores["numpy"].summary == stores["numba"].summary


@pytest.mark.parametrize("budget", [None, 40_000])
def test_dropped_self_loops_keep_their_vertices(tmp_path, budget):
    """Edge lists keep the vertices that occur: one whose only edge is a
    self-loop stays a vertex (isolated) when self_loops='drop' removes it,
    in memory and out of core."""
    rng = np.random.default_rng(3)
    src = np.concatenate([rng.integers(0, 300, 4000) * 2, [1001, 777]])    # even ids, then
    dst = np.concatenate([rng.integers(0, 300, 4000) * 2, [1001, 777]])    # two odd loops
    store = build(tmp_path, from_arrays(src, dst), self_loops="drop", memory_budget=budget)
    expected = naive.clean_edges(src, dst, self_loops="drop")
    assert store.manifest["built_in_memory"] == (budget is None)
    assert np.array_equal(store.original_ids(), expected["original_ids"])
    assert store.num_vertices == expected["n"] and store_edges(store) == expected["edges"]
    loop_vertices = store.internal_ids([777, 1001])
    assert (store.in_degree[loop_vertices] == 0).all()
    assert store.summary["isolated_vertices"] >= 2


def test_an_input_edited_in_place_with_its_size_and_time_kept_is_rebuilt(tmp_path):
    """Same size, modification time set back: the store of the old content
    must not be reused."""
    from garaphpy.storage.readers import open_source

    graph = tmp_path / "g.wel"
    graph.write_text("0 1 5\n1 2 5\n")
    first = build(tmp_path, open_source(graph))
    assert store_edges(first) == [(0, 1, 5), (1, 2, 5)]
    stamp = graph.stat()
    time.sleep(0.05)
    graph.write_text("0 1 7\n1 2 5\n")
    os.utime(graph, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert graph.stat().st_size == stamp.st_size
    again = build(tmp_path, open_source(graph))
    assert not again.reused
    assert store_edges(again) == [(0, 1, 7), (1, 2, 5)]
    assert build(tmp_path, open_source(graph)).reused


def test_ids_beyond_int32_are_renumbered_in_any_chunk(tmp_path, monkeypatch):
    from garaphpy import config
    from garaphpy.storage.readers import from_arrays
    from garaphpy.storage.store import Store

    monkeypatch.setattr(config, "READ_CHUNK_EDGES", 4)     # small ids first, wide ids later
    src = np.array([0, 1, 2, 3, 5, 2**40, 7, 3, 2**33])
    dst = np.array([1, 2, 3, 0, 2**40, 7, 2**33, 5, 0])
    store = build_store(from_arrays(src, dst), tmp_path / "g", BuildOptions(),
                        progress=False)
    ids = np.unique(np.concatenate([src, dst]))
    in_offsets, sources, _ = Store.open(tmp_path / "g").csc()
    targets = np.repeat(np.arange(ids.size), np.diff(in_offsets))
    expected = sorted(zip(np.searchsorted(ids, src), np.searchsorted(ids, dst)))
    assert sorted(zip(sources.tolist(), targets.tolist())) == [
        (int(a), int(b)) for a, b in expected]
    np.testing.assert_array_equal(store.original_ids(), ids)
