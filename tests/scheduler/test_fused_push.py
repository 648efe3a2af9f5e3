"""The device loop's fused push: one pass and one grid barrier a level.

Without a GPU: the rule (:func:`decisions.gpu_fused_push`), the program
property it reads (:func:`garaphpy.program.activate_is_change`), the loop's
arrays and description, and ``nvcc`` of the persistent kernel's translation
unit for BFS, SSSP, CC and SSWP with every warning an error, and of the
engine's and the persistent unit for 8- and 16-bit values (the GPU plan's
choice and its switch: test_gpu_plan.py).
With one (``pytest -m gpu``): asynchronous BFS, SSSP, CC and SSWP through
the fused persistent kernel on a grid, a chain, a road-like grid (random
edges removed, weights 1..255) and a skewed rmat, with and without buckets
of values, give SciPy's BFS levels, Dijkstra distances and components (and a
max-heap's widest paths), one record per iteration, numbered in order; the
same run with the two-pass kernel (``turned_off={"fused_push"}``) gives the
same values; a stop at ``max_iterations`` stops exactly there; launches mix
with the graphs of launches; synchronous runs, and a 16-bit program (SciPy's
depths), keep the two passes.
"""

from __future__ import annotations

import shutil
import subprocess
import types

import numpy as np
import pytest

import garaphpy
from garaphpy import config
from garaphpy.api import _program_instance
from garaphpy.program import activate_is_change
from garaphpy.programs import SSSP
from garaphpy.scheduler import decisions, device_loop

import references as ref
from helpers import loop_entries, loop_launches, persistent_loop_graphs, program_for, source_of

ASYNC_PUSHED = ("bfs", "sssp", "cc", "sswp")


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    return persistent_loop_graphs(tmp_path_factory.mktemp("fused"))


@pytest.fixture(autouse=True)
def loop_from_the_first_iteration(monkeypatch):
    monkeypatch.setattr(config, "GPU_LOOP_AFTER_ITERATIONS", 0)
    monkeypatch.setattr(config, "GPU_SHORTCUT_LABELS_AFTER", 0)


# -- the rule and the property it reads, without a GPU ---------------------------------------
@pytest.mark.parametrize("persistent, synchronous, change, value_bytes, expected", [
    (True, False, True, 8, True),
    (True, False, True, 4, True),
    (False, False, True, 8, False),     # no persistent kernel: nothing to fuse
    (True, True, True, 8, False),       # synchronous: the pull's records, level by level
    (True, False, False, 8, False),     # an activate that asks for more than a change
    (True, False, True, 2, False),      # no compare-and-swap of 2 bytes
    (True, False, True, 1, False),
])
def test_the_fused_push_is_for_asynchronous_persistent_runs_of_changes(
        persistent, synchronous, change, value_bytes, expected):
    assert decisions.gpu_fused_push(persistent, synchronous, change, value_bytes) is expected


@pytest.mark.parametrize("name, expected", [
    ("bfs", True), ("sssp", True), ("cc", True), ("sswp", True),
    ("pagerank", False),        # sum add: apply does more than keep the best
])
def test_the_built_in_activates_are_changes(name, expected):
    assert activate_is_change(_program_instance(name)) is expected


class _Threshold(SSSP):
    """SSSP whose vertices activate only on a drop of more than 1: each change
    of a fused level alone may not activate where their sum does."""

    def activate(new, old):
        return old - new > 1.0


class _Unchanged(_Threshold):
    """Activates every vertex it applies, changed or not."""

    def activate(new, old):
        return True


class _Int32Labels(_Threshold):
    """Hop counts in 32 bits, activated on any change."""

    value_dtype = np.int32
    needs_weights = False

    def init(is_source):
        return 0 if is_source else 1000000

    def gather(src):
        return src + 1

    def activate(new, old):
        return new != old


class _Int16Labels(_Int32Labels):
    """Hop counts in 16 bits: no compare-and-swap of their size, so no fused push."""

    value_dtype = np.int16

    def init(is_source):
        return 0 if is_source else 16384


class _Int8Labels(_Int32Labels):
    """Hop counts in 8 bits, as _Int16Labels."""

    value_dtype = np.int8

    def init(is_source):
        return 0 if is_source else 64


def test_an_activate_beyond_a_change_does_not_qualify():
    assert not activate_is_change(_Threshold())
    assert not activate_is_change(_Unchanged())
    assert activate_is_change(_Int32Labels())


def test_its_arrays_are_counted():
    base = device_loop.extra_bytes(1000, 5000, 4, 8, 8, priority=True)
    fused = device_loop.extra_bytes(1000, 5000, 4, 8, 8, priority=True, fused=True)
    assert fused - base == 4 * 1000 + 3 * 8 * len(device_loop.LOOP_FIELDS)


