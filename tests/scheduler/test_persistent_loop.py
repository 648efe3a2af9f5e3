"""The device loop's persistent kernel: several sparse iterations a launch.

Without a GPU: the rules (:func:`decisions.gpu_persistent_loop`,
:func:`decisions.gpu_persistent_launch`, :func:`decisions.gpu_persistent_blocks`),
the kernel's source (it runs the graph-launched loop's passes, not copies of
them), its launch's arguments against its parameters, and ``nvcc --ptx`` of
the whole translation unit without separate compilation.  With one
(``pytest -m gpu``): BFS, SSSP, CC and SSWP on a grid, a chain, a road-like
grid (random edges removed, weights 1..255) and a skewed rmat give the values
and the iteration records of the loop without its persistent kernel
(``turned_off={"persistent_loop"}``), and SciPy's BFS levels and Dijkstra
distances; the order of value (near-far buckets) too; a stop at
``max_iterations`` stops exactly there; a launch mixes with the graphs.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import types
from pathlib import Path

import numpy as np
import pytest

import garaphpy
from garaphpy import config
from garaphpy.scheduler import decisions, device_loop

import references as ref
from helpers import loop_entries, loop_launches, persistent_loop_graphs, program_for, source_of

CUDA = Path(garaphpy.__file__).parent / "kernels" / "cuda"
PASSES = ("gp_split_pass", "gp_push_pass", "gp_apply_pass")
OFF = {"persistent_loop"}


@pytest.fixture(autouse=True)
def loop_from_the_first_iteration(monkeypatch):
    monkeypatch.setattr(config, "GPU_LOOP_AFTER_ITERATIONS", 0)
    monkeypatch.setattr(config, "GPU_SHORTCUT_LABELS_AFTER", 0)


# -- the rules, without a GPU ------------------------------------------------------------
def test_the_persistent_loop_is_for_the_push():
    assert decisions.gpu_persistent_loop(push=True)
    assert not decisions.gpu_persistent_loop(push=False)


def test_a_launch_is_persistent_while_the_frontier_is_small_for_its_grid():
    threads = 1000
    assert decisions.gpu_persistent_launch(0, threads, 16.0)
    assert decisions.gpu_persistent_launch(16_000, threads, 16.0)
    assert not decisions.gpu_persistent_launch(16_001, threads, 16.0)
    bound = decisions.PERSISTENT_EDGES_PER_THREAD * threads
    assert decisions.gpu_persistent_launch(int(bound), threads)
    assert not decisions.gpu_persistent_launch(int(bound) + 1, threads)


def test_the_persistent_grid_is_co_resident():
    assert decisions.gpu_persistent_blocks(8, 132, 2) == 264
    assert decisions.gpu_persistent_blocks(1, 132, 2) == 132      # what fits
    assert decisions.gpu_persistent_blocks(8, 132, None) == 1056  # every block that fits
    assert decisions.gpu_persistent_blocks(0, 132, 2) == 0


# -- the kernel's source -------------------------------------------------------------------
def _function_body(text: str, name: str) -> str:
    start = text.index("{", re.search(rf"\b{name}\(", text).start())
    depth = 0
    for end in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            return text[start:end + 1]
    raise AssertionError(name)


def test_the_persistent_kernel_runs_the_loops_own_passes():
    sparse = (CUDA / "sparse.cu").read_text()
    persistent = (CUDA / "persistent.cu").read_text()
    kernel = _function_body(persistent, "gp_persistent_push")
    for name in PASSES:
        assert f"__device__ __forceinline__ void {name}(" in sparse
        assert f"{name}(" in kernel
        assert f"void {name}(" not in persistent         # no copy of its own
    for launched, shared in (("gp_sparse_push", "gp_push_pass"),
                             ("gp_sparse_apply", "gp_apply_pass"),
                             ("gp_priority_split", "gp_split_pass")):
        assert f"{shared}(" in _function_body(sparse, f'extern "C" __global__ void {launched}')
    assert kernel.count("grid.sync()") == 3


def _kernel_parameters(text: str, name: str) -> list:
    head = re.search(rf"void {name}\((.*?)\)\s*{{", text, re.S).group(1)
    head = head.replace("GP_ATTR_PARAMETERS", ",".join(["attr"] * 5))
    return [p for p in head.split(",") if p.strip()]


def test_the_launch_passes_every_parameter_of_the_kernel():
    parameters = _kernel_parameters((CUDA / "persistent.cu").read_text(), "gp_persistent_push")
    launched = []
    kernel = types.SimpleNamespace(kernel=lambda grid, block, args, **options: launched.append(
        (grid, block, args, options)))
    engine = types.SimpleNamespace(values="values", attrs=("a",) * 5,
                                   aggregate_totals="totals")
    loop = types.SimpleNamespace(
        engine=engine, persistent_kernel=kernel, state="state", records="records",
        out_offsets="offsets",
        out_targets="targets", out_weights="weights", frontiers="frontiers",
        notified_flags="flags", notified="queue", accum="accum", far="far",
        far_flags="far_flags", group_shift=2, num_vertices=10, persistent_blocks=264,
        fused_slots="slots", stamps="stamps", _fused_now=True)
    device_loop.DeviceLoop._launch_persistent(loop, "stream", 128)
    (grid, block, args, options), = launched
    assert len(args) == len(parameters)
    assert grid == (264,) and block == (device_loop.THREADS,)
    assert options == {"shared_mem": device_loop.APPLY_SHARED_BYTES, "stream": "stream",
                       "enable_cooperative_groups": True}
    assert args[-1] == 128 and args[-2] == 10 and args[-3] == 2 and args[-4] == 1
    assert args[-7:-4] == ("totals", "slots", "stamps")


@pytest.mark.parametrize("name, vertex_dtype", [("bfs", np.int32), ("sssp", np.int64)])
def test_the_unit_compiles_to_ptx_without_separate_compilation(name, vertex_dtype, tmp_path):
    """``nvcc --ptx`` (no -rdc) of the persistent kernel's translation unit
    defines it with its grid barrier, and the loop's other kernels (NVRTC
    takes the same unit)."""
    from garaphpy.kernels.cuda_program import translate_program
    from garaphpy.kernels.gpu import kernel_source, persistent_source

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH")
    translated = translate_program(program_for(name), weight_dtype=np.int32)
    source = tmp_path / f"{name}.cu"
    source.write_text(persistent_source(kernel_source(translated, vertex_dtype)))
    result = subprocess.run([nvcc, "-arch=sm_90", "-std=c++17", "-diag-suppress", "550",
                             "--ptx", str(source), "-o", str(tmp_path / f"{name}.ptx")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-6000:]
    ptx = (tmp_path / f"{name}.ptx").read_text()
    body = ptx[ptx.index(".entry gp_persistent_push"):]
    body = body[:body.index("\n}\n")]
    assert "ld.acquire.gpu" in body and "atom.add.release.gpu" in body     # grid barrier
    for kernel in ("gp_sparse_push", "gp_sparse_apply", "gp_priority_split"):
        assert f".entry {kernel}(" in ptx


# -- on the GPU ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    return persistent_loop_graphs(tmp_path_factory.mktemp("persistent"))


def both_paths(graph, name, sources, **options):
    """The run with the persistent kernel (its two passes an iteration: the
    fused push, whose asynchronous iterations differ, has its own tests in
    test_fused_push.py) and the one without."""
    program = program_for(name)
    used = sources if program.needs_sources else ()
    persistent = ref.run_engine_like_gpu(graph, program, used, mode="gpu",
                                         turned_off={"fused_push"}, **options)
    graphs = ref.run_engine_like_gpu(graph, program, used, mode="gpu", turned_off=OFF, **options)
    return persistent, graphs


def assert_same_iterations(persistent, graphs):
    np.testing.assert_array_equal(persistent.values, graphs.values)
    key = [(r.iteration, r.direction, r.active_vertices, r.updated_vertices,
            r.edges_processed, r.activated) for r in graphs.iterations]
    assert [(r.iteration, r.direction, r.active_vertices, r.updated_vertices,
             r.edges_processed, r.activated) for r in persistent.iterations] == key
    changes = [np.array([r.l1_change for r in run.iterations]) for run in (persistent, graphs)]
    finite = np.isfinite(changes[1])
    np.testing.assert_allclose(changes[0][finite], changes[1][finite], rtol=1e-12)
    assert persistent.stop_reason == graphs.stop_reason
    # the same iterations looped; the persistent kernel ran them in one run alone
    launches = loop_launches(persistent)
    assert len(launches) == len(loop_launches(graphs))
    assert not any("persistent kernel" in launch for launch in loop_launches(graphs))
    if launches:
        assert any("persistent kernel" in launch for launch in launches), launches[-1]
        entries = loop_entries(persistent)
        assert entries[-1]["persistent"]["choice"] is True


@pytest.mark.gpu
@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("graph_name", ["grid", "chain", "road", "rmat"])
def test_bfs_levels_and_records_equal_the_graphs_and_scipy(graphs, graph_name, execution):
    graph = graphs[graph_name]
    source = source_of(graph, graph_name)
    persistent, launched = both_paths(graph, "bfs", source, execution=execution,
                                      max_iterations=100_000)
    assert_same_iterations(persistent, launched)
    assert loop_launches(persistent)
    np.testing.assert_array_equal(persistent.values, ref.bfs_scipy(graph, source))


@pytest.mark.gpu
@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("graph_name", ["grid", "chain", "road", "rmat"])
def test_sssp_distances_and_records_equal_the_graphs_and_dijkstra(graphs, graph_name,
                                                                  execution):
    """Asynchronous: in buckets of values (the split inside the kernel)."""
    graph = graphs[graph_name]
    source = source_of(graph, graph_name)
    persistent, launched = both_paths(graph, "sssp", source, execution=execution,
                                      max_iterations=100_000)
    assert_same_iterations(persistent, launched)
    np.testing.assert_array_equal(persistent.values, ref.sssp_scipy(graph, source))
    if execution == "async" and graph_name != "chain":
        entry = loop_entries(persistent)[-1]
        assert entry["value_priority"]["choice"] and entry["buckets"] >= 1


@pytest.mark.gpu
@pytest.mark.parametrize("width", [1.0, 64.0, 10_000.0])
def test_buckets_of_every_width_equal_the_graphs(graphs, width, monkeypatch):
    monkeypatch.setattr(config, "GPU_BUCKET_WIDTH", width)
    for graph_name in ("grid", "road"):
        graph = graphs[graph_name]
        source = source_of(graph, graph_name)
        for name in ("sssp", "sswp"):
            persistent, launched = both_paths(graph, name, source, execution="async")
            assert_same_iterations(persistent, launched)
            buckets = [[r.decisions["device_loop"].get("buckets") for r in run.iterations
                        if "device_loop" in r.decisions] for run in (persistent, launched)]
            assert buckets[0] == buckets[1]
            expected = ref.sssp_scipy(graph, source) if name == "sssp" \
                else ref.sswp_heap(graph, source)
            np.testing.assert_array_equal(persistent.values, expected)


@pytest.mark.gpu
@pytest.mark.parametrize("graph_name", ["grid", "road", "rmat"])
def test_components_and_widest_paths_equal_the_graphs(graphs, graph_name):
    graph = graphs[graph_name]
    source = source_of(graph, graph_name)
    for execution in ("sync", "async"):
        persistent, launched = both_paths(graph, "cc", source, execution=execution)
        assert_same_iterations(persistent, launched)
        np.testing.assert_array_equal(persistent.values, ref.components_scipy(graph))
        persistent, launched = both_paths(graph, "sswp", source, execution=execution)
        assert_same_iterations(persistent, launched)
        np.testing.assert_array_equal(persistent.values, ref.sswp_heap(graph, source))


@pytest.mark.gpu
@pytest.mark.parametrize("limit", [1, 37, device_loop.PERSISTENT_ITERATIONS,
                                   device_loop.PERSISTENT_ITERATIONS + 1, 300])
def test_a_stop_inside_a_launch_stops_exactly_there(graphs, limit):
    graph = graphs["grid"]
    source = source_of(graph, "grid")
    persistent, launched = both_paths(graph, "bfs", source, execution="sync",
                                      max_iterations=limit)
    assert_same_iterations(persistent, launched)
    cpu = ref.run_engine_like_gpu(graph, "bfs", source, mode="cpu", execution="sync")
    assert persistent.num_iterations == min(limit, cpu.num_iterations)
    assert [r.iteration for r in persistent.iterations] == \
        list(range(persistent.num_iterations))


@pytest.mark.gpu
def test_launches_mix_with_the_graphs_as_the_frontier_grows(graphs, monkeypatch):
    """A rule that takes the persistent kernel for frontiers of at most 100
    out-edges alone: a grid's BFS from a corner runs both in one batch."""
    monkeypatch.setattr(decisions, "gpu_persistent_launch",
                        lambda frontier_out_edges, grid_threads: frontier_out_edges <= 100)
    monkeypatch.setattr(device_loop, "PERSISTENT_ITERATIONS", 8)
    graph = graphs["grid"]
    corner = np.array([0])
    persistent, launched = both_paths(graph, "bfs", corner, execution="sync")
    assert_same_iterations(persistent, launched)
    assert any("persistent kernel" in launch and "groups" in launch
               for launch in loop_launches(persistent))
    np.testing.assert_array_equal(persistent.values, ref.bfs_scipy(graph, corner))


@pytest.mark.gpu
def test_checkpoints_and_resume_through_the_persistent_kernel(graphs, tmp_path):
    class Crash(Exception):
        pass

    def crash(record):
        if record.iteration == 70:
            raise Crash

    graph = graphs["grid"]
    options = dict(sources=0, mode="gpu", execution="sync", checkpoint_dir=tmp_path / "ck",
                   checkpoint_every=25)
    with pytest.raises(Crash):
        garaphpy.run(graph, "sssp", on_iteration=crash, **options)
    resumed = garaphpy.run(graph, "sssp", resume=True, **options)
    cpu = garaphpy.run(graph, "sssp", sources=0, mode="cpu", execution="sync")
    assert resumed.resumed_from.endswith("checkpoint-000000050.gck")
    np.testing.assert_array_equal(resumed.values, cpu.values)
    assert resumed.num_iterations == cpu.num_iterations
    assert any("persistent kernel" in launch for launch in loop_launches(resumed))
