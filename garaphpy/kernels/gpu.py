"""GPU kernels: replication-based pull over shards (Garaph sections 3.1-3.2).

One thread block processes one shard.  It keeps the shard's accumulators
(*LocalVertices*) in shared memory, ``R_i`` replicas per vertex, initialised
to the sum monoid's identity.  Consecutive threads read consecutive edges
(coalesced); the thread ``tid`` adds its gather into the replica at
``(i - r_s) * R_i + tid % R_i`` with the monoid's shared-memory atomic, so
threads working on the same vertex spread their atomics over ``R_i``
addresses.  The replicas are then merged two by two with strides ``R_i/2,
R_i/4, ..., 1``, and each vertex is applied and activated.  (The pairing is
the paper's, but no barrier separates the strides: a vertex's replicas belong
to ``config.GPU_MERGE_LANES`` consecutive lanes of one warp, each lane merges
its own slots in shared memory, then the lanes merge by register shuffles.)
A vertex split over several shards (its in-edges exceed one shard) combines
its partial sums in global memory with the monoid's global atomic; it is
applied by a second kernel once every page of the iteration has been
processed.

Beyond the paper, each thread takes ``config.GPU_EDGES_PER_THREAD``
consecutive edges at a time rather than one: their sources and offsets are
loaded as 16-byte vectors, their gathers are all in flight before the first
is used, and the edges of one destination among them (edges are sorted by
destination) are combined in registers before a single replica atomic.  On
rmat:22 PageRank this made the kernel 1.26x faster on an H100 (8 edges per
thread; BENCHMARKS.md): it removes the memory-latency stalls that bounded
the one-edge kernel.

The program's functions come from :mod:`garaphpy.kernels.cuda_program`
(the same Python source the CPU compiles with numba); the kernels are CUDA
C++ in ``kernels/cuda/pull.cu`` (package data).  This module puts the
program's functions and a prelude sized for the store and the device in front
of them, compiles the translation unit at run time with NVRTC through
:class:`cupy.RawModule` and caches the modules (cupy also keeps the compiled
binaries on disk).

When the gather reads only source-side data (``src`` with ``src_out_degree``
or ``src_in_degree``) a synchronous run computes each vertex's contribution
once per iteration (``gp_contributions``), and the pull reads one array per
edge instead of two: the same arithmetic, fewer random reads.  A shard whose
accumulators exceed the card's shared memory keeps them in global memory
(slower, same results).
"""

from __future__ import annotations

import functools
import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .. import config
from ..errors import ConfigError, GaraphError
from ..monoids import MONOIDS

if TYPE_CHECKING:
    from .cuda_program import CudaProgram

#: Consecutive edges one pull-kernel thread may take at a time
#: (``config.GPU_EDGES_PER_THREAD``).
EDGES_PER_THREAD_CHOICES = (1, 2, 4, 8, 16)

#: Lanes of one warp that may merge a vertex's replicas (``config.GPU_MERGE_LANES``).
MERGE_LANES_CHOICES = (1, 2, 4, 8, 16, 32)

_PRELUDE = r"""
typedef {vid_type} vid_t;
#define GP_THREADS_PER_BLOCK {threads}
#define GP_MERGE_LANES {merge_lanes}

__device__ __forceinline__ double gp_aggregate_merge(int i, double a, double b) {{
{aggregate_merge}
}}

__device__ __forceinline__ void gp_atomic_merge_double(int i, double* address, double x) {{
{aggregate_atomic}
}}
"""

#: The kernels' CUDA C++ (package data), after the program's functions and the prelude:
#: the pull over shards and its companions, the device loop's sparse iterations, the
#: pushes of streamed pages' active edges.
_KERNELS_PATHS = (Path(__file__).with_name("cuda") / "pull.cu",
                  Path(__file__).with_name("cuda") / "sparse.cu",
                  Path(__file__).with_name("cuda") / "stream.cu")

#: The device loop's persistent kernel, compiled in a unit of its own after the
#: kernels' (:func:`persistent_kernel`): it includes cooperative_groups.h, which
#: the other kernels do not need.
_PERSISTENT_PATH = Path(__file__).with_name("cuda") / "persistent.cu"

#: A partitioned run's GPU worker's kernels (garaphpy.distributed.gpu_worker): the
#: pull's helpers and the partition's pull, commit and aggregates.
_PARTITION_KERNELS_PATHS = (Path(__file__).with_name("cuda") / "pull.cu",
                            Path(__file__).with_name("cuda") / "partition.cu")


