"""Synthetic graph generators: seeded RMAT (Kronecker) graphs and 2-D grids.

Both generators are :class:`~garaphpy.storage.edges.EdgeSource` objects, so
the store builder ingests them exactly like a file (``input = "rmat:22"``),
and :func:`parse_generator_spec` turns such a string into a source.

RMAT
    The recursive-matrix model of Chakrabarti, Zhan and Faloutsos (SDM'04)
    with the initiator probabilities of the Graph500 benchmark
    (a, b, c, d) = (0.57, 0.19, 0.19, 0.05), as also used by GAPBS
    (``src/generator.h``, ``-g SCALE``).  A graph of scale ``s`` has ``2^s``
    vertices and ``edge_factor * 2^s`` directed edges; at each of the ``s``
    levels an edge descends into quadrant a (00), b (01: destination bit set),
    c (10: source bit set) or d (11), the first level fixing the most
    significant bit.  As in Graph500 and GAPBS, the vertex labels are then
    scrambled by a seeded bijection so that high-degree vertices are not all
    at small ids; the bijection is the Graph500 reference ``scramble``
    (add, multiply by an odd key, bit-reverse the low ``s`` bits, twice),
    which needs no permutation array.  Self loops and duplicate edges are
    kept, as the Graph500 generator emits them; the builder's cleaning step
    removes them if asked to.

Grid
    A ``width`` x ``height`` 4-neighbour lattice, a stand-in for road networks
    (tiny degrees, diameter ``width + height - 2``).  Vertex ``(x, y)`` has id
    ``y * width + x``; every undirected edge gets one uniform integer weight
    used for both of its directions.

Determinism
    Every random number is a counter-based hash (the splitmix64 finaliser of
    ``key(seed, stream) + counter * golden_gamma``) of the edge index and the
    level, never the state of a sequential generator.  Edge ``i`` is therefore
    the same whatever the chunk size, the chunk order or the number of numba
    threads, and any chunk can be computed on its own.
"""

from __future__ import annotations

import math
import re
from typing import Iterator

import numpy as np
from numba import njit, prange, uint64

from . import _numba_setup  # noqa: F401  (threading layer first)

from garaphpy import config
from garaphpy.errors import ConfigError
from garaphpy.storage.edges import EdgeChunk, EdgeSource

__all__ = [
    "MAX_VERTICES_LOG2",
    "RmatSource",
    "GridSource",
    "rmat",
    "grid",
    "parse_generator_spec",
]

#: Generated graphs have at most 2**this vertices (rmat:36, or a grid of as
#: many cells): far beyond what one node can hold, small enough to reject
#: typos such as ``rmat:40`` before they run for days.
MAX_VERTICES_LOG2 = 36

#: Counters (edge index x hashes per edge) must stay far below 2**64.
_MAX_EDGES_LOG2 = 48

#: Bumped whenever the generated edges change for the same parameters, so
#: stores built by an older generator are rebuilt (it is part of identity()).
_RMAT_ALGORITHM = 1
_GRID_ALGORITHM = 1

#: Hash streams (the ``stream`` argument of :func:`_stream_key`).
_STREAM_LEVELS, _STREAM_WEIGHTS, _STREAM_SCRAMBLE0, _STREAM_SCRAMBLE1 = 1, 2, 3, 4
_STREAM_GRID_WEIGHTS = 5

# ---------------------------------------------------------------- hashing --
_GOLDEN_GAMMA = uint64(0x9E3779B97F4A7C15)
_MIX1 = uint64(0xBF58476D1CE4E5B9)
_MIX2 = uint64(0x94D049BB133111EB)
_LOW32 = uint64(0xFFFFFFFF)

#: RMAT edges generated together by one thread (the vectorised inner loop).
_RMAT_BLOCK = 256


