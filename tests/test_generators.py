"""Tests of garaphpy.generators: RMAT and grid sources, generator specs.

RMAT edges are checked against a slow pure-Python transcription of the
documented algorithm (counter hash, quadrant thresholds, Graph500 scramble)
and against their expected statistics; grids against NetworkX and SciPy.
"""

from __future__ import annotations

import json

import networkx as nx
import numba
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse import csgraph

from garaphpy import config
from garaphpy import generators as gen
from garaphpy.errors import ConfigError
from garaphpy.generators import GridSource, RmatSource, grid, parse_generator_spec, rmat


def all_edges(source, max_edges):
    """Concatenate ``source.chunks(max_edges)``; check the chunk contract."""
    src, dst, weight = [], [], []
    for chunk in source.chunks(max_edges):
        assert 0 < len(chunk) <= max_edges
        assert chunk.src.dtype == np.int64 and chunk.dst.dtype == np.int64
        assert (chunk.weight is None) == (not source.weighted)
        src.append(chunk.src)
        dst.append(chunk.dst)
        if chunk.weight is not None:
            assert chunk.weight.dtype == np.int64
            weight.append(chunk.weight)
    cat = (lambda xs: np.concatenate(xs) if xs else np.empty(0, np.int64))
    return cat(src), cat(dst), (cat(weight) if source.weighted else None)


# ------------------------------------------------- slow reference of RMAT --
_MASK = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15


def _ref_hash(key, counter):
    z = (key + counter * _GAMMA) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def _ref_reverse(v, bits):
    return int(format(v & ((1 << bits) - 1), f"0{bits}b")[::-1], 2)


def _ref_scramble(v, bits, val0, val1):
    # Graph500 reference generator, scramble() in graph_generator.c
    v = (v + val0 + val1) & _MASK
    v = (v * (val0 | 0x4519840211493211)) & _MASK
    v = _ref_reverse(v, bits)
    v = (v * (val1 | 0x3050852102C843A5)) & _MASK
    return _ref_reverse(v, bits)


