"""The GPU's part of the run plan (garaphpy.scheduler.gpu.plan): every run-constant
GPU choice made once by plan_gpu, on the CPU alone.

Each choice is its rule in garaphpy.scheduler.decisions (tested there); here:
which choices a run's facts lead to (pages resident or streamed, selective
transfers or not, the device loop's room), what turning each off does, the
plan's two forms, the one budget rule, and that the GPU engine's modules make
none of these choices themselves.
"""

from __future__ import annotations

import ast
import inspect
import json
import types
from pathlib import Path

import numpy as np
import pytest

import garaphpy
from garaphpy import config
from garaphpy.api import _program_instance
from garaphpy.kernels.cuda_program import translate_program
from garaphpy.scheduler import decisions
from garaphpy.scheduler.gpu.page_store import compressed_layouts, packed_layouts
from garaphpy.scheduler.gpu.plan import ENGINE_SWITCHES, GpuPlan, VertexMemory, plan_gpu
from garaphpy.scheduler.plan import CPU_CHOICES, GPU_CHOICES, RunPlan, check_turned_off
from garaphpy.storage.page_source import InMemoryPages

#: The device bytes the vertex data takes in these plans (the precompute adds some).
VERTEX_BYTES = 50_000


@pytest.fixture(scope="module")
def graph():
    """A weighted graph of ten pages (about 560 KB of them, 240 KB without values)."""
    rng = np.random.default_rng(3)
    n, m = 3000, 40000
    graph = garaphpy.Graph.from_arrays(rng.integers(0, n, m), rng.integers(0, n, m),
                                       rng.integers(1, 9, m).astype(np.float64),
                                       max_shard_edges=4096, min_shards=1,
                                       max_page_bytes=60000, compress=False)
    assert len(graph.store.pages) > 4
    return graph


@pytest.fixture
def store(graph):
    return graph.store


@pytest.fixture(scope="module")
def compressed_store():
    """An unweighted graph of several pages, stored compressed."""
    rng = np.random.default_rng(4)
    n, m = 3000, 40000
    return garaphpy.Graph.from_arrays(rng.integers(0, n, m), rng.integers(0, n, m),
                                      max_shard_edges=4096, min_shards=1,
                                      max_page_bytes=60000, compress=True).store


@pytest.fixture(scope="module")
def symmetric_store(graph):
    """The graph's edges and their reverses (connected components' plans)."""
    return graph.as_undirected().store


def make_plan(store, name: str, budget: int = 10 ** 9, *, synchronous: bool = False,
              turned_off=(), n_streams: int = 4, cached: bool = True,
              reads_storage: bool = True) -> GpuPlan:
    """plan_gpu for built-in program ``name`` over ``store`` with a GPU budget of
    ``budget`` bytes (the pages the host holds packable where ``cached``; the
    others read from storage where ``reads_storage``; compressed pages
    shippable as stored either way)."""
    program = _program_instance(name)
    translated = translate_program(program, weight_dtype=store.weight_dtype,
                                   degree_dtype=store.out_degree.dtype)
    reads_weights = bool(store.weighted
                         and "weight" in type(program).functions["gather"].parameters)
    asked = []

    def vertex_memory(precompute):
        asked.append(precompute)
        return VertexMemory(VERTEX_BYTES + 1000 * precompute, budget)

    plan = plan_gpu(program, translated, store, synchronous=synchronous,
                    reads_weights=reads_weights, n_streams=n_streams,
                    vertex_memory=vertex_memory,
                    packed_layouts=lambda: packed_layouts(store, InMemoryPages(store),
                                                          reads_weights) if cached else {},
                    compressed_layouts=lambda: compressed_layouts(store, reads_weights),
                    reads_storage=reads_storage, turned_off=turned_off)
    assert asked == [plan.precompute]       # the vertex data is made once, for the choice
    return plan