@njit(inline="always", cache=True)
def _mix64(z):
    """splitmix64 finaliser (Steele, Lea, Flood 2014): a 64-bit bijection."""
    z = (z ^ (z >> uint64(30))) * _MIX1
    z = (z ^ (z >> uint64(27))) * _MIX2
    return z ^ (z >> uint64(31))


@njit(inline="always", cache=True)
def _hash(key, counter):
    """Uniform 64-bit value number ``counter`` of the stream ``key``."""
    return _mix64(key + counter * _GOLDEN_GAMMA)


def _stream_key(seed: int, stream: int) -> np.uint64:
    """Key of one independent hash stream derived from a seed (host side)."""
    mask = (1 << 64) - 1

    def mix(z: int) -> int:
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return z ^ (z >> 31)

    return np.uint64(mix((mix(seed & mask) + stream * 0x9E3779B97F4A7C15) & mask))


@njit(inline="always", cache=True)
def _bit_reverse(v):
    """Reverse the 64 bits of ``v``."""
    v = ((v >> uint64(1)) & uint64(0x5555555555555555)) | ((v & uint64(0x5555555555555555)) << uint64(1))
    v = ((v >> uint64(2)) & uint64(0x3333333333333333)) | ((v & uint64(0x3333333333333333)) << uint64(2))
    v = ((v >> uint64(4)) & uint64(0x0F0F0F0F0F0F0F0F)) | ((v & uint64(0x0F0F0F0F0F0F0F0F)) << uint64(4))
    v = ((v >> uint64(8)) & uint64(0x00FF00FF00FF00FF)) | ((v & uint64(0x00FF00FF00FF00FF)) << uint64(8))
    v = ((v >> uint64(16)) & uint64(0x0000FFFF0000FFFF)) | ((v & uint64(0x0000FFFF0000FFFF)) << uint64(16))
    return (v >> uint64(32)) | (v << uint64(32))


@njit(inline="always", cache=True)
def _scramble(v, shift, val0, val1):
    """Graph500's vertex-label bijection on ``64 - shift`` bits.

    Multiplying by an odd number is a bijection on the low bits, and the bit
    reversal moves the well-mixed high bits of the window to the bottom.
    """
    v = v + val0 + val1
    v = v * (val0 | uint64(0x4519840211493211))
    v = _bit_reverse(v) >> shift
    v = v * (val1 | uint64(0x3050852102C843A5))
    return _bit_reverse(v) >> shift


# ----------------------------------------------------------------- kernels --
@njit(cache=True)
def _rmat_levels(first, count, scale, level_key, t_a, t_ab, t_abc, x, u, v):
    """Unscrambled endpoints ``u[k], v[k]`` of RMAT edges ``first + k``.

    Levels ``2j`` and ``2j + 1`` of edge ``e`` use the high and the low 32
    bits of hash number ``e * ceil(scale / 2) + j`` of ``level_key``, compared
    with the cumulative quadrant probabilities ``t_*`` scaled to 2**32.  The
    loop over edges is innermost and branch-free so that LLVM vectorises it
    (about twice as fast as one edge at a time).
    """
    pairs = (scale + 1) // 2
    # hash input of pair 0 of each edge, kept in memory so that LLVM cannot
    # fold the counter arithmetic back into two more multiplies per hash
    for k in range(count):
        x[k] = level_key + (uint64(first + k) * uint64(pairs)) * _GOLDEN_GAMMA
        u[k] = 0
        v[k] = 0
    for j in range(pairs):
        two_levels = 2 * j + 1 < scale
        step = uint64(j) * _GOLDEN_GAMMA
        for k in range(count):
            h = _mix64(x[k] + step)
            # quadrant a: (0, 0) for r < t_a; b: (0, 1) below t_ab;
            # c: (1, 0) below t_abc; d: (1, 1) above
            r = h >> uint64(32)
            ge_a = uint64(r >= t_a)
            ge_ab = uint64(r >= t_ab)
            ge_abc = uint64(r >= t_abc)
            a = (u[k] << uint64(1)) | ge_ab
            b = (v[k] << uint64(1)) | (ge_a ^ ge_ab ^ ge_abc)
            if two_levels:
                r = h & _LOW32
                ge_a = uint64(r >= t_a)
                ge_ab = uint64(r >= t_ab)
                ge_abc = uint64(r >= t_abc)
                a = (a << uint64(1)) | ge_ab
                b = (b << uint64(1)) | (ge_a ^ ge_ab ^ ge_abc)
            u[k] = a
            v[k] = b