def _ref_rmat_edge(g: RmatSource, e: int):
    """Edge ``e`` of ``g``, one Python int at a time."""
    level_key = int(gen._stream_key(g.seed, gen._STREAM_LEVELS))
    weight_key = int(gen._stream_key(g.seed, gen._STREAM_WEIGHTS))
    val0 = int(gen._stream_key(g.seed, gen._STREAM_SCRAMBLE0))
    val1 = int(gen._stream_key(g.seed, gen._STREAM_SCRAMBLE1))
    t_a, t_ab, t_abc = (round(p * 2 ** 32) for p in (g.a, g.a + g.b, g.a + g.b + g.c))
    pairs = (g.scale + 1) // 2
    u = v = 0
    for level in range(g.scale):
        h = _ref_hash(level_key, e * pairs + level // 2)
        r = h >> 32 if level % 2 == 0 else h & 0xFFFFFFFF
        if r < t_a:
            bits = (0, 0)
        elif r < t_ab:
            bits = (0, 1)
        elif r < t_abc:
            bits = (1, 0)
        else:
            bits = (1, 1)
        u, v = 2 * u + bits[0], 2 * v + bits[1]
    if g.scramble:
        u = _ref_scramble(u, g.scale, val0, val1)
        v = _ref_scramble(v, g.scale, val0, val1)
    w = 1 + _ref_hash(weight_key, e) % g.max_weight
    return u, v, w


# ------------------------------------------------------------------- RMAT --
def test_rmat_declares_counts_and_flags():
    g = rmat(10, edge_factor=8)
    assert isinstance(g, RmatSource)
    assert g.num_vertices == 1024 and g.num_edges == 8192 == g.num_edges_hint
    assert g.format == "rmat" and g.name == "rmat:10:8"
    assert rmat(10).name == "rmat:10"
    assert g.directed is None and not g.already_symmetric and g.id_base == 0
    assert g.weight_kind is None and not g.weighted
    assert rmat(3, weighted=True).weight_kind == "int"
    src, dst, weight = all_edges(g, 1000)
    assert len(src) == 8192 and weight is None
    assert src.min() >= 0 and dst.min() >= 0
    assert src.max() < 1024 and dst.max() < 1024


@pytest.mark.parametrize("scale,edge_factor,scramble", [
    (1, 3, True), (5, 4, True), (7, 2, False), (22, 1, True), (gen.MAX_VERTICES_LOG2, 1, True)])
def test_rmat_matches_reference(scale, edge_factor, scramble):
    g = rmat(scale, edge_factor=edge_factor, weighted=True, max_weight=1000,
             scramble=scramble, seed=12345)
    n = min(g.num_edges, 300)
    for start in (0, g.num_edges - n):  # first and last edges
        src, dst, weight = g.edges(start, start + n)
        got = list(zip(src.tolist(), dst.tolist(), weight.tolist()))
        assert got == [_ref_rmat_edge(g, e) for e in range(start, start + n)]


def test_rmat_same_seed_same_edges_other_seed_other_edges():
    a = all_edges(rmat(9, weighted=True, seed=7), 1 << 20)
    b = all_edges(rmat(9, weighted=True, seed=7), 1 << 20)
    c = all_edges(rmat(9, weighted=True, seed=8), 1 << 20)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    for x, z in zip(a, c):
        assert (x != z).mean() > 0.5


@pytest.mark.parametrize("max_edges", [1, 7, 1000, 1 << 20])
def test_rmat_independent_of_chunk_size(max_edges):
    g = rmat(7, edge_factor=3, weighted=True)
    whole = g.edges()
    for x, y in zip(whole, all_edges(g, max_edges)):
        np.testing.assert_array_equal(x, y)


def test_rmat_any_range_on_its_own():
    g = rmat(10, weighted=True)
    src, dst, weight = g.edges()
    for start, stop in [(0, 0), (3, 4), (255, 257), (1000, 9000), (16383, 16384)]:
        s, d, w = g.edges(start, stop)
        np.testing.assert_array_equal(s, src[start:stop])
        np.testing.assert_array_equal(d, dst[start:stop])
        np.testing.assert_array_equal(w, weight[start:stop])
    with pytest.raises(ConfigError, match="rmat:10"):
        g.edges(5, 3)
    with pytest.raises(ConfigError, match="rmat:10"):
        g.edges(0, g.num_edges + 1)


def test_rmat_independent_of_thread_count():
    g = rmat(12, weighted=True)
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = g.edges()
    finally:
        numba.set_num_threads(threads)
    for x, y in zip(one, g.edges()):
        np.testing.assert_array_equal(x, y)


def test_rmat_int32_fast_path():
    g = rmat(11, weighted=True)
    src, dst, weight = g.edges(id_dtype=np.int32, weight_dtype=np.int32)
    assert src.dtype == dst.dtype == weight.dtype == np.int32
    for x, y in zip((src, dst, weight), g.edges()):
        np.testing.assert_array_equal(x, y)
    with pytest.raises(ConfigError, match="id_dtype"):
        rmat(32).edges(0, 1, id_dtype=np.int32)
    with pytest.raises(ConfigError, match="id_dtype"):
        g.edges(id_dtype=np.float64)


def test_rmat_quadrant_frequencies():
    """Without scrambling, every bit level of (src, dst) follows (a, b, c, d)."""
    scale = 14
    a, b, c = config.RMAT_A, config.RMAT_B, config.RMAT_C
    src, dst, _ = rmat(scale, scramble=False).edges()
    expected = np.array([a, b, c, 1 - a - b - c])
    for level in (0, 1, scale // 2, scale - 1):  # level 0 is the top bit
        shift = scale - 1 - level
        quadrant = 2 * ((src >> shift) & 1) + ((dst >> shift) & 1)
        freq = np.bincount(quadrant, minlength=4) / len(src)
        np.testing.assert_allclose(freq, expected, atol=0.005)
    # the top bit alone: P(src top bit = 0) = a + b, P(dst top bit = 0) = a + c
    top = scale - 1
    assert abs(((src >> top) == 0).mean() - (a + b)) < 0.005
    assert abs(((dst >> top) == 0).mean() - (a + c)) < 0.005


def test_rmat_other_initiator():
    src, dst, _ = rmat(12, a=0.25, b=0.25, c=0.25, scramble=False).edges()
    quadrant = 2 * (src >> 11) + (dst >> 11)
    np.testing.assert_allclose(np.bincount(quadrant, minlength=4) / len(src), 0.25, atol=0.01)


def test_rmat_degree_skew_and_scrambling():
    scale = 14
    n = 1 << scale
    plain_src, plain_dst, _ = rmat(scale, scramble=False).edges()
    src, dst, _ = rmat(scale).edges()
    out_degree = np.bincount(src, minlength=n)
    in_degree = np.bincount(dst, minlength=n)
    mean = len(src) / n
    assert out_degree.max() > 50 * mean and in_degree.max() > 50 * mean
    assert (out_degree == 0).sum() > n // 10  # many isolated or sink vertices, kept
    # unscrambled, vertex 0 is the hub; scrambled, the hubs are spread out
    assert np.bincount(plain_src, minlength=n).argmax() == 0
    hubs = np.argsort(out_degree)[-20:]
    assert 0 not in hubs and hubs.max() > n // 2
    # scrambling is a relabelling: same degree sequence, one consistent map
    np.testing.assert_array_equal(np.sort(out_degree),
                                  np.sort(np.bincount(plain_src, minlength=n)))
    label = np.full(n, -1)
    label[plain_src] = src
    label[plain_dst] = dst
    np.testing.assert_array_equal(label[plain_src], src)
    np.testing.assert_array_equal(label[plain_dst], dst)
    seen = label[label >= 0]
    assert len(np.unique(seen)) == len(seen)


@pytest.mark.parametrize("scale", [1, 2, 5, 10])
def test_scramble_is_a_bijection(scale):
    val0 = gen._stream_key(1, gen._STREAM_SCRAMBLE0)
    val1 = gen._stream_key(1, gen._STREAM_SCRAMBLE1)
    shift = np.uint64(64 - scale)
    image = [int(gen._scramble(np.uint64(v), shift, val0, val1)) for v in range(1 << scale)]
    assert sorted(image) == list(range(1 << scale))


def test_rmat_weights_in_range_and_uniform():
    weight = rmat(12, weighted=True, max_weight=10).edges()[2]
    assert weight.min() == 1 and weight.max() == 10
    np.testing.assert_allclose(np.bincount(weight, minlength=11)[1:] / len(weight), 0.1,
                               atol=0.01)
    assert set(np.unique(rmat(6, weighted=True, max_weight=1).edges()[2])) == {1}
    weight = rmat(10, weighted=True).edges()[2]
    assert 1 <= weight.min() and weight.max() <= config.GENERATOR_MAX_WEIGHT


def test_rmat_identity():
    ident = rmat(10, weighted=True).identity()
    assert json.loads(json.dumps(ident)) == ident
    assert ident["generator"] == "rmat" and ident["scale"] == 10
    assert ident["seed"] == config.GENERATOR_SEED and ident["edge_factor"] == 16
    assert rmat(10, weighted=True).identity() == ident
    for other in (rmat(11, weighted=True), rmat(10, weighted=True, seed=1), rmat(10),
                  rmat(10, weighted=True, max_weight=7), rmat(10, 8, weighted=True),
                  rmat(10, weighted=True, scramble=False), rmat(10, weighted=True, a=0.6)):
        assert other.identity() != ident
    # the weight range does not matter when there are no weights
    assert rmat(10, max_weight=3).identity() == rmat(10, max_weight=4).identity()


@pytest.mark.parametrize("kwargs,name", [
    (dict(scale=0), "scale"), (dict(scale=gen.MAX_VERTICES_LOG2 + 1), "scale"),
    (dict(scale=2.5), "scale"), (dict(scale=True), "scale"),
    (dict(scale=10, edge_factor=0), "edge_factor"),
    (dict(scale=30, edge_factor=1 << 20), "edge_factor"),
    (dict(scale=10, seed=-1), "seed"), (dict(scale=10, seed=1 << 64), "seed"),
    (dict(scale=10, weighted="yes"), "weighted"),
    (dict(scale=10, max_weight=0), "max_weight"),
    (dict(scale=10, a=1.2), "a"), (dict(scale=10, b=float("nan")), "b"),
    (dict(scale=10, a=0.5, b=0.3, c=0.3), "a \\+ b \\+ c"),
])
def test_rmat_rejects_bad_arguments(kwargs, name):
    with pytest.raises(ConfigError, match=name):
        rmat(**kwargs)


# ------------------------------------------------------------------- grid --
def _nx_grid_edges(width, height):
    graph = nx.grid_2d_graph(width, height)  # nodes (x, y)
    ident = {(x, y): y * width + x for x, y in graph.nodes}
    edges = set()
    for p, q in graph.edges:
        edges.add((ident[p], ident[q]))
        edges.add((ident[q], ident[p]))
    return graph.number_of_nodes(), edges


@pytest.mark.parametrize("width,height", [(1, 1), (1, 5), (6, 1), (4, 3), (7, 7), (30, 11)])
def test_grid_matches_networkx(width, height):
    g = grid(width, height)
    assert isinstance(g, GridSource)
    src, dst, weight = all_edges(g, 5)
    nodes, edges = _nx_grid_edges(width, height)
    assert g.num_vertices == nodes
    assert g.num_edges == len(src) == len(edges)  # no duplicates
    assert set(zip(src.tolist(), dst.tolist())) == edges
    assert len(weight) == len(src)


def test_grid_declares_flags():
    g = grid(20, 10)
    assert g.name == "grid:20x10" and g.format == "grid"
    assert g.directed is False and g.already_symmetric and g.weight_kind == "int"
    assert g.num_edges_hint == g.num_edges == 2 * (19 * 10 + 20 * 9)
    bare = grid(20, 10, weighted=False)
    assert bare.weight_kind is None and all_edges(bare, 100)[2] is None


def test_grid_weights_symmetric_in_range_and_seeded():
    g = grid(40, 25, max_weight=9)
    src, dst, weight = g.edges()
    assert weight.min() == 1 and weight.max() == 9
    by_edge = dict(zip(zip(src.tolist(), dst.tolist()), weight.tolist()))
    assert all(by_edge[(v, u)] == w for (u, v), w in by_edge.items())
    np.testing.assert_array_equal(weight, grid(40, 25, max_weight=9).edges()[2])
    other = grid(40, 25, max_weight=9, seed=5).edges()[2]
    assert (weight != other).mean() > 0.5


def test_grid_independent_of_chunk_size():
    g = grid(17, 9)
    whole = g.edges()
    for max_edges in (1, 3, 100):
        for x, y in zip(whole, all_edges(g, max_edges)):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("width,height", [(1, 9), (12, 12), (50, 7)])
def test_grid_bfs_depth_from_corner(width, height):
    g = grid(width, height, weighted=False)
    src, dst, _ = g.edges()
    n = g.num_vertices
    matrix = sp.csr_matrix((np.ones(len(src)), (src, dst)), shape=(n, n))
    depth = csgraph.shortest_path(matrix, unweighted=True, indices=0)
    assert depth.max() == width + height - 2
    assert depth[n - 1] == width + height - 2  # the opposite corner
    assert csgraph.connected_components(matrix, directed=False)[0] == 1


def test_grid_identity():
    ident = grid(20, 10).identity()
    assert json.loads(json.dumps(ident)) == ident
    assert ident == grid(20, 10).identity()
    for other in (grid(10, 20), grid(20, 10, seed=1), grid(20, 10, max_weight=3),
                  grid(20, 10, weighted=False)):
        assert other.identity() != ident
    assert ident != rmat(4).identity()


@pytest.mark.parametrize("kwargs,name", [
    (dict(width=0, height=5), "width"), (dict(width=5, height=0), "height"),
    (dict(width=1 << 20, height=1 << 20), "width \\* height"),
    (dict(width=5, height=5, max_weight=0), "max_weight"),
    (dict(width=5, height=5, seed=-3), "seed"),
])
def test_grid_rejects_bad_arguments(kwargs, name):
    with pytest.raises(ConfigError, match=name):
        grid(**kwargs)


# ------------------------------------------------------------------ specs --
def test_parse_rmat_specs():
    g = parse_generator_spec("rmat:22")
    assert isinstance(g, RmatSource)
    assert (g.scale, g.edge_factor, g.seed, g.weighted) == (
        22, config.RMAT_EDGE_FACTOR, config.GENERATOR_SEED, False)
    g = parse_generator_spec("rmat:20:8")
    assert (g.scale, g.edge_factor, g.name) == (20, 8, "rmat:20:8")
    assert parse_generator_spec("RMAT:5").scale == 5
    g = parse_generator_spec("rmat:10", {"seed": 3, "weighted": True, "max_weight": 9,
                                        "edge_factor": 4})
    assert (g.seed, g.weighted, g.max_weight, g.edge_factor) == (3, True, 9, 4)
    assert parse_generator_spec("rmat:10:4", {"edge_factor": 4}).edge_factor == 4
    # None means "the default"
    assert parse_generator_spec("rmat:10", {"seed": None}).seed == config.GENERATOR_SEED


def test_parse_grid_specs():
    g = parse_generator_spec("grid:2000x2000")
    assert isinstance(g, GridSource)
    assert (g.width, g.height, g.num_vertices, g.weighted) == (2000, 2000, 4_000_000, True)
    g = parse_generator_spec("Grid:30X20", {"seed": 4, "max_weight": 3, "weighted": False})
    assert (g.width, g.height, g.seed, g.max_weight, g.weighted) == (30, 20, 4, 3, False)


@pytest.mark.parametrize("spec", ["graph.el", "rmat", "rmat.el", "grid_10x10.mtx",
                                  "/data/rmat:22", "./rmat:22", "C:\\rmat.el", "", "rmat22"])
def test_parse_returns_none_for_paths(spec):
    assert parse_generator_spec(spec) is None


def test_parse_non_string_is_not_a_spec(tmp_path):
    assert parse_generator_spec(tmp_path / "rmat:22") is None


@pytest.mark.parametrize("spec", [
    "rmat:x", "rmat:", "rmat:0", "rmat:40", "rmat:-3", "rmat:22:", "rmat:22:0",
    "rmat:22:8:1", "rmat: 22", "rmat:2.5", "grid:10", "grid:0x5", "grid:5x0", "grid:5x",
    "grid:axb", "grid:", "grid:10x10x10",
])
def test_parse_rejects_malformed_specs(spec):
    with pytest.raises(ConfigError) as info:
        parse_generator_spec(spec)
    assert repr(spec) in str(info.value)


@pytest.mark.parametrize("spec,options,words", [
    ("rmat:10", {"sed": 1}, "sed"),
    ("grid:3x3", {"edge_factor": 4}, "edge_factor"),
    ("rmat:10:8", {"edge_factor": 4}, "edge_factor"),
    ("rmat:10", {"weighted": "yes"}, "weighted"),
    ("rmat:10", {"max_weight": 0}, "max_weight"),
    ("grid:3x3", {"seed": -1}, "seed"),
])
def test_parse_rejects_bad_options(spec, options, words):
    with pytest.raises(ConfigError, match=words) as info:
        parse_generator_spec(spec, options)
    assert repr(spec) in str(info.value)
