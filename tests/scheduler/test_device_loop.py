"""The GPU's device loop of sparse iterations.

Without a GPU: the decision rules on synthetic inputs, and the loop state's
layout, which the Python driver and the CUDA kernels must agree on.  With one
(``pytest -m gpu``): every built-in program, sync and async, on a grid, a
chain of 10^5 steps, rmat and the SNAP graphs equals the CPU engine; the
iteration records equal those of the host-driven loop; the notified vertices
of each iteration equal NumPy's out-neighbours of the BFS level; a stop at
``max_iterations`` inside a captured graph stops exactly there; checkpoints
and resumption go through the loop.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse.csgraph

import garaphpy
from garaphpy import api, config
from garaphpy.programs import BUILTIN_PROGRAMS
from garaphpy.scheduler import decisions, device_loop
from garaphpy.storage.store import neighbour_in_degree

import references as ref
from helpers import SHARED_DATA, program_for

SPARSE_CU = Path(garaphpy.__file__).parent / "kernels" / "cuda" / "sparse.cu"
EXACT = ref.EXACT_PROGRAMS
#: Programs with a frontier (the others are active everywhere, or aggregate).
FRONTIER_PROGRAMS = ["bfs", "sssp", "cc", "sswp"]


@pytest.fixture(autouse=True)
def loop_from_the_first_iteration(monkeypatch):
    """The tests of the loop and the label shortcut let them take any
    iteration; the waits of ``config.GPU_LOOP_AFTER_ITERATIONS`` and
    ``config.GPU_SHORTCUT_LABELS_AFTER`` have tests of their own."""
    monkeypatch.setattr(config, "GPU_LOOP_AFTER_ITERATIONS", 0)
    monkeypatch.setattr(config, "GPU_SHORTCUT_LABELS_AFTER", 0)


# -- the rules, without a GPU ------------------------------------------------------------
def test_the_sparse_pass_waits_for_its_iteration_unless_forced():
    edges = 1_000_000
    assert not decisions.gpu_sparse_pass(0, edges, iteration=7, loop_after=8)
    assert decisions.gpu_sparse_pass(0, edges, iteration=8, loop_after=8)
    assert decisions.gpu_sparse_pass(edges, edges, forced="notify-pull", iteration=0,
                                     loop_after=8)
    assert not decisions.gpu_sparse_pass(edges, edges, iteration=9, loop_after=8)


def test_sparse_pass_takes_small_frontiers_only():
    edges = 1_000_000
    limit = edges / config.GPU_SPARSE_FACTOR
    assert decisions.gpu_sparse_pass(0, edges)
    assert decisions.gpu_sparse_pass(int(limit), edges)
    assert not decisions.gpu_sparse_pass(int(limit) + 1, edges)
    assert not decisions.gpu_sparse_pass(edges, edges)
    assert decisions.gpu_sparse_pass(edges, edges, forced="notify-pull")
    assert not decisions.gpu_sparse_pass(0, edges, forced="pull")
    assert decisions.gpu_sparse_pass(10, 100, factor=10, pull_factor=0) and \
        not decisions.gpu_sparse_pass(11, 100, factor=10, pull_factor=0)
    # a power-law graph: few frontier edges reach hubs with many in-edges to pull
    assert decisions.gpu_sparse_pass(1000, 10**6, factor=10, neighbour_in_degree=100,
                                     pull_factor=3)
    assert not decisions.gpu_sparse_pass(5000, 10**6, factor=10, neighbour_in_degree=100,
                                         pull_factor=3)


def test_the_neighbour_in_degree_weighs_vertices_by_their_in_edges():
    assert neighbour_in_degree([4, 4, 4, 4]) == 4
    assert neighbour_in_degree([1, 1, 1, 97]) == (3 + 97 * 97) / 100
    assert neighbour_in_degree([0, 0]) == 1.0


@pytest.mark.parametrize("num_edges", [0, 1, 19, 20, 21, 999, 10**6 + 7])
@pytest.mark.parametrize("forced", ["auto", "pull", "notify-pull"])
def test_the_loops_bound_is_the_rule(num_edges, forced):
    """The device loop's stop test (frontier out-edges above a bound) agrees with
    the host's rule for every frontier size."""
    bound = decisions.gpu_dense_edges(num_edges, forced=forced)
    for edges in range(0, min(num_edges, 300) + 2):
        assert decisions.gpu_sparse_pass(edges, num_edges, forced=forced) == (edges <= bound)
    for edges in (num_edges // 20 - 1, num_edges // 20, num_edges // 20 + 1, num_edges):
        if edges >= 0:
            assert decisions.gpu_sparse_pass(edges, num_edges, forced=forced) == \
                (edges <= bound)
    skewed = dict(forced=forced, neighbour_in_degree=37.5, pull_factor=3)
    bound = decisions.gpu_dense_edges(num_edges, **skewed)
    for edges in range(0, min(num_edges, 300) + 2):
        assert decisions.gpu_sparse_pass(edges, num_edges, **skewed) == (edges <= bound)


def test_a_sparse_pull_is_bounded_by_its_in_edges():
    assert decisions.gpu_pull_edges(900, factor=3) == 300
    assert decisions.gpu_pull_edges(900, forced="notify-pull") >= 2 ** 62
    assert decisions.gpu_pull_edges(900, factor=0) >= 2 ** 62
    assert decisions.gpu_pull_edges(10**9) == int(10**9 // config.GPU_SPARSE_PULL_FACTOR)


def test_one_vertex_may_take_a_few_times_the_pulls_edges_per_thread():
    # 1M edges over 10,000 threads: 100 a thread; a group of 4 lanes takes 4 * 4 * 100
    assert decisions.gpu_span_edges(10**6, 4, 10_000, factor=4) == 1600
    # small graphs: at least a warp's worth of rounds per lane
    assert decisions.gpu_span_edges(1000, 1, 10_000, factor=4) == 128
    assert decisions.gpu_span_edges(10**6, 8, 10_000, factor=4) == \
        2 * decisions.gpu_span_edges(10**6, 4, 10_000, factor=4)


def test_the_push_is_for_programs_that_declare_it():
    assert decisions.gpu_push(True) and not decisions.gpu_push(False)
    assert not decisions.gpu_push(True, enabled=False)
    assert device_loop.extra_bytes(10, 20, 4, 8, 4) == \
        device_loop.extra_bytes(10, 20, 4) + 8 * 14 + 4 * 20


def test_an_apply_that_keeps_the_sum_is_caught_by_the_probe():
    from garaphpy import api

    honest = BUILTIN_PROGRAMS["sssp"]()
    api._check_apply_keeps_best(honest, api._compiled_program(honest, parallel=False))
    liar = KeepsTheSum()
    with pytest.raises(garaphpy.ProgramError, match="must keep the min"):
        api._check_apply_keeps_best(liar, api._compiled_program(liar, parallel=False))


def test_the_declaration_is_checked_when_the_class_is_defined():
    from garaphpy.program import ProgramError, VertexProgram

    with pytest.raises(ProgramError, match="needs sum 'min' or 'max'"):
        class Adds(VertexProgram):
            apply_keeps_best = True

            def init(vertex):
                return 0.0

            def gather(src):
                return src

            def apply(value, accum):
                return accum

            def activate(new, old):
                return new != old
    with pytest.raises(ProgramError, match=r"reads \['dst'\]"):
        class ReadsTheDestination(BUILTIN_PROGRAMS["sssp"]):
            def gather(src, dst, weight):
                return src + weight + dst
    with pytest.raises(ProgramError, match="expected True or False"):
        class NotABool(BUILTIN_PROGRAMS["sssp"]):
            apply_keeps_best = 1


def test_device_loop_needs_resident_pages_no_aggregates_and_room():
    fine = dict(enabled=True, resident=True, aggregates=False, host_copies=False,
                checkpoints_after_pages=False, extra_bytes=100, free_bytes=100)
    assert decisions.device_loop(**fine)
    for key, value in [("enabled", False), ("resident", False), ("aggregates", True),
                       ("host_copies", True), ("checkpoints_after_pages", True),
                       ("extra_bytes", 101), ("notify_pull", False)]:
        assert not decisions.device_loop(**{**fine, key: value}), key


def test_extra_bytes_counts_every_array():
    n, m = 1000, 5000
    expected = (2 * 8 * (n + 1) + 4 * m + 4 * n + 4 * 4 * n
                + 8 * (len(device_loop.LOOP_FIELDS)
                       + len(device_loop.RECORD_FIELDS) * config.GPU_LOOP_MAX_STEPS))
    assert device_loop.extra_bytes(n, m, 4) == expected
    assert device_loop.extra_bytes(n, m, 8) > expected


def test_extra_bytes_count_the_far_queues_in_order_of_value():
    n, m = 1000, 5000
    assert device_loop.extra_bytes(n, m, 4, 8, 4, priority=True) \
        - device_loop.extra_bytes(n, m, 4, 8, 4) == (2 * 4 + 4) * n


def test_buckets_of_values_are_for_declared_asynchronous_pushes():
    fine = dict(declared=True, synchronous=False, push=True, larger_first=False,
                width_configured=False, enabled=True)
    assert decisions.gpu_value_priority(**fine)
    for key, value in [("declared", False), ("synchronous", True), ("push", False),
                       ("enabled", False), ("larger_first", True)]:
        assert not decisions.gpu_value_priority(**{**fine, key: value}), key
    # a max program (edge values, not sums) with a width of the user's only
    assert decisions.gpu_value_priority(**{**fine, "larger_first": True,
                                           "width_configured": True})


def test_the_gpu_bucket_width_is_the_cpu_rule_times_the_factor():
    assert decisions.gpu_bucket_width(None, 128.0, 4.0, 8.0) == 8.0 * 32.0
    assert decisions.gpu_bucket_width(None, None, 4.0, 8.0) == 8.0       # levels: 1 a step
    assert decisions.gpu_bucket_width(3.5, 128.0, 4.0, 8.0) == 3.5
    for configured, factor in [(0, 8.0), (-1.0, 8.0), (float("inf"), 8.0), (True, 8.0),
                               ("32", 8.0), (None, 0.0), (None, float("nan"))]:
        with pytest.raises(garaphpy.ConfigError, match="GPU_BUCKET"):
            decisions.gpu_bucket_width(configured, 128.0, 4.0, factor)


def test_the_kernels_and_the_driver_agree_on_the_state_layout():
    text = SPARSE_CU.read_text()
    defines = dict(re.findall(r"#define (GP_LOOP_\w+) (\d+)", text))
    for name, index in device_loop.FIELD.items():
        key = "GP_LOOP_" + name.upper()
        if name[-2:] in ("_0", "_1"):
            key, index = "GP_LOOP_" + name[:-2].upper(), index - int(name[-1])
        assert int(defines[key]) == index, name
    assert int(defines["GP_LOOP_FIELDS"]) == len(device_loop.LOOP_FIELDS)
    stops = dict(re.findall(r"#define GP_STOP_(\w+) (\d+)", text))
    assert len(stops) == len(device_loop.STOP_REASONS)
    assert int(re.search(r"#define GP_RECORD_FIELDS (\d+)", text).group(1)) == \
        len(device_loop.RECORD_FIELDS)


# -- on the GPU ----------------------------------------------------------------------------
def run_quietly(graph, program, sources=(), **options):
    return ref.run_engine_like_gpu(graph, program, sources, **options)


@pytest.fixture
def loop_off(monkeypatch):
    ref.gpu_engine_options(monkeypatch, device_loop=False)


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    return garaphpy.Graph.load("grid:60x50", store=tmp_path_factory.mktemp("grid") / "s",
                               progress=False)


@pytest.fixture(scope="module")
def rmat(tmp_path_factory):
    return garaphpy.Graph.load("rmat:12", store=tmp_path_factory.mktemp("rmat") / "s",
                               generator_options={"weighted": True}, progress=False)


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    return garaphpy.Graph.load("grid:1x100000", store=tmp_path_factory.mktemp("chain") / "s",
                               progress=False)


def looped(result) -> int:
    """Iterations of a run that the device loop ran."""
    return sum("device_loop" in r.decisions for r in result.iterations)


def source_of(program, graph):
    return np.array([0], np.int64) if program.needs_sources else ()


@pytest.mark.gpu
def test_the_loop_takes_no_iteration_before_its_own_unless_forced(grid, rmat, monkeypatch):
    """With ``config.GPU_LOOP_AFTER_ITERATIONS`` at 8: a run of fewer iterations
    never loops, a longer one loops from iteration 8 on, and
    ``direction="notify-pull"`` loops from the first; each equals the CPU."""
    monkeypatch.setattr(config, "GPU_LOOP_AFTER_ITERATIONS", 8)
    hub = np.array([int(np.argmax(rmat.store.out_degree))])
    short = run_quietly(rmat, "bfs", hub, mode="gpu", execution="sync")
    np.testing.assert_array_equal(
        short.values, run_quietly(rmat, "bfs", hub, mode="cpu", execution="sync").values)
    assert 2 < short.num_iterations < 8 and looped(short) == 0
    source = np.array([0], np.int64)
    cpu = run_quietly(grid, "bfs", source, mode="cpu", execution="sync")
    waited = run_quietly(grid, "bfs", source, mode="gpu", execution="sync")
    np.testing.assert_array_equal(waited.values, cpu.values)
    looping = [r.iteration for r in waited.iterations if "device_loop" in r.decisions]
    assert looping == list(range(8, waited.num_iterations))
    for record in waited.iterations[:8]:
        rule = record.decisions["gpu_sparse_pass"]
        assert rule["choice"] is False and rule["iteration"] < rule["loop_after"] == 8
    forced = run_quietly(grid, "bfs", source, mode="gpu", execution="sync",
                         direction="notify-pull")
    np.testing.assert_array_equal(forced.values, cpu.values)
    assert looped(forced) == forced.num_iterations


@pytest.mark.gpu
@pytest.mark.parametrize("execution", ["sync", "async"])
@pytest.mark.parametrize("name", list(BUILTIN_PROGRAMS))
def test_every_program_on_the_grid_equals_the_cpu(grid, name, execution):
    program = program_for(name)
    used = source_of(program, grid)
    # the float programs run a fixed number of iterations on both engines
    options = {"tolerance": 0.0, "max_iterations": 300} if name in ("pagerank", "hs", "cs") \
        else {}
    cpu = run_quietly(grid, program, used, mode="cpu", execution=execution, **options)
    gpu = run_quietly(grid, program, used, mode="gpu", execution=execution, **options)
    if execution == "sync" or name in EXACT:
        ref.assert_program_values(name, gpu.values, cpu.values)
    if name in ("bfs", "sssp", "sswp"):
        assert looped(gpu) > 0.5 * gpu.num_iterations
    if name == "cc":        # every vertex active at first: the pull, then the loop
        assert 0 < looped(gpu) < gpu.num_iterations
        if execution == "sync":
            assert gpu.num_iterations == cpu.num_iterations


@pytest.mark.gpu
@pytest.mark.parametrize("name", FRONTIER_PROGRAMS)
def test_records_equal_the_host_driven_loop(grid, rmat, name, monkeypatch):
    program = program_for(name)
    for graph in (grid, rmat):
        used = source_of(program, graph)
        looping = run_quietly(graph, program, used, mode="gpu", execution="sync")
        ref.gpu_engine_options(monkeypatch, device_loop=False)
        host = run_quietly(graph, program, used, mode="gpu", execution="sync")
        ref.gpu_engine_options(monkeypatch, device_loop=True)
        assert looped(host) == 0
        np.testing.assert_array_equal(looping.values, host.values)
        assert [(r.iteration, r.active_vertices, r.activated) for r in looping.iterations] \
            == [(r.iteration, r.active_vertices, r.activated) for r in host.iterations]
        # the L1 changes: sums of doubles in another order; the pull's also counts the
        # vertices not reached (infinity - infinity, NaN), like the CPU's pull
        looped_l1 = np.array([r.l1_change for r in looping.iterations])
        host_l1 = np.array([r.l1_change for r in host.iterations])
        finite = np.isfinite(host_l1)
        np.testing.assert_allclose(looped_l1[finite], host_l1[finite], rtol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("push", [False, True])
def test_notified_vertices_are_the_out_neighbours_of_each_level(grid, rmat, push, monkeypatch):
    ref.gpu_engine_options(monkeypatch, sparse_push=push)
    for graph in (grid, rmat):
        source = int(np.argmax(graph.store.out_degree))
        result = run_quietly(graph, "bfs", [source], mode="gpu", execution="sync",
                             direction="notify-pull")
        out_offsets = np.asarray(graph.store.out_offsets)
        targets = np.asarray(graph.store.out_targets)
        csr = scipy.sparse.csr_matrix((np.ones(targets.size), targets, out_offsets),
                                      shape=(graph.num_vertices,) * 2)
        levels = scipy.sparse.csgraph.shortest_path(csr, indices=source, unweighted=True)
        assert looped(result) == result.num_iterations
        for record in result.iterations:
            level = np.flatnonzero(levels == record.iteration)
            neighbours = np.unique(np.concatenate(
                [targets[out_offsets[u]:out_offsets[u + 1]] for u in level]))
            assert record.active_vertices == level.size
            assert record.updated_vertices == neighbours.size
            frontier_edges = int((out_offsets[level + 1] - out_offsets[level]).sum())
            assert record.decisions["gpu_sparse_pass"]["notified_edges"] == frontier_edges
            in_offsets = graph.store.in_offsets
            # a push reads the frontier's out-edges; a pull, the notified ones' in-edges
            assert record.edges_processed == (frontier_edges if push else int(
                (in_offsets[neighbours + 1] - in_offsets[neighbours]).sum()))
            assert record.decisions["device_loop"]["push"]["choice"] is push


@pytest.mark.gpu
@pytest.mark.parametrize("execution", ["sync", "async"])
def test_a_chain_of_a_hundred_thousand_steps(chain, execution):
    end = np.array([int(np.flatnonzero(np.asarray(chain.store.out_degree) == 1)[0])])
    for name in ("bfs", "sssp"):     # CC's labels would move one step an iteration everywhere
        program = program_for(name)
        used = end
        cpu = run_quietly(chain, program, used, mode="cpu", execution=execution,
                          max_iterations=200_000)
        gpu = run_quietly(chain, program, used, mode="gpu", execution=execution,
                          max_iterations=200_000)
        np.testing.assert_array_equal(gpu.values, cpu.values)
        if name == "bfs":
            assert gpu.num_iterations >= 99_999
            assert looped(gpu) >= 99_990
            # many iterations a launch: the persistent kernel's, or CUDA graphs
            launch = gpu.iterations[-1].decisions["device_loop"]["launch"]
            assert "persistent kernel" in launch or "CUDA graphs" in launch


@pytest.mark.gpu
@pytest.mark.parametrize("limit", [1, 17, 37, 16 + 16 * 3, 250])
def test_a_stop_inside_a_graph_stops_exactly_there(grid, limit):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", garaphpy.NotConvergedWarning)
        gpu = garaphpy.run(grid, "bfs", sources=0, mode="gpu", max_iterations=limit)
        cpu = garaphpy.run(grid, "bfs", sources=0, mode="cpu", execution="sync",
                           max_iterations=limit)
    assert gpu.num_iterations == min(limit, cpu.num_iterations)
    assert [r.iteration for r in gpu.iterations] == list(range(gpu.num_iterations))
    np.testing.assert_array_equal(gpu.values, cpu.values)


@pytest.mark.gpu
def test_on_iteration_sees_every_looped_iteration(grid):
    seen = []
    result = garaphpy.run(grid, "bfs", sources=0, mode="gpu", on_iteration=seen.append)
    assert [r.iteration for r in seen] == list(range(result.num_iterations))
    assert looped(result) == result.num_iterations


@pytest.mark.gpu
def test_checkpoints_and_resume_through_the_loop(grid, tmp_path):
    class Crash(Exception):
        pass

    def crash(record):
        if record.iteration == 70:
            raise Crash

    directory = tmp_path / "ck"
    with pytest.raises(Crash):
        garaphpy.run(grid, "sssp", sources=0, mode="gpu", execution="sync",
                     checkpoint_dir=directory, checkpoint_every=25, on_iteration=crash)
    resumed = garaphpy.run(grid, "sssp", sources=0, mode="gpu", execution="sync",
                           checkpoint_dir=directory, checkpoint_every=25, resume=True)
    cpu = garaphpy.run(grid, "sssp", sources=0, mode="cpu", execution="sync")
    assert resumed.resumed_from.endswith("checkpoint-000000050.gck")
    np.testing.assert_array_equal(resumed.values, cpu.values)
    assert resumed.num_iterations == cpu.num_iterations
    assert looped(resumed) > 0


@pytest.mark.gpu
@pytest.mark.parametrize("file", ["ca-HepPh.txt.gz", "soc-Slashdot0811.txt.gz",
                                  "web-NotreDame.txt.gz"])
def test_snap_graphs_equal_the_cpu(file, tmp_path):
    path = SHARED_DATA / file
    if not path.exists():
        pytest.skip(f"{path} is not here")
    graph = garaphpy.Graph.load(path, store=tmp_path / "store", weights="hash", progress=False)
    hub = np.array([int(np.argmax(graph.store.out_degree))], np.int64)
    for name in FRONTIER_PROGRAMS:
        program = program_for(name)
        used = hub if program.needs_sources else ()
        for execution in ("sync", "async"):
            cpu = run_quietly(graph, program, used, mode="cpu", execution=execution)
            gpu = run_quietly(graph, program, used, mode="gpu", execution=execution)
            np.testing.assert_array_equal(gpu.values, cpu.values)


@pytest.mark.gpu
def test_a_hub_is_left_to_the_pull(rmat, monkeypatch):
    hub = np.array([int(np.argmax(rmat.store.out_degree))])
    cpu = run_quietly(rmat, "bfs", hub, mode="cpu", execution="sync")
    # a push reads the hub's out-edges alone: the loop takes it (when no span bound)
    monkeypatch.setattr(config, "GPU_SPARSE_SPAN_FACTOR", 1e6)
    gpu = run_quietly(rmat, "bfs", hub, mode="gpu", execution="sync")
    np.testing.assert_array_equal(gpu.values, cpu.values)
    assert gpu.iterations[0].decisions["gpu_sparse_pass"]["choice"] is True
    monkeypatch.setattr(config, "GPU_SPARSE_SPAN_FACTOR", 4.0)
    # a notify-pull: the host's rule expects the hub's neighbours to pull too many in-edges
    ref.gpu_engine_options(monkeypatch, sparse_push=False)
    gpu = run_quietly(rmat, "bfs", hub, mode="gpu", execution="sync")
    np.testing.assert_array_equal(gpu.values, cpu.values)
    first = gpu.iterations[0].decisions["gpu_sparse_pass"]
    assert first["choice"] is False and first["called_off"] is False
    assert first["neighbour_in_degree"] > 4
    # a rule that lets it through: the loop calls the iteration off on the device
    monkeypatch.setattr(rmat.store, "neighbour_in_degree", 1.0)     # a cached property
    monkeypatch.setattr(config, "GPU_SPARSE_SPAN_FACTOR", 1e-3)
    gpu = run_quietly(rmat, "bfs", hub, mode="gpu", execution="sync")
    np.testing.assert_array_equal(gpu.values, cpu.values)
    first = gpu.iterations[0].decisions["gpu_sparse_pass"]
    assert first["choice"] is False and first["called_off"] is True
    assert gpu.iterations[0].direction == "pull"


@pytest.mark.gpu
def test_rmat_equals_the_cpu_in_every_direction(rmat):
    for name in FRONTIER_PROGRAMS:
        program = program_for(name)
        used = source_of(program, rmat)
        cpu = run_quietly(rmat, program, used, mode="cpu", execution="sync")
        for direction in ("auto", "notify-pull", "pull"):
            gpu = run_quietly(rmat, program, used, mode="gpu", execution="sync",
                              direction=direction)
            np.testing.assert_array_equal(gpu.values, cpu.values)
            assert gpu.num_iterations == cpu.num_iterations
            if direction == "pull":
                assert looped(gpu) == 0
            if direction == "notify-pull":     # CC, all active at first, pulls its first
                assert looped(gpu) == gpu.num_iterations - (name == "cc")


@pytest.mark.gpu
@pytest.mark.parametrize("execution", ["sync", "async"])
def test_push_and_pull_give_the_same_iterations(grid, rmat, execution, monkeypatch):
    for graph in (grid, rmat):
        for name in FRONTIER_PROGRAMS:
            program = program_for(name)
            used = source_of(program, graph)
            runs = {}
            for push in (True, False):
                ref.gpu_engine_options(monkeypatch, sparse_push=push)
                runs[push] = run_quietly(graph, program, used, mode="gpu", execution=execution)
            np.testing.assert_array_equal(runs[True].values, runs[False].values)
            if execution == "sync":
                assert [(r.active_vertices, r.activated) for r in runs[True].iterations] == \
                    [(r.active_vertices, r.activated) for r in runs[False].iterations]


class KeepsTheSum(BUILTIN_PROGRAMS["sssp"]):
    """A false declaration: apply takes the sum, not the better of the two."""

    def apply(value, accum):
        return accum


@pytest.mark.gpu
def test_a_false_push_declaration_is_refused_on_the_gpu(grid):
    with pytest.raises(garaphpy.ProgramError, match="apply_keeps_best"):
        garaphpy.run(grid, KeepsTheSum(), mode="gpu", sources=[0])


# -- the label shortcut on the GPU ----------------------------------------------------------
@pytest.mark.gpu
def test_the_gpu_shortcuts_labels_to_the_same_components(grid, rmat, tmp_path):
    graphs = [grid, rmat]
    path = SHARED_DATA / "ca-HepPh.txt.gz"
    if path.exists():
        graphs.append(garaphpy.Graph.load(path, store=tmp_path / "hep", progress=False))
    for graph in graphs:
        for execution in ("sync", "async"):
            plain = run_quietly(graph, "cc", mode="gpu", execution=execution)
            # label propagation with shortcuts: without the union-find start
            result = api.execute(graph, "cc", mode="gpu", execution=execution,
                                 turned_off={"gpu_union_find_start"})
            np.testing.assert_array_equal(result.values, plain.values)
            expected = ref.components_scipy(graph)
            np.testing.assert_array_equal(result.values, expected)
            assert result.num_iterations <= plain.num_iterations
            pulled = [r for r in result.iterations if "shortcut_labels" in r.decisions]
            assert pulled and pulled[0].decisions["shortcut_labels"]["dropped"] >= 0
    result = api.execute(grid, "cc", mode="gpu", turned_off={"gpu_union_find_start"})
    assert result.num_iterations <= 4      # 60 + 50 without


@pytest.mark.gpu
def test_the_gpu_shortcuts_labels_from_its_iteration_on(grid, rmat, monkeypatch):
    """With ``config.GPU_SHORTCUT_LABELS_AFTER`` at 8: a run of fewer pulls
    never shortcuts, a longer one shortcuts from its eighth on; each gives
    SciPy's components."""
    monkeypatch.setattr(config, "GPU_SHORTCUT_LABELS_AFTER", 8)
    # every iteration a pull
    off = {"device_loop", "gpu_union_find_start"}
    short = api.execute(rmat, "cc", mode="gpu", execution="sync", turned_off=off)
    np.testing.assert_array_equal(short.values, ref.components_scipy(rmat))
    assert short.num_iterations < 8
    assert not any("shortcut_labels" in r.decisions for r in short.iterations)
    long = api.execute(grid, "cc", mode="gpu", execution="sync", turned_off=off)
    np.testing.assert_array_equal(long.values, ref.components_scipy(grid))
    shortcut = [r.iteration for r in long.iterations if "shortcut_labels" in r.decisions]
    assert shortcut == list(range(8, long.num_iterations))
    assert long.num_iterations <= 20       # 60 + 50 pulls without


@pytest.mark.gpu
@pytest.mark.parametrize("name, message", [("OffByOneInit", "instead of its own id"),
                                           ("DoublingGather", "pass labels on unchanged"),
                                           ("TakesTheSum", "keep the smaller")])
def test_a_false_declaration_is_refused_on_the_gpu(grid, name, message):
    import helpers

    with pytest.raises(garaphpy.ProgramError, match=message):
        garaphpy.run(grid, getattr(helpers, name)(), mode="gpu")


# -- in order of value (value_priority, asynchronous runs) -------------------------------
def loop_entries(result) -> list:
    return [r.decisions["device_loop"] for r in result.iterations if "device_loop" in r.decisions]


@pytest.mark.gpu
@pytest.mark.parametrize("width", [None, 1.0, 10_000.0])
def test_buckets_of_values_give_the_cpus_values(grid, rmat, width, monkeypatch):
    monkeypatch.setattr(config, "GPU_BUCKET_WIDTH", width)
    for graph in (grid, rmat):
        for name in ("sssp", "sswp"):
            program = program_for(name)
            used = np.array([int(np.argmax(graph.store.out_degree))], np.int64)
            cpu = run_quietly(graph, program, used, mode="cpu", execution="async")
            gpu = run_quietly(graph, program, used, mode="gpu", execution="async")
            np.testing.assert_array_equal(gpu.values, cpu.values)
            entries = loop_entries(gpu)
            if name == "sswp" and width is None:        # a max program: no width of its own
                assert entries and not entries[-1]["value_priority"]["choice"]
                continue
            assert entries and entries[-1]["value_priority"]["choice"]
            assert entries[-1]["buckets"] >= 1
            if width is not None:
                assert entries[-1]["bucket_width"] == width
            if width == 1.0 and graph is grid and name == "sssp":
                # a bucket a distance: far more buckets than the 10,000-wide run's one
                assert entries[-1]["buckets"] > 100


@pytest.mark.gpu
def test_buckets_wait_for_the_smaller_distances(grid, monkeypatch):
    monkeypatch.setattr(config, "GPU_BUCKET_WIDTH", 64.0)
    source = np.array([61], np.int64)
    runs = {}
    for priority in (False, True):
        ref.gpu_engine_options(monkeypatch, value_priority=priority)
        runs[priority] = run_quietly(grid, "sssp", source, mode="gpu", execution="async")
    np.testing.assert_array_equal(runs[True].values, runs[False].values)
    assert not loop_entries(runs[False])[-1]["value_priority"]["choice"]
    edges = {p: sum(r.edges_processed for r in run.iterations) for p, run in runs.items()}
    assert edges[True] < 0.75 * edges[False]


@pytest.mark.gpu
def test_a_synchronous_run_keeps_the_whole_frontier(grid):
    result = run_quietly(grid, "sssp", np.array([61], np.int64), mode="gpu", execution="sync")
    entries = loop_entries(result)
    assert entries and not entries[-1]["value_priority"]["choice"]
    assert "buckets" not in entries[-1]


@pytest.mark.gpu
def test_waiting_vertices_go_to_the_pull_and_back(grid, monkeypatch):
    # a frontier of more than a few dozen out-edges leaves the loop for the host's
    # pull over every shard: the vertices waiting in the far queues are active there
    monkeypatch.setattr(config, "GPU_SPARSE_FACTOR", grid.num_edges / 40)
    monkeypatch.setattr(config, "GPU_BUCKET_WIDTH", 600.0)
    source = np.array([61], np.int64)
    cpu = run_quietly(grid, "sssp", source, mode="cpu", execution="async")
    gpu = run_quietly(grid, "sssp", source, mode="gpu", execution="async")
    np.testing.assert_array_equal(gpu.values, cpu.values)
    assert 0 < looped(gpu) < gpu.num_iterations
    stops = {entry["stop"] for entry in loop_entries(gpu)}
    assert "dense frontier" in stops


@pytest.mark.gpu
@pytest.mark.parametrize("every", [1, 5, 17, 40])
def test_a_crash_and_a_resume_keep_the_waiting_vertices(grid, tmp_path, every, monkeypatch):
    monkeypatch.setattr(config, "GPU_BUCKET_WIDTH", 50.0)

    class Crash(Exception):
        pass

    def crash(record):
        if record.iteration == 2 * every:
            raise Crash

    directory = tmp_path / "ck"
    options = dict(sources=61, mode="gpu", execution="async", checkpoint_dir=directory,
                   checkpoint_every=every)
    with pytest.raises(Crash):
        garaphpy.run(grid, "sssp", on_iteration=crash, **options)
    resumed = garaphpy.run(grid, "sssp", resume=True, **options)
    cpu = garaphpy.run(grid, "sssp", sources=61, mode="cpu", execution="sync")
    assert resumed.resumed_from.endswith(f"checkpoint-{2 * every:09d}.gck")
    np.testing.assert_array_equal(resumed.values, cpu.values)
    assert looped(resumed) > 0
    assert loop_entries(resumed)[-1]["buckets"] >= 1