@njit(parallel=True, cache=True)
def _rmat_kernel(start, scale, level_key, t_a, t_ab, t_abc, scramble, val0, val1,
                 weight_key, max_weight, src, dst, weight):
    """Fill ``src[i], dst[i] (, weight[i])`` with RMAT edge ``start + i``.

    Blocks of ``_RMAT_BLOCK`` edges are generated independently (prange);
    ``weight`` has length 0 for an unweighted graph.  The weight of edge
    ``e`` is hash number ``e`` of ``weight_key``.
    """
    n = src.shape[0]
    shift = uint64(64 - scale)
    weighted = weight.shape[0] > 0
    n_blocks = (n + _RMAT_BLOCK - 1) // _RMAT_BLOCK
    for block in prange(n_blocks):
        lo = block * _RMAT_BLOCK
        count = min(_RMAT_BLOCK, n - lo)
        u = np.empty(_RMAT_BLOCK, np.uint64)
        v = np.empty(_RMAT_BLOCK, np.uint64)
        x = np.empty(_RMAT_BLOCK, np.uint64)
        _rmat_levels(start + lo, count, scale, level_key, t_a, t_ab, t_abc, x, u, v)
        for k in range(count):
            if scramble:
                src[lo + k] = _scramble(u[k], shift, val0, val1)
                dst[lo + k] = _scramble(v[k], shift, val0, val1)
            else:
                src[lo + k] = u[k]
                dst[lo + k] = v[k]
        if weighted:
            for k in range(count):
                weight[lo + k] = uint64(1) + _hash(weight_key, uint64(start + lo + k)) % max_weight


@njit(parallel=True, cache=True)
def _grid_kernel(start, width, height, weight_key, max_weight, src, dst, weight):
    """Fill ``src[i], dst[i] (, weight[i])`` with grid edge ``start + i``.

    Directed edge ``2k`` is undirected edge ``k`` from its lower id to its
    higher one, ``2k + 1`` the way back.  Undirected edges ``0 .. H-1`` are
    the horizontal ones ``(x, y) - (x + 1, y)`` row by row, the rest the
    vertical ones ``(x, y) - (x, y + 1)``.  The weight hashes ``k``.
    """
    n = src.shape[0]
    n_horizontal = (width - 1) * height
    weighted = weight.shape[0] > 0
    for i in prange(n):
        e = start + i
        k = e >> 1
        if k < n_horizontal:
            y = k // (width - 1)
            x = k - y * (width - 1)
            a = y * width + x
            b = a + 1
        else:
            a = k - n_horizontal
            b = a + width
        if e & 1:
            src[i] = b
            dst[i] = a
        else:
            src[i] = a
            dst[i] = b
        if weighted:
            weight[i] = uint64(1) + _hash(weight_key, uint64(k)) % max_weight


