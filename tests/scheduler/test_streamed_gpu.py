"""Graphs larger than the GPU budget: partial residency and the
per-page transfer choice, against the CPU engine.

Every built-in program, synchronous and asynchronous, with each forced
transfer choice and the automatic one, at budgets holding about a quarter
and about half of the pages beside the stream buffers, equals the CPU
engine's run (exact for min/max programs, 1e-4 for sums); so do runs whose
pages come from storage directories, and runs of packed pages, which the
GPU unpacks to exactly the stored pages.
"""

from __future__ import annotations


import numpy as np
import pytest

import garaphpy
from garaphpy import config
from garaphpy.programs import BUILTIN_PROGRAMS

import references as ref
from helpers import Crash, budget_for, gpu_reference, host_budget
from helpers import gpu_program as program_for

pytestmark = pytest.mark.gpu

EXACT = ref.EXACT_PROGRAMS
KEEPS_BEST = [name for name, cls in BUILTIN_PROGRAMS.items() if cls.apply_keeps_best]
OTHERS = [name for name in BUILTIN_PROGRAMS if name not in KEEPS_BEST]
CHOICES = ["auto", "copy", "skip", "compact", "zero-copy"]
ITERATIONS = {"max_iterations": 40}


@pytest.fixture(scope="module")
def paged():
    """rmat:12, weighted, in many small pages."""
    return garaphpy.Graph.load("rmat:12", progress=False, max_shard_edges=512,
                               max_page_bytes=16384, compress=False,
                               generator_options={"weighted": True, "seed": 11})


@pytest.fixture(scope="module")
def disk_rmat(tmp_path_factory):
    return ref.out_of_core_rmat(tmp_path_factory.mktemp("streamed"))


def run_gpu(graph, program, sources, forced, packed: bool = False, **options):
    """A GPU run with the transfer choice ``forced``; pages packed or as stored
    (the transfer tests keep the stored pages: packed, all of them fit)."""
    turned_off = {*options.pop("turned_off", ()), *(() if packed else ("packed_pages",))}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(config, "GPU_TRANSFER", forced)
        return ref.run_engine_like_gpu(graph, program, sources, mode="gpu",
                                       turned_off=turned_off, **options)


def sources_for(program):
    return np.array([0, 7], np.int64) if program.needs_sources else ()


@pytest.mark.parametrize("fraction", [0.2, 0.4])
@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("name", KEEPS_BEST)
def test_every_transfer_choice_equals_the_cpu(paged, name, execution, fraction):
    program = program_for(name)
    sources = sources_for(program)
    options = dict(execution=execution, **ITERATIONS)
    cpu = ref.run_engine_like_gpu(paged, program, sources, mode="cpu", **options)
    budget = budget_for(paged, program, fraction, execution)
    graph_run = paged.as_undirected() if program.needs_undirected else paged
    total = sum(page.nbytes for page in graph_run.store.pages)
    bytes_moved = {}
    for forced in CHOICES:
        gpu = run_gpu(paged, program, sources, forced, gpu_memory=budget, **options)
        ref.assert_run_matches(name, execution, gpu, cpu)
        records = gpu.iterations
        bytes_moved[forced] = sum(r.bytes_to_device for r in records)
        if forced == "copy":    # Garaph's stream: every page not resident, every iteration
            assert all("page_transfer" not in r.decisions for r in records)
            assert all(0 < r.bytes_to_device < total for r in records)   # some stay resident
            continue
        choices = [r.decisions["page_transfer"] for r in records]
        assert all(c["forced"] == forced for c in choices)
        assert all(r.decisions["selective_pushes"]["pinned_fits"] for r in records)
        if forced != "auto":    # kept pages are pulled or skipped (auto may push them)
            assert all(c["resident"] + c["skip"] > 0 for c in choices)
        if forced in ("compact", "zero-copy"):
            letter = "p" if forced == "compact" else "z"
            assert any(letter in c["choice"] for c in choices)
        if forced == "zero-copy":     # a frontier too large to count copies every page
            assert not any("c" in c["choice"] for c in choices if c["counted"])
    # pushing the active edges moves less than copying the pages they reach (the
    # forced copy keeps more pages resident: it needs no room for the push's arrays)
    assert bytes_moved["compact"] < bytes_moved["skip"]
    assert bytes_moved["zero-copy"] < bytes_moved["skip"]


