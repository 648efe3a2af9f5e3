"""The store's rules: compressed pages where they pay, read-ahead by the disk's speed.

Truth tables of the pure rules (:mod:`garaphpy.storage.decisions`), the
build's measured choice (:mod:`garaphpy.storage.compress_choice`) with its
record and its option, the directories' read speed, and runs from disk whose
read-ahead is sized by it, against the in-memory run and SciPy.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.csgraph

import garaphpy
from garaphpy import config
from garaphpy.configfile import validate_config
from garaphpy.errors import ConfigError
from garaphpy.options import BuildOptions, config_values
from garaphpy.storage import compress_choice, decisions, read_ratio
from garaphpy.storage.host_budget import plan_run_pages, run_fixed_bytes
from garaphpy.storage.page_io import page_buffer_bytes
from garaphpy.storage.store import format_summary

GB = 1e9


# ------------------------------------------------------------------ the rules --
@pytest.mark.parametrize("compressed, plain, decode, disk, expected", [
    (30, 100, 10 * GB, 1.5 * GB, True),      # kron-like: 0.3, a fast decoder
    (30, 100, 1.0 * GB, 1.5 * GB, False),    # decode slower than the saved reads
    (80, 100, 100 * GB, 1.5 * GB, False),    # saves too little
    (75, 100, 100 * GB, 1.5 * GB, True),     # at the ratio's switch point
    (50, 100, 3.0 * GB, 1.5 * GB, True),     # decode of P = read of P - C exactly
    (50, 100, 2.9 * GB, 1.5 * GB, False),    # just below it
    (0, 0, 10 * GB, 1.5 * GB, False),        # nothing to save
])
def test_compress_pages_truth_table(compressed, plain, decode, disk, expected):
    choice = decisions.compress_pages(compressed, plain, decode, disk)
    assert choice.compress is expected
    assert choice.reason.startswith("compressed" if expected else "plain")
    saves_enough = plain and compressed <= decisions.COMPRESS_MAX_RATIO * plain
    if saves_enough:
        assert choice.disk_bytes_per_s == disk and choice.decode_bytes_per_s == decode
    # the inequality it states: P / r <= (P - C) / d and C <= 0.75 P
    if plain:
        by_hand = compressed <= decisions.COMPRESS_MAX_RATIO * plain and \
            plain / decode <= (plain - compressed) / disk + 1e-15
        assert by_hand is expected


def test_pages_that_save_too_little_are_not_timed():
    def no_measuring():
        raise AssertionError("measured")

    choice = decisions.compress_pages(80, 100, no_measuring, no_measuring)
    assert choice.compress is False and choice.ratio == 0.8
    assert choice.decode_bytes_per_s is None and choice.disk_bytes_per_s is None
    measured = decisions.compress_pages(30, 100, lambda: 10 * GB, lambda: 1.5 * GB)
    assert measured.compress is True and measured.decode_bytes_per_s == 10 * GB


@pytest.mark.parametrize("largest, budget, expected", [
    (64 << 20, None, True),                 # built in memory: pages are slices of its CSC
    (64 << 20, 256 << 20, True),            # 2 x 64 MiB within half of 256 MiB
    (64 << 20, (256 << 20) - 1, False),
    (20_000, 32 << 20, True),
    (19 << 20, 32 << 20, False),            # one 19 MB page under a 32 MiB budget
])
def test_compress_fits_memory_truth_table(largest, budget, expected):
    assert decisions.compress_fits_memory(largest, budget) is expected


MIB = 1 << 20


@pytest.mark.parametrize("buffer, disk, consumer, in_flight, expected", [
    (64 * MIB, 1.5 * GB, None, 0, 3),          # a page takes 45 ms: 1 held + 2 read
    (MIB, 1.5 * GB, None, 0, 1 + 30),          # 20 ms at 1.5 GB/s is 30 MB: 30 reading
    (MIB, 1.5 * GB, 0.15 * GB, 0, 1 + 3),      # a slow consumer needs fewer in flight
    (64 * MIB, 0.1 * GB, None, 0, 3),          # slow disk, large pages
    (4 * MIB, 10 * GB, None, 0, 1 + 49),       # a fast disk needs more
    (MIB, 1.5 * GB, None, 64 * MIB, 1 + 64),   # every reader thread's block in flight
    (MIB, 1e3, None, 0, 1 + 2),                # a crawl: the page read and the next
])
def test_readahead_pages_truth_table(buffer, disk, consumer, in_flight, expected):
    assert decisions.readahead_pages(buffer, disk, consumer,
                                     reads_in_flight_bytes=in_flight) == expected


def test_readahead_holds_at_least_the_page_held_and_the_page_read():
    assert decisions.readahead_pages(MIB, 1e3, cover_seconds=0) == \
        decisions.MIN_READAHEAD_PAGES == 2
    assert decisions.readahead_pages(64 * MIB, 1.5 * GB, 1e3) == 2


def test_readahead_grows_with_the_disk_and_the_stall_covered():
    sizes = [decisions.readahead_pages(MIB, speed * GB) for speed in (0.5, 1, 2, 4, 8)]
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]
    assert decisions.readahead_pages(MIB, GB, cover_seconds=0.1) > \
        decisions.readahead_pages(MIB, GB, cover_seconds=0.01)


# ------------------------------------------------------------ measured choice --
def test_sample_pages_are_spread_and_cover_small_stores():
    edges = np.full(100, 1000)
    sample = compress_choice.sample_pages(edges, 10_000)
    assert len(sample) == 10 and sample[0] == 0 and sample[-1] == 99
    assert np.all(np.diff(sample) >= 10)
    assert compress_choice.sample_pages(edges[:3], 10**9).tolist() == [0, 1, 2]
    assert compress_choice.sample_pages(np.zeros(0, np.int64), 10).size == 0


@pytest.fixture
def edges():
    rng = np.random.default_rng(11)
    n = 3000
    src = rng.integers(0, n, 40_000)
    dst = (src + rng.integers(1, 40, src.size)) % n     # local: compresses well
    return src, dst, n


def build(tmp_path, name, edges, **options):
    src, dst, n = edges
    return garaphpy.Graph.from_arrays(src, dst, num_vertices=n, store=tmp_path / name,
                                      max_page_bytes=16 << 10, progress=False, **options)


@pytest.mark.parametrize("disk, compressed", [(1e3, True), (1e15, False)])
def test_auto_compresses_where_the_measured_disk_makes_it_pay(tmp_path, edges, monkeypatch,
                                                              disk, compressed):
    monkeypatch.setattr(config, "DISK_READ_BYTES_PER_SECOND", disk)
    graph = build(tmp_path, "auto", edges)
    layout = graph.store.manifest["layout"]
    choice = layout["compress"]
    assert choice["compress"] is compressed
    assert any(info.compressed for info in graph.store.pages) is compressed
    assert ("page_codec" in layout) is compressed
    assert choice["disk_bytes_per_s"] == disk and choice["decode_bytes_per_s"] > 0
    assert 0 < choice["ratio"] <= decisions.COMPRESS_MAX_RATIO
    assert choice["sample_edges"] == graph.num_edges      # a small store: every page
    assert ("decoding a page takes longer" in choice["reason"]) is not compressed
    assert f"page format {choice['reason']}" in format_summary(graph.store.manifest)
    plain = build(tmp_path, "plain", edges, compress=False)
    for mine, theirs in zip(graph.store.csc(), plain.store.csc()):
        np.testing.assert_array_equal(mine, theirs)


@pytest.mark.parametrize("setting", [True, False])
def test_forced_settings_measure_nothing(tmp_path, edges, monkeypatch, setting):
    def no_measuring(*args, **kwargs):
        raise AssertionError("measured")

    monkeypatch.setattr(compress_choice, "disk_read_speed", no_measuring)
    monkeypatch.setattr(compress_choice, "_decode_rate", no_measuring)
    graph = build(tmp_path, "forced", edges, compress=setting)
    choice = graph.store.manifest["layout"]["compress"]
    assert choice["compress"] is setting and choice["sample_edges"] == 0
    assert choice["reason"].endswith(f"store.compress = {str(setting).lower()}")
    assert any(info.compressed for info in graph.store.pages) is setting


@pytest.mark.parametrize("page_bytes, compressed", [(16 << 10, True), (64 << 20, False)])
def test_an_out_of_core_build_compresses_only_pages_its_budget_holds(
        tmp_path, edges, monkeypatch, page_bytes, compressed):
    monkeypatch.setattr(config, "DISK_READ_BYTES_PER_SECOND", 1e3)
    src, dst, n = edges
    graph = garaphpy.Graph.from_arrays(src, dst, num_vertices=n, store=tmp_path / "s",
                                       max_page_bytes=page_bytes, memory_budget=400_000,
                                       progress=False)
    manifest = graph.store.manifest
    assert not manifest["built_in_memory"]
    choice = manifest["layout"]["compress"]
    assert choice["compress"] is compressed
    assert ("memory budget" in choice["reason"]) is not compressed
    plain = build(tmp_path, "plain", edges, compress=False)
    for mine, theirs in zip(graph.store.csc(), plain.store.csc()):
        np.testing.assert_array_equal(mine, theirs)


def test_a_store_of_before_the_measured_choice_opens_and_summarises(tmp_path, edges):
    from garaphpy.storage.store import Store, read_manifest, write_manifest

    store = build(tmp_path, "old", edges, compress=False).store
    manifest = read_manifest(store.path)
    del manifest["layout"]["compress"]
    manifest["options"]["compress"] = False         # the old default, as recorded then
    write_manifest(store.path, manifest)
    old = Store.open(store.path, verify="full")
    assert not any(info.compressed for info in old.pages)
    summary = format_summary(old.manifest)
    assert "page format" not in summary and "store:" in summary


def test_false_reuses_a_plain_store_and_rebuilds_a_compressed_one(tmp_path, edges,
                                                                  monkeypatch):
    monkeypatch.setattr(config, "DISK_READ_BYTES_PER_SECOND", 1e3)     # auto compresses
    auto = build(tmp_path, "s", edges).store
    assert any(info.compressed for info in auto.pages)
    decoded = [np.array(array) for array in auto.csc()[:2]]
    plain = build(tmp_path, "s", edges, compress=False).store
    assert not plain.reused and not any(info.compressed for info in plain.pages)
    again = build(tmp_path, "s", edges, compress=False).store
    assert again.reused
    reused_by_auto = build(tmp_path, "s", edges).store      # as a store built before "auto"
    assert reused_by_auto.reused and not any(info.compressed for info in reused_by_auto.pages)
    for mine, theirs in zip(decoded, plain.csc()[:2]):
        np.testing.assert_array_equal(mine, theirs)


def test_int64_ids_stay_plain_without_measuring(tmp_path, edges, monkeypatch):
    monkeypatch.setattr(config, "INT32_VERTEX_LIMIT", 16)
    monkeypatch.setattr(compress_choice, "disk_read_speed", lambda d: pytest.fail("measured"))
    graph = build(tmp_path, "wide", edges)
    assert "64-bit" in graph.store.manifest["layout"]["compress"]["reason"]
    assert not any(info.compressed for info in graph.store.pages)


def test_the_option_takes_true_false_or_auto():
    assert BuildOptions().compress == "auto"
    for value in (True, False, "auto"):
        BuildOptions(compress=value).validate()
    for value in ("yes", 1, None):
        with pytest.raises(ConfigError, match=r"^compress=.*expected true, false or \"auto\""):
            BuildOptions(compress=value).validate()
    # "auto" and False keep the key stores had when False was the default
    assert "compress" not in BuildOptions().content_options()
    assert "compress" not in BuildOptions(compress=False).content_options()
    assert BuildOptions(compress=True).content_options()["compress"] is True
    for value in (True, False, "auto"):
        settings = validate_config({"graph": "rmat:4", "store": {"compress": value}})
        assert BuildOptions(**config_values(BuildOptions, settings)).compress == value
    with pytest.raises(ConfigError, match=r"store.compress: expected true, false or \"auto\""):
        validate_config({"graph": "rmat:4", "store": {"compress": "maybe"}})


# ----------------------------------------------------------- the disk's speed --
def test_disk_read_speed_fixed_or_of_the_device(tmp_path, monkeypatch):
    monkeypatch.setenv("GARAPHPY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(config, "DISK_READ_BYTES_PER_SECOND", 2e9)
    assert read_ratio.disk_read_speed([tmp_path, tmp_path]) == 2e9
    monkeypatch.setattr(config, "DISK_READ_BYTES_PER_SECOND", -1)
    with pytest.raises(ConfigError, match="DISK_READ_BYTES_PER_SECOND"):
        read_ratio.disk_read_speed(tmp_path)
    monkeypatch.setattr(config, "DISK_READ_BYTES_PER_SECOND", None)
    monkeypatch.setattr(config, "READ_RATIO_FILE_BYTES", 1 << 20)
    monkeypatch.setattr(config, "READ_RATIO_RANDOM_READS", 16)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    measured = read_ratio.measure_read_speeds(tmp_path / "a", refresh=True)

    def no_measuring(*args, **kwargs):
        raise AssertionError("measured again")

    monkeypatch.setattr(read_ratio, "measure_read_speeds", no_measuring)
    # b lies on a's device: a's measurement, and two directories of one disk read at its speed
    speed = measured.sequential_bytes_per_s
    assert read_ratio.disk_read_speed(tmp_path / "b") == pytest.approx(speed)
    assert read_ratio.disk_read_speed([tmp_path / "a", str(tmp_path / "b")]) == \
        pytest.approx(speed)


def test_disk_read_speed_of_directories_on_two_devices(tmp_path, monkeypatch):
    """Blocks spread evenly over three directories, two on one device: that
    device reads 2/3 of the bytes, the other 1/3; the slower bounds them."""
    monkeypatch.setenv("GARAPHPY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(config, "DISK_READ_BYTES_PER_SECOND", None)
    shared = tmp_path / "one", tmp_path / "two"
    for directory in shared:
        directory.mkdir()
    other = tmp_path / "unmeasurable"       # no such directory: a device of its own
    measured, assumed = 3e9, config.ASSUMED_DISK_READ_BYTES_PER_SECOND
    monkeypatch.setattr(read_ratio, "measure_read_speeds",
                        lambda directory: read_ratio.ReadSpeeds(measured, measured / 10, True,
                                                                1 << 20, 4096, "now"))
    # a GB: 2/3 of it at 3 GB/s take 0.22 s, 1/3 at 3.5 GB/s 0.095 s; the first bounds
    two_thirds_seconds = 2 / 3 * 1e9 / measured
    assert read_ratio.disk_read_speed([*shared, other]) == pytest.approx(1e9 / two_thirds_seconds)
    assert read_ratio.disk_read_speed(shared) == pytest.approx(measured)
    assert read_ratio.disk_read_speed([shared[0], other]) == pytest.approx(2 * measured)
    assert assumed > measured


# -------------------------------------------------------------- sized windows --
def test_plan_sizes_the_readahead_by_the_disk_within_the_budget(tmp_path, edges):
    store = build(tmp_path, "s", edges, compress=False).store
    buffer = page_buffer_bytes(store)
    pages = sum(info.nbytes for info in store.pages)
    assert len(store.pages) >= 8
    fixed = run_fixed_bytes(store)
    roomy = fixed + pages - 1           # not every page fits; a quarter of the room is plenty
    windows = []
    for speed in (1e5, 1e8, 1e12):
        plan, readahead = plan_run_pages(store, 1, roomy, disk_bytes_per_s=speed)
        windows.append(readahead)
        # whole pages, the held one and one being read at least, a quarter of the room at most
        assert readahead % buffer == 0
        assert decisions.MIN_READAHEAD_PAGES * buffer <= readahead <= (roomy - fixed) // 4
        assert readahead <= min(config.PAGE_READAHEAD_BYTES, len(store.pages) * buffer)
        assert plan.readahead_pages == readahead // buffer and plan.disk_bytes_per_s == speed
        # the read-ahead is paid before the cached pages, within the budget
        assert plan.readahead_bytes == readahead and plan.used_bytes <= roomy
        assert plan.cached_bytes <= roomy - fixed - readahead
        assert "GB/s" in plan.describe()
    assert windows[0] < windows[-1]     # a slow disk needs fewer pages in flight
    everything, _ = plan_run_pages(store, 1, fixed + pages, disk_bytes_per_s=1e9)
    assert everything.all_cached and everything.disk_bytes_per_s is None


def _scipy_bfs(src, dst, n, source):
    """BFS depths by SciPy's shortest paths, -1 where unreached."""
    matrix = scipy.sparse.csr_array((np.ones(src.size), (src, dst)), shape=(n, n))
    levels = scipy.sparse.csgraph.shortest_path(matrix, indices=source, unweighted=True)
    return np.where(np.isfinite(levels), levels, -1).astype(np.int64)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::garaphpy.NotConvergedWarning")
