"""Tests of garaphpy.storage.readers (text, binary, compressed, in-memory inputs).

Every reader is checked against arrays written by hand or computed by an
independent method (Python string splitting, numpy, struct-packed binary
files following the layouts documented in garaphpy.storage.binary), and every
kind of bad input must name the file and the line or byte offset.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import re
import struct
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse
from scipy.sparse.csgraph import dijkstra

from garaphpy import config
from garaphpy.errors import ConfigError, GraphInputError
from garaphpy.storage import readers, textparse
from garaphpy.storage.edges import EdgeSource
from garaphpy.storage.readers import from_arrays, from_scipy, open_source

DATA_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data"


# ------------------------------------------------------------------ helpers --
def read_all(source: EdgeSource, max_edges: int = 1 << 20):
    """Concatenate every chunk: (src, dst, weight or None), checking chunk sizes."""
    srcs, dsts, weights = [], [], []
    for chunk in source.chunks(max_edges):
        assert 0 < len(chunk) <= max_edges
        if source.format in ("arrays", "scipy"):  # the caller's int32/int64, uncopied
            assert chunk.src.dtype in (np.int32, np.int64) and chunk.dst.dtype in (np.int32,
                                                                                 np.int64)
        else:
            assert chunk.src.dtype == np.int64 and chunk.dst.dtype == np.int64
        assert len(chunk.dst) == len(chunk)
        if source.weight_kind is None:
            assert chunk.weight is None
        else:
            expected = np.int64 if source.weight_kind == "int" else np.float64
            assert chunk.weight.dtype == expected and len(chunk.weight) == len(chunk)
            weights.append(chunk.weight)
        srcs.append(chunk.src)
        dsts.append(chunk.dst)
    cat = (lambda parts, dtype: np.concatenate(parts) if parts
           else np.empty(0, dtype=dtype))
    weight = None
    if source.weight_kind is not None:
        weight = cat(weights, np.int64 if source.weight_kind == "int" else np.float64)
    return cat(srcs, np.int64), cat(dsts, np.int64), weight


def write(path: Path, text: str, newline: str = "\n") -> Path:
    path.write_bytes(text.replace("\n", newline).encode())
    return path


def compress(path: Path, kind: str, name: str | None = None) -> Path:
    """Write a compressed copy of ``path`` (named ``name``, default path + suffix)."""
    opener, suffix = {"gzip": (gzip.open, ".gz"), "bz2": (bz2.open, ".bz2"),
                      "xz": (lzma.open, ".xz")}[kind]
    target = path.with_name(name or path.name + suffix)
    with opener(target, "wb") as out:
        out.write(path.read_bytes())
    return target


def raises_at(path, line=None, offset=None, match=None):
    """Context manager: GraphInputError naming ``path`` and line / byte offset."""
    class _Check:
        def __enter__(self):
            self.ctx = pytest.raises(GraphInputError)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            handled = self.ctx.__exit__(*exc)
            message = str(self.info.value)
            assert str(path) in message, message
            if line is not None:
                assert f"{path}:{line}:" in message, message
                assert self.info.value.line == line
            if offset is not None:
                assert f"byte {offset}" in message, message
                assert self.info.value.offset == offset
            if match is not None:
                assert re.search(match, message), message
            return handled
    return _Check()


def consume(source: EdgeSource, max_edges: int = 1 << 20) -> None:
    for _ in source.chunks(max_edges):
        pass


# ---------------------------------------------------- binary test writers --
# An independent writer following garaphpy/storage/binary.py's documented
# layouts (gapbs writer.h, Subway tools/converter.cpp).
def csr(num_vertices, edges):
    """Row offsets and the rows' (dst, weight) entries, sorted by source."""
    order = sorted(range(len(edges)), key=lambda k: edges[k][0])
    offsets = [0] * (num_vertices + 1)
    for u, *_ in edges:
        offsets[u + 1] += 1
    for i in range(num_vertices):
        offsets[i + 1] += offsets[i]
    return offsets, [edges[k] for k in order]


def write_gap(path, num_vertices, edges, directed, weighted):
    """A GAP .sg/.wsg file; for undirected graphs ``edges`` holds both directions."""
    def section(edge_list):
        offsets, rows = csr(num_vertices, edge_list)
        data = struct.pack(f"<{num_vertices + 1}q", *offsets)
        for _, v, *w in rows:
            data += struct.pack("<ii", v, w[0]) if weighted else struct.pack("<i", v)
        return data
    data = struct.pack("<?qq", directed, len(edges), num_vertices) + section(edges)
    if directed:
        data += section([(v, u, *w) for u, v, *w in edges])
    path.write_bytes(data)
    return path


def write_subway(path, num_vertices, edges, weighted):
    """A Subway .bcsr/.bwcsr file: n, m, nodePointer[n], edge records."""
    offsets, rows = csr(num_vertices, edges)
    data = struct.pack("<II", num_vertices, len(edges))
    data += struct.pack(f"<{num_vertices}I", *offsets[:num_vertices])
    for _, v, *w in rows:
        data += struct.pack("<II", v, w[0]) if weighted else struct.pack("<I", v)
    path.write_bytes(data)
    return path


# ============================================================ edge lists ==
def test_el_with_comments_blanks_tabs_and_crlf(tmp_path):
    path = write(tmp_path / "g.el", "# comment\n0 1\n\n1\t2  \n% other\n  2 0\n5 5\n",
                 newline="\r\n")
    source = open_source(path)
    assert (source.format, source.num_vertices, source.id_base) == ("el", None, 0)
    assert source.weight_kind is None and source.directed is None
    src, dst, weight = read_all(source)
    assert src.tolist() == [0, 1, 2, 5] and dst.tolist() == [1, 2, 0, 5]
    assert weight is None


def test_el_last_line_without_newline_and_large_ids(tmp_path):
    big = 2 ** 63 - 1
    path = write(tmp_path / "g.el", f"0 {big}\n{big} 3")
    src, dst, _ = read_all(open_source(path))
    assert src.tolist() == [0, big] and dst.tolist() == [big, 3]


def test_snap_file(tmp_path):
    path = write(tmp_path / "graph.txt",
                 "# Directed graph: x\n# Nodes: 3 Edges: 3\n# FromNodeId\tToNodeId\n"
                 "10\t20\n20\t30\n30\t10\n")
    source = open_source(path)
    assert source.format == "snap" and source.num_vertices is None
    src, dst, _ = read_all(source)
    assert src.tolist() == [10, 20, 30] and dst.tolist() == [20, 30, 10]