@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("name", KEEPS_BEST)
def test_resident_pages_without_room_for_the_device_loop_choose_per_page(paged, name,
                                                                         execution,
                                                                         monkeypatch):
    from garaphpy.scheduler.gpu_engine import GpuEngine

    # config's rates: measured on a graph this small, counting a frontier costs its
    # fixed costs and may be judged not worth it (the runs would then never skip)
    ref.gpu_engine_options(monkeypatch, calibrate_transfer_rates=False)

    program = program_for(name)
    sources = sources_for(program)
    options = dict(execution=execution, **ITERATIONS)
    cpu = ref.run_engine_like_gpu(paged, program, sources, mode="cpu", **options)
    graph_run = paged.as_undirected() if program.needs_undirected else paged
    internal = np.array([0], np.int64) if program.needs_sources else np.zeros(0, np.int64)
    sizing = GpuEngine(graph_run, program, internal, synchronous=execution == "sync")
    # every page and the selective arrays fit; the device loop's out-edge CSR does not
    budget = sizing.plan.vertex_bytes + sizing.plan.page_bytes + sizing.selective_bytes + 4096
    for forced in ("auto", "skip", "copy"):
        gpu = run_gpu(paged, program, sources, forced, gpu_memory=budget, **options)
        ref.assert_run_matches(name, execution, gpu, cpu)
        records = gpu.iterations
        assert all(r.bytes_to_device == 0 or "page_transfer" in r.decisions for r in records)
        choices = [r.decisions["page_transfer"] for r in records
                   if "page_transfer" in r.decisions]
        if forced == "copy":        # every iteration pulls every page
            assert not choices
            assert all(r.bytes_to_device == 0 for r in records)
            continue
        assert all(r.decisions["resident_selective"]["choice"] for r in records)
        assert choices and all(c["copied_bytes"] == 0 for c in choices)
        assert any(c["skip"] for c in choices)


@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("name", OTHERS)
def test_sums_copy_every_streamed_page_beside_the_resident_ones(paged, name, execution):
    program = program_for(name)
    sources = sources_for(program)
    options = dict(execution=execution, **ITERATIONS)
    cpu = ref.run_engine_like_gpu(paged, program, sources, mode="cpu", **options)
    graph_run = paged.as_undirected() if program.needs_undirected else paged
    total = sum(page.nbytes for page in graph_run.store.pages)
    gpu = run_gpu(paged, program, sources, "auto",
                  gpu_memory=budget_for(paged, program, 0.5), **options)
    ref.assert_run_matches(name, execution, gpu, cpu)
    for record in gpu.iterations:
        assert "page_transfer" not in record.decisions
        assert 0 < record.bytes_to_device < 0.75 * total     # about half stays resident


@pytest.mark.parametrize("forced", ["auto", "skip", "compact", "zero-copy"])
@pytest.mark.parametrize("name", ["bfs", "sssp", "cc"])
def test_pages_from_storage_directories(disk_rmat, name, forced):
    program = program_for(name)
    sources = sources_for(program)
    cpu = ref.run_engine_like_gpu(disk_rmat, program, sources, mode="cpu", **ITERATIONS)
    budget = host_budget(disk_rmat, program, readers=1, cached_fraction=0.25)
    gpu = run_gpu(disk_rmat, program, sources, forced, **budget, read_ratio=8.0,
                  gpu_memory=budget_for(disk_rmat, program, 0.25), **ITERATIONS)
    ref.assert_program_values(name, gpu.values, cpu.values)
    assert gpu.num_iterations == cpu.num_iterations
    copied = sum(record.decisions["page_transfer"]["copy"] for record in gpu.iterations)
    if forced == "skip":    # the copied pages the host does not cache come from storage
        assert copied > 0 and sum(record.bytes_read for record in gpu.iterations) > 0
    # the host budget leaves no room for a pinned copy of the out-edge CSR: the host
    # counts (and, without values, gathers) from the store's own arrays
    pushes = gpu.iterations[0].decisions["selective_pushes"]
    assert not pushes["pinned_fits"]
    assert pushes["choice"] == (() if name == "sssp" else ("compact",))
    used = "".join(r.decisions["page_transfer"]["choice"] for r in gpu.iterations)
    assert "z" not in used and (name != "sssp" or "p" not in used)