def streamed_budget(store, name: str = "sssp") -> int:
    """A budget that holds the vertex data and half the pages of a run of ``name``."""
    pages = make_plan(store, name).pages
    return pages.vertex_bytes + pages.page_bytes // 2


# -- the truth table -----------------------------------------------------------------------
def test_resident_pages_loop_on_the_device_and_fuse_their_launches(store):
    plan = make_plan(store, "sssp")
    assert plan.resident and plan.pages.budget == 10 ** 9
    assert plan.selective_transfers and plan.push and plan.value_priority and plan.device_loop
    assert not (plan.selective or plan.selective_room or plan.prefetch_next_copies)
    assert plan.packed_layouts == {} and plan.release_pages is None
    # a resident run packs nothing and defers nothing: those are not recorded
    for name in ("packed_pages", "defer_selective_arrays", "selective_pushes"):
        assert plan.entry(name) is None
    assert plan.entry("resident_selective")["choice"] is False   # the loop's arrays fit
    assert plan.device_loop_entry(False)["choice"] and not plan.device_loop_entry(True)["choice"]
    assert plan.fused_launch_entry(False)["choice"]
    assert not plan.fused_launch_entry(True)["choice"]     # asynchronous, checkpoints after pages
    assert make_plan(store, "sssp", synchronous=True).fused_launch_entry(True)["choice"]


def test_streamed_pages_are_packed_chosen_per_page_and_not_looped(store):
    plan = make_plan(store, "sssp", streamed_budget(store))
    assert not plan.resident and plan.pages.n_streams >= 1
    packed = plan.entry("packed_pages")
    assert packed["choice"] and packed["packed_bytes"] <= 0.9 * packed["wire_bytes"]
    assert plan.packed_layouts and plan.selective_transfers and plan.selective_room
    assert plan.selective and not plan.prefetch_next_copies
    deferred = plan.entry("defer_selective_arrays")
    assert deferred["choice"] and deferred["kept_until_sparse"] == int(plan.release_pages.sum())
    assert plan.pages.selective_bytes == 0      # their room holds pages until then
    assert not plan.device_loop and not plan.device_loop_entry(False)["resident"]
    assert not plan.fused_launch_entry(False)["choice"]
    assert plan.selective_pushes_entry(True)["choice"] == ("compact", "zero-copy")
    assert plan.selective_pushes_entry(False)["choice"] == ()     # SSSP reads edge values


def test_streamed_pages_without_selective_transfers_queue_the_next_copies(store):
    plan = make_plan(store, "pagerank", streamed_budget(store, "pagerank"))
    assert not plan.resident and not plan.selective_transfers and plan.selective_bytes == 0
    assert not plan.selective and plan.prefetch_next_copies
    assert plan.entry("defer_selective_arrays") is None and plan.release_pages is None
    assert plan.entry("prefetch_next_copies") == {"resident": False, "selective": False,
                                                  "choice": True}


def test_pages_the_host_does_not_hold_stream_as_stored(store):
    plan = make_plan(store, "sssp", streamed_budget(store), cached=False)
    assert not plan.resident and not plan.entry("packed_pages")["choice"]
    assert plan.packed_layouts == {} and plan.raw_buffers
    assert plan.entry("defer_selective_arrays") is None


def test_resident_pages_choose_per_page_where_only_the_selective_arrays_fit(store):
    roomy = make_plan(store, "sssp")
    loop_bytes = roomy.device_loop_entry(False)["extra_bytes"]
    assert roomy.selective_bytes < loop_bytes
    pages = roomy.pages
    budget = pages.vertex_bytes + pages.page_bytes + (roomy.selective_bytes + loop_bytes) // 2
    plan = make_plan(store, "sssp", budget)
    assert plan.resident and not plan.device_loop
    assert plan.entry("resident_selective") == {
        "loop_bytes": loop_bytes, "selective_bytes": plan.selective_bytes,
        "free_bytes": plan.device_loop_entry(False)["free_bytes"], "choice": True}
    assert plan.selective and plan.entry("selective_pushes") is not None
    assert not plan.prefetch_next_copies     # resident