def test_snap_detected_by_comment_header_without_extension(tmp_path):
    path = write(tmp_path / "graph", "# SNAP\n1 2\n")
    assert open_source(path).format == "snap"


def test_wel_integer_weights(tmp_path):
    path = write(tmp_path / "g.wel", "0 1 5\n1 2 -3\n2 0 +7\n")
    source = open_source(path)
    assert source.format == "wel" and source.weight_kind == "int"
    src, dst, weight = read_all(source)
    assert src.tolist() == [0, 1, 2] and dst.tolist() == [1, 2, 0]
    assert weight.tolist() == [5, -3, 7]


def test_wel_real_weights(tmp_path):
    path = write(tmp_path / "g.wel", "0 1 5\n1 2 0.25\n2 0 -1.5e3\n3 3 .5\n4 4 7.\n")
    source = open_source(path)
    assert source.weight_kind == "real"
    _, _, weight = read_all(source)
    assert weight.tolist() == [5.0, 0.25, -1500.0, 0.5, 7.0]


def test_wel_kind_is_decided_by_the_first_block(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "WEIGHT_PROBE_BYTES", 16)
    lines = [f"{i} {i + 1} {i}" for i in range(10)] + ["10 11 2.5"]
    path = write(tmp_path / "g.wel", "\n".join(lines) + "\n")
    source = open_source(path, weight_kind="int")     # asked for: kept, and refused
    assert source.weight_kind == "int"
    with raises_at(path, line=11, match="not an integer.*weight_kind='real'"):
        consume(source)
    real = open_source(path, weight_kind="real")
    assert real.weight_kind == "real"
    _, _, weight = read_all(real)
    assert weight[-1] == 2.5 and weight[3] == 3.0


def test_real_weights_parse_like_python_float(tmp_path):
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.normal(0, 1e3, 2000), rng.lognormal(0, 20, 2000),
                             -rng.lognormal(0, 150, 2000)])
    tokens = ([f"{v:.6g}" for v in values] + [repr(float(v)) for v in values]
              + [f"{v:.20e}" for v in values]
              + ["0", "-0.0", "1e308", "1.7976931348623157e308", "2.2250738585072014e-308",
                 "4.9e-324", "1e-400", "123456789012345678901234567890", "0.1", "3.3e-5"])
    path = write(tmp_path / "g.wel", "".join(f"0 1 {t}\n" for t in tokens))
    _, _, weight = read_all(open_source(path))
    np.testing.assert_array_equal(weight, np.array([float(t) for t in tokens]))


def test_power_of_ten_table_is_the_exact_rationals_rounded():
    """The decimal parser's double-double powers of ten, against 10**k in exact
    rationals (hi the significand rounded, lo the rest rounded)."""
    from fractions import Fraction

    lowest, highest = textparse._LOWEST_POWER, textparse._HIGHEST_POWER
    for index, k in enumerate(range(lowest, highest + 1)):
        value = Fraction(10) ** k
        b = int(textparse._POWER_EXPONENT[index])
        significand = value / Fraction(2) ** b
        assert 1 <= significand < 2, k
        hi = textparse._POWER_HI[index]
        assert hi == float(significand), k
        assert textparse._POWER_LO[index] == float(significand - Fraction(hi)), k


def test_chunks_are_bounded_and_reiterable(tmp_path):
    path = write(tmp_path / "g.el", "".join(f"{i} {i * 7 % 13}\n" for i in range(100)))
    source = open_source(path)
    first = read_all(source, max_edges=7)
    second = read_all(source, max_edges=100)
    assert first[0].tolist() == list(range(100))
    assert np.array_equal(first[0], second[0]) and np.array_equal(first[1], second[1])
    assert [len(c) for c in source.chunks(30)] == [30, 30, 30, 10]


@pytest.mark.parametrize("max_edges", [0, -1, 2.5, True])
def test_max_edges_must_be_positive_integer(tmp_path, max_edges):
    path = write(tmp_path / "g.el", "0 1\n")
    with pytest.raises(ConfigError, match="max_edges"):
        consume(open_source(path), max_edges)


# ======================================================== Matrix Market ==
def test_mtx_general_pattern(tmp_path):
    path = write(tmp_path / "g.mtx", "%%MatrixMarket matrix coordinate pattern general\n"
                                     "% a comment\n%\n4 4 3\n1 2\n4 1\n3 3\n")
    source = open_source(path)
    assert (source.format, source.num_vertices, source.id_base) == ("mtx", 4, 1)
    assert source.weight_kind is None and not source.already_symmetric
    src, dst, _ = read_all(source)
    assert src.tolist() == [0, 3, 2] and dst.tolist() == [1, 0, 2]


def test_mtx_integer_and_real_fields(tmp_path):
    integer = write(tmp_path / "i.mtx", "%%MatrixMarket matrix coordinate integer general\n"
                                        "2 2 2\n1 2 7\n2 1 -4\n")
    source = open_source(integer)
    assert source.weight_kind == "int"
    assert read_all(source)[2].tolist() == [7, -4]
    real = write(tmp_path / "r.mtx", "%%MatrixMarket matrix coordinate real general\n"
                                     "2 2 2\n1 2 7\n2 1 -4.5e-1\n")
    source = open_source(real)
    assert source.weight_kind == "real"
    assert read_all(source)[2].tolist() == [7.0, -0.45]


def test_mtx_symmetric_yields_both_directions(tmp_path):
    path = write(tmp_path / "s.mtx", "%%MatrixMarket matrix coordinate real symmetric\n"
                                     "3 3 3\n1 1 1.5\n2 1 2\n3 2 4\n")
    source = open_source(path)
    assert source.already_symmetric and source.directed is False
    for max_edges in (1, 2, 3, 100):
        src, dst, weight = read_all(source, max_edges)
        edges = sorted(zip(src.tolist(), dst.tolist(), weight.tolist()))
        assert edges == [(0, 0, 1.5), (0, 1, 2.0), (1, 0, 2.0), (1, 2, 4.0), (2, 1, 4.0)]


def test_mtx_isolated_vertices_only_is_valid(tmp_path):
    path = write(tmp_path / "e.mtx", "%%MatrixMarket matrix coordinate pattern general\n"
                                     "5 5 0\n")
    source = open_source(path)
    assert source.num_vertices == 5
    assert read_all(source)[0].size == 0


def test_mtx_detected_in_txt_file_and_case_insensitive(tmp_path):
    path = write(tmp_path / "matrix.txt", "%%matrixmarket MATRIX Coordinate Pattern General\n"
                                          "2 2 1\n1 2\n")
    source = open_source(path)
    assert source.format == "mtx"
    assert read_all(source)[0].tolist() == [0]