def test_checkpoint_and_resume_with_streamed_pages(paged, tmp_path):
    program = program_for("sssp")
    budget = budget_for(paged, program, 0.25)
    whole = run_gpu(paged, program, [0], "auto", gpu_memory=budget, **ITERATIONS)
    assert whole.num_iterations > 3

    def crash_after_three(record):
        if record.iteration == 2:
            raise Crash

    options = dict(gpu_memory=budget, checkpoint_dir=tmp_path / "c", checkpoint_every=1,
                   **ITERATIONS)
    with pytest.raises(Crash):
        run_gpu(paged, program, [0], "auto", on_iteration=crash_after_three, **options)
    resumed = run_gpu(paged, program, [0], "auto", resume=True, **options)
    np.testing.assert_array_equal(resumed.values, whole.values)
    assert resumed.num_iterations == whole.num_iterations


# -- packed pages (kernels/packed.py) -----------------------------------------------------
def packed_engine(graph, name, fraction, pull_packed: bool = False, transfer: str = "auto"):
    """An engine of packed pages; unpacked before their pull unless ``pull_packed``;
    ``transfer``: ``config.GPU_TRANSFER`` (a forced copy has no selective arrays)."""
    from garaphpy.scheduler.gpu_engine import GpuEngine

    program = program_for(name)
    graph_run = graph.as_undirected() if program.needs_undirected else graph
    budget = budget_for(graph, program, fraction, selective=transfer != "copy")
    saved = config.GPU_TRANSFER
    config.GPU_TRANSFER = transfer
    try:
        return GpuEngine(graph_run, program, np.array([0], np.int64), synchronous=True,
                         gpu_memory=budget, packed_pages=True, pull_packed=pull_packed)
    finally:
        config.GPU_TRANSFER = saved


@pytest.mark.parametrize("name", ["bfs", "sssp"])
def test_the_gpu_unpacks_every_page_to_its_image(paged, name):
    engine = packed_engine(paged, name, 0.15)
    store = engine.store
    # some kept packed, some streamed
    assert engine.packed_images and engine.packed_host, (engine.describe(), engine.plan)
    stream = engine.streams[0]
    for k, layout in engine.packed_layouts.items():
        if k in engine.packed_host:
            device = engine.device_packed[0]
            device[:layout.nbytes].set(engine.packed_host[k])
        elif k in engine.packed_images:
            device = engine.packed_images[k]
        else:
            continue
        engine.device_pages[0].fill(0xAB)
        # (set and fill ran on the current stream, which the engine's streams do not wait for)
        engine.cupy.cuda.Device().synchronize()
        engine.launches.unpack(k, device, 0, stream)
        stream.synchronize()
        sources, idxoff, weights = (array.get() for array in engine.page_store.views(k, 0))
        page = store.read_page(k)
        np.testing.assert_array_equal(sources, page.sources)
        np.testing.assert_array_equal(idxoff, page.idxoff)
        if engine.reads_weights:
            assert layout.weight_code == 1      # the generator's weights are 1..255
            np.testing.assert_array_equal(weights, page.weights)
        else:
            assert layout.weight_code == 0


