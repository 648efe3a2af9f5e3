"""PACE 2016 track A ``p tw n m`` files read as undirected DIMACS graphs.

The PACE conversions of the 9th DIMACS road graphs (ben-strasser/
road-graphs-pace16) list each undirected edge once as "u v", 1-based, after
``c`` comments and one ``p tw n m`` line.  The reader
(:class:`garaphpy.storage.readers.DimacsSource`) must give both directions
of every edge; these tests compare what it builds with SciPy's and
NetworkX's graphs of the same edge list.
"""

from __future__ import annotations

import gzip
import lzma
import re
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import scipy.sparse
from scipy.sparse.csgraph import shortest_path

import garaphpy
from garaphpy.errors import GraphInputError
from garaphpy.generators import hashed_edge_weights
from garaphpy.storage.readers import open_source

# 1-based; vertex 6 is isolated, 7-8 is a second component, 3-4 is listed twice
NUM_VERTICES = 8
EDGES = [(1, 2), (2, 3), (3, 4), (4, 1), (2, 5), (7, 8), (3, 4)]
PACE_TEXT = ("c PACE 2016 track A\nc from a DIMACS road graph\n"
             f"p tw {NUM_VERTICES} {len(EDGES)}\n"
             + "".join(f"{u} {v}\n" if k != 3 else f"c between edges\n{u}\t{v}\n\n"
                       for k, (u, v) in enumerate(EDGES)))


def write_pace(directory: Path, compression: str | None) -> Path:
    data = PACE_TEXT.encode()
    if compression is None:
        path = directory / "roads.gr"
        path.write_bytes(data)
    else:
        opener, suffix = {"gzip": (gzip.open, ".gz"), "xz": (lzma.open, ".xz")}[compression]
        path = directory / f"roads.gr{suffix}"
        with opener(path, "wb") as out:
            out.write(data)
    return path


def scipy_undirected(num_vertices, edges) -> scipy.sparse.csr_array:
    """The symmetric 0/1 adjacency of ``edges`` (1-based), duplicates kept apart."""
    rows = [u - 1 for u, v in edges] + [v - 1 for u, v in edges]
    cols = [v - 1 for u, v in edges] + [u - 1 for u, v in edges]
    return scipy.sparse.coo_array((np.ones(len(rows)), (rows, cols)),
                                  shape=(num_vertices, num_vertices)).tocsr()


def in_user_ids(graph) -> scipy.sparse.csr_array:
    """``graph``'s adjacency with rows and columns in the file's 1-based ids - 1."""
    matrix = graph.to_scipy().tocoo()
    ids = graph.original_ids().astype(np.int64) - 1
    return scipy.sparse.coo_array((np.ones(matrix.nnz), (ids[matrix.row], ids[matrix.col])),
                                  shape=matrix.shape).tocsr()


# ------------------------------------------------------------ the records --
def test_each_line_gives_both_directions_in_every_chunk_size(tmp_path):
    source = open_source(write_pace(tmp_path, None))
    assert (source.format, source.num_vertices, source.id_base) == ("gr", NUM_VERTICES, 1)
    assert source.directed is False and source.already_symmetric
    assert source.weight_kind is None and source.num_edges_hint == 2 * len(EDGES)
    expected = sorted([(u - 1, v - 1) for u, v in EDGES] + [(v - 1, u - 1) for u, v in EDGES])
    for max_edges in (1, 2, 3, 1000):
        pairs = []
        for chunk in source.chunks(max_edges):
            assert 0 < len(chunk) <= max_edges and chunk.weight is None
            pairs += zip(chunk.src.tolist(), chunk.dst.tolist())
        assert sorted(pairs) == expected


def test_a_self_loop_line_gives_one_edge(tmp_path):
    path = tmp_path / "loop.gr"
    path.write_text("p tw 2 2\n1 1\n1 2\n")
    pairs = [pair for chunk in open_source(path).chunks(10)
             for pair in zip(chunk.src.tolist(), chunk.dst.tolist())]
    assert sorted(pairs) == [(0, 0), (0, 1), (1, 0)]


# ------------------------------------------------------- the loaded graph --
@pytest.mark.parametrize("compression", [None, "gzip", "xz"])
def test_loaded_graph_is_the_undirected_graph_of_scipy_and_networkx(tmp_path, compression):
    path = write_pace(tmp_path, compression)
    graph = garaphpy.Graph.load(path, store=tmp_path / "store", progress=False,
                                duplicates="keep")
    assert graph.num_vertices == NUM_VERTICES and not graph.weighted
    assert sorted(graph.original_ids().tolist()) == list(range(1, NUM_VERTICES + 1))
    expected = scipy_undirected(NUM_VERTICES, EDGES)
    got = in_user_ids(graph)
    assert graph.num_edges == expected.sum() == 2 * len(EDGES)
    np.testing.assert_array_equal(got.toarray(), expected.toarray())
    # NetworkX's multigraph of the same lines: its neighbours, both directions
    reference = nx.MultiGraph()
    reference.add_nodes_from(range(1, NUM_VERTICES + 1))
    reference.add_edges_from(EDGES)
    for u in reference:
        row = got[[u - 1]].toarray().ravel()
        neighbours = [v for v in reference.neighbors(u)
                      for _ in range(reference.number_of_edges(u, v))]
        assert sorted(np.repeat(np.arange(1, NUM_VERTICES + 1), row.astype(int)).tolist()) \
            == sorted(neighbours), u
    assert reference.degree(6) == 0 and got[[5]].nnz == 0