@pytest.mark.parametrize("name, expected", [
    ("sssp", True), ("bfs", True), ("cc", True),
    ("pagerank", False),        # aggregates change between the loop's iterations
])
def test_device_loop_eligibility(store, name, expected):
    plan = make_plan(store, name)
    entry = plan.device_loop_entry(False)
    assert plan.device_loop is expected and entry["choice"] is expected
    assert entry["aggregates"] is (not expected)
    assert not plan.device_loop_entry(True)["choice"]       # checkpoints after pages
    assert not make_plan(store, name, streamed_budget(store, name)).device_loop
    tight = entry["extra_bytes"] - 1 + plan.pages.vertex_bytes + plan.pages.page_bytes
    assert not make_plan(store, name, tight).device_loop    # its arrays do not fit


@pytest.mark.parametrize("name, expected", [
    ("sssp", True), ("bfs", True), ("cc", True), ("sswp", True),
    ("pagerank", False),        # no push: the notify-pull's graphs of launches
])
def test_the_persistent_loop_is_the_pushs(store, name, expected):
    plan = make_plan(store, name)
    assert plan.persistent_loop is expected
    assert plan.entry("persistent_loop") == {"push": expected, "choice": expected}
    assert ("persistent loop" in plan.describe()) is expected
    assert plan.as_dict()["persistent_loop"]["choice"] is expected


@pytest.mark.parametrize("name, synchronous, expected", [
    ("bfs", False, True), ("sssp", False, True), ("cc", False, True), ("sswp", False, True),
    ("bfs", True, False), ("sssp", True, False),
    ("pagerank", False, False),     # no push, no persistent kernel
])
def test_the_plan_fuses_asynchronous_pushes(store, name, synchronous, expected):
    plan = make_plan(store, name, synchronous=synchronous)
    assert plan.fused_push is expected
    entry = plan.entry("fused_push")
    assert entry["choice"] is expected
    assert entry["synchronous"] is synchronous and entry["persistent"] is plan.persistent_loop
    assert ("fused push" in plan.describe()) is expected
    assert plan.as_dict()["fused_push"]["choice"] is expected


def test_the_fused_push_turns_off_alone(store):
    plan = make_plan(store, "sssp", turned_off={"fused_push"})
    assert plan.persistent_loop and not plan.fused_push
    assert plan.entry("fused_push")["turned_off"] is True
    assert not make_plan(store, "sssp", turned_off={"persistent_loop"}).fused_push


def test_the_precompute_follows_its_rule(store):
    assert make_plan(store, "pagerank", synchronous=True).precompute
    assert not make_plan(store, "pagerank").precompute          # asynchronous
    assert not make_plan(store, "bfs", synchronous=True).precompute     # reads src alone
    entry = make_plan(store, "pagerank", synchronous=True).entry("gpu_precompute")
    assert entry == decisions.fixed(
        decisions.precompute_source_gathers, direction="pull", synchronous=True,
        gather_parameters=frozenset(entry["gather_parameters"]), enabled=True)


# -- turned off ----------------------------------------------------------------------------
def _streamed(store):
    return streamed_budget(store)


def _streamed_bfs(store):
    """Half of BFS's pages beside the vertex data, and room for the selective arrays."""
    roomy = make_plan(store, "bfs", synchronous=True)
    return roomy.pages.vertex_bytes + roomy.pages.page_bytes // 2 + roomy.selective_bytes


