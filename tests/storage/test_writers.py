"""Tests of garaphpy.storage.writers.write_edge_list.

Written files are read back with numpy.loadtxt (an independent parser) or
compared byte for byte with text formatted by Python.
"""

from __future__ import annotations

import gzip
import os

import numpy as np
import pytest

from garaphpy.errors import ConfigError, GraphInputError
from garaphpy.generators import grid, rmat
from garaphpy.storage.edges import EdgeChunk, EdgeSource
from garaphpy.storage.writers import write_edge_list


class ArraySource(EdgeSource):
    """Edges from arrays; ``fail_after`` chunks, then GraphInputError."""

    format = "arrays"

    def __init__(self, src, dst, weight=None, fail_after=None):
        self.src = np.asarray(src, dtype=np.int64)
        self.dst = np.asarray(dst, dtype=np.int64)
        self.weight = None if weight is None else np.asarray(weight)
        self.weight_kind = (None if weight is None
                            else "real" if self.weight.dtype.kind == "f" else "int")
        self.fail_after = fail_after
        self.name = "<arrays>"

    def chunks(self, max_edges):
        for k, start in enumerate(range(0, len(self.src), max_edges)):
            if self.fail_after is not None and k >= self.fail_after:
                raise GraphInputError("broken on purpose", path=self.name, line=start + 1)
            part = slice(start, start + max_edges)
            yield EdgeChunk(self.src[part], self.dst[part],
                            None if self.weight is None else self.weight[part])

    def identity(self):
        return {"arrays": len(self.src)}


def python_lines(src, dst, weight=None):
    if weight is None:
        return "".join(f"{u} {v}\n" for u, v in zip(src, dst))
    return "".join(f"{u} {v} {w!r}\n" for u, v, w in zip(src, dst, weight))


def test_unweighted_round_trip(tmp_path):
    g = rmat(9)
    path = tmp_path / "g.el"
    assert write_edge_list(g, path) == g.num_edges
    back = np.loadtxt(path, dtype=np.int64)
    src, dst, _ = g.edges()
    np.testing.assert_array_equal(back[:, 0], src)
    np.testing.assert_array_equal(back[:, 1], dst)


def test_weighted_round_trip(tmp_path):
    g = grid(13, 7, max_weight=1000)
    path = tmp_path / "g.wel"
    assert write_edge_list(g, str(path)) == g.num_edges
    back = np.loadtxt(path, dtype=np.int64)
    for column, expected in zip(back.T, g.edges()):
        np.testing.assert_array_equal(column, expected)


def test_exact_text_and_extreme_integers(tmp_path):
    big = np.iinfo(np.int64).max
    src = [0, 1, 9, 10, 99, 100, 12345, big, 7]
    dst = [0, 10, 99, 100, 101, 999999, 1000000, 0, big]
    weight = [0, -1, 1, -9, 10, -100, np.iinfo(np.int64).min, big, 123456789012]
    path = tmp_path / "x.wel"
    write_edge_list(ArraySource(src, dst, weight), path, chunk_edges=4)
    assert path.read_text() == python_lines(src, dst, weight)
    path = tmp_path / "x.el"
    write_edge_list(ArraySource(src, dst, weight), path)
    assert path.read_text() == python_lines(src, dst)


def test_random_integers_match_python(tmp_path):
    rng = np.random.default_rng(5)
    n = 5000
    digits = rng.integers(0, 19, size=(3, n))
    values = rng.integers(0, 10, size=(3, n)) * 10 ** digits.astype(np.int64)
    src, dst, weight = values[0], values[1], -values[2]
    path = tmp_path / "r.wel"
    write_edge_list(ArraySource(src, dst, weight), path, chunk_edges=777)
    assert path.read_text() == python_lines(src.tolist(), dst.tolist(), weight.tolist())


def test_real_weights_read_back_exactly(tmp_path):
    rng = np.random.default_rng(1)
    weight = np.concatenate([
        [0.1, 1 / 3, -2.5, 1e-300, 5e-324, 1.7976931348623157e308, -0.0, 0.0, 1.0,
         123456789.0, np.inf, -np.inf, np.nan],
        rng.standard_normal(1000) * 10.0 ** rng.integers(-20, 20, 1000)])
    n = len(weight)
    src, dst = np.arange(n), np.arange(n)[::-1]
    path = tmp_path / "f.wel"
    assert write_edge_list(ArraySource(src, dst, weight), path, chunk_edges=100) == n
    back = np.loadtxt(path, dtype=np.float64)
    np.testing.assert_array_equal(back[:, 0], src)
    np.testing.assert_array_equal(back[:, 1], dst)
    np.testing.assert_array_equal(back[:, 2], weight)  # NaN == NaN here
    assert np.array_equal(np.signbit(back[:, 2]), np.signbit(weight))
    assert path.read_text().splitlines()[0] == f"0 {n - 1} 0.1"