def test_a_loop_launch_says_it_fused():
    loop = types.SimpleNamespace(push=True, priority=0, persistent_launches=3,
                                 persistent_blocks=264, group_launches=0, _fused_now=True,
                                 persistent_failure=None, graph_failure=None, graphs={})
    assert device_loop.DeviceLoop.describe(loop).startswith("fused push, 3 launches")
    loop._fused_now = False
    assert device_loop.DeviceLoop.describe(loop).startswith("push, 3 launches")


@pytest.mark.parametrize("name", ASYNC_PUSHED)
def test_the_unit_compiles_without_a_warning(name, tmp_path):
    """``nvcc -c`` of the persistent kernel's unit (what NVRTC takes), warnings
    as errors; its kernel swaps values (the fused pass) and keeps its barrier."""
    from garaphpy.kernels.cuda_program import translate_program
    from garaphpy.kernels.gpu import kernel_source, persistent_source

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH")
    translated = translate_program(program_for(name), weight_dtype=np.float64)
    source = tmp_path / f"{name}.cu"
    source.write_text(persistent_source(kernel_source(translated, np.int32)))
    ptx = tmp_path / f"{name}.ptx"
    for output in (["-c", "-o", str(tmp_path / f"{name}.o")], ["--ptx", "-o", str(ptx)]):
        result = subprocess.run([nvcc, "-arch=sm_90", "-std=c++17", "-Werror", "all-warnings",
                                 str(source), *output], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-6000:]
    body = ptx.read_text()
    body = body[body.index(".entry gp_persistent_push"):]
    body = body[:body.index("\n}\n")]
    assert "atom.global.cas" in body or "atom.cas" in body
    assert "ld.acquire.gpu" in body


@pytest.mark.parametrize("program", [_Int16Labels(), _Int8Labels()],
                         ids=["int16", "int8"])
def test_the_units_compile_for_values_of_one_and_two_bytes(program, tmp_path):
    """The engine's unit and the persistent kernel's hold the fused pass for
    every value type, compiled whatever the run's plan: a value too narrow for
    a compare-and-swap must not stop them compiling (its runs keep two passes)."""
    from garaphpy.kernels.cuda_program import translate_program
    from garaphpy.kernels.gpu import kernel_source, persistent_source

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH")
    engine_unit = kernel_source(translate_program(program, weight_dtype=None), np.int32)
    for name, text in (("engine", engine_unit), ("persistent", persistent_source(engine_unit))):
        source = tmp_path / f"{name}.cu"
        source.write_text(text)
        result = subprocess.run([nvcc, "-arch=sm_90", "-std=c++17", "-Werror", "all-warnings",
                                 "-c", "-o", str(tmp_path / f"{name}.o"), str(source)],
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-6000:]


# -- on the GPU ------------------------------------------------------------------------------
def fused_and_two_pass(graph, name, sources, **options):
    """The asynchronous run through the fused kernel and through the two-pass one."""
    program = program_for(name)
    used = sources if program.needs_sources else ()
    turned_off = set(options.pop("turned_off", ()))
    fused = ref.run_engine_like_gpu(graph, program, used, mode="gpu", execution="async",
                                    turned_off=turned_off, **options)
    two_pass = ref.run_engine_like_gpu(graph, program, used, mode="gpu", execution="async",
                                       turned_off=turned_off | {"fused_push"}, **options)
    return fused, two_pass


def expected_values(graph, name, source):
    if name == "bfs":
        return ref.bfs_scipy(graph, source)
    if name == "sssp":
        return ref.sssp_scipy(graph, source)
    if name == "cc":
        return ref.components_scipy(graph)
    return ref.sswp_heap(graph, source)


def assert_fused(result):
    """The loop ran fused launches; one record per iteration, in order."""
    entries = loop_entries(result)
    assert entries, "the device loop did not run"
    assert entries[-1]["fused_push"]["choice"] is True
    assert any(launch.startswith("fused push") and "persistent kernel" in launch
               for launch in loop_launches(result)), loop_launches(result)[-1]
    assert [r.iteration for r in result.iterations] == list(range(result.num_iterations))
    assert result.stop_reason is not None