@pytest.mark.parametrize("body, line, match", [
    ("3 3 3\n1 2\n2 3\n", 4, "only 2 entries but the header declares 3"),
    ("3 3 1\n1 2\n2 3\n", 4, "more entries than the 1"),
    ("3 4 1\n1 2\n", 2, "square"),
    ("3 3 1\n1 4\n", 3, "outside the declared vertex range 1..3"),
    ("3 3 1\n0 2\n", 3, "is 0 but this format numbers vertices from 1"),
    ("3 3\n1 2\n", 2, "size line"),
    ("3 3 x\n1 2\n", 2, "'x' is not an integer"),
    ("3 3 1\n1 2 3\n", 3, "expected 2 columns"),
])
def test_mtx_bad_input(tmp_path, body, line, match):
    path = write(tmp_path / "bad.mtx",
                 "%%MatrixMarket matrix coordinate pattern general\n" + body)
    with raises_at(path, line=line, match=match):
        consume(open_source(path))


@pytest.mark.parametrize("banner, match", [
    ("matrix coordinate real skew-symmetric", "unsupported .*skew-symmetric"),
    ("matrix coordinate complex hermitian", "unsupported .*complex"),
    ("matrix coordinate real hermitian", "unsupported .*hermitian"),
    ("matrix array real general", "unsupported .*array"),
    ("vector coordinate real general", "unsupported .*vector"),
])
def test_mtx_unsupported_variants(tmp_path, banner, match):
    path = write(tmp_path / "u.mtx", f"%%MatrixMarket {banner}\n2 2 1\n1 2 1\n")
    with raises_at(path, line=1, match=match):
        open_source(path)


def test_mtx_extension_without_banner_is_an_error(tmp_path):
    path = write(tmp_path / "nobanner.mtx", "2 2 1\n1 2\n")
    with raises_at(path, line=1, match="MatrixMarket"):
        open_source(path)
    with raises_at(path, line=1, match="first line is not a '%%MatrixMarket' banner"):
        open_source(path, format="mtx")


def test_mtx_entry_line_numbers_after_long_comment_header(tmp_path):
    comments = "".join(f"% comment {i}\n" for i in range(50))
    path = write(tmp_path / "c.mtx", "%%MatrixMarket matrix coordinate integer general\n"
                 + comments + "3 3 2\n1 2 1\n2 3 x\n", newline="\r\n")
    with raises_at(path, line=54, match="weight 'x' is not a number"):
        consume(open_source(path))


# =============================================================== DIMACS ==
def test_dimacs_gr(tmp_path):
    path = write(tmp_path / "g.gr", "c 9th DIMACS\nc\np sp 4 3\nc arcs\na 1 2 10\n"
                                    "a 2 3 20\n\na 4 1 5\n")
    source = open_source(path)
    assert (source.format, source.num_vertices, source.id_base) == ("gr", 4, 1)
    assert source.weight_kind == "int" and source.directed is True
    src, dst, weight = read_all(source)
    assert src.tolist() == [0, 1, 3] and dst.tolist() == [1, 2, 0]
    assert weight.tolist() == [10, 20, 5]


def test_dimacs_without_extension_and_isolated_vertices(tmp_path):
    path = write(tmp_path / "roads", "c x\np sp 3 0\n")
    source = open_source(path)
    assert source.format == "gr" and source.num_vertices == 3
    assert read_all(source)[0].size == 0


@pytest.mark.parametrize("body, line, match", [
    ("p sp 3 3\na 1 2 1\na 2 3 1\n", 3, "only 2 entries but the header declares 3"),
    ("p sp 3 1\na 1 2 1\nc\na 2 3 1\n", 4, "more entries than the 1"),
    ("a 1 2 3\np sp 3 1\n", 1, "arc line before"),
    ("p max 3 1\na 1 2 3\n", 1, "unsupported DIMACS problem type 'max'"),
    ("p sp 3 1\na 0 2 3\n", 2, "is 0 but"),
    ("p sp 3 1\na 1 2 1.5\n", 2, "not an integer"),
    ("p sp 3 1\na 1 2\n", 2, "expected 3 columns after 'a'"),
    ("p sp 3 1\nb 1 2 3\n", 2, "expected an 'a' line"),
    ("p sp 3 2\na 1 2 3\np sp 3 1\n", 3, "expected an 'a' line"),
    ("p sp 0 0\n", 1, "empty graph"),
])
def test_dimacs_bad_input(tmp_path, body, line, match):
    path = write(tmp_path / "bad.gr", "c header\n" + body)
    with raises_at(path, line=line + 1, match=match):
        consume(open_source(path))


# ================================================================ binary ==
EDGES = [(0, 1, 5), (0, 2, -1), (2, 1, 7), (3, 0, 2)]


@pytest.mark.parametrize("weighted", [False, True])
def test_gap_directed(tmp_path, weighted):
    path = write_gap(tmp_path / ("g.wsg" if weighted else "g.sg"), 4, EDGES, True, weighted)
    source = open_source(path)
    assert source.format == ("wsg" if weighted else "sg")
    assert source.num_vertices == 4 and source.directed is True
    assert not source.already_symmetric
    src, dst, weight = read_all(source, max_edges=3)
    assert list(zip(src.tolist(), dst.tolist())) == [(u, v) for u, v, _ in EDGES]
    if weighted:
        assert weight.tolist() == [w for *_, w in EDGES]
    else:
        assert weight is None


def test_gap_undirected_stores_both_directions(tmp_path):
    both = [(0, 1, 1), (1, 0, 1), (1, 2, 3), (2, 1, 3)]
    path = write_gap(tmp_path / "u.wsg", 3, both, False, True)
    source = open_source(path)
    assert source.directed is False and source.already_symmetric
    src, dst, weight = read_all(source)
    assert sorted(zip(src.tolist(), dst.tolist(), weight.tolist())) == sorted(both)


@pytest.mark.parametrize("weighted", [False, True])
def test_subway_csr(tmp_path, weighted):
    edges = [(u, v, abs(w)) for u, v, w in EDGES]
    path = write_subway(tmp_path / ("g.bwcsr" if weighted else "g.bcsr"), 5, edges, weighted)
    source = open_source(path)
    assert source.format == ("bwcsr" if weighted else "bcsr")
    assert source.num_vertices == 5 and source.directed is None
    src, dst, weight = read_all(source, max_edges=2)
    assert list(zip(src.tolist(), dst.tolist())) == [(u, v) for u, v, _ in edges]
    assert (weight.tolist() == [w for *_, w in edges]) if weighted else weight is None