def test_bfs_matches_scipy(tmp_path):
    graph = garaphpy.Graph.load(write_pace(tmp_path, "xz"), store=tmp_path / "store",
                                progress=False)
    source_user_id = 3        # sources are the file's ids
    result = garaphpy.run(graph, "bfs", sources=[source_user_id], mode="cpu")
    hops = shortest_path(scipy_undirected(NUM_VERTICES, EDGES), directed=True,
                         unweighted=True, indices=source_user_id - 1)
    expected = np.where(np.isfinite(hops), hops, -1).astype(np.int64)
    user = graph.original_ids().astype(np.int64) - 1
    values = np.asarray(result.values)
    unreached = (values < 0) | ~np.isfinite(values.astype(np.float64))
    depth = np.where(unreached, -1, values).astype(np.int64)
    np.testing.assert_array_equal(depth, expected[user])
    assert (expected == -1).sum() == 3        # vertex 6 and the 7-8 component


@pytest.mark.parametrize("kind", ["pace", "symmetric mtx"])
def test_hashed_weights_give_both_directions_one_weight(tmp_path, kind):
    """weights="hash" on a file listing each undirected edge once: u -> v and
    v -> u weigh what the rule gives the pair (min, max) of user ids."""
    if kind == "pace":
        path = write_pace(tmp_path, None)
    else:
        path = tmp_path / "roads.mtx"
        path.write_text("%%MatrixMarket matrix coordinate pattern symmetric\n"
                        f"{NUM_VERTICES} {NUM_VERTICES} {len(EDGES)}\n"
                        + "".join(f"{v} {u}\n" for u, v in EDGES))
    graph = garaphpy.Graph.load(path, store=tmp_path / "store", progress=False,
                                weights="hash", duplicates="keep")
    assert graph.weighted and graph.num_edges == 2 * len(EDGES)
    ids = graph.original_ids().astype(np.int64)
    coo = graph.to_scipy().tocoo()
    got = sorted(zip(ids[coo.row].tolist(), ids[coo.col].tolist(), coo.data.tolist()))
    pairs = [(min(u, v), max(u, v)) for u, v in EDGES]
    rule = hashed_edge_weights(np.array([a for a, _ in pairs]), np.array([b for _, b in pairs]))
    expected = sorted([(u, v, int(w)) for (u, v), w in zip(EDGES, rule)]
                      + [(v, u, int(w)) for (u, v), w in zip(EDGES, rule)])
    assert got == expected
    assert all(1 <= w <= 255 for *_, w in got)


# ------------------------------------------------------------------ errors --
@pytest.mark.parametrize("body, line, match", [
    ("p tw 3 3\n1 2\n2 3\n", 3, "only 2 entries but the header declares 3"),
    ("p tw 3 1\n1 2\nc\n2 3\n", 4, "more entries than the 1"),
    ("p tw 3 1\n1 4\n", 2, r"destination id '4' is outside the declared vertex range 1\.\.3"),
    ("p tw 3 1\n0 2\n", 2, "source id is 0 but this format numbers vertices from 1"),
    ("p tw 3 1\n1 2 3\n", 2, r"expected 2 columns but found more \('3'\)"),
    ("p tw 3 1\n1\n", 2, "expected 2 columns but the line ends after 1"),
    ("p tw 3 1\na 1 2 3\n", 2, r"an 'a u v w' arc line in a 'p tw' file"),
    ("p tw 3 2\n1 2\np tw 3 1\n", 3, "a second problem line after the edges"),
    ("p tw 3\n1 2\n", 1, r"malformed problem line: expected 'p sp n m' or 'p tw n m'"),
    ("p cut 3 1\n1 2\n", 1, r"unsupported DIMACS problem type 'cut' \(only 'sp' and 'tw'"),
    ("p tw 0 0\n", 1, "empty graph"),
])
def test_bad_pace_file_names_file_and_line(tmp_path, body, line, match):
    path = tmp_path / "bad.gr"
    path.write_text("c header\n" + body)
    with pytest.raises(GraphInputError) as info:
        for _ in open_source(path).chunks(1 << 10):
            pass
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}:{line + 1}:"), message
    assert info.value.line == line + 1
    assert re.search(match, message), message


def test_isolated_vertices_only(tmp_path):
    path = tmp_path / "empty.gr"
    path.write_text("c no edges\np tw 4 0\n")
    source = open_source(path)
    assert source.num_vertices == 4
    assert sum(len(chunk) for chunk in source.chunks(10)) == 0