#: choice -> (program, synchronous, budget of the store or None for resident, the plan's
#: field that goes off (or None), the entry's input that says so)
TURNED_OFF = {
    "gpu_precompute": ("pagerank", True, None, "precompute", "enabled"),
    "selective_transfers": ("sssp", False, _streamed, "selective_transfers", "turned_off"),
    "packed_pages": ("sssp", False, _streamed, None, "enabled"),
    "compressed_pages": ("pagerank", True, lambda store: streamed_budget(store, "pagerank"),
                         None, "enabled"),
    "pull_packed": ("sssp", False, _streamed, "pull_packed", None),
    "defer_selective_arrays": ("sssp", False, _streamed, None, "enabled"),
    "gpu_push": ("sssp", False, None, "push", "enabled"),
    "gpu_value_priority": ("sssp", False, None, "value_priority", "enabled"),
    "persistent_loop": ("bfs", False, None, "persistent_loop", "turned_off"),
    "fused_push": ("bfs", False, None, "fused_push", "turned_off"),
    "device_loop": ("bfs", False, None, "device_loop", "enabled"),
    "resident_selective": ("sssp", False, "between", "selective", "turned_off"),
    "prefetch_next_copies": ("pagerank", False, lambda store: streamed_budget(store, "pagerank"),
                             "prefetch_next_copies", "turned_off"),
    "fused_launch": ("pagerank", True, None, None, "fuse_enabled"),
    "selective_when_pays": ("sssp", False, _streamed, "selective_when_pays", None),
    "calibrate_transfer_rates": ("sssp", False, _streamed, "calibrate_transfer_rates", None),
    "settled_pages": ("bfs", True, _streamed_bfs, "settled_pages", "turned_off"),
    "gpu_union_find_start": ("cc", False, None, "union_find_start", "turned_off"),
}