@pytest.mark.parametrize("fraction", [0.05, 0.1])
@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("name", list(BUILTIN_PROGRAMS))
def test_packed_pages_equal_the_cpu(paged, name, execution, fraction):
    program = program_for(name)
    sources = sources_for(program)
    options = dict(execution=execution, **ITERATIONS)
    cpu = ref.run_engine_like_gpu(paged, program, sources, mode="cpu", **options)
    # the stream buffers hold packed pages: not counted, or every packed page fits
    budget = budget_for(paged, program, fraction, execution, buffers=False)
    graph_run = paged.as_undirected() if program.needs_undirected else paged
    total = sum(page.nbytes for page in graph_run.store.pages)
    for forced in (["auto", "copy"] if name in KEEPS_BEST else ["auto"]):
        gpu = run_gpu(paged, program, sources, forced, packed=True, gpu_memory=budget,
                      **options)
        ref.assert_run_matches(name, execution, gpu, cpu)
        records = gpu.iterations
        assert all(r.decisions["packed_pages"]["choice"] for r in records)
        # half the bytes of the stored pages or fewer cross the bus
        assert any(r.bytes_to_device > 0 for r in records)
        assert all(r.bytes_to_device < 0.5 * total for r in records)


def deferred_arrays_case(paged, name, execution):
    """A deferred-arrays test's program, sources, run options, the CPU's run and
    a budget of a tenth of the pages (no raw buffers): the selective arrays
    are deferred."""
    program = program_for(name)
    sources = sources_for(program)
    options = dict(execution=execution, **ITERATIONS)
    cpu = ref.run_engine_like_gpu(paged, program, sources, mode="cpu", **options)
    budget = budget_for(paged, program, 0.1, execution, buffers=False)
    return program, sources, options, cpu, budget


@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("name", ["cc", "bfs", "sssp"])
def test_selective_arrays_made_at_the_first_sparse_iteration(paged, name, execution,
                                                               monkeypatch):
    """Deferred, the selective arrays' room keeps pages on the device until the
    frontier first holds at most 1/8 of the vertices (made whether or not
    they pay, the engine's ``selective_when_pays`` off); then those pages are
    released and stream packed.  A run that starts dense (CC) copies fewer
    bytes before; every run equals the CPU's and the run made at set-up."""
    from garaphpy.scheduler.gpu_engine import SELECTIVE_FRONTIER_SHARE

    ref.gpu_engine_options(monkeypatch, selective_when_pays=False)
    program, sources, options, cpu, budget = deferred_arrays_case(paged, name, execution)
    runs = {}
    for deferred in (True, False):
        with pytest.MonkeyPatch.context() as patch:
            ref.gpu_engine_options(patch, defer_selective_arrays=deferred)
            runs[deferred] = run_gpu(paged, program, sources, "auto", packed=True,
                                     gpu_memory=budget, **options)
        ref.assert_run_matches(name, execution, runs[deferred], cpu)
    now, before = runs[False].iterations, runs[True].iterations
    assert not now[0].decisions["defer_selective_arrays"]["choice"]
    entry = before[0].decisions["defer_selective_arrays"]
    assert entry["choice"] and entry["kept_until_sparse"] > 0, entry
    made = [r for r in before if "selective_arrays" in r.decisions]
    assert len(made) == 1
    first = made[0].iteration
    most = paged.num_vertices // SELECTIVE_FRONTIER_SHARE
    # made at the first iteration whose frontier is sparse; dense ones copy every page
    assert all(r.active_vertices > most for r in before[:first])
    assert before[first].active_vertices <= most
    assert all("page_transfer" not in r.decisions for r in before[:first])
    assert all("page_transfer" in r.decisions for r in before[first:])
    released = made[0].decisions["selective_arrays"]
    assert len(released["released_pages"]) == entry["kept_until_sparse"]
    assert released["released_bytes"] == entry["displaced_bytes"]
    if name == "cc":    # every vertex starts active: dense iterations first
        assert first > 0
        for deferred, planned in zip(before[:first], now[:first]):
            assert deferred.bytes_to_device < planned.bytes_to_device
    else:
        assert first == 0