@pytest.mark.parametrize("format", ["sg", "wsg", "bcsr", "bwcsr"])
def test_binary_detected_without_extension(tmp_path, format):
    edges = [(u, v, abs(w)) for u, v, w in EDGES]
    path = tmp_path / "graph.bin"
    if format in ("sg", "wsg"):
        write_gap(path, 4, edges, True, format == "wsg")
    else:
        write_subway(path, 4, edges, format == "bwcsr")
    source = open_source(path)
    assert source.format == format
    assert read_all(source)[1].tolist() == [v for _, v, _ in edges]


@pytest.mark.parametrize("format", ["sg", "wsg", "bcsr", "bwcsr"])
def test_binary_truncated_names_byte_offset(tmp_path, format):
    full = tmp_path / f"full.{format}"
    if format in ("sg", "wsg"):
        write_gap(full, 4, EDGES, True, format == "wsg")
    else:
        write_subway(full, 4, [(u, v, abs(w)) for u, v, w in EDGES], format == "bwcsr")
    data = full.read_bytes()
    for keep in (len(data) - 1, 12, 3):
        path = tmp_path / f"cut{keep}.{format}"
        path.write_bytes(data[:keep])
        with raises_at(path, offset=keep, match="truncated"):
            open_source(path)
    trailing = tmp_path / f"long.{format}"
    trailing.write_bytes(data + b"\0\0")
    with raises_at(trailing, offset=len(data), match="trailing bytes"):
        open_source(trailing)


def test_binary_bad_contents_name_byte_offset(tmp_path):
    path = write_gap(tmp_path / "bad.sg", 3, [(0, 1), (1, 2)], True, False)
    data = bytearray(path.read_bytes())
    # out neighbours start at 17 + 8 * 4 = 49; make the second one 9 (>= n)
    data[53:57] = struct.pack("<i", 9)
    path.write_bytes(bytes(data))
    with raises_at(path, offset=53, match="neighbour id 9"):
        consume(open_source(path))
    data[53:57] = struct.pack("<i", 2)
    data[25:33] = struct.pack("<q", 5)       # offsets[1] = 5 > num_edges
    path.write_bytes(bytes(data))
    with raises_at(path, offset=25, match="invalid row offset"):
        consume(open_source(path))
    data[0] = 7
    path.write_bytes(bytes(data))
    with raises_at(path, offset=0, match="'directed' flag"):
        open_source(path)


def test_binary_ambiguous_layout(tmp_path):
    # an undirected .sg and an undirected .wsg without edges have the same size
    path = write_gap(tmp_path / "isolated.bin", 2, [], False, False)
    with raises_at(path, offset=0, match="ambiguous.*sg, wsg"):
        open_source(path)
    source = open_source(path, format="sg")
    assert source.num_vertices == 2 and read_all(source)[0].size == 0


def test_binary_unknown_layout(tmp_path):
    path = tmp_path / "noise.bin"
    path.write_bytes(bytes(range(256)) * 3)
    with raises_at(path, offset=0, match="unknown format"):
        open_source(path)


def test_binary_explicit_format_on_wrong_file(tmp_path):
    path = write(tmp_path / "g.el", "0 1\n1 2\n")
    with raises_at(path, match="sg"):
        open_source(path, format="sg")


# =========================================================== compression ==
TEXT_CASES = {
    "g.el": ("0 1\n1 2\n2 0\n", "el", [0, 1, 2]),
    "g.wel": ("0 1 1.5\n1 2 2\n2 0 3\n", "wel", [0, 1, 2]),
    "g.txt": ("# snap\n5\t6\n6\t7\n7\t5\n", "snap", [5, 6, 7]),
    "g.mtx": ("%%MatrixMarket matrix coordinate real general\n3 3 3\n1 2 1\n2 3 2\n3 1 3\n",
              "mtx", [0, 1, 2]),
    "g.gr": ("p sp 3 3\na 1 2 1\na 2 3 2\na 3 1 3\n", "gr", [0, 1, 2]),
}


@pytest.mark.parametrize("kind", ["gzip", "bz2", "xz"])
@pytest.mark.parametrize("filename", sorted(TEXT_CASES))
def test_compressed_text(tmp_path, kind, filename):
    text, format, expected_src = TEXT_CASES[filename]
    plain = write(tmp_path / filename, text)
    packed = compress(plain, kind)
    source = open_source(packed)
    assert source.format == format
    assert read_all(source)[0].tolist() == expected_src
    assert source.identity()["compression"] == kind


def test_compression_detected_by_magic_not_name(tmp_path):
    plain = write(tmp_path / "g.el", "0 1\n1 2\n")
    disguised = compress(plain, "gzip", name="graph.el")  # gzip without .gz
    plain.unlink()
    source = open_source(disguised)
    assert source.format == "el" and read_all(source)[1].tolist() == [1, 2]
    not_gzip = write(tmp_path / "plain.el.gz", "0 1\n")   # .gz name, plain text
    assert read_all(open_source(not_gzip))[1].tolist() == [1]


def test_compressed_binary(tmp_path):
    plain = write_gap(tmp_path / "g.wsg", 4, EDGES, True, True)
    for kind in ("gzip", "xz"):
        source = open_source(compress(plain, kind))
        assert source.format == "wsg"
        assert read_all(source)[2].tolist() == [w for *_, w in EDGES]
    truncated = tmp_path / "t.wsg"
    truncated.write_bytes(plain.read_bytes()[:60])
    with raises_at(compress(truncated, "gzip"), offset=60, match="truncated"):
        open_source(tmp_path / "t.wsg.gz")