def test_chunking_does_not_change_the_file(tmp_path):
    g = rmat(5, edge_factor=12, weighted=True)
    texts = set()
    for chunk_edges in (1, 3, 1000, 1 << 20):
        path = tmp_path / f"c{chunk_edges}.wel"
        write_edge_list(g, path, chunk_edges=chunk_edges)
        texts.add(path.read_bytes())
    assert len(texts) == 1


def test_weighted_follows_extension_then_source(tmp_path):
    g = rmat(5, weighted=True)
    write_edge_list(g, tmp_path / "a.el")
    assert np.loadtxt(tmp_path / "a.el").shape[1] == 2
    write_edge_list(g, tmp_path / "a.txt")
    assert np.loadtxt(tmp_path / "a.txt").shape[1] == 3
    write_edge_list(g, tmp_path / "b.wel", weighted=False)
    assert np.loadtxt(tmp_path / "b.wel").shape[1] == 2
    write_edge_list(rmat(5), tmp_path / "c.txt")
    assert np.loadtxt(tmp_path / "c.txt").shape[1] == 2


@pytest.mark.parametrize("name,weighted", [("u.wel", None), ("u.el", True), ("u.txt", True)])
def test_weights_of_an_unweighted_source_are_an_error(tmp_path, name, weighted):
    with pytest.raises(ConfigError, match="no weights"):
        write_edge_list(rmat(4), tmp_path / name, weighted=weighted)
    assert list(tmp_path.iterdir()) == []


def test_bad_arguments(tmp_path):
    with pytest.raises(ConfigError, match="weighted"):
        write_edge_list(rmat(4), tmp_path / "a.el", weighted="yes")
    with pytest.raises(ConfigError, match="chunk_edges"):
        write_edge_list(rmat(4), tmp_path / "a.el", chunk_edges=0)
    with pytest.raises(ConfigError, match=".gz"):
        write_edge_list(rmat(4), tmp_path / "a.el.bz2")
    with pytest.raises(FileNotFoundError):
        write_edge_list(rmat(4), tmp_path / "missing" / "a.el")
    with pytest.raises(IsADirectoryError):
        write_edge_list(rmat(4), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_empty_source_writes_an_empty_file(tmp_path):
    path = tmp_path / "e.el"
    assert write_edge_list(ArraySource([], []), path) == 0
    assert path.read_bytes() == b""
    assert write_edge_list(grid(1, 1), tmp_path / "one.wel") == 0


def test_gzip_output(tmp_path):
    g = rmat(7, weighted=True)
    path = tmp_path / "g.wel.gz"
    write_edge_list(g, path)
    with gzip.open(path, "rt") as f:
        back = np.loadtxt(f, dtype=np.int64)
    for column, expected in zip(back.T, g.edges()):
        np.testing.assert_array_equal(column, expected)


def test_failed_write_leaves_nothing(tmp_path):
    src = np.arange(100)
    broken = ArraySource(src, src, fail_after=2)
    path = tmp_path / "broken.el"
    with pytest.raises(GraphInputError, match="broken on purpose"):
        write_edge_list(broken, path, chunk_edges=10)
    assert list(tmp_path.iterdir()) == []


def test_failed_write_keeps_the_previous_file(tmp_path):
    path = tmp_path / "keep.el"
    path.write_text("0 1\n")
    src = np.arange(100)
    with pytest.raises(GraphInputError):
        write_edge_list(ArraySource(src, src, fail_after=3), path, chunk_edges=10)
    assert path.read_text() == "0 1\n"
    assert os.listdir(tmp_path) == ["keep.el"]
    # and a successful write replaces it
    write_edge_list(ArraySource(src, src), path, chunk_edges=10)
    assert path.read_text() == python_lines(src, src)
    assert os.listdir(tmp_path) == ["keep.el"]


def test_interrupt_leaves_nothing(tmp_path):
    class Interrupted(ArraySource):
        def chunks(self, max_edges):
            yield from super().chunks(max_edges)
            raise KeyboardInterrupt

    src = np.arange(50)
    with pytest.raises(KeyboardInterrupt):
        write_edge_list(Interrupted(src, src), tmp_path / "i.el", chunk_edges=10)
    assert list(tmp_path.iterdir()) == []