def _program_module(cupy, source: str, program, name_expressions: tuple = ()):
    """``source`` compiled by NVRTC (C++17) into a module; a rejection of a
    program's generated code is a ProgramError naming the program."""
    module = cupy.RawModule(code=source, options=("-std=c++17",),
                            name_expressions=name_expressions or None)
    try:
        module.compile()
    except cupy.cuda.compiler.CompileException as error:
        from ..program import ProgramError

        raise ProgramError(f"{type(program.program).__name__}: NVRTC rejected the "
                           f"generated CUDA code:\n{error.get_message()}") from None
    return module


class GpuUnavailableError(GaraphError, RuntimeError):
    """A GPU mode was asked for, and cupy or a CUDA device is missing."""


def cupy_module():
    """Import cupy and check for a device; raise :class:`GpuUnavailableError` if not usable."""
    try:
        import cupy
    except ImportError as error:
        raise GpuUnavailableError(
            f"the GPU engine needs cupy, which is not installed ({error}); install it with "
            "`pip install garaphpy[gpu]` (cupy-cuda13x, for CUDA 13 drivers)") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # CUDARuntimeError without a driver or device
        raise GpuUnavailableError(f"the GPU engine found no usable CUDA device ({error}); "
                                  "run with mode='cpu'") from None
    if count < 1:
        raise GpuUnavailableError("the GPU engine found no CUDA device; run with mode='cpu'")
    return cupy


def pinned_empty(nbytes: int, alignment: int = 4096) -> np.ndarray:
    """An uninitialised uint8 array of ``nbytes`` in page-locked host memory,
    starting at a multiple of ``alignment`` (copies from it to the GPU are
    asynchronous, and ``O_DIRECT`` reads can land in it)."""
    memory = cupy_module().cuda.alloc_pinned_memory(max(nbytes, 1) + alignment)
    raw = np.frombuffer(memory, np.uint8, max(nbytes, 1) + alignment)
    start = (-raw.ctypes.data) % alignment
    return raw[start:start + nbytes]


@dataclass(frozen=True)
class DeviceInfo:
    """What the kernels are sized from (read off the device, never assumed).

    Attributes
    ----------
    name : str
    compute_capability : tuple of int
    multiprocessors : int
    shared_memory_per_block : int
        Without opt-in (48 KB on every card since Kepler).
    shared_memory_per_block_optin : int
        The largest dynamic shared memory a block may ask for after raising
        its limit (227 KB on Hopper).
    free_memory, total_memory : int
        Bytes, when the information was read.
    """

    name: str
    compute_capability: tuple
    multiprocessors: int
    shared_memory_per_block: int
    shared_memory_per_block_optin: int
    free_memory: int
    total_memory: int

    @classmethod
    def current(cls) -> "DeviceInfo":
        """The properties of cupy's current device."""
        cupy = cupy_module()
        device = cupy.cuda.Device()
        properties = cupy.cuda.runtime.getDeviceProperties(device.id)
        free, total = cupy.cuda.runtime.memGetInfo()
        name = properties["name"]
        return cls(name=name.decode() if isinstance(name, bytes) else str(name),
                   compute_capability=(int(properties["major"]), int(properties["minor"])),
                   multiprocessors=int(properties["multiProcessorCount"]),
                   shared_memory_per_block=int(properties["sharedMemPerBlock"]),
                   shared_memory_per_block_optin=int(properties.get(
                       "sharedMemPerBlockOptin", properties["sharedMemPerBlock"])),
                   free_memory=int(free), total_memory=int(total))


def kernel_source(program: CudaProgram, vertex_dtype, kernels: str = "engine") -> str:
    """The whole CUDA C++ translation unit for ``program``: its device
    functions followed by the kernels, for a store with ``vertex_dtype`` ids.

    ``kernels`` names the kernels: ``"engine"``, the engine's (pull.cu,
    sparse.cu, stream.cu), or ``"partition"``, a partitioned run's GPU worker's
    (pull.cu, partition.cu).

    Raises
    ------
    ConfigError
        When ``config.GPU_MERGE_LANES`` is not one of :data:`MERGE_LANES_CHOICES`.
    """
    from .cuda_program import ctype

    lanes = config.GPU_MERGE_LANES
    if lanes not in MERGE_LANES_CHOICES or isinstance(lanes, (bool, float)):
        raise ConfigError(f"config.GPU_MERGE_LANES={lanes!r}: expected one of "
                          f"{MERGE_LANES_CHOICES}")
    monoids = program.aggregate_monoids
    merge = "\n".join(f"    if (i == {i}) return {MONOIDS[m].cuda_merge_double};"
                      for i, m in enumerate(monoids)) + "\n    return a;"
    atomic = "\n".join(f"    if (i == {i}) {{\n        {MONOIDS[m].cuda_double_atomic()}\n        return;\n    }}"
                       for i, m in enumerate(monoids)) or "    (void)i; (void)address; (void)x;"
    prelude = _PRELUDE.format(vid_type=ctype(vertex_dtype), threads=config.GPU_THREADS_PER_BLOCK,
                              merge_lanes=config.GPU_MERGE_LANES,
                              aggregate_merge=merge, aggregate_atomic=atomic)
    return program.source + "\n" + prelude + "\n" + _kernels_text(kernels)