# ------------------------------------------------------------- validation --
def _check_int(name: str, value, low: int, high: int, where: str) -> int:
    """``value`` as an int in ``[low, high]``, else ConfigError naming it."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ConfigError(f"{where}: {name} must be an integer, got {value!r}")
    value = int(value)
    if not low <= value <= high:
        raise ConfigError(f"{where}: {name} must be in {low}..{high}, got {value}")
    return value


def _check_bool(name: str, value, where: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ConfigError(f"{where}: {name} must be true or false, got {value!r}")
    return bool(value)


def _check_id_dtype(dtype, num_vertices: int, where: str) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise ConfigError(f"{where}: id_dtype must be int32 or int64, got {dtype}")
    if num_vertices > np.iinfo(dtype).max + 1:
        raise ConfigError(f"{where}: {num_vertices} vertices do not fit id_dtype {dtype}")
    return dtype


# ----------------------------------------------------------------- sources --
class _GeneratedSource(EdgeSource):
    """Shared chunking of the generators: ``chunks`` slices ``edges``."""

    #: Exact number of directed edges the generator yields.
    num_edges: int = 0

    def _fill(self, start: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray) -> None:
        raise NotImplementedError

    def edges(self, start: int = 0, stop: int | None = None, *,
              id_dtype=np.int64, weight_dtype=np.int64):
        """Edges ``start .. stop-1`` as whole arrays (fast path for the builder).

        Unlike :meth:`chunks`, this allocates the arrays once, in the dtype
        asked for (``int32`` ids halve the memory of a large graph), and any
        range can be asked for on its own.

        Parameters
        ----------
        start, stop : int, optional
            Range of edge indices, ``0 <= start <= stop <= num_edges``
            (default: every edge).
        id_dtype : {numpy.int64, numpy.int32}
            Dtype of ``src`` and ``dst``; int32 needs ``num_vertices <= 2**31``.
        weight_dtype : numpy dtype
            Integer dtype of the weights (ignored when unweighted).

        Returns
        -------
        src, dst : numpy.ndarray
        weight : numpy.ndarray or None
            None when the graph is unweighted.
        """
        stop = self.num_edges if stop is None else stop
        if not (isinstance(start, (int, np.integer)) and isinstance(stop, (int, np.integer))
                and 0 <= start <= stop <= self.num_edges):
            raise ConfigError(f"{self.name}: edge range {start}..{stop} is outside "
                              f"0..{self.num_edges}")
        id_dtype = _check_id_dtype(id_dtype, self.num_vertices, self.name)
        n = int(stop - start)
        src = np.empty(n, dtype=id_dtype)
        dst = np.empty(n, dtype=id_dtype)
        weight = np.empty(n if self.weighted else 0, dtype=weight_dtype)
        self._fill(int(start), src, dst, weight)
        return src, dst, (weight if self.weighted else None)

    def chunks(self, max_edges: int) -> Iterator[EdgeChunk]:
        """Yield the edges in order, ``max_edges`` at a time (int64 arrays)."""
        max_edges = _check_int("max_edges", max_edges, 1, 1 << 62, self.name)
        for start in range(0, self.num_edges, max_edges):
            src, dst, weight = self.edges(start, min(start + max_edges, self.num_edges))
            yield EdgeChunk(src, dst, weight)

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.identity().items()
                           if k not in ("generator", "algorithm"))
        return f"<{type(self).__name__} {self.name}: {params}>"


class RmatSource(_GeneratedSource):
    """A seeded RMAT graph; build it with :func:`rmat`."""

    format = "rmat"

    def __init__(self, scale: int, edge_factor: int, seed: int, weighted: bool,
                 max_weight: int, a: float, b: float, c: float, scramble: bool):
        self.scale = scale
        self.edge_factor = edge_factor
        self.seed = seed
        self.max_weight = max_weight
        self.a, self.b, self.c = a, b, c
        self.scramble = scramble
        self.name = (f"rmat:{scale}" if edge_factor == config.RMAT_EDGE_FACTOR
                     else f"rmat:{scale}:{edge_factor}")
        self.num_vertices = 1 << scale
        self.num_edges = edge_factor << scale
        self.num_edges_hint = self.num_edges
        self.weight_kind = "int" if weighted else None
        self.directed = None
        self.already_symmetric = False
        # cumulative quadrant probabilities, as 32-bit thresholds
        self._thresholds = tuple(uint64(min(round(p * 2.0 ** 32), 1 << 32))
                                 for p in (a, a + b, a + b + c))
        self._level_key = _stream_key(seed, _STREAM_LEVELS)
        self._weight_key = _stream_key(seed, _STREAM_WEIGHTS)
        self._val0 = _stream_key(seed, _STREAM_SCRAMBLE0)
        self._val1 = _stream_key(seed, _STREAM_SCRAMBLE1)

    def _fill(self, start, src, dst, weight):
        t_a, t_ab, t_abc = self._thresholds
        _rmat_kernel(start, self.scale, self._level_key, t_a, t_ab, t_abc,
                     self.scramble, self._val0, self._val1,
                     self._weight_key, uint64(self.max_weight), src, dst, weight)

    def identity(self) -> dict:
        """Every parameter that determines the edges (JSON-able)."""
        return {
            "generator": "rmat",
            "algorithm": _RMAT_ALGORITHM,
            "scale": self.scale,
            "edge_factor": self.edge_factor,
            "seed": self.seed,
            "a": self.a, "b": self.b, "c": self.c,
            "scramble": self.scramble,
            "weighted": self.weighted,
            "max_weight": self.max_weight if self.weighted else None,
        }


class GridSource(_GeneratedSource):
    """A weighted 2-D grid; build it with :func:`grid`."""

    format = "grid"

    def __init__(self, width: int, height: int, seed: int, weighted: bool, max_weight: int):
        self.width = width
        self.height = height
        self.seed = seed
        self.max_weight = max_weight
        self.name = f"grid:{width}x{height}"
        self.num_vertices = width * height
        self.num_edges = 2 * ((width - 1) * height + width * (height - 1))
        self.num_edges_hint = self.num_edges
        self.weight_kind = "int" if weighted else None
        self.directed = False
        self.already_symmetric = True
        self._weight_key = _stream_key(seed, _STREAM_GRID_WEIGHTS)

    def _fill(self, start, src, dst, weight):
        _grid_kernel(start, self.width, self.height, self._weight_key,
                     uint64(self.max_weight), src, dst, weight)

    def identity(self) -> dict:
        """Every parameter that determines the edges (JSON-able)."""
        return {
            "generator": "grid",
            "algorithm": _GRID_ALGORITHM,
            "width": self.width,
            "height": self.height,
            "seed": self.seed if self.weighted else None,
            "weighted": self.weighted,
            "max_weight": self.max_weight if self.weighted else None,
        }


# -------------------------------------------------------------- factories --
def rmat(scale: int, edge_factor: int | None = None,
         seed: int | None = None, weighted: bool = False,
         max_weight: int | None = None,
         a: float | None = None, b: float | None = None, c: float | None = None,
         scramble: bool = True) -> RmatSource:
    """A seeded RMAT (Kronecker) graph with Graph500 parameters.

    Parameters
    ----------
    scale : int
        log2 of the number of vertices, 1 .. ``MAX_VERTICES_LOG2`` (36).
    edge_factor : int, default ``config.RMAT_EDGE_FACTOR`` (16)
        Directed edges per vertex: the graph has ``edge_factor * 2**scale``
        edges (self loops and duplicates included), at most 2**48.
    seed : int, default ``config.GENERATOR_SEED``
        0 .. 2**64 - 1.  The same seed gives the same edges, in the same
        order, whatever the chunk size and the number of threads.
    weighted : bool, default False
        Give every edge an integer weight drawn uniformly from
        ``1 .. max_weight``.
    max_weight : int, default ``config.GENERATOR_MAX_WEIGHT`` (255)
        1 .. 2**62.
    a, b, c : float, default ``config.RMAT_A/B/C`` (0.57, 0.19, 0.19)
        Initiator probabilities of the quadrants (0,0), (0,1) and (1,0);
        ``d = 1 - a - b - c`` must be >= 0.
    scramble : bool, default True
        Relabel the vertices by a seeded bijection (Graph500, GAPBS).  Without
        it vertex 0 has the largest degree and ids follow the quadrants, which
        only tests want.

    Returns
    -------
    RmatSource
        ``num_vertices = 2**scale`` (declared: isolated vertices are kept),
        ``directed = None``, ``weight_kind = "int"`` when weighted.

    Raises
    ------
    garaphpy.errors.ConfigError
        Naming the argument that is out of range.
    """
    if edge_factor is None:
        edge_factor = config.RMAT_EDGE_FACTOR
    if seed is None:
        seed = config.GENERATOR_SEED
    if max_weight is None:
        max_weight = config.GENERATOR_MAX_WEIGHT
    if a is None:
        a = config.RMAT_A
    if b is None:
        b = config.RMAT_B
    if c is None:
        c = config.RMAT_C
    where = f"rmat:{scale}"
    scale = _check_int("scale", scale, 1, MAX_VERTICES_LOG2, where)
    edge_factor = _check_int("edge_factor", edge_factor, 1,
                             1 << (_MAX_EDGES_LOG2 - scale), where)
    seed = _check_int("seed", seed, 0, (1 << 64) - 1, where)
    weighted = _check_bool("weighted", weighted, where)
    max_weight = _check_int("max_weight", max_weight, 1, 1 << 62, where)
    probs = []
    for name, p in (("a", a), ("b", b), ("c", c)):
        if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)) \
                or not math.isfinite(p) or not 0.0 <= p <= 1.0:
            raise ConfigError(f"{where}: {name} must be a probability in [0, 1], got {p!r}")
        probs.append(float(p))
    if sum(probs) > 1.0 + 1e-12:
        raise ConfigError(f"{where}: a + b + c must be <= 1 (d = 1 - a - b - c), "
                          f"got {sum(probs)!r}")
    scramble = _check_bool("scramble", scramble, where)
    return RmatSource(scale, edge_factor, seed, weighted, max_weight, *probs, scramble)


def grid(width: int, height: int, seed: int | None = None,
         max_weight: int | None = None, weighted: bool = True) -> GridSource:
    """A ``width`` x ``height`` 4-neighbour grid, a road-like high-diameter graph.

    Vertex ``(x, y)``, ``0 <= x < width``, ``0 <= y < height``, has id
    ``y * width + x`` and edges to its (up to) 4 neighbours, in both
    directions.

    Parameters
    ----------
    width, height : int
        At least 1 each, ``width * height <= 2**MAX_VERTICES_LOG2``.
    seed : int, default ``config.GENERATOR_SEED``
        Seed of the weights, 0 .. 2**64 - 1.
    max_weight : int, default ``config.GENERATOR_MAX_WEIGHT`` (255)
        Every undirected edge gets one weight uniform in ``1 .. max_weight``,
        used for both of its directions.
    weighted : bool, default True
        False gives the bare lattice.

    Returns
    -------
    GridSource
        ``num_vertices = width * height``, ``directed = False``,
        ``already_symmetric = True``, ``weight_kind = "int"`` when weighted.

    Raises
    ------
    garaphpy.errors.ConfigError
        Naming the argument that is out of range.
    """
    if seed is None:
        seed = config.GENERATOR_SEED
    if max_weight is None:
        max_weight = config.GENERATOR_MAX_WEIGHT
    where = f"grid:{width}x{height}"
    width = _check_int("width", width, 1, 1 << MAX_VERTICES_LOG2, where)
    height = _check_int("height", height, 1, 1 << MAX_VERTICES_LOG2, where)
    if width * height > 1 << MAX_VERTICES_LOG2:
        raise ConfigError(f"{where}: width * height must be <= 2**{MAX_VERTICES_LOG2}, "
                          f"got {width * height}")
    seed = _check_int("seed", seed, 0, (1 << 64) - 1, where)
    max_weight = _check_int("max_weight", max_weight, 1, 1 << 62, where)
    weighted = _check_bool("weighted", weighted, where)
    return GridSource(width, height, seed, weighted, max_weight)


# ------------------------------------------------------------------ specs --
_SPEC_PREFIX = re.compile(r"(rmat|grid):", re.IGNORECASE)
_RMAT_SPEC = re.compile(r"rmat:([0-9]+)(?::([0-9]+))?", re.IGNORECASE)
_GRID_SPEC = re.compile(r"grid:([0-9]+)[xX]([0-9]+)", re.IGNORECASE)

#: Options each generator accepts in ``parse_generator_spec(..., options)``.
_SPEC_OPTIONS = {
    "rmat": ("seed", "weighted", "max_weight", "edge_factor"),
    "grid": ("seed", "weighted", "max_weight"),
}


def parse_generator_spec(spec: str, options: dict | None = None) -> EdgeSource | None:
    """The generator a spec string names, or None when it names none.

    Parameters
    ----------
    spec : str
        ``"rmat:SCALE"``, ``"rmat:SCALE:EDGE_FACTOR"`` or
        ``"grid:WIDTHxHEIGHT"`` (the prefix is case-insensitive).  Any string
        that does not start with ``rmat:`` or ``grid:`` is not a generator
        spec: None is returned so the caller can treat it as a path.
    options : dict, optional
        Keyword options: ``seed``, ``weighted``, ``max_weight`` and, for
        rmat, ``edge_factor`` (which must agree with one given in the spec).
        Missing or None values take the generator's defaults (rmat
        unweighted, grid weighted).

    Returns
    -------
    RmatSource, GridSource or None

    Raises
    ------
    garaphpy.errors.ConfigError
        For a malformed spec (``rmat:x``, ``rmat:0``, ``rmat:40``,
        ``grid:10``, ``grid:0x5``) or an unknown or invalid option; the
        message names the spec.
    """
    if not isinstance(spec, str):
        return None
    prefix = _SPEC_PREFIX.match(spec)
    if prefix is None:
        return None
    kind = prefix.group(1).lower()
    opts = {k: v for k, v in (options or {}).items() if v is not None}
    unknown = sorted(set(opts) - set(_SPEC_OPTIONS[kind]))
    if unknown:
        raise ConfigError(f"generator {spec!r}: unknown option(s) {', '.join(unknown)} "
                          f"(valid: {', '.join(_SPEC_OPTIONS[kind])})")
    if kind == "rmat":
        m = _RMAT_SPEC.fullmatch(spec)
        if m is None:
            raise ConfigError(f"generator {spec!r}: expected rmat:SCALE or "
                              f"rmat:SCALE:EDGE_FACTOR with integers, e.g. rmat:22:16")
        scale = int(m.group(1))
        if m.group(2) is not None:
            spec_factor = int(m.group(2))
            if "edge_factor" in opts and opts["edge_factor"] != spec_factor:
                raise ConfigError(f"generator {spec!r}: option edge_factor="
                                  f"{opts['edge_factor']!r} contradicts the spec")
            opts["edge_factor"] = spec_factor
        if not 1 <= scale <= MAX_VERTICES_LOG2:
            raise ConfigError(f"generator {spec!r}: scale must be in 1..{MAX_VERTICES_LOG2}, "
                              f"got {scale}")
        try:
            return rmat(scale, **opts)
        except ConfigError as exc:
            raise ConfigError(f"generator {spec!r}: {_strip_where(exc)}") from None
    m = _GRID_SPEC.fullmatch(spec)
    if m is None:
        raise ConfigError(f"generator {spec!r}: expected grid:WIDTHxHEIGHT with "
                          f"integers, e.g. grid:2000x2000")
    try:
        return grid(int(m.group(1)), int(m.group(2)), **opts)
    except ConfigError as exc:
        raise ConfigError(f"generator {spec!r}: {_strip_where(exc)}") from None


def _strip_where(exc: ConfigError) -> str:
    """The message of a factory's error without its ``rmat:..: `` prefix."""
    text = str(exc)
    return text.split(": ", 1)[1] if ": " in text else text