def _budget(store, how):
    if how is None:
        return 10 ** 9
    if how == "between":
        roomy = make_plan(store, "sssp")
        loop_bytes = roomy.device_loop_entry(False)["extra_bytes"]
        return (roomy.pages.vertex_bytes + roomy.pages.page_bytes
                + (roomy.selective_bytes + loop_bytes) // 2)
    return how(store)


def test_every_gpu_choice_can_be_turned_off():
    assert set(TURNED_OFF) == set(GPU_CHOICES)
    assert not set(GPU_CHOICES) & set(CPU_CHOICES)
    assert set(ENGINE_SWITCHES.values()) <= set(GPU_CHOICES)


@pytest.mark.parametrize("name", GPU_CHOICES)
def test_a_gpu_choice_turned_off(request, store, symmetric_store, name):
    program, synchronous, how, field, flag = TURNED_OFF[name]
    if program == "cc":
        store = symmetric_store
    if name == "compressed_pages":
        store = request.getfixturevalue("compressed_store")
    budget = _budget(store, how)
    on = make_plan(store, program, budget, synchronous=synchronous)
    off = make_plan(store, program, budget, synchronous=synchronous, turned_off={name})
    assert off.turned_off == frozenset({name}) and on.turned_off == frozenset()
    if field is not None:
        assert getattr(on, field) and not getattr(off, field)
    entry_on, entry_off = on.entry(name), off.entry(name)
    if name in ("device_loop", "fused_launch"):
        entry_on, entry_off = entry_on[False], entry_off[False]
    if flag == "turned_off":        # no switch among the rule's inputs
        assert entry_on["choice"] and entry_off == {**entry_on, "choice": False,
                                                    "turned_off": True}
    elif flag is not None:          # the rule made with its switch off
        assert entry_on["choice"] and entry_on[flag]
        entry_on = {key: value for key, value in entry_on.items()
                    if key != "kept_until_sparse"}      # what a deferral keeps
        assert entry_off == {**entry_on, flag: False, "choice": False}


def test_choices_made_after_one_turned_off_see_it(store):
    plan = make_plan(store, "sssp", turned_off={"gpu_push"})
    assert not plan.value_priority and plan.entry("gpu_value_priority")["push"] is False
    assert not plan.persistent_loop and plan.entry("persistent_loop")["push"] is False
    assert not plan.fused_push and plan.entry("fused_push")["persistent"] is False
    streamed = make_plan(store, "sssp", _streamed(store), turned_off={"selective_transfers"})
    assert streamed.selective_bytes == 0 and not streamed.selective
    assert streamed.prefetch_next_copies
    unpacked = make_plan(store, "sssp", _streamed(store), turned_off={"pull_packed"})
    # a stream's buffer for an unpacked page too: the released pages could not stream
    assert unpacked.raw_buffers and unpacked.release_pages is None
    deferral = unpacked.entry("defer_selective_arrays")
    assert deferral is None or deferral["packed_streams"] is False


def test_unknown_names_are_refused():
    assert check_turned_off({"device_loop", "early_exit"}) == {"device_loop", "early_exit"}
    with pytest.raises(ValueError, match="not plan choices"):
        check_turned_off({"device_loops"})


# -- its forms --------------------------------------------------------------------------
def test_the_plan_is_frozen_and_in_both_forms(store):
    plan = make_plan(store, "sssp", _streamed(store), turned_off={"device_loop"})
    with pytest.raises(AttributeError):
        plan.device_loop = True
    row = json.loads(json.dumps(plan.as_dict()))
    assert row["pages"]["resident"] is False and row["turned_off"] == ["device_loop"]
    assert row["packed_pages"]["choice"] is True
    assert row["device_loop"]["checkpoints_after_pages=False"]["enabled"] is False
    assert row["selective_pushes"]["pinned_fits=True"]["choice"] == ["compact", "zero-copy"]
    run = RunPlan(mode="gpu", execution="async", direction="auto", max_iterations=10,
                  tolerance=None, threads=1).with_gpu(plan)
    assert run.gpu is plan and run.as_dict()["gpu"] == plan.as_dict()
    assert "GPU: pages streamed over" in run.describe()
    assert "selective transfers" in plan.describe()


def test_the_engine_study_switches_are_its_plan_choices():
    from garaphpy.scheduler.gpu.engine import GpuEngine

    parameters = inspect.signature(GpuEngine).parameters
    for switch in ENGINE_SWITCHES:
        assert parameters[switch].default is True
    assert "turned_off" in parameters


# -- one place -----------------------------------------------------------------------------
#: The rules of the choices plan_gpu makes.
MOVED_RULES = ("precompute_source_gathers", "selective_transfers", "packed_pages",
               "compressed_pages",
               "defer_selective_arrays", "gpu_push", "gpu_value_priority",
               "gpu_persistent_loop", "gpu_fused_push", "device_loop",
               "resident_selective", "selective_pushes", "prefetch_next_copies",
               "fuse_gpu_launch", "gpu_union_find_start", "gpu_settled_pages", "fixed")


def test_no_gpu_module_but_the_plan_makes_a_run_constant_choice():
    """No module of garaphpy/scheduler/gpu calls ``decisions.fixed`` or names
    the rule of a choice plan_gpu makes, but gpu/plan.py."""
    folder = Path(garaphpy.__file__).parent / "scheduler" / "gpu"
    wrong = []
    for path in sorted(folder.glob("*.py")):
        if path.name == "plan.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == "decisions" and node.attr in MOVED_RULES:
                wrong.append(f"{path.name}:{node.lineno} decisions.{node.attr}")
            if isinstance(node, ast.ImportFrom) and node.module \
                    and node.module.endswith("decisions"):
                wrong.extend(f"{path.name}:{node.lineno} imports {alias.name}"
                             for alias in node.names if alias.name in MOVED_RULES)
    assert wrong == []


def test_the_check_sees_a_rule_called():
    tree = ast.parse("from .. import decisions\nentry = decisions.fixed(decisions.gpu_push)\n")
    names = [node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)]
    assert set(names) <= set(MOVED_RULES) and "fixed" in names