@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("name", ["bfs", "sssp"])
@pytest.mark.parametrize("pays", ["never", "at once", "by rent"])
def test_selective_arrays_made_when_they_pay(paged, name, execution, pays, monkeypatch):
    """With the rent-or-buy rule (the engine's ``selective_when_pays``), every
    sparse iteration before the arrays are made runs the pull over every page
    with its verdict recorded (``selective_pays``: no), the one that makes
    them says yes with the rent reaching the price, and none after decides
    again; a selective pass priced above any dense one never makes them, and
    the values equal the CPU's either way."""
    from garaphpy.scheduler.gpu_engine import SELECTIVE_FRONTIER_SHARE

    overhead, dense_iterations = {"never": (1e3, 2), "at once": (0.0, 0),
                                  "by rent": (0.0, 1e6)}[pays]
    ref.gpu_engine_options(monkeypatch, selective_when_pays=True)
    monkeypatch.setattr(config, "HYBRID_GPU_SPARSE_OVERHEAD_SECONDS", overhead)
    monkeypatch.setattr(config, "GPU_RELEASE_DENSE_ITERATIONS", dense_iterations)
    program, sources, options, cpu, budget = deferred_arrays_case(paged, name, execution)
    run = run_gpu(paged, program, sources, "auto", packed=True, gpu_memory=budget, **options)
    ref.assert_run_matches(name, execution, run, cpu)
    records = run.iterations
    assert records[0].decisions["defer_selective_arrays"]["choice"]
    most = paged.num_vertices // SELECTIVE_FRONTIER_SHARE
    made = [r.iteration for r in records if "selective_arrays" in r.decisions]
    assert len(made) <= 1
    end = made[0] if made else len(records)
    for record in records[:end]:
        verdict = record.decisions.get("selective_pays")
        assert (verdict is not None) == (record.active_vertices <= most)
        assert "page_transfer" not in record.decisions
        if verdict is not None:
            assert not verdict["choice"] and verdict["enabled"]
            assert verdict["tail"] == any(r.active_vertices > record.active_vertices
                                          for r in records[:record.iteration])
    if made:
        verdict = records[end].decisions["selective_pays"]
        assert verdict["choice"]
        price = verdict["released_seconds"] * (0 if verdict["tail"] else dense_iterations)
        assert verdict["rent"] >= price
        assert verdict["dense_seconds"] > verdict["sparse_seconds"]
        assert all("selective_pays" not in r.decisions for r in records[end + 1:])
        assert all("page_transfer" in r.decisions for r in records[end:])
    if pays == "never":
        assert not made
    elif pays == "at once":      # the first sparse iteration, the source's
        assert made == [0]
    else:       # the tail's first sparse iteration, or never when there is none
        rising = [r for r in records[:end] if r.active_vertices <= most]
        assert all(not r.decisions["selective_pays"]["tail"] for r in rising)
        assert rising and rising[0].iteration == 0
        if made:
            assert records[end].decisions["selective_pays"]["tail"]


# -- packed pages pulled where they lie (gp_pull_packed) ------------------------------------
def packed_pull_cases(store) -> set:
    """What the packed pull meets in the store's shards."""
    from garaphpy.kernels.packed import KEY_SHIFT

    cases = set()
    in_degree = np.diff(np.asarray(store.in_offsets))
    page_first_edge = {page.index: page.edge_begin for page in store.pages}
    for shard in store.shards:
        begin = int(shard["edge_begin"]) - page_first_edge[int(shard["page"])]
        if begin % (1 << KEY_SHIFT):
            cases.add("a stride begun in the shard before")
        if shard["split"]:
            cases.add("split")
            continue
        if shard["replication"] > 1:
            cases.add("replicas")
        first, count = int(shard["first_vertex"]), int(shard["num_vertices"])
        degrees = in_degree[first:first + count]
        empty = np.flatnonzero(degrees[:-1] == 0)
        if np.any(np.diff(empty) == 1) and degrees[empty[-1] + 1:].sum() > 0:
            cases.add("vertices without in-edges among others")
    return cases


