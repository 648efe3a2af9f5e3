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


def _hard_floats() -> np.ndarray:
    """Doubles where shortest round-trip text is easy to get wrong."""
    rng = np.random.default_rng(11)
    tenths = [10.0 ** k for k in range(-323, 309)]
    nines = [float(f"9.{'9' * digits}e{k}") for digits in range(1, 17) for k in range(-30, 30)]
    near_powers = np.array(tenths + nines)
    powers_of_two = np.ldexp(1.0, np.arange(-1074, 1024))
    return np.concatenate([
        [np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308,
         2.225073858507201e-308, 1.7976931348623157e308, 0.1, 0.2, 0.3, 1 / 3, 2 / 3, 0.5,
         1.5, 2.5, 4.35, 1e-4, 1e-5, 0.00012345, 9999999999999998.0, 1e16, 1e15, 1e17,
         123456789012345678.0, 2.0 ** 53, 2.0 ** 53 + 2, 1e22, 1e23, 5e-310, 1e-290, 1e290],
        near_powers, np.nextafter(near_powers, np.inf), np.nextafter(near_powers, -np.inf),
        powers_of_two, -powers_of_two[::7],
        rng.integers(0, 2**64, 200_000, dtype=np.uint64).view(np.float64),   # every exponent
        rng.random(100_000) / 1e5,                                  # ranks
        np.round(rng.random(100_000) * 1e6) / 1e3,                  # few digits
        rng.integers(-10**6, 10**6, 50_000).astype(np.float64),    # whole numbers
        np.ldexp(rng.random(50_000), -1060),                        # subnormals
    ])


def test_float_text_is_reprs_and_reads_back_bit_for_bit(tmp_path):
    from garaphpy import value_lines

    values = _hard_floats()
    lines = bytes(value_lines.float_lines(np.zeros(values.size, np.int64), values))
    text = [line[2:].decode() for line in lines.splitlines()]
    expected = [repr(value) for value in values.tolist()]
    wrong = [(e, t) for e, t in zip(expected, text) if e != t]
    assert not wrong, wrong[:10]
    vertices = np.arange(values.size)
    path = write_values(tmp_path / "v.txt", vertices, values)
    assert path.read_bytes() == _python_text(vertices, values)
    _, read = read_values(path)
    finite_or_inf = ~np.isnan(values)
    assert np.isnan(read[~finite_or_inf]).all()
    np.testing.assert_array_equal(read[finite_or_inf].view(np.int64),
                                  values[finite_or_inf].view(np.int64))   # -0.0 included


def test_float32_text_is_the_reprs_of_its_doubles(tmp_path):
    rng = np.random.default_rng(5)
    values = (rng.standard_normal(100_000) * 10.0 ** rng.integers(-45, 38, 100_000)) \
        .astype(np.float32)
    values[:5] = (np.float32(1e-45), np.float32(3.4028235e38), np.float32(0.1), -0.0, np.nan)
    path = write_values(tmp_path / "v.txt", np.arange(values.size), values)
    assert path.read_bytes() == _python_text(np.arange(values.size), values)
    _, read = read_values(path)
    np.testing.assert_array_equal(read[1:4].astype(np.float32).view(np.int32),
                                  values[1:4].view(np.int32))
    np.testing.assert_array_equal(read.astype(np.float32), values)


@pytest.mark.parametrize("threads", [1, 3])
def test_lines_made_in_pieces_by_threads_come_in_order(tmp_path, monkeypatch, threads):
    from garaphpy import output

    monkeypatch.setattr(output, "_LINES_PER_WRITE", 997)
    monkeypatch.setattr(output, "_COMPILED_LINES", 10)
    values = _hard_floats()[:40_000]
    vertices = np.random.default_rng(3).permutation(values.size) - 20_000
    path = write_values(tmp_path / "f.txt", vertices, values, threads=threads)
    assert path.read_bytes() == _python_text(vertices, values)
    depths = (vertices * 31) % 1000 - 1
    path = write_values(tmp_path / "i.txt", vertices, depths, threads=threads)
    assert path.read_bytes() == _python_text(vertices, depths)