# ------------------------------------------------- weights for unweighted inputs --
#: ``weights=`` choices of :func:`with_edge_weights` (and ``[input] weights``).
EDGE_WEIGHT_RULES = ("file", "unit", "hash")


def hashed_edge_weights(src, dst, max_weight: int | None = None) -> np.ndarray:
    """``1 + splitmix64(src * 2^32 XOR dst) % max_weight`` per edge, int64.

    A weight from the edge's endpoints' user ids only, so the same edge
    gets the same weight whatever the numbering or the order of the input
    (the rule ``bench/modes.py`` weights SNAP graphs with).
    """
    if max_weight is None:
        max_weight = config.GENERATOR_MAX_WEIGHT
    z = (np.asarray(src).astype(np.uint64) << np.uint64(32)) ^ \
        np.asarray(dst).astype(np.uint64)
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return (np.uint64(1) + z % np.uint64(max_weight)).astype(np.int64)


class EdgeWeightsSource(EdgeSource):
    """Another source's edges with weights by a rule (see :func:`with_edge_weights`)."""

    def __init__(self, source: EdgeSource, rule: str, max_weight: int):
        self.source = source
        self.rule = rule
        self.max_weight = max_weight
        for name in ("name", "format", "num_vertices", "num_edges_hint", "id_base",
                     "directed", "already_symmetric", "input_bytes"):
            setattr(self, name, getattr(source, name))
        self.weight_kind = "int"

    def chunks(self, max_edges: int) -> Iterator[EdgeChunk]:
        for chunk in self.source.chunks(max_edges):
            if self.rule == "unit":
                weight = np.ones(len(chunk.src), np.int64)
            else:   # the user's ids: file ids plus the format's base
                src = chunk.src.astype(np.int64) + self.id_base
                dst = chunk.dst.astype(np.int64) + self.id_base
                if self.already_symmetric:   # u -> v and v -> u: one undirected edge
                    src, dst = np.minimum(src, dst), np.maximum(src, dst)
                weight = hashed_edge_weights(src, dst, self.max_weight)
            yield EdgeChunk(chunk.src, chunk.dst, weight)

    def identity(self) -> dict:
        return {**self.source.identity(), "edge_weights": self.rule,
                "edge_weights_max": self.max_weight if self.rule == "hash" else None}