@functools.cache
def _kernels_text(kernels: str = "engine") -> str:
    paths = _KERNELS_PATHS if kernels == "engine" else _PARTITION_KERNELS_PATHS
    return "\n".join(path.read_text() for path in paths)


@dataclass
class GpuKernels:
    """The compiled kernels of one program (cupy RawKernel objects).

    ``pull[precomputed]`` is the pull kernel reading precomputed
    contributions or gathering per edge.
    ``pull_packed[precomputed]`` pulls a packed page where it lies
    (``gp_pull_packed``, kernels/cuda/stream.cu).
    """

    module: object
    pull: dict
    apply_split: object
    contributions: object
    init_values: object
    aggregates: object
    source: str
    sparse_notify: object
    sparse_pull: object
    shortcut_labels: object
    loop_out_edges: object
    loop_enter: object
    loop_leave: object
    sparse_push: object
    sparse_apply: object
    loop_identity: object
    priority_split: object
    loop_enter_far: object
    loop_turn: object
    stream_push: object
    stream_split_merge: object
    stream_apply: object
    unpack_page: object
    pull_packed: dict


_MODULES: dict = {}
_MODULES_LOCK = threading.Lock()


#: Dynamic shared memory every pull or split-apply block has at least (the
#: block statistics' reduction reuses it; GP_TOTALS_SHARED_BYTES in the source).
TOTALS_SHARED_BYTES = 768


def compile_kernels(program: CudaProgram, vertex_dtype,
                    edges_per_thread: int | None = None) -> GpuKernels:
    """Compile (once per process, translation unit and ``edges_per_thread``) the
    kernels of ``program``.

    Parameters
    ----------
    edges_per_thread : int, optional
        Consecutive edges one thread of the pull kernel takes at a time
        (default ``config.GPU_EDGES_PER_THREAD``; one of
        :data:`EDGES_PER_THREAD_CHOICES`).

    Raises
    ------
    ConfigError
        For an ``edges_per_thread`` or a ``config.GPU_MERGE_LANES`` not offered.
    GpuUnavailableError
        Without cupy or a device.
    garaphpy.program.ProgramError
        When NVRTC rejects the generated code (a translator bug: the message
        carries the compiler's log).
    """
    if edges_per_thread is None:
        edges_per_thread = config.GPU_EDGES_PER_THREAD
    if edges_per_thread not in EDGES_PER_THREAD_CHOICES or isinstance(edges_per_thread, bool):
        raise ConfigError(f"edges_per_thread={edges_per_thread!r}: expected one of "
                          f"{EDGES_PER_THREAD_CHOICES}")
    source = kernel_source(program, vertex_dtype)
    cupy = cupy_module()
    key = (hashlib.sha256(source.encode()).hexdigest(), edges_per_thread)
    with _MODULES_LOCK:
        if key in _MODULES:
            return _MODULES[key]
        names = {precomputed: f"gp_pull<{str(precomputed).lower()}, {edges_per_thread}>"
                 for precomputed in (False, True)}
        packed_names = {precomputed: f"gp_pull_packed<{str(precomputed).lower()}, "
                                     f"{edges_per_thread}>" for precomputed in (False, True)}
        module = _program_module(cupy, source, program, tuple(names.values())
                                 + tuple(packed_names.values()))
        kernels = GpuKernels(
            module=module,
            pull={variant: module.get_function(name) for variant, name in names.items()},
            apply_split=module.get_function("gp_apply_split"),
            contributions=module.get_function("gp_contributions"),
            init_values=module.get_function("gp_init_values"),
            aggregates=module.get_function("gp_aggregates"), source=source,
            sparse_notify=module.get_function("gp_sparse_notify"),
            sparse_pull=module.get_function("gp_sparse_pull"),
            shortcut_labels=module.get_function("gp_shortcut_labels"),
            loop_out_edges=module.get_function("gp_loop_out_edges"),
            loop_enter=module.get_function("gp_loop_enter"),
            loop_leave=module.get_function("gp_loop_leave"),
            sparse_push=module.get_function("gp_sparse_push"),
            sparse_apply=module.get_function("gp_sparse_apply"),
            loop_identity=module.get_function("gp_loop_identity"),
            priority_split=module.get_function("gp_priority_split"),
            loop_enter_far=module.get_function("gp_loop_enter_far"),
            loop_turn=module.get_function("gp_loop_turn"),
            stream_push=module.get_function("gp_stream_push"),
            stream_split_merge=module.get_function("gp_stream_split_merge"),
            stream_apply=module.get_function("gp_stream_apply"),
            unpack_page=module.get_function("gp_unpack_page"),
            pull_packed={precomputed: module.get_function(name)
                         for precomputed, name in packed_names.items()})
        _MODULES[key] = kernels
        return kernels


