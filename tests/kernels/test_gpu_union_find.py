"""The union-find start of min-label propagation on the GPU.

A GPU run of a program declaring ``shortcut_labels`` on a symmetric graph
whose pages are resident starts its first iteration from the labels of a
sampled union-find on the device (Afforest, ``kernels/cuda/union_find.cu``,
:mod:`garaphpy.kernels.gpu_union_find`), and its own pull confirms them.
Checked here without a GPU: the rule's truth table, the plan's choice and
``turned_off``, the hybrid estimate, and that the CUDA source compiles with
nvcc for every pair of types.  With a GPU (``gpu`` marker): the kernels'
roots against SciPy's components, and CC runs against SciPy's components
(smallest user id each) on grids, long chains, road-like grids with edges
removed, skewed RMAT graphs, isolated vertices, ids from 1 and a table of
ids, 64-bit vertex ids, synchronous and asynchronous, on the GPU alone and
in a hybrid run's GPU alone; each ends after one iteration that activates
nothing, its record carrying the start.
"""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

import garaphpy
from garaphpy import api, config
from garaphpy.api import _program_instance
from garaphpy.kernels import gpu_union_find
from garaphpy.kernels.cuda_program import translate_program
from garaphpy.scheduler import decisions
from garaphpy.scheduler.gpu.page_store import packed_layouts
from garaphpy.scheduler.gpu.plan import VertexMemory, plan_gpu
from garaphpy.scheduler.run_choice import CpuAlone, RunChoice
from garaphpy.storage.page_source import InMemoryPages

from helpers import budget_for, policy_with_costs
from references import MinLabels, components_scipy


# -- the rule and the plan, without a GPU ---------------------------------------------------
def test_the_rule():
    assert decisions.gpu_union_find_start(True, True, True)
    assert not decisions.gpu_union_find_start(False, True, True)   # not min-label propagation
    assert not decisions.gpu_union_find_start(True, False, True)   # directed
    assert not decisions.gpu_union_find_start(True, True, False)   # streamed pages
    assert decisions.gpu_union_find_start(True, True, True, extra_bytes=10, free_bytes=10)
    assert not decisions.gpu_union_find_start(True, True, True, extra_bytes=11, free_bytes=10)
    assert not decisions.gpu_union_find_start(False, False, False)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    rng = np.random.default_rng(5)
    n, m = 3000, 20000
    directed = garaphpy.Graph.from_arrays(rng.integers(0, n, m), rng.integers(0, n, m),
                                          store=tmp_path_factory.mktemp("uf") / "s",
                                          max_shard_edges=2048, max_page_bytes=20000)
    assert len(directed.store.pages) > 4
    return {"directed": directed.store, "symmetric": directed.as_undirected().store}


def make_plan(store, program, budget: int = 10 ** 9, turned_off=()):
    program = _program_instance(program)
    translated = translate_program(program, weight_dtype=np.float64,
                                   degree_dtype=store.out_degree.dtype)
    return plan_gpu(program, translated, store, synchronous=False, reads_weights=False,
                    n_streams=2, vertex_memory=lambda precompute: VertexMemory(50_000, budget),
                    packed_layouts=lambda: packed_layouts(store, InMemoryPages(store), False),
                    turned_off=turned_off)


def test_the_plan_starts_cc_from_a_union_find_on_resident_symmetric_pages(stores):
    store = stores["symmetric"]
    plan = make_plan(store, "cc")
    entry = plan.entry("gpu_union_find_start")
    assert plan.union_find_start and entry["choice"] is True
    assert entry["declared"] and entry["symmetric"] and entry["resident"]
    # the device loop's CSC offsets are shared: a parent per vertex alone
    assert plan.device_loop
    assert entry["extra_bytes"] == store.num_vertices * 4 + 16
    assert entry["extra_bytes"] <= entry["free_bytes"]
    assert "union-find start" in plan.describe()
    assert plan.as_dict()["gpu_union_find_start"]["choice"] is True


