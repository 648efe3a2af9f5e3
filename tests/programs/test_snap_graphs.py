"""Built-in programs on the engine against SciPy references, on the real SNAP graphs.

Exact for BFS, SSSP with integer weights, CC and SSWP; 1e-6 relative for
PageRank and DeltaPageRank (float64) against a power iteration with the same
definition; sync and async reach the same fixed point where the program's math
says so.
"""

from __future__ import annotations


import numpy as np
import pytest

import garaphpy
from garaphpy.programs import (BFS, SSSP, SSWP, ConnectedComponents, DeltaPageRank,
                               NeuralNetwork, PageRank)

import references as ref
from helpers import SHARED_DATA

FILES = ["ca-HepPh.txt.gz", "soc-Slashdot0811.txt.gz", "web-NotreDame.txt.gz"]


@pytest.fixture(scope="module", params=FILES)
def snap(request, tmp_path_factory):
    path = SHARED_DATA / request.param
    if not path.exists():
        pytest.skip(f"{path} is not here")
    graph = garaphpy.Graph.load(path, store=tmp_path_factory.mktemp("s") / "store",
                                progress=False)
    # the same edges with integer weights 1..100, ids kept
    in_offsets, sources, _ = graph.store.csc()
    destinations = np.repeat(np.arange(graph.num_vertices), np.diff(in_offsets))
    weights = np.random.default_rng(7).integers(1, 101, sources.size)
    weighted = garaphpy.Graph.from_arrays(sources, destinations, weights,
                                          num_vertices=graph.num_vertices)
    hub = int(np.argmax(graph.store.out_degree))  # a source that reaches much of the graph
    return {"name": request.param, "graph": graph, "weighted": weighted, "hub": hub}


def test_pagerank_matches_power_iteration(snap):
    graph = snap["graph"]
    result = garaphpy.run(graph, PageRank, tolerance=1e-12, max_iterations=1000)
    assert result.converged
    np.testing.assert_allclose(result.values, ref.pagerank_power(graph), rtol=1e-6)
    assert result.program.verify(graph, result).ok


def test_async_pagerank_reaches_the_same_ranks(snap):
    graph = snap["graph"]
    result = garaphpy.run(graph, PageRank, execution="async", tolerance=1e-12,
                          max_iterations=1000)
    np.testing.assert_allclose(result.values, ref.pagerank_power(graph), rtol=1e-6)


@pytest.mark.parametrize("execution", ["sync", "async"])
def test_delta_pagerank_matches_power_iteration(snap, execution):
    # ||r - PR||_1 <= l1_bound / (2 (1 - d)): 1e-12 keeps the smallest scores within 1e-6
    graph = snap["graph"]
    result = garaphpy.run(graph, DeltaPageRank(l1_bound=1e-12), execution=execution)
    assert result.converged and result.stop_reason == "no active vertex"
    np.testing.assert_allclose(result.values, ref.pagerank_power(graph), rtol=1e-6)
    assert result.program.verify(graph, result).ok


@pytest.mark.parametrize("execution", ["sync", "async"])
def test_bfs_exact(snap, execution):
    graph, hub = snap["graph"], snap["hub"]
    result = ref.run_engine(graph, BFS, [hub], execution=execution)
    np.testing.assert_array_equal(result.values, ref.bfs_scipy(graph, [hub]))
    assert result.program.verify(graph, result).ok


@pytest.mark.parametrize("execution", ["sync", "async"])
def test_sssp_integer_weights_exact(snap, execution):
    weighted, hub = snap["weighted"], snap["hub"]
    result = ref.run_engine(weighted, SSSP, [hub], execution=execution)
    np.testing.assert_array_equal(result.values, ref.sssp_scipy(weighted, [hub]))
    assert result.program.verify(weighted, result).ok


def test_components_exact(snap):
    graph = snap["graph"]
    result = garaphpy.run(graph, ConnectedComponents)
    np.testing.assert_array_equal(result.values, ref.components_scipy(graph))
    assert result.program.verify(result.graph, result).ok


def test_sswp_exact(snap):
    if snap["name"] == "web-NotreDame.txt.gz":
        pytest.skip("the pure-Python heap reference is too slow for 1.5 M edges")
    weighted, hub = snap["weighted"], snap["hub"]
    result = ref.run_engine(weighted, SSWP, [hub])
    np.testing.assert_array_equal(result.values, ref.sswp_heap(weighted, [hub]))
    assert result.program.verify(weighted, result).ok


def test_neural_network_matches_sparse_products(snap):
    weighted = snap["weighted"]
    result = garaphpy.run(weighted, NeuralNetwork)
    np.testing.assert_allclose(result.values, ref.nn_scipy(weighted, result.num_iterations),
                               rtol=1e-9)