def test_corrupt_gzip_is_a_graph_input_error(tmp_path):
    packed = compress(write(tmp_path / "g.el", "0 1\n" * 5000), "gzip")
    data = packed.read_bytes()
    packed.write_bytes(data[: len(data) // 2])
    with raises_at(packed, match="gzip"):
        consume(open_source(packed))


# ============================================================= detection ==
def test_detection_without_extension(tmp_path):
    assert open_source(write(tmp_path / "plain", "0 1\n1 2\n")).format == "el"
    assert open_source(write(tmp_path / "weighted", "0 1 2\n")).format == "wel"
    assert open_source(write(tmp_path / "mm", "%%MatrixMarket matrix coordinate "
                                             "pattern general\n2 2 1\n1 2\n")).format == "mtx"


def test_explicit_format_overrides_detection(tmp_path):
    path = write(tmp_path / "g.txt", "# comments\n1 2\n2 3\n")
    assert open_source(path).format == "snap"
    source = open_source(path, format="el")
    assert source.format == "el" and read_all(source)[0].tolist() == [1, 2]
    with raises_at(path, line=2, match="expected 3 columns"):
        consume(open_source(path, format="wel"))


def test_weight_kind_argument(tmp_path):
    path = write(tmp_path / "g.wel", "0 1 2\n")
    assert open_source(path, weight_kind="real").weight_kind == "real"
    with pytest.raises(ConfigError, match="weight_kind"):
        open_source(path, weight_kind="float")
    with pytest.raises(ConfigError, match="weight_kind is only meaningful"):
        open_source(write(tmp_path / "g.el", "0 1\n"), weight_kind="int")


def test_unknown_or_undetectable_format(tmp_path):
    path = write(tmp_path / "g.el", "0 1\n")
    with raises_at(path, match="unknown format 'csv'"):
        open_source(path, format="csv")
    four = write(tmp_path / "four", "# x\n0 1 2 3\n")
    with raises_at(four, line=2, match="cannot detect the format"):
        open_source(four)


def test_missing_file_and_directory(tmp_path):
    with raises_at(tmp_path / "nope.el", match="no such file"):
        open_source(tmp_path / "nope.el")
    with raises_at(tmp_path, match="not a regular file"):
        open_source(tmp_path)


def test_file_identity(tmp_path):
    path = write(tmp_path / "g.el", "0 1\n")
    source = open_source(path)
    identity = source.identity()
    assert identity["path"] == str(path.resolve()) and identity["format"] == "el"
    assert identity["size"] == 4 and identity["mtime_ns"] > 0
    write(path, "0 1\n1 2\n")
    assert open_source(path).identity() != identity


# =========================================================== bad input ==
@pytest.mark.parametrize("line, match", [
    ("7", "expected 2 columns but the line ends after 1"),
    ("7 8 9", "expected 2 columns but found more"),
    ("1.5 2", "source id '1.5' is not an integer"),
    ("1 2.0", "destination id '2.0' is not an integer"),
    ("abc 2", "source id 'abc' is not a non-negative integer"),
    ("1 2x", "destination id '2x' is not a non-negative integer"),
    ("-1 2", "source id '-1' is negative"),
    ("1 -2", "destination id '-2' is negative"),
    ("99999999999999999999 1", "does not fit in 64 bits"),
])
def test_edge_list_bad_lines(tmp_path, line, match):
    path = write(tmp_path / "bad.el", f"# head\n0 1\n\n{line}\n4 5\n", newline="\r\n")
    with raises_at(path, line=4, match=match):
        consume(open_source(path))


@pytest.mark.parametrize("token", ["nan", "NaN", "inf", "-inf", "Infinity", "1e999"])
def test_non_finite_weights(tmp_path, token):
    path = write(tmp_path / "bad.wel", f"0 1 0.5\n1 2 {token}\n")
    with raises_at(path, line=2, match="not finite"):
        consume(open_source(path))


@pytest.mark.parametrize("token", ["abc", "1.2.3", "--1", "1e", "0x10"])
def test_garbage_weights(tmp_path, token):
    path = write(tmp_path / "bad.wel", f"0 1 0.5\n1 2 {token}\n")
    with raises_at(path, line=2, match="weight"):
        consume(open_source(path))


def test_empty_edge_lists(tmp_path):
    for text in ("", "# only comments\n\n", "\n\n\n"):
        path = write(tmp_path / "empty.el", text)
        with raises_at(path, match="empty graph"):
            consume(open_source(path))
    # a comment header longer than the detection sample: found while streaming
    long_header = write(tmp_path / "long.el", "#" * 200 + "\n" + "# x\n" * 30000)
    with raises_at(long_header, line=30001, match="empty graph"):
        consume(open_source(long_header))


@pytest.mark.parametrize("workers", [1, 2])
def test_line_numbers_across_blocks_pieces_and_chunks(tmp_path, monkeypatch, workers):
    """Tiny blocks and pieces force every boundary; CRLF and comments interleave."""
    monkeypatch.setattr(config, "TEXT_BLOCK_BYTES", 64)
    monkeypatch.setattr(config, "PIECE_BYTES", 16)
    monkeypatch.setattr(config, "PARSE_WORKERS", workers)
    rng = np.random.default_rng(workers)
    lines, expected = [], []
    for i in range(3000):
        roll = rng.random()
        if roll < 0.1:
            lines.append("# comment " + "x" * int(rng.integers(0, 100)))
        elif roll < 0.15:
            lines.append("")
        else:
            u, v, w = (int(x) for x in rng.integers(0, 10 ** 6, 3))
            lines.append(f"{u}\t{v} {w}")
            expected.append((u, v, w))
    good = write(tmp_path / "good.wel", "\n".join(lines) + "\n", newline="\r\n")
    src, dst, weight = read_all(open_source(good), max_edges=37)
    assert list(zip(src.tolist(), dst.tolist(), weight.tolist())) == expected
    for bad_line in (1, 2, 1234, 2999, 3000):
        broken = list(lines)
        broken[bad_line - 1] = "12 oops 3"
        path = write(tmp_path / f"bad{bad_line}.wel", "\n".join(broken) + "\n",
                     newline="\r\n")
        with raises_at(path, line=bad_line, match="'oops'"):
            consume(open_source(path, weight_kind="int"), max_edges=37)


def test_huge_max_edges_reserves_no_memory_ahead(tmp_path, monkeypatch):
    """Chunks start at one block's worth of records and double up to max_edges."""
    monkeypatch.setattr(config, "TEXT_BLOCK_BYTES", 64)
    monkeypatch.setattr(config, "PIECE_BYTES", 32)
    path = write(tmp_path / "g.el", "".join(f"{i} {i + 1}\n" for i in range(5000)))
    chunks = list(open_source(path).chunks(1 << 40))
    assert len(chunks) == 1 and chunks[0].src.tolist() == list(range(5000))


def test_utf8_byte_order_mark_is_skipped(tmp_path):
    path = tmp_path / "bom.el"
    path.write_bytes(b"\xef\xbb\xbf0 1\n1 2\nx 3\n")
    with raises_at(path, line=3, match="'x'"):
        consume(open_source(path))
    path.write_bytes(b"\xef\xbb\xbf%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n")
    assert read_all(open_source(path))[1].tolist() == [1]


def test_long_line_grows_the_block(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "TEXT_BLOCK_BYTES", 16)
    path = write(tmp_path / "g.el", "0 1\n" + " " * 100 + "2 3" + " " * 100 + "\n4 5\n")
    src, dst, _ = read_all(open_source(path))
    assert src.tolist() == [0, 2, 4] and dst.tolist() == [1, 3, 5]


# =========================================================== in memory ==
def test_from_arrays():
    source = from_arrays(np.array([0, 1, 2], np.int32), [1, 2, 0],
                         weight=np.array([1.5, 2, 3], np.float32), num_vertices=5)
    assert (source.format, source.name, source.num_vertices) == ("arrays", "<arrays>", 5)
    assert source.weight_kind == "real"
    src, dst, weight = read_all(source, max_edges=2)
    assert src.tolist() == [0, 1, 2] and dst.tolist() == [1, 2, 0]
    assert weight.tolist() == [1.5, 2.0, 3.0]
    unweighted = from_arrays(np.arange(4), np.arange(4)[::-1], name="mine")
    assert unweighted.weight_kind is None and unweighted.num_vertices is None
    assert unweighted.name == "mine"
    assert from_arrays([0], [1], weight=np.array([3], np.uint8)).weight_kind == "int"
    isolated = from_arrays([], [], num_vertices=3)
    assert read_all(isolated)[0].size == 0


def test_from_arrays_chunks_do_not_copy_int32_or_int64():
    for dtype in (np.int32, np.int64):
        src = np.array([0, 1], dtype)
        chunk = next(iter(from_arrays(src, np.array([1, 0], dtype)).chunks(10)))
        assert np.shares_memory(chunk.src, src)
    narrow = np.array([0, 1], np.uint16)
    chunk = next(iter(from_arrays(narrow, narrow).chunks(10)))
    assert chunk.src.dtype == np.int64 and not np.shares_memory(chunk.src, narrow)


def test_from_arrays_identity_tracks_contents():
    src, dst = np.arange(1000), np.arange(1000)[::-1].copy()
    first = from_arrays(src, dst).identity()
    assert first == from_arrays(src.copy(), dst.copy()).identity()
    dst[500] = 3
    assert from_arrays(src, dst).identity() != first
    assert from_arrays(src, dst, weight=np.ones(1000)).identity() != first


@pytest.mark.parametrize("kwargs, match", [
    (dict(src=[0, 1], dst=[1]), "src and dst have different lengths"),
    (dict(src=[0.0, 1.0], dst=[1, 0]), "src must have an integer dtype, got float64"),
    (dict(src=[0, 1], dst=[True, False]), "dst must have an integer dtype"),
    (dict(src=[0, -1], dst=[1, 0]), r"src contains a negative id \(-1 at index 1\)"),
    (dict(src=[0, 1], dst=[1, 5], num_vertices=5), "dst contains id 5 at index 1"),
    (dict(src=[[0, 1]], dst=[[1, 0]]), "src must be one-dimensional"),
    (dict(src=[0, 1], dst=[1, 0], weight=[1.0, np.nan]), r"non-finite value \(nan at index 1\)"),
    (dict(src=[0, 1], dst=[1, 0], weight=[np.inf, 1.0]), "non-finite"),
    (dict(src=[0, 1], dst=[1, 0], weight=[1.0]), "weight has length 1 but src has 2"),
    (dict(src=[0, 1], dst=[1, 0], weight=["a", "b"]), "weight must have an integer or floating"),
    (dict(src=[0], dst=[1], num_vertices=-1), "num_vertices must be >= 0"),
    (dict(src=[0], dst=[1], num_vertices=2.0), "num_vertices must be an integer"),
    (dict(src=np.array([2 ** 63], np.uint64), dst=np.array([0], np.uint64)),
     "does not fit in int64"),
    (dict(src=[], dst=[]), "empty graph"),
])
def test_from_arrays_validation(kwargs, match):
    with pytest.raises(GraphInputError, match=match) as info:
        from_arrays(**kwargs, name="<test arrays>")
    assert "<test arrays>" in str(info.value)


@pytest.mark.parametrize("kind", ["csr_matrix", "coo_array", "csc_array", "lil_matrix"])
def test_from_scipy(kind):
    dense = np.array([[0, 2.5, 0], [0, 0, 1], [4, 0, 0]])
    matrix = getattr(scipy.sparse, kind)(dense)
    source = from_scipy(matrix)
    assert (source.format, source.name, source.num_vertices) == ("scipy", "<scipy>", 3)
    assert source.weight_kind == "real"
    src, dst, weight = read_all(source)
    assert sorted(zip(src.tolist(), dst.tolist(), weight.tolist())) == \
        [(0, 1, 2.5), (1, 2, 1.0), (2, 0, 4.0)]


def test_from_scipy_pattern_integer_and_explicit_zeros():
    pattern = from_scipy(scipy.sparse.csr_matrix(np.eye(3, dtype=bool)))
    assert pattern.weight_kind is None
    assert read_all(pattern)[0].tolist() == [0, 1, 2]
    integer = scipy.sparse.coo_matrix(([0, 7], ([0, 1], [1, 0])), shape=(4, 4), dtype=np.int32)
    source = from_scipy(integer, name="ints")
    assert source.weight_kind == "int" and source.name == "ints" and source.num_vertices == 4
    assert sorted(read_all(source)[2].tolist()) == [0, 7]   # explicit zero kept


@pytest.mark.parametrize("matrix, match", [
    (np.eye(3), "must be a scipy.sparse matrix or array, got ndarray"),
    (scipy.sparse.csr_matrix((3, 4)), r"must be square .* \(3, 4\)"),
    (scipy.sparse.csr_matrix(np.array([[0, 1j], [0, 0]])), "complex"),
    (scipy.sparse.csr_matrix(np.array([[0, np.nan], [0, 0]])),
     "matrix.data contains a non-finite"),
    (scipy.sparse.csr_matrix((0, 0)), "empty graph"),
])
def test_from_scipy_validation(matrix, match):
    with pytest.raises(GraphInputError, match=match) as info:
        from_scipy(matrix, name="<adjacency>")
    assert "<adjacency>" in str(info.value)


# ========================================================== SNAP files ==
SNAP_FILES = ["web-NotreDame.txt.gz", "soc-Slashdot0811.txt.gz", "ca-HepPh.txt.gz"]


def snap_header_counts(path: Path) -> tuple[int, int]:
    with gzip.open(path, "rt") as handle:
        for line in handle:
            match = re.search(r"Nodes:\s*(\d+)\s+Edges:\s*(\d+)", line)
            if match:
                return int(match.group(1)), int(match.group(2))
            if not line.startswith("#"):
                break
    raise AssertionError(f"no 'Nodes: Edges:' header in {path}")


def independent_parse(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The edge list by Python string splitting, not garaphpy's parser."""
    with gzip.open(path, "rb") as handle:
        body = b"".join(line for line in handle if not line.startswith(b"#"))
    pairs = np.array(body.split()).astype(np.int64).reshape(-1, 2)
    return pairs[:, 0], pairs[:, 1]


@pytest.mark.parametrize("filename", SNAP_FILES)
def test_snap_data_files(filename):
    path = DATA_DIR / filename
    if not path.exists():
        pytest.skip(f"{path} is not available")
    source = open_source(path)
    assert source.format == "snap" and source.num_vertices is None
    src, dst, _ = read_all(source, max_edges=1 << 19)
    nodes, edges = snap_header_counts(path)
    assert src.size == edges
    assert np.unique(np.concatenate([src, dst])).size == nodes
    reference_src, reference_dst = independent_parse(path)
    assert np.array_equal(src, reference_src) and np.array_equal(dst, reference_dst)
    self_loops = int(np.count_nonzero(reference_src == reference_dst))
    assert int(np.count_nonzero(src == dst)) == self_loops
    assert self_loops == {"web-NotreDame.txt.gz": 27455, "soc-Slashdot0811.txt.gz": 77307,
                          "ca-HepPh.txt.gz": 32}[filename]
    if filename == "ca-HepPh.txt.gz":
        # The header's first line says "each unordered pair of nodes is saved
        # once", but the file stores every collaboration in both directions:
        # "Edges: 237010" counts lines = 2 * 118,489 distinct non-loop pairs
        # + 32 self-loops (stored once).  SNAP's web page lists 118,521 edges,
        # which is the number of distinct unordered pairs, loops included.
        forward = set(zip(src.tolist(), dst.tolist()))
        assert all((v, u) in forward for u, v in forward)
        low, high = np.minimum(src, dst), np.maximum(src, dst)
        pairs = np.unique(low * (1 << 32) + high)
        assert pairs.size == 118521
        assert 2 * (pairs.size - self_loops) + self_loops == edges


# ============================================ decimal weights from text files ==
DECIMAL_EDGES = [(0, 1, "1.000000001"), (1, 2, "0.300000007"), (0, 2, "1.300000009"),
                 (2, 3, "2.0000000001"), (1, 3, "2.3000000004")]


def _decimal_text_files(tmp_path):
    """The same decimal-weighted graph as .wel, 3-column .el and .txt, and real .mtx."""
    lines = "".join(f"{u} {v} {w}\n" for u, v, w in DECIMAL_EDGES)
    mtx = ("%%MatrixMarket matrix coordinate real general\n4 4 5\n"
           + "".join(f"{u + 1} {v + 1} {w}\n" for u, v, w in DECIMAL_EDGES))
    return [write(tmp_path / "g.wel", lines), write(tmp_path / "g.el", lines),
            write(tmp_path / "g.txt", "# decimal\n" + lines), write(tmp_path / "g.mtx", mtx)]


def _dijkstra(weights_as):
    matrix = scipy.sparse.coo_matrix(
        ([weights_as(w) for *_, w in DECIMAL_EDGES],
         ([u for u, *_ in DECIMAL_EDGES], [v for _, v, _ in DECIMAL_EDGES])), shape=(4, 4))
    return dijkstra(matrix.tocsr(), indices=0)


def test_decimal_text_weights_are_kept_in_float64(tmp_path):
    import garaphpy

    expected = _dijkstra(float)
    for path in _decimal_text_files(tmp_path):
        graph = garaphpy.Graph.load(path, store=tmp_path / f"{path.name}.store")
        assert graph.store.weight_dtype == np.float64, path
        first = 1 if path.suffix == ".mtx" else 0     # Matrix Market ids are 1-based
        result = garaphpy.run(graph, "sssp", sources=[first], mode="cpu")
        ids = graph.original_ids() - first
        np.testing.assert_array_equal(result.values, expected[ids], err_msg=str(path))


def test_float32_weights_from_text_when_asked_say_what_was_rounded(tmp_path):
    import garaphpy
    from garaphpy.storage.edges import WeightsRoundedWarning

    path = _decimal_text_files(tmp_path)[0]
    with pytest.warns(WeightsRoundedWarning, match=r"rounded 5 of 5 weights.*1\.000000001"):
        graph = garaphpy.Graph.load(path, store=tmp_path / "narrow", weight_dtype="float32")
    assert graph.store.weight_dtype == np.float32
    result = garaphpy.run(graph, "sssp", sources=[0], mode="cpu")
    np.testing.assert_allclose(result.values, _dijkstra(np.float32)[graph.original_ids()],
                               rtol=1e-6)


# ===================================================== SciPy's duplicates ==
def _with_duplicates(kind):
    """(0, 1) stored as 5.0 and 1.0, (1, 2) as 2 and 3 (int8: 100 and 100), in ``kind``."""
    row, col = np.array([0, 0, 1, 1, 2]), np.array([1, 1, 2, 2, 0])
    if kind == "int8":
        return scipy.sparse.coo_matrix((np.array([5, 1, 100, 100, 7], np.int8), (row, col)),
                                       shape=(3, 3))
    data = np.array([5.0, 1.0, 2.0, 3.0, 7.0])
    if kind in ("csr_matrix", "csc_array"):   # non-canonical: duplicates inside a row
        matrix = scipy.sparse.csr_matrix((data, col, np.array([0, 2, 4, 5])), shape=(3, 3))
        return matrix if kind == "csr_matrix" else scipy.sparse.csc_array(
            (data[[4, 0, 1, 2, 3]], row[[4, 0, 1, 2, 3]], np.array([0, 1, 3, 5])), shape=(3, 3))
    return getattr(scipy.sparse, kind)((data, (row, col)), shape=(3, 3))


@pytest.mark.parametrize("kind", ["coo_matrix", "coo_array", "csr_matrix", "csc_array", "int8"])
def test_from_scipy_sums_duplicate_entries_as_scipy_does(kind):
    matrix = _with_duplicates(kind)
    before = matrix.copy()
    src, dst, weight = read_all(from_scipy(matrix))
    summed = scipy.sparse.coo_matrix(
        (np.asarray(matrix.tocoo().data, np.int64 if kind == "int8" else np.float64),
         (matrix.tocoo().row, matrix.tocoo().col)), shape=(3, 3)).toarray()   # SciPy sums
    assert sorted(zip(src.tolist(), dst.tolist(), weight.tolist())) == \
        [(int(u), int(v), summed[u, v]) for u, v in zip(*np.nonzero(summed))]
    # the caller's matrix is left as it was
    assert (matrix != before).nnz == 0 and matrix.nnz == before.nnz == 5


def test_sssp_on_a_scipy_matrix_with_duplicates_follows_scipy():
    import garaphpy

    matrix = scipy.sparse.coo_matrix(([5.0, 1.0], ([0, 0], [1, 1])), shape=(2, 2))
    graph = garaphpy.Graph.from_scipy(matrix)
    result = garaphpy.run(graph, "sssp", sources=[0], mode="cpu")
    np.testing.assert_array_equal(result.values, dijkstra(matrix.tocsr(), indices=0))
    assert result.values[1] == 6.0


# ============================================== long mantissas, correctly rounded ==
def _near_halfway(rng, digits: int, count: int) -> list[str]:
    """Decimal strings of ``digits`` significant digits within a few units of the
    last digit of a point halfway between two adjacent doubles."""
    from decimal import Decimal, getcontext

    getcontext().prec = 60
    tokens = []
    for _ in range(count):
        x = float(rng.uniform(0.5, 2.0) * 10.0 ** int(rng.integers(-30, 30)))
        halfway = (Decimal(x) + Decimal(np.nextafter(x, np.inf))) / 2
        text = f"{halfway:.{digits - 1}e}"
        mantissa, exponent = text.split("e")
        last = int(mantissa[-1]) + int(rng.integers(-1, 2))
        if 0 <= last <= 9:
            mantissa = mantissa[:-1] + str(last)
        sign = "-" if rng.random() < 0.25 else ""
        tokens.append(f"{sign}{mantissa}e{exponent}")
    return tokens


@pytest.mark.parametrize("digits", [17, 18, 19, 20, 25, 40])
def test_long_mantissas_are_correctly_rounded(tmp_path, digits):
    rng = np.random.default_rng(digits)
    tokens = _near_halfway(rng, digits, 400)
    tokens += ["0." + "0" * 30 + "1" * digits, "1" * digits + ".5", "1.0" + "0" * digits]
    lines = "".join(f"{i % 7} {i % 5} {t}\n" for i, t in enumerate(tokens))
    path = write(tmp_path / "g.wel", "# comment\n\n" + lines.replace("\n", "\n% c\n", 3))
    source = open_source(path)
    assert source.weight_kind == "real"
    for max_edges in (1 << 20, 33):
        _, _, weight = read_all(source, max_edges)
        np.testing.assert_array_equal(weight, np.array([float(t) for t in tokens]))


def test_a_long_literal_that_overflows_names_its_line(tmp_path):
    largest = "1.797693134862315708e308"         # rounds down to the largest double
    beyond = "1.797693134862315808e308"          # past the halfway point: infinity
    assert float(largest) == np.finfo(np.float64).max and float(beyond) == np.inf
    path = write(tmp_path / "g.wel", f"0 1 1.5\n1 2 {largest}\n2 3 {beyond}\n")
    with raises_at(path, line=3, match="out of range"):
        consume(open_source(path))
    path = write(tmp_path / "h.wel", f"0 1 1.5\n1 2 {largest}\n")
    assert read_all(open_source(path))[2].tolist() == [1.5, float(largest)]


@pytest.mark.parametrize("max_edges", [1 << 20, 3])
@pytest.mark.parametrize("workers", [1, 3])
def test_wel_probed_integer_widens_to_real_on_a_later_decimal(tmp_path, monkeypatch,
                                                              max_edges, workers):
    monkeypatch.setattr(config, "WEIGHT_PROBE_BYTES", 16)
    monkeypatch.setattr(config, "PARSE_WORKERS", workers)
    monkeypatch.setattr(config, "PIECE_BYTES", 24)           # many pieces in flight
    weights = [str(i) for i in range(10)] + ["2.5", "7", "-0.125", "12"]
    text = "".join(f"{i} {i + 1} {w}\n" for i, w in enumerate(weights))
    path = write(tmp_path / "g.wel", text)
    source = open_source(path)
    key = source.identity()
    assert source.weight_kind == "int"
    for _ in range(2):                                       # the second pass reads reals
        chunks = list(source.chunks(max_edges))
        assert source.weight_kind == "real" and source.identity() == key
        weight = np.concatenate([c.weight.astype(np.float64) for c in chunks])
        assert weight.tolist() == [float(w) for w in weights]
        assert np.concatenate([c.src for c in chunks]).tolist() == list(range(len(weights)))
    assert all(c.weight.dtype == np.float64 for c in source.chunks(max_edges))


def test_cli_reads_a_wel_whose_decimals_start_after_the_probe(tmp_path, monkeypatch):
    from garaphpy.console import main

    monkeypatch.setattr(config, "WEIGHT_PROBE_BYTES", 64)
    rows = config.WEIGHT_PROBE_BYTES // 10 + 10             # integer weights beyond the probe
    lines = [f"{i} {i + 1} 1" for i in range(rows)] + [f"{rows} {rows + 1} 2.5"]
    path = write(tmp_path / "g.wel", "\n".join(lines) + "\n")
    out = tmp_path / "d.txt"
    assert main(["sssp", str(path), "--source", str(rows - 1), "--mode", "cpu", "--store",
                 str(tmp_path / "st"), "--output", str(out), "--quiet"]) == 0
    distances = dict(line.split() for line in out.read_text().splitlines()
                     if not line.startswith("#"))
    assert float(distances[str(rows + 1)]) == 3.5 and float(distances[str(rows)]) == 1.0


def test_a_widened_wel_builds_the_same_store_in_memory_and_out_of_core(tmp_path, monkeypatch):
    from garaphpy.storage.builder import BuildOptions, build_store

    monkeypatch.setattr(config, "WEIGHT_PROBE_BYTES", 64)
    monkeypatch.setattr(config, "READ_CHUNK_EDGES", 500)
    rng = np.random.default_rng(4)
    src, dst = rng.integers(0, 700, 6000), rng.integers(0, 700, 6000)
    weights = [str(int(w)) for w in rng.integers(1, 9, 6000)]
    weights[3000] = "2.5"
    path = write(tmp_path / "g.wel", "".join(f"{u} {v} {w}\n" for u, v, w in
                                             zip(src, dst, weights)))
    stores = [build_store(open_source(path), tmp_path / name,
                          BuildOptions(duplicates="keep", **budget), progress=False)
              for name, budget in (("m", {}), ("o", {"memory_budget": 60_000}))]
    assert [s.manifest["built_in_memory"] for s in stores] == [True, False]
    expected = sorted(zip(src.tolist(), dst.tolist(), map(float, weights)))
    for store in stores:
        assert store.weight_dtype == np.float64
        in_offsets, sources, stored = store.csc()
        ids = store.original_ids()
        heads = np.repeat(np.arange(store.num_vertices), np.diff(in_offsets))
        assert sorted(zip(ids[sources].tolist(), ids[heads].tolist(),
                          stored.tolist())) == expected