def test_the_plan_keeps_label_propagation_elsewhere(stores):
    symmetric = stores["symmetric"]
    assert not make_plan(stores["directed"], "cc").union_find_start         # no symmetry
    assert not make_plan(symmetric, "bfs").union_find_start                 # no declaration
    page_bytes = sum(page.nbytes for page in symmetric.pages)
    streamed = make_plan(symmetric, "cc", budget=50_000 + page_bytes // 2)
    assert not streamed.resident and not streamed.union_find_start
    # the offsets too, where the device loop has none to share
    alone = make_plan(symmetric, "cc", turned_off={"device_loop"})
    n = symmetric.num_vertices
    assert alone.entry("gpu_union_find_start")["extra_bytes"] == n * 4 + 16 + (n + 1) * 8
    assert alone.union_find_start


def test_turned_off_it_is_recorded_off(stores):
    on = make_plan(stores["symmetric"], "cc")
    off = make_plan(stores["symmetric"], "cc", turned_off={"gpu_union_find_start"})
    assert not off.union_find_start and off.turned_off == {"gpu_union_find_start"}
    assert off.entry("gpu_union_find_start") == {**on.entry("gpu_union_find_start"),
                                                  "choice": False, "turned_off": True}


def test_the_hybrid_estimate_prices_the_gpus_start():
    """CC on a mesh of 1.5 M vertices: label propagation takes about sqrt(|V|)
    iterations on either processor, each start one pass and a pull."""
    policy = policy_with_costs(8.0, 0.5)
    shape = CpuAlone(num_vertices=1_500_000, in_degree_skew=1.2, union_find_start=True,
                     gpu_union_find_start=True)
    entry = RunChoice(policy, shape).estimate(0, 1.0, 1.0, 10_000)
    assert entry["gpu_union_find_start"] is True
    assert entry["gpu_seconds"] == 1.0 and entry["cpu_seconds"] == 16.0
    assert entry["choice"] == "gpu"
    later = RunChoice(policy, shape).estimate(3, 1.0, 1.0, 10_000)
    assert later["gpu_union_find_start"] is False and later["gpu_seconds"] > 100


@pytest.mark.parametrize("vertex_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("value_dtype", [np.int64, np.int32])
def test_the_cuda_source_compiles_with_nvcc(tmp_path, vertex_dtype, value_dtype):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH: the device compilation check is skipped")
    path = tmp_path / "union_find.cu"
    path.write_text(gpu_union_find.kernel_source(vertex_dtype, value_dtype))
    result = subprocess.run([nvcc, "-arch=sm_90", "-std=c++17", "--ptx", "-o",
                             str(tmp_path / "union_find.ptx"), str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    with pytest.raises(ValueError, match="int32 or int64"):
        gpu_union_find.kernel_source(np.int16, value_dtype)


# -- on the GPU ---------------------------------------------------------------------------
def smallest_member(matrix) -> np.ndarray:
    """Every vertex's smallest vertex of its component (SciPy's components)."""
    count, label = connected_components(matrix, directed=False)
    smallest = np.full(count, matrix.shape[0], np.int64)
    np.minimum.at(smallest, label, np.arange(matrix.shape[0]))
    return smallest[label]


@pytest.mark.gpu
@pytest.mark.parametrize("num_vertices, num_edges", [(1, 0), (7, 0), (10, 3), (1000, 600),
                                                     (5000, 20000), (200_000, 150_000)])
@pytest.mark.parametrize("rounds", [0, 1, 2, 5])
def test_the_kernels_roots_are_each_components_smallest_vertex(num_vertices, num_edges, rounds):
    import cupy

    rng = np.random.default_rng(num_vertices + rounds)
    src, dst = rng.integers(0, num_vertices, num_edges), rng.integers(0, num_vertices, num_edges)
    matrix = sp.coo_matrix((np.ones(num_edges), (src, dst)),
                           shape=(num_vertices, num_vertices)).tocsr()
    matrix = (matrix + matrix.T).tocsr()
    offsets = cupy.asarray(matrix.indptr.astype(np.int64))
    sources = cupy.asarray(matrix.indices.astype(np.int32))
    union_find = gpu_union_find.DeviceUnionFind(cupy, offsets, sources, np.int64, 8,
                                                rounds=rounds)
    labels = cupy.arange(num_vertices, dtype=np.int64)
    ids = cupy.zeros(1, np.int64)
    # the inputs were made on the null stream, which a non-blocking stream does not wait for
    cupy.cuda.Device().synchronize()
    stream = cupy.cuda.Stream(non_blocking=True)
    # consecutive ids from 0: a vertex's label is its root
    union_find.write_labels(ids, True, labels, labels, stream)
    largest, dropped = union_find.result(stream)
    expected = smallest_member(matrix)
    np.testing.assert_array_equal(labels.get(), expected)
    assert dropped == int(np.count_nonzero(expected != np.arange(num_vertices)))
    assert 0 <= largest < num_vertices     # a root when sampled; maybe linked since


def road_like(width: int, height: int, keep: float, seed: int):
    """A grid's edges (each once), ``keep`` of them kept at random: many
    components, some vertices isolated."""
    cells = np.arange(width * height).reshape(height, width)
    src = np.concatenate([cells[:, :-1].ravel(), cells[:-1, :].ravel()])
    dst = np.concatenate([cells[:, 1:].ravel(), cells[1:, :].ravel()])
    kept = np.random.default_rng(seed).random(src.size) < keep
    return src[kept], dst[kept]


def chain(num_vertices: int, seed: int):
    """A path through every vertex in a random order (diameter |V| - 1)."""
    order = np.random.default_rng(seed).permutation(num_vertices)
    return order[:-1], order[1:]


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    base = tmp_path_factory.mktemp("gpu-union-find")
    rng = np.random.default_rng(7)
    road_src, road_dst = road_like(400, 300, 0.6, seed=1)
    chain_src, chain_dst = chain(100_000, seed=2)
    table = np.sort(rng.choice(10 ** 12, 400 * 300, replace=False))
    half = rng.integers(0, 10_000, (2, 15_000))
    return {
        "grid": garaphpy.Graph.load("grid:300x200", store=base / "grid", progress=False),
        "road-like": garaphpy.Graph.from_arrays(road_src, road_dst, num_vertices=400 * 300,
                                                store=base / "road"),
        "chain": garaphpy.Graph.from_arrays(chain_src, chain_dst, num_vertices=100_000,
                                            store=base / "chain"),
        "rmat": garaphpy.Graph.load("rmat:14", store=base / "rmat", progress=False),
        # the upper half of the vertices isolated
        "isolated": garaphpy.Graph.from_arrays(half[0], half[1], num_vertices=20_000,
                                               store=base / "isolated"),
        # consecutive user ids from 1 (a chain reaches every one)
        "ids-from-1": garaphpy.Graph.from_arrays(chain_src + 1, chain_dst + 1,
                                                 store=base / "from-1"),
        # a table of ids far from 0..n-1 (the road's vertices that have an edge)
        "id-table": garaphpy.Graph.from_arrays(table[road_src], table[road_dst],
                                               store=base / "table"),
    }


def assert_started_from_a_union_find(result, graph):
    """SciPy's components, in one iteration started from the union-find."""
    np.testing.assert_array_equal(result.values, components_scipy(graph))
    first = result.iterations[0]
    entry = first.decisions["gpu_union_find_start"]
    assert entry["choice"] is True and entry["seconds"] >= 0 and entry["dropped"] >= 0
    assert result.converged and result.num_iterations == 1 and first.activated == 0
    assert result.plan.gpu.union_find_start


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["grid", "road-like", "chain", "rmat", "isolated",
                                  "ids-from-1", "id-table"])
@pytest.mark.parametrize("execution", ["async", "sync"])
def test_cc_on_the_gpu_equals_scipy_after_one_iteration(graphs, name, execution):
    graph = graphs[name]
    result = garaphpy.run(graph, "cc", mode="gpu", execution=execution)
    assert_started_from_a_union_find(result, graph)
    if name == "ids-from-1":
        assert graph.original_ids()[0] == 1 and result.values.min() == 1
    if name == "grid":          # connected: every label but vertex 0's dropped to 0
        assert result.iterations[0].decisions["gpu_union_find_start"]["dropped"] == \
            graph.num_vertices - 1


@pytest.mark.gpu
def test_a_users_declaration_on_a_symmetric_graph_uses_it(graphs):
    class DeclaredMinLabels(MinLabels):
        shortcut_labels = True

    graph = graphs["rmat"].as_undirected()
    result = garaphpy.run(graph, DeclaredMinLabels(), mode="gpu")
    assert_started_from_a_union_find(result, graph)


@pytest.mark.gpu
def test_64_bit_vertex_ids(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "INT32_VERTEX_LIMIT", 16)
    src, dst = road_like(120, 80, 0.7, seed=4)
    graph = garaphpy.Graph.from_arrays(src, dst, num_vertices=120 * 80, store=tmp_path / "s")
    assert graph.store.vertex_dtype == np.int64
    assert_started_from_a_union_find(garaphpy.run(graph, "cc", mode="gpu"), graph)


@pytest.mark.gpu
def test_turned_off_or_streamed_it_propagates_labels(graphs, tmp_path):
    graph = graphs["road-like"]
    off = api.execute(graph, "cc", mode="gpu", turned_off={"gpu_union_find_start"})
    np.testing.assert_array_equal(off.values, components_scipy(graph))
    assert off.num_iterations > 1
    assert not any("gpu_union_find_start" in r.decisions for r in off.iterations)
    assert off.plan.gpu.entry("gpu_union_find_start")["turned_off"] is True
    # the vertex data, the stream buffers and half the pages: pages stream
    src, dst = road_like(120, 80, 0.7, seed=4)
    graph = garaphpy.Graph.from_arrays(src, dst, num_vertices=120 * 80, store=tmp_path / "p",
                                       max_shard_edges=1024, max_page_bytes=8192)
    assert len(graph.store.pages) > 4
    # below the vertex data and every page, above the vertex data, the stream buffers
    # and half the pages (a budget_for's selective arrays would make room for them all)
    sized = garaphpy.run(graph, "cc", mode="gpu").plan.gpu
    budget = (sized.pages.vertex_bytes + sized.pages.page_bytes // 2
              + sized.pages.n_streams * sized.largest_wire_bytes)
    assert budget < sized.pages.vertex_bytes + sized.pages.page_bytes
    streamed = garaphpy.run(graph, "cc", mode="gpu", gpu_memory=budget)
    np.testing.assert_array_equal(streamed.values, components_scipy(graph))
    assert not streamed.plan.gpu.resident and not streamed.plan.gpu.union_find_start
    assert streamed.num_iterations > 1
    assert not any("gpu_union_find_start" in r.decisions for r in streamed.iterations)


@pytest.mark.gpu
def test_the_hybrids_gpu_alone_starts_from_it(graphs):
    graph = graphs["road-like"]
    policy = policy_with_costs(1000.0, 1e-3)
    policy.cpu_overhead = 1.0
    result = garaphpy.run(graph, "cc", mode="hybrid", policy=policy)
    first = result.iterations[0]
    assert first.decisions["run_processors"]["choice"] == "gpu"
    assert first.decisions["run_processors"]["gpu_union_find_start"] is True
    assert first.mode == "gpu"
    assert_started_from_a_union_find(result, graph)