# -- the budget ----------------------------------------------------------------------------
def test_build_and_run_resolve_the_gpu_budget_by_one_rule(monkeypatch):
    from garaphpy.options import BuildOptions
    from garaphpy.storage import builder

    assert config.gpu_budget(123_456) == 123_456
    assert config.gpu_budget(123_456, held_bytes=10 ** 9) == 123_456
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=types.SimpleNamespace(
        memGetInfo=lambda: (1000, 4000))))
    monkeypatch.setitem(__import__("sys").modules, "cupy", fake)
    assert config.gpu_budget(None) == int(config.GPU_MEMORY_FRACTION * 1000)
    assert config.gpu_budget(None, 500) == int(config.GPU_MEMORY_FRACTION * 1500)
    assert builder._resolve_gpu_memory(BuildOptions()) == int(config.GPU_MEMORY_FRACTION * 1000)
    assert builder._resolve_gpu_memory(BuildOptions(gpu_memory=77_777)) == 77_777


def test_without_a_device_a_build_assumes_a_budget_and_a_run_raises(monkeypatch):
    from garaphpy.options import BuildOptions
    from garaphpy.storage import builder

    monkeypatch.setitem(__import__("sys").modules, "cupy", None)    # import fails
    assert builder._resolve_gpu_memory(BuildOptions()) == config.DEFAULT_GPU_MEMORY_BYTES
    assert config.gpu_budget(None, without_device=5) == 5
    with pytest.raises(ImportError):
        config.gpu_budget(None, 100)


def test_compressed_pages_decode_a_group_of_shards_at_a_time(compressed_store):
    from garaphpy.scheduler.gpu.page_store import decode_chunks
    from garaphpy.storage.page_codec import BLOCK_EDGES

    store = compressed_store
    budget = streamed_budget(store, "pagerank")
    plan = make_plan(store, "pagerank", budget, synchronous=True)
    assert not plan.resident and plan.entry("compressed_pages")["choice"]
    assert plan.entry("compressed_pages")["index_bytes"] == 4 * (store.num_vertices + 1)
    # every page compressed and in host memory: no buffer for a whole plain page
    assert not plan.raw_buffers
    edges = plan.decode_edges
    assert edges == plan.entry("decode_buffer")["choice"] and edges % BLOCK_EDGES == 0
    largest = max(info.num_edges for info in store.pages)
    assert edges < largest
    assert plan.pages.vertex_bytes + plan.pages.page_bytes <= budget
    for info in store.pages:
        rows = store.page_shards(info.index)
        chunks = decode_chunks(info, rows, edges)
        assert [c[0] for c in chunks] == list(
            np.cumsum([info.first_shard] + [c[1] for c in chunks[:-1]]))
        assert sum(c[1] for c in chunks) == info.num_shards
        for first_shard, count, first_block, end_block in chunks:
            assert (end_block - first_block) * BLOCK_EDGES <= edges
            group = store.shards[first_shard:first_shard + count]
            assert group["edge_begin"].min() - info.edge_begin >= first_block * BLOCK_EDGES
            assert group["edge_end"].max() - info.edge_begin <= end_block * BLOCK_EDGES
    assert any(len(decode_chunks(info, store.page_shards(info.index), edges)) > 1
               for info in store.pages)


def test_streamed_pages_of_a_final_once_set_program_skip_settled_pages(store):
    bfs = make_plan(store, "bfs", _streamed_bfs(store), synchronous=True)
    assert not bfs.resident and bfs.selective and bfs.settled_pages
    assert bfs.entry("settled_pages") == {"final_once_set": True, "synchronous": True,
                                          "resident": False, "selective": True,
                                          "reads_storage": True, "choice": True}
    assert not make_plan(store, "bfs", _streamed_bfs(store), synchronous=True,
                         reads_storage=False).settled_pages     # pages in host memory
    assert not make_plan(store, "bfs", synchronous=True).settled_pages     # resident
    assert not make_plan(store, "bfs", _streamed_bfs(store)).settled_pages     # async
    assert not make_plan(store, "sssp", streamed_budget(store),
                         synchronous=True).settled_pages       # SSSP's values improve
    off = make_plan(store, "bfs", _streamed_bfs(store), synchronous=True,
                    turned_off={"settled_pages"})
    assert not off.settled_pages and off.entry("settled_pages")["turned_off"]