def with_edge_weights(source: EdgeSource, weights: str = "file",
                      max_weight: int | None = None) -> EdgeSource:
    """``source`` with edge weights by a rule, for weighted programs on unweighted inputs.

    Parameters
    ----------
    source : EdgeSource
    weights : {"file", "unit", "hash"}
        ``file``: the input's own weights, if any (``source`` unchanged).
        ``unit``: weight 1 on every edge.  ``hash``: an integer weight in
        ``1 .. max_weight`` per edge from its endpoints' user ids
        (:func:`hashed_edge_weights`), deterministic; an input that lists
        both directions of its undirected edges (``already_symmetric``:
        symmetric Matrix Market, undirected GAP, PACE ``p tw``) gives both
        the weight of ``(min(u, v), max(u, v))``, as an undirected graph
        needs.  ``unit`` and ``hash`` replace the input's weights where it
        has some.
    max_weight : int, optional
        ``hash`` only; default ``config.GENERATOR_MAX_WEIGHT`` (255).

    Raises
    ------
    ConfigError
        Naming ``weights`` or ``max_weight``.
    """
    if weights not in EDGE_WEIGHT_RULES:
        raise ConfigError(f"weights={weights!r}: expected one of "
                          f"{', '.join(repr(r) for r in EDGE_WEIGHT_RULES)}")
    if max_weight is not None and weights != "hash":
        raise ConfigError(f"max_weight applies to weights='hash' (and generators), not "
                          f"weights={weights!r}")
    if weights == "file":
        return source
    max_weight = config.GENERATOR_MAX_WEIGHT if max_weight is None else \
        _check_int("max_weight", max_weight, 1, 1 << 62, "weights='hash'")
    return EdgeWeightsSource(source, weights, max_weight)