@pytest.mark.gpu
@pytest.mark.parametrize("priority", [True, False])
@pytest.mark.parametrize("name", ASYNC_PUSHED)
@pytest.mark.parametrize("graph_name", ["grid", "chain", "road", "rmat"])
def test_fused_values_equal_scipy_and_the_two_passes(graphs, graph_name, name, priority):
    graph = graphs[graph_name]
    source = source_of(graph, graph_name)
    off = set() if priority else {"gpu_value_priority"}
    fused, two_pass = fused_and_two_pass(graph, name, source, turned_off=off,
                                         max_iterations=100_000)
    assert_fused(fused)
    expected = expected_values(graph, name, source)
    np.testing.assert_array_equal(fused.values, expected)
    np.testing.assert_array_equal(two_pass.values, expected)
    if name in ("bfs", "sssp"):     # each vertex reached was activated at least once
        reached = int(np.count_nonzero(np.isfinite(expected) & (expected > 0)))
        assert sum(r.activated for r in fused.iterations) >= reached
    if priority and name in ("sssp",) and graph_name != "chain":
        entry = loop_entries(fused)[-1]
        assert entry["value_priority"]["choice"] and entry["buckets"] >= 1


@pytest.mark.gpu
@pytest.mark.parametrize("width", [1.0, 64.0, 10_000.0])
def test_fused_buckets_of_every_width(graphs, width, monkeypatch):
    monkeypatch.setattr(config, "GPU_BUCKET_WIDTH", width)
    for graph_name in ("grid", "road"):
        graph = graphs[graph_name]
        source = source_of(graph, graph_name)
        for name in ("sssp", "sswp"):
            fused, _ = fused_and_two_pass(graph, name, source)
            assert_fused(fused)
            np.testing.assert_array_equal(fused.values, expected_values(graph, name, source))


@pytest.mark.gpu
@pytest.mark.parametrize("limit", [1, 37, device_loop.PERSISTENT_ITERATIONS,
                                   device_loop.PERSISTENT_ITERATIONS + 1, 300])
def test_a_fused_stop_inside_a_launch_stops_exactly_there(graphs, limit):
    graph = graphs["chain"]         # one vertex a level: 30,000 levels
    source = source_of(graph, "chain")
    fused, _ = fused_and_two_pass(graph, "bfs", source, max_iterations=limit)
    assert not fused.converged
    assert fused.num_iterations == limit
    assert [r.iteration for r in fused.iterations] == list(range(limit))
    depth = np.asarray(fused.values)
    reached = depth >= 0
    assert reached.sum() >= limit + 1
    np.testing.assert_array_equal(depth[reached], ref.bfs_scipy(graph, source)[reached])


@pytest.mark.gpu
def test_fused_launches_mix_with_the_graphs(graphs, monkeypatch):
    """Persistent launches for frontiers of at most 100 out-edges alone: a
    grid's asynchronous SSSP from a corner runs fused levels and two-pass
    graphs in one batch."""
    monkeypatch.setattr(decisions, "gpu_persistent_launch",
                        lambda frontier_out_edges, grid_threads: frontier_out_edges <= 100)
    monkeypatch.setattr(device_loop, "PERSISTENT_ITERATIONS", 8)
    graph = graphs["road"]
    corner = np.array([int(np.flatnonzero(np.asarray(graph.store.out_degree) > 0)[0])])
    for name in ("bfs", "sssp"):
        fused, _ = fused_and_two_pass(graph, name, corner, turned_off={"gpu_value_priority"})
        assert any(launch.startswith("fused push") and "groups" in launch
                   for launch in loop_launches(fused)), loop_launches(fused)
        np.testing.assert_array_equal(fused.values, expected_values(graph, name, corner))


@pytest.mark.gpu
def test_synchronous_runs_keep_the_two_passes(graphs):
    graph = graphs["grid"]
    source = source_of(graph, "grid")
    result = ref.run_engine_like_gpu(graph, "bfs", source, mode="gpu", execution="sync")
    entries = loop_entries(result)
    assert entries and entries[-1]["fused_push"]["choice"] is False
    assert not any(launch.startswith("fused") for launch in loop_launches(result))
    np.testing.assert_array_equal(result.values, ref.bfs_scipy(graph, source))


@pytest.mark.gpu
def test_a_16_bit_program_keeps_the_two_passes_and_scipys_depths(graphs):
    graph = graphs["grid"]
    source = source_of(graph, "grid")
    result = garaphpy.run(graph, _Int16Labels(), sources=int(source[0]), mode="gpu",
                          execution="async", max_iterations=100_000)
    entries = loop_entries(result)
    assert entries and entries[-1]["fused_push"]["choice"] is False
    depth = ref.bfs_scipy(graph, source)
    np.testing.assert_array_equal(result.values, np.where(depth >= 0, depth, 16384))


@pytest.mark.gpu
def test_a_user_program_with_a_threshold_activate_keeps_the_two_passes(graphs):
    graph = graphs["road"]
    source = source_of(graph, "road")
    result = garaphpy.run(graph, _Threshold(), sources=int(source[0]), mode="gpu",
                          execution="async")
    entries = loop_entries(result)
    assert entries and entries[-1]["fused_push"]["choice"] is False
    assert entries[-1]["fused_push"]["activate_is_change"] is False
