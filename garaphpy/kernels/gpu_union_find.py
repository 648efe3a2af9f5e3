"""Connected components by sampled union-find on the GPU (Afforest), the GPU's
start of min-label propagation (Sutton, Ben-Nun and Barak, "Optimizing
Parallel Graph Connectivity Computation via Subgraph Sampling", IPDPS 2018,
sections III-IV; the hooking of ECL-CC, Jaiganesh and Burtscher, HPDC 2018).

Garaph's CC (section 6) is label propagation: each pull moves a label one
edge, so a road network takes about a thousand pulls on the GPU, and each is
a few microseconds of launch over a small frontier.  Afforest reaches the
same fixed point in a few passes whatever the diameter, as the CPU's
:mod:`garaphpy.kernels.union_find` does on the host:

1. every vertex links along its first ``rounds`` in-edges (the resident
   CSC of a symmetric graph: in-edges are out-edges), the larger root hooked
   under the smaller with an atomic compare-and-swap, the trees compressed
   after each round (pointer jumping);
2. :data:`SAMPLE_SIZE` evenly spaced vertices name the most frequent root,
   the largest component in all likelihood (one block, on the device: no
   copy to the host);
3. only the vertices outside that root's tree link along their remaining
   in-edges; an edge between the tree and another component is linked from
   the other side;
4. each vertex takes its root's user id as its label.

Roots are the smallest internal ids of their trees (``parent[v] <= v``),
and internal ids increase with the user's, so a label is the smallest user
id of the component: what min-label propagation converges to, for
consecutive ids from any start (``ids[0] + root``) or a table of ids.

The kernels are CUDA C++ in ``kernels/cuda/union_find.cu`` (package data),
compiled with NVRTC through :class:`cupy.RawModule` after a prelude naming
the store's vertex type and the program's value type, once per pair.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: Vertices sampled to name the largest component (GAPBS's 1024; the block
#: size of ``gp_uf_largest``, GP_UF_SAMPLE in the source).
SAMPLE_SIZE = 1024

#: In-edges per vertex linked before the largest component is named (GAPBS's
#: ``neighbor_rounds``).
ROUNDS = 2

#: Threads per block of the kernels over every vertex (a multiple of a warp).
THREADS = 256

_SOURCE_PATH = Path(__file__).with_name("cuda") / "union_find.cu"

_PRELUDE = "typedef {vid_type} vid_t;\ntypedef {value_type} value_t;\n"

_KERNEL_NAMES = ("gp_uf_init", "gp_uf_link_round", "gp_uf_compress", "gp_uf_largest",
                 "gp_uf_link_rest", "gp_uf_labels")

_MODULES: dict = {}
_MODULES_LOCK = threading.Lock()


@functools.cache
def _kernels_text() -> str:
    return _SOURCE_PATH.read_text()


def kernel_source(vertex_dtype, value_dtype) -> str:
    """The translation unit for a store of ``vertex_dtype`` ids (int32 or int64)
    and labels of ``value_dtype``."""
    from .cuda_program import ctype

    vertex_dtype = np.dtype(vertex_dtype)
    if vertex_dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise ValueError(f"vertex ids of {vertex_dtype}: expected int32 or int64")
    return _PRELUDE.format(vid_type=ctype(vertex_dtype),
                           value_type=ctype(value_dtype)) + _kernels_text()


@dataclass
class UnionFindKernels:
    """The compiled kernels (cupy RawKernel objects, by name without ``gp_uf_``)."""

    init: object
    link_round: object
    compress: object
    largest: object
    link_rest: object
    labels: object


def compile_kernels(cupy, vertex_dtype, value_dtype) -> UnionFindKernels:
    """Compile (once per process and pair of types) the union-find kernels."""
    key = (np.dtype(vertex_dtype).str, np.dtype(value_dtype).str)
    with _MODULES_LOCK:
        if key not in _MODULES:
            module = cupy.RawModule(code=kernel_source(vertex_dtype, value_dtype),
                                    options=("-std=c++17",))
            module.compile()
            _MODULES[key] = UnionFindKernels(*(module.get_function(name)
                                               for name in _KERNEL_NAMES))
        return _MODULES[key]


class DeviceUnionFind:
    """Afforest over a symmetric graph's CSC on the device, its labels written
    into a run's values.

    Parameters
    ----------
    cupy : module
    in_offsets : cupy.ndarray of int64
        |V| + 1 offsets of the CSC.
    sources : cupy.ndarray of vid_t
        The in-edges' sources (at least ``in_offsets[-1]`` of them).
    value_dtype : numpy.dtype
        The labels' type.
    multiprocessors : int
        The device's (the grid is sized from them).
    rounds : int
        In-edges per vertex linked before the largest component is named.
    """

    def __init__(self, cupy, in_offsets, sources, value_dtype, multiprocessors: int,
                 rounds: int = ROUNDS):
        self.cupy = cupy
        self.in_offsets = in_offsets
        self.sources = sources
        self.num_vertices = int(in_offsets.size) - 1
        self.rounds = int(rounds)
        self.kernels = compile_kernels(cupy, sources.dtype, value_dtype)
        self.parent = cupy.empty(max(self.num_vertices, 1), sources.dtype)
        #: the root the last phase skipped, and the labels that dropped (device)
        self.found = cupy.zeros(2, np.int64)
        blocks = -(-self.num_vertices // THREADS)
        self.grid = (max(1, min(8 * multiprocessors, blocks)),)

    def write_labels(self, ids, dense: bool, values, next_values, stream) -> None:
        """Every vertex's label (its component's smallest user id) into
        ``values`` and ``next_values`` (the same array for an asynchronous run),
        queued on ``stream``; :meth:`result` reads what it found.

        Parameters
        ----------
        ids : cupy.ndarray of int64
            The user ids, increasing; with ``dense`` (consecutive ids) the
            first alone is read.
        """
        n = np.int64(self.num_vertices)
        if not self.num_vertices:
            return
        k, grid, block = self.kernels, self.grid, (THREADS,)
        offsets, sources, parent = self.in_offsets, self.sources, self.parent
        with stream:
            self.found.fill(0)
            k.init(grid, block, (parent, n))
            for round_ in range(self.rounds):
                k.link_round(grid, block, (offsets, sources, parent, n, np.int32(round_)))
                k.compress(grid, block, (parent, n))
            k.largest((1,), (SAMPLE_SIZE,), (parent, n, self.found[0:1]))
            k.link_rest(grid, block, (offsets, sources, parent, n, np.int32(self.rounds),
                                      self.found[0:1]))
            k.labels(grid, block, (parent, ids, np.int32(bool(dense)), values, next_values, n,
                                   self.found[1:2]))

    def result(self, stream) -> tuple[int, int]:
        """(the root skipped in the last phase, -1 if none; the labels that
        dropped), once ``stream`` is done."""
        found = self.found.get(stream=stream)
        stream.synchronize()
        return int(found[0]), int(found[1])