def test_the_tiered_graph_has_what_the_packed_pull_must_meet(tiered):
    assert packed_pull_cases(tiered.store) == {
        "a stride begun in the shard before", "split", "replicas",
        "vertices without in-edges among others"}


@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("name", ["pagerank", "sssp", "bfs", "sswp"])
def test_packed_pages_pulled_where_they_lie_equal_the_cpu(tiered, name, execution):
    """Every page packed, some kept on the device and some streamed, each pulled
    from its packed bytes: the CPU engine's values (and iterations when
    synchronous and exact), as with unpacking first."""
    program = program_for(name)
    sources = sources_for(program)
    # (the CPU's asynchronous SSWP, larger widths first, takes more than 40 iterations here)
    options = dict(execution=execution, max_iterations=1000)
    cpu = ref.run_engine_like_gpu(tiered, program, sources, mode="cpu", **options)
    assert cpu.converged
    if name == "bfs":   # an independent reference: a mismatch below is then the GPU's
        np.testing.assert_array_equal(cpu.values, ref.bfs_scipy(tiered, sources))
    # the packed pages' buffers and some of the packed pages (4 to 10 bytes an edge
    # stored, 3.3 to 4.3 packed); a forced copy has no selective arrays
    budget = budget_for(tiered, program, 0.45, execution, buffers=False, selective=False)
    for pull_packed in (True, False):
        with pytest.MonkeyPatch.context() as patch:
            ref.gpu_engine_options(patch, pull_packed=pull_packed)
            gpu = run_gpu(tiered, program, sources, "copy", packed=True, gpu_memory=budget,
                          **options)
        try:
            ref.assert_run_matches(name, execution, gpu, cpu)
        except AssertionError as error:
            raise AssertionError(f"pull_packed={pull_packed}: {error}") from error
        assert any(r.bytes_to_device > 0 for r in gpu.iterations)


def test_a_packed_pull_needs_no_buffer_for_unpacked_pages(paged):
    # (a forced copy: the selective arrays, which a plan drops when they do not fit
    # beside the buffers, would leave the unpacking plan more room)
    engine = packed_engine(paged, "sssp", 0.0, pull_packed=True, transfer="copy")
    assert engine.packed_host and not engine.raw_buffers and not engine.device_pages
    unpacking = packed_engine(paged, "sssp", 0.0, transfer="copy")
    assert unpacking.raw_buffers and len(unpacking.device_pages) == len(unpacking.streams)
    # the buffers' room keeps more pages on the device
    assert engine.plan.streamed_pages <= unpacking.plan.streamed_pages


@pytest.mark.parametrize("edges_per_thread", [1, 2, 4, 16])
@pytest.mark.parametrize("name", ["pagerank", "sssp"])
def test_packed_pulls_of_every_run_length_equal_the_cpu(tiered, name, edges_per_thread,
                                                        monkeypatch):
    """``gp_pull_packed`` with runs other than 8 edges (sources byte by byte,
    values in narrower or wider loads, runs of 16 past the kept keys' stride)."""
    program = program_for(name)
    sources = sources_for(program)
    cpu = ref.run_engine_like_gpu(tiered, program, sources, mode="cpu", **ITERATIONS)
    monkeypatch.setattr(config, "GPU_EDGES_PER_THREAD", edges_per_thread)
    budget = budget_for(tiered, program, 0.45, buffers=False, selective=False)
    gpu = run_gpu(tiered, program, sources, "copy", packed=True, gpu_memory=budget,
                  **ITERATIONS)
    ref.assert_run_matches(name, "sync", gpu, cpu)
    assert any(r.bytes_to_device > 0 for r in gpu.iterations)