@pytest.mark.parametrize("disk", [1e4, 1e12])
@pytest.mark.parametrize("compress", [False, True])
def test_a_run_from_disk_with_the_sized_window_gives_the_in_memory_values(
        tmp_path, edges, monkeypatch, disk, compress):
    monkeypatch.setattr(config, "DISK_READ_BYTES_PER_SECOND", disk)
    graph = build(tmp_path, "s", edges, compress=compress)
    store = graph.store
    budget = run_fixed_bytes(store) + sum(info.nbytes for info in store.pages) // 3
    plan, _ = plan_run_pages(store, 1, budget)
    assert plan.streamed and plan.disk_bytes_per_s == disk
    streamed = garaphpy.run(graph, "pagerank", mode="cpu", max_iterations=4, tolerance=0,
                            host_memory=budget, read_ratio=4.0)
    in_memory = garaphpy.run(graph, "pagerank", mode="cpu", max_iterations=4, tolerance=0)
    assert streamed.iterations[-1].bytes_read > 0 and in_memory.iterations[-1].bytes_read == 0
    assert streamed.plan.pages.startswith("from storage (read-ahead ")
    assert f"disk {disk / 1e9:.2f} GB/s" in streamed.plan.pages
    assert in_memory.plan.pages == "in memory"
    np.testing.assert_allclose(streamed.values, in_memory.values, rtol=1e-12, atol=0)
    bfs = garaphpy.run(graph, "bfs", mode="cpu", sources=[0], host_memory=budget,
                       read_ratio=4.0)
    src, dst, n = edges
    np.testing.assert_array_equal(bfs.values, _scipy_bfs(src, dst, n, 0))