def persistent_source(kernels_source: str) -> str:
    """The translation unit of the device loop's persistent kernel: the kernels'
    (``GpuKernels.source``) and kernels/cuda/persistent.cu after them."""
    return kernels_source + "\n" + _PERSISTENT_PATH.read_text()


def persistent_kernel(kernels: GpuKernels) -> tuple:
    """The device loop's persistent kernel (``gp_persistent_push``) for the
    program of ``kernels``, compiled once per process and unit, launched
    cooperatively (:class:`~garaphpy.scheduler.device_loop.DeviceLoop`).

    Returns
    -------
    kernel : cupy.RawKernel or None
        None where NVRTC could not compile it (cooperative_groups.h not found,
        or rejected): the device loop then launches its graphs alone.
    why : str or None
        The compiler's first line where it failed.
    """
    source = persistent_source(kernels.source)
    key = ("persistent", hashlib.sha256(source.encode()).hexdigest())
    with _MODULES_LOCK:
        if key not in _MODULES:
            cupy = cupy_module()
            try:
                module = cupy.RawModule(code=source, options=("-std=c++17",))
                kernel = module.get_function("gp_persistent_push")
                kernel.kernel       # compiles the unit and loads the kernel
                _MODULES[key] = (kernel, None)
            except Exception as error:      # NVRTC's or the driver's refusal
                text = str(error).strip().splitlines()
                _MODULES[key] = (None, f"{type(error).__name__}: "
                                       f"{text[0][:200] if text else ''}")
        return _MODULES[key]


def accumulator_bytes(shards: np.ndarray, accum_dtype) -> np.ndarray:
    """Bytes of accumulators (``|V_i| * R_i`` slots) each shard's block needs.

    Rounded up to 4 bytes: an accumulator narrower than 32 bits is combined
    atomically through the aligned word that holds it, which must not leave
    the shard's region (and the next region must start aligned).
    """
    slots = shards["num_vertices"].astype(np.int64) * shards["replication"].astype(np.int64)
    return (slots * np.dtype(accum_dtype).itemsize + 3) // 4 * 4


@dataclass
class PartitionKernels:
    """The compiled kernels of a partitioned run's GPU worker for one program
    (kernels/cuda/partition.cu, and pull.cu's contributions)."""

    module: object
    pull: object
    commit: object
    aggregates: object
    contributions: object
    source: str


def compile_partition_kernels(program: CudaProgram, vertex_dtype) -> PartitionKernels:
    """Compile (once per process and translation unit) a partition's GPU
    worker's kernels for ``program``, as :func:`compile_kernels` does the engine's.

    Raises
    ------
    GpuUnavailableError
        Without cupy or a device.
    garaphpy.program.ProgramError
        When NVRTC rejects the generated code.
    """
    source = kernel_source(program, vertex_dtype, "partition")
    cupy = cupy_module()
    key = (hashlib.sha256(source.encode()).hexdigest(), "partition")
    with _MODULES_LOCK:
        if key in _MODULES:
            return _MODULES[key]
        module = _program_module(cupy, source, program)
        kernels = PartitionKernels(
            module=module, pull=module.get_function("gp_partition_pull"),
            commit=module.get_function("gp_partition_commit"),
            aggregates=module.get_function("gp_partition_aggregates"),
            contributions=module.get_function("gp_contributions"), source=source)
        _MODULES[key] = kernels
        return kernels