def forced_copy_runs(graph, name, execution, fraction, key, values, monkeypatch,
                     packed=True) -> dict:
    """GPU runs of program ``name`` that copy every streamed page, at a budget
    holding ``fraction`` of the pages, one for each of ``values`` of config
    ``key``, each checked against the CPU engine's run: value -> run."""
    program = program_for(name)
    sources = sources_for(program)
    options = dict(execution=execution, max_iterations=1000)
    cpu = ref.run_engine_like_gpu(graph, program, sources, mode="cpu", **options)
    budget = budget_for(graph, program, fraction, execution, buffers=False, selective=False)
    runs = {}
    for value in values:
        monkeypatch.setattr(config, key, value)
        runs[value] = run_gpu(graph, program, sources, "copy", packed=packed,
                              gpu_memory=budget, **options)
        ref.assert_run_matches(name, execution, runs[value], cpu)
    return runs


@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("name", ["pagerank", "sssp"])
def test_kept_pages_pulled_on_streams_of_their_own_equal_the_cpu(tiered, name, execution,
                                                                 monkeypatch):
    """The pulls of the pages kept on the device taken in turn by streams of their
    own (``config.GPU_KEPT_PAGES_STREAMS``, 3 and 8), or by the copied pages'
    streams (0): the CPU's values, and the same pages copied."""
    runs = forced_copy_runs(tiered, name, execution, 0.45, "GPU_KEPT_PAGES_STREAMS",
                            (0, 3, 8), monkeypatch)
    copied = {kept_streams: {r.bytes_to_device for r in gpu.iterations}
              for kept_streams, gpu in runs.items()}
    assert copied[0] == copied[3] == copied[8] and max(copied[0]) > 0


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("name", ["pagerank", "sssp"])
def test_next_copies_queued_ahead_equal_the_cpu(tiered, name, execution, packed,
                                               monkeypatch):
    """Iterations that copy every streamed page queue the next iteration's
    first copies (one per stream buffer) once their own are launched: the
    CPU's values, pages copied every iteration, and every iteration after
    the first uses copies the one before queued."""
    streams = config.GPU_KEPT_PAGES_STREAMS
    run = forced_copy_runs(tiered, name, execution, 0.3, "GPU_KEPT_PAGES_STREAMS",
                           (streams,), monkeypatch, packed=packed)[streams]
    entries = [r.decisions["prefetch_next_copies"] for r in run.iterations]
    assert run.num_iterations > 2 and all(entry["choice"] for entry in entries)
    assert entries[0]["used"] == 0
    assert all(0 < entry["used"] == before["queued"]
               for before, entry in zip(entries, entries[1:]))
    assert min(r.bytes_to_device for r in run.iterations) > 0


def test_a_page_launched_into_a_buffer_queued_for_another_page_is_copied_again(tiered):
    """A copy queued ahead for one page is not taken for another launched into
    the same buffer: that page is copied again, and its pull's values are those
    of an engine that queued nothing ahead."""
    from garaphpy.scheduler.gpu_engine import GpuEngine
    from garaphpy.scheduler.records import IterationRecord

    program = program_for("pagerank")
    budget = budget_for(tiered, program, 0.3, buffers=False, selective=False)
    saved = config.GPU_TRANSFER
    config.GPU_TRANSFER = "copy"
    try:
        engines = [GpuEngine(tiered, program, np.zeros(0, np.int64), synchronous=True,
                             gpu_memory=budget) for _ in range(2)]
    finally:
        config.GPU_TRANSFER = saved
    pulled = []
    for queued_ahead, engine in zip((True, False), engines):
        copied = [k for k in range(len(engine.pages)) if engine.page_store.copied(k)]
        assert len(copied) >= 2 and engine.prefetch_entry["choice"]
        aggregates = engine.aggregates(0)
        engine.begin_iteration(0)
        if queued_ahead:
            engine.page_store.prefetch_next_copies(copied, [0] * len(copied))
            assert list(engine.page_store.prefetched) == [0]
            assert engine.page_store.prefetched[0].page == copied[0]
        timing = engine.launch_page(copied[1], aggregates, 0, slot=0)
        assert not timing.prefetched and timing.bytes_to_device > 0
        assert not engine.page_store.prefetched
        page = engine.pages[copied[1]]
        engine.end_iteration(IterationRecord(0, "gpu", "pull", False, 0.0, 1.0, 1), [timing],
                             aggregates)
        pulled.append(engine.values_to_host()[page.first_vertex:page.end_vertex])
        engine.close()
    assert pulled[0].size > 0
    np.testing.assert_array_equal(pulled[0], pulled[1])


