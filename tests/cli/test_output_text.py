"""Values written as text: the same bytes as Python's own formatting of each
line (``f"{vertex}\\t{value!r}"`` for floats, ``f"{vertex}\\t{value}"``
otherwise), whether the integers go through the whole-array formatter or not."""

from __future__ import annotations

import numpy as np
import pytest

import garaphpy
from garaphpy.output import read_values, write_values


def _python_text(vertices, values) -> bytes:
    floats = np.asarray(values).dtype.kind == "f"
    lines = [f"{v}\t{x!r}" if floats else f"{v}\t{x}"
             for v, x in zip(np.asarray(vertices).tolist(), np.asarray(values).tolist())]
    return "".join(line + "\n" for line in lines).encode()


EXTREMES = np.array([0, -1, 1, 9, 10, -10, 99, 100, np.iinfo(np.int64).min,
                     np.iinfo(np.int64).max, -(10**18), 10**18, 123456789], np.int64)


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint32", "uint16",
                                   "uint8", "uint64", "bool", "float64", "float32"])
def test_text_is_pythons_own_for_every_value_type(tmp_path, dtype):
    rng = np.random.default_rng(7)
    count = 70_000 if dtype != "bool" else 1000
    vertices = np.concatenate([EXTREMES, rng.integers(-2**63, 2**63 - 1, count,
                                                      dtype=np.int64, endpoint=True)])
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    if info is not None:
        values = rng.integers(info.min, info.max, vertices.size, dtype=dtype, endpoint=True)
        values[:2] = (info.min, info.max)
    elif dtype == "bool":
        values = rng.random(vertices.size) < 0.5
    else:
        exponent = 300 if dtype == "float64" else 30
        values = (rng.standard_normal(vertices.size) * 10.0 ** rng.integers(
            -exponent, exponent, vertices.size)).astype(dtype)
        values[:6] = (np.inf, -np.inf, np.nan, -0.0, 0.0, 1.0)
    path = write_values(tmp_path / "v.txt", vertices, values)
    assert path.read_bytes() == _python_text(vertices, values)


def test_an_empty_result_writes_an_empty_file(tmp_path):
    path = write_values(tmp_path / "v.txt", np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert path.read_bytes() == b""


def test_bfs_and_pagerank_results_on_a_graph(tmp_path):
    sources = np.array([10, 10, 20, 30, 40, 50, 50, 7])
    targets = np.array([20, 30, 30, 40, 50, 10, 60, 10])
    graph = garaphpy.Graph.from_arrays(sources, targets, store=tmp_path / "g")
    for program, keywords in (("bfs", {"sources": [10]}), ("pagerank", {})):
        result = garaphpy.run(graph, program, mode="cpu", threads=1, **keywords)
        path = write_values(tmp_path / f"{program}.txt", result.original_ids(), result.values)
        assert path.read_bytes() == _python_text(result.original_ids(), result.values)
        vertices, values = read_values(path)
        np.testing.assert_array_equal(vertices, result.original_ids())
        np.testing.assert_array_equal(values, result.values)