# -- the transfer rates measured at set-up ------------------------------------------------
@pytest.mark.parametrize("packed", [True, False])
def test_transfer_rates_measured_at_set_up(packed, monkeypatch):
    """A run that chooses per page prices its first iterations with the link's
    and the host threads' rates measured at its set-up: each measured rate
    replaces config's default and is recorded; without the calibration the
    defaults stand.  Either way the run equals the CPU's."""
    from garaphpy.scheduler.gpu import transfer
    from garaphpy.scheduler.gpu_engine import GpuEngine

    graph = garaphpy.Graph.load("rmat:20", progress=False, max_page_bytes=16 << 20, compress=False,
                                generator_options={"weighted": True, "seed": 5})
    program = program_for("bfs")
    budget = budget_for(graph, program, 0.25)
    engine = GpuEngine(graph, program, np.array([0], np.int64), synchronous=True,
                       gpu_memory=budget, packed_pages=packed)
    assert not engine.plan.resident and engine.selective
    measured = engine.calibration
    assert measured["choice"] == "measured"
    rates = engine.transfer_rates
    for name in ("bus", "count", "gather"):
        entry = measured[name]
        assert entry["seconds"] >= rates.MIN_SECONDS and entry["amount"] > 0, measured
        assert getattr(rates, name) == pytest.approx(entry["amount"] / entry["seconds"])
    assert 1e8 < rates.bus < 1e12       # bytes/s of a PCIe or NVLink-C2C link
    assert rates.bus != config.GPU_BUS_BYTES_PER_SECOND
    sources = np.array([0], np.int64)
    cpu = ref.run_engine_like_gpu(graph, program, sources, mode="cpu", **ITERATIONS)
    gpu = run_gpu(graph, program, sources, "auto", packed=packed, gpu_memory=budget,
                  **ITERATIONS)
    ref.assert_run_matches("bfs", "sync", gpu, cpu)
    assert gpu.iterations[0].decisions["transfer_calibration"]["choice"] == "measured"
    plain = GpuEngine(graph, program, np.array([0], np.int64), synchronous=True,
                      gpu_memory=budget, packed_pages=packed, calibrate_transfer_rates=False)
    assert plain.calibration is None
    assert plain.transfer_rates.as_dict() == transfer.TransferRates().as_dict()


@pytest.mark.parametrize("name", ["sssp", "cc", "sswp"])
def test_gpu_alone_takes_the_programs_default(paged, name):
    """SSSP, CC and SSWP run asynchronously on the GPU alone when no execution
    is asked for, resident and at a budget sized for the asynchronous run's
    vertex data and half the pages (so pages stream), and reach the
    independent reference's values."""

    program = program_for(name)
    sources = sources_for(program)
    expected = gpu_reference(name, paged, sources)
    for budget in (None, budget_for(paged, program, 0.5, "async")):
        options = {} if budget is None else {"gpu_memory": budget}
        result = ref.run_engine_quietly(paged, program, sources, mode="gpu", **options)
        assert result.execution == "async" and result.converged, result.stop_reason
        ref.assert_program_values(name, result.values, expected)
        streamed = sum(record.bytes_to_device for record in result.iterations)
        assert (streamed > 0) == (budget is not None), streamed
