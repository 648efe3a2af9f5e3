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
(the same Python source the CPU compiles with numba); this module wraps them
into kernels, compiles them at run time with NVRTC through
:class:`cupy.RawModule` and caches the modules (cupy also keeps the compiled
binaries on disk).

When the gather reads only source-side data (``src`` with ``src_out_degree``
or ``src_in_degree``) a synchronous run computes each vertex's contribution
once per iteration (``gp_contributions``), and the pull reads one array per
edge instead of two: the same arithmetic, fewer random reads.  A shard whose
accumulators exceed the card's shared memory keeps them in global memory
(slower, same results).  ``config.GPU_WARP_COMBINE`` selects a variant that
combines each warp's runs of same-destination edges before the replica
atomics.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass

import numpy as np

from .. import config
from ..errors import ConfigError, GaraphError
from .cuda_program import CudaProgram, ctype

#: Consecutive edges one pull-kernel thread may take at a time
#: (``config.GPU_EDGES_PER_THREAD``).
EDGES_PER_THREAD_CHOICES = (1, 2, 4, 8, 16)

#: Lanes of one warp that may merge a vertex's replicas (``config.GPU_MERGE_LANES``).
MERGE_LANES_CHOICES = (1, 2, 4, 8, 16, 32)

#: Gather parameters that read only the edge's source (contributions can be
#: computed once per vertex).
SOURCE_SIDE_PARAMETERS = frozenset({"src", "src_out_degree", "src_in_degree"})

_KERNELS = r"""
typedef {vid_type} vid_t;

__device__ __forceinline__ double gp_aggregate_merge(int i, double a, double b) {{
{aggregate_merge}
}}

__device__ __forceinline__ void gp_atomic_merge_double(int i, double* address, double x) {{
{aggregate_atomic}
}}

template <typename T>
__device__ __forceinline__ T gp_warp_sum(T x) {{
    for (int offset = 16; offset > 0; offset >>= 1)
        x += __shfl_down_sync(0xffffffffu, x, offset);
    return x;
}}

// The block's statistics reach global memory in one atomic each: per-warp
// atomics on three addresses from every block of the grid serialise in L2.
// Every thread of the block must call it; it reuses GP_TOTALS_SHARED_BYTES of
// the block's dynamic shared memory (static shared memory would push a 48 KB
// shard's block past the carveout that fits four blocks per multiprocessor).
#define GP_TOTALS_SHARED_BYTES 768
__device__ __forceinline__ void gp_block_totals(double l1, unsigned long long activated,
                                                unsigned long long activated_out_edges,
                                                double* l1_total,
                                                unsigned long long* counters,
                                                unsigned char* shared) {{
    double* warp_l1 = reinterpret_cast<double*>(shared);
    unsigned long long* warp_activated = reinterpret_cast<unsigned long long*>(shared + 256);
    unsigned long long* warp_out_edges = warp_activated + 32;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int warps = (blockDim.x + 31) >> 5;
    l1 = gp_warp_sum(l1);
    activated = gp_warp_sum(activated);
    activated_out_edges = gp_warp_sum(activated_out_edges);
    __syncthreads();  // the shared memory may still be read as accumulators
    if (lane == 0) {{
        warp_l1[warp] = l1;
        warp_activated[warp] = activated;
        warp_out_edges[warp] = activated_out_edges;
    }}
    __syncthreads();
    if (warp == 0) {{
        l1 = lane < warps ? warp_l1[lane] : 0.0;
        activated = lane < warps ? warp_activated[lane] : 0ull;
        activated_out_edges = lane < warps ? warp_out_edges[lane] : 0ull;
        l1 = gp_warp_sum(l1);
        activated = gp_warp_sum(activated);
        activated_out_edges = gp_warp_sum(activated_out_edges);
        if (lane == 0) {{
            if (l1 != 0.0) atomicAdd(l1_total, l1);
            if (activated != 0) {{
                atomicAdd(&counters[0], activated);
                atomicAdd(&counters[1], activated_out_edges);
            }}
        }}
    }}
}}

#define GP_ATTRS gp_attrs attrs; attrs.out_degree = out_degree; \
    attrs.in_degree = in_degree; attrs.weighted_in_degree = weighted_in_degree; \
    attrs.vertex = vertex_ids; attrs.is_source = is_source;

#define GP_ATTR_PARAMETERS const degree_t* __restrict__ out_degree, \
    const degree_t* __restrict__ in_degree, const double* __restrict__ weighted_in_degree, \
    const long long* __restrict__ vertex_ids, const bool* __restrict__ is_source

// Apply and activate one vertex; count it for the iteration's statistics.
__device__ __forceinline__ void gp_update(const gp_attrs& attrs, const double* aggregates,
                                          long long num_vertices, long long iteration,
                                          long long v, accum_t accum, const value_t* values,
                                          value_t* out, unsigned char* active, double* l1,
                                          unsigned long long* activated,
                                          unsigned long long* activated_out_edges) {{
    value_t old_value = values[v];
    value_t new_value = gp_apply(attrs, aggregates, num_vertices, iteration, v, old_value,
                                 accum);
    out[v] = new_value;
    bool is_active = gp_activate(new_value, old_value);
    active[v] = is_active;
    *l1 += fabs((double)new_value - (double)old_value);
    if (is_active) {{
        *activated += 1;
        *activated_out_edges += (unsigned long long)attrs.out_degree[v];
    }}
}}

template <int BYTES> struct gp_bits {{ typedef int type; }};
template <> struct gp_bits<8> {{ typedef long long type; }};

// __shfl_up_sync (UP) or __shfl_down_sync for any accumulator type: moved as its
// bit pattern
template <bool UP, typename T>
__device__ __forceinline__ T gp_shuffle(T x, int delta) {{
    union {{ T value; typename gp_bits<sizeof(T)>::type bits; }} word;
    word.bits = 0;
    word.value = x;
    word.bits = UP ? __shfl_up_sync(0xffffffffu, word.bits, delta)
                   : __shfl_down_sync(0xffffffffu, word.bits, delta);
    return word.value;
}}

// N consecutive elements from p (aligned to N * sizeof(T) bytes), in 16-, 8- or
// 4-byte loads where the size allows
template <typename T, int N>
__device__ __forceinline__ void gp_load_run(const T* __restrict__ p, T (&out)[N]) {{
    constexpr int BYTES = (int)sizeof(T) * N;
    if constexpr (BYTES % 16 == 0) {{
        union {{ uint4 words[BYTES / 16]; T items[N]; }} run;
#pragma unroll
        for (int i = 0; i < BYTES / 16; ++i) run.words[i] = __ldg(reinterpret_cast<const uint4*>(p) + i);
#pragma unroll
        for (int i = 0; i < N; ++i) out[i] = run.items[i];
    }} else if constexpr (BYTES % 8 == 0) {{
        union {{ uint2 words[BYTES / 8]; T items[N]; }} run;
#pragma unroll
        for (int i = 0; i < BYTES / 8; ++i) run.words[i] = __ldg(reinterpret_cast<const uint2*>(p) + i);
#pragma unroll
        for (int i = 0; i < N; ++i) out[i] = run.items[i];
    }} else {{
#pragma unroll
        for (int i = 0; i < N; ++i) out[i] = p[i];
    }}
}}

template <bool PRECOMPUTED, bool WARP_COMBINE, int EDGES_PER_THREAD>
__global__ void __launch_bounds__({threads})
gp_pull(const vid_t* __restrict__ sources, const unsigned short* __restrict__ idxoff,
        const weight_t* __restrict__ weights,
        const long long* __restrict__ shard_first_vertex,
        const int* __restrict__ shard_num_vertices, const int* __restrict__ shard_replication,
        const long long* __restrict__ shard_edge_begin,
        const long long* __restrict__ shard_edge_end, const int* __restrict__ shard_split_slot,
        const long long* __restrict__ shard_scratch, accum_t* scratch,
        int first_shard, const value_t* values, value_t* out,
        const accum_t* __restrict__ contributions, unsigned char* __restrict__ active,
        accum_t* split_accum, GP_ATTR_PARAMETERS, const double* __restrict__ aggregates,
        long long num_vertices, long long iteration, double* l1_total,
        unsigned long long* counters) {{
    extern __shared__ __align__(16) unsigned char gp_shared[];
    GP_ATTRS
    const int shard = first_shard + blockIdx.x;
    // a shard whose accumulators exceed the card's shared memory keeps them in global memory
    const long long scratch_offset = shard_scratch[shard];
    accum_t* local = scratch_offset >= 0 ? scratch + scratch_offset
                                         : reinterpret_cast<accum_t*>(gp_shared);
    const long long first_vertex = shard_first_vertex[shard];
    const int shard_vertices = shard_num_vertices[shard];
    const int replication = shard_replication[shard];
    const long long edge_begin = shard_edge_begin[shard];
    const long long edge_end = shard_edge_end[shard];
    const int slots = shard_vertices * replication;
    const accum_t identity = gp_accum_identity();
    for (int i = threadIdx.x; i < slots; i += blockDim.x) local[i] = identity;
    __syncthreads();
    // R_i and the merge strides are powers of two: shifts and masks, no integer division
    const int replication_shift = __ffs(replication) - 1;
    const int replica = threadIdx.x & (replication - 1);
    if (WARP_COMBINE) {{
        // edges are sorted by destination, so a warp's 32 edges form runs of one
        // destination: a segmented scan combines each run, and only its last lane
        // takes the replica's atomic
        const int lane = threadIdx.x & 31;
        for (long long base = edge_begin + (threadIdx.x - lane); base < edge_end;
             base += blockDim.x) {{
            const long long e = base + lane;
            const bool valid = e < edge_end;
            int key = -1 - lane;
            accum_t x = identity;
            if (valid) {{
                const long long u = (long long)sources[e];
                key = idxoff[e];
                if (PRECOMPUTED) x = contributions[u];
                else x = gp_gather(values, weights, attrs, u, first_vertex + key, e);
            }}
            for (int delta = 1; delta < 32; delta <<= 1) {{
                const accum_t before = gp_shuffle<true>(x, delta);
                const int before_key = __shfl_up_sync(0xffffffffu, key, delta);
                if (lane >= delta && before_key == key) x = gp_combine(x, before);
            }}
            const int next_key = __shfl_down_sync(0xffffffffu, key, 1);
            if (valid && (lane == 31 || next_key != key))
                gp_atomic_combine(&local[(key << replication_shift) + replica], x);
        }}
    }} else if (EDGES_PER_THREAD > 1) {{
        // each thread takes a run of consecutive edges (runs aligned to their length in
        // the arrays, loaded as vectors, their gathers in flight at once), combines each
        // destination's edges of the run in registers and takes one replica atomic per
        // destination; a run straddling the shard's ends ignores the other shards' edges
        constexpr int RUN = EDGES_PER_THREAD;
        const long long first_run = edge_begin / RUN, end_run = (edge_end + RUN - 1) / RUN;
        for (long long r = first_run + threadIdx.x; r < end_run; r += blockDim.x) {{
            const long long e0 = r * RUN;
            const int lo = (int)max(edge_begin - e0, 0ll);
            const int hi = (int)min(edge_end - e0, (long long)RUN);
            vid_t u[RUN];
            unsigned short key[RUN];
            gp_load_run(sources + e0, u);
            gp_load_run(idxoff + e0, key);
            accum_t x[RUN];
#pragma unroll
            for (int j = 0; j < RUN; ++j) {{
                x[j] = identity;
                if (j >= lo && j < hi) {{
                    if (PRECOMPUTED) x[j] = contributions[u[j]];
                    else x[j] = gp_gather(values, weights, attrs, (long long)u[j],
                                          first_vertex + key[j], e0 + j);
                }}
            }}
            int run_key = -1;
            accum_t run = identity;
#pragma unroll
            for (int j = 0; j < RUN; ++j) {{
                if (j >= lo && j < hi) {{
                    if ((int)key[j] != run_key) {{
                        if (run_key >= 0)
                            gp_atomic_combine(&local[(run_key << replication_shift) + replica], run);
                        run_key = key[j];
                        run = x[j];
                    }} else {{
                        run = gp_combine(run, x[j]);
                    }}
                }}
            }}
            if (run_key >= 0) gp_atomic_combine(&local[(run_key << replication_shift) + replica], run);
        }}
    }} else {{
        for (long long e = edge_begin + threadIdx.x; e < edge_end; e += blockDim.x) {{
            const long long u = (long long)sources[e];
            const int offset = idxoff[e];
            accum_t x;
            if (PRECOMPUTED) x = contributions[u];
            else x = gp_gather(values, weights, attrs, u, first_vertex + offset, e);
            gp_atomic_combine(&local[(offset << replication_shift) + replica], x);
        }}
    }}
    __syncthreads();
    // the two-way merge with strides R_i/2, ..., 1 (the paper's pairing), no barrier: the
    // R_i replicas of a vertex belong to G = min(R_i, MERGE_LANES) consecutive lanes of one
    // warp; lane l merges its own slots l, l + G, l + 2G, ... with the strides R_i/2 .. G,
    // then the G lanes merge by shuffles with the strides G/2 .. 1
    if (replication > 1) {{
        constexpr int MERGE_LANES = {merge_lanes};
        const int group_shift = min(replication_shift, __ffs(MERGE_LANES) - 1);
        const int group = 1 << group_shift;
        const int lane_slots = replication >> group_shift;
        const int group_slots = shard_vertices << group_shift;
        for (int base = threadIdx.x & ~31; base < group_slots; base += blockDim.x) {{
            const int i = base + (threadIdx.x & 31);
            accum_t x = identity;
            if (i < group_slots) {{
                accum_t* mine = local + ((i >> group_shift) << replication_shift)
                                + (i & (group - 1));
                for (int half = lane_slots >> 1; half > 0; half >>= 1)
                    for (int k = 0; k < half; ++k)
                        mine[k << group_shift] = gp_combine(mine[k << group_shift],
                                                            mine[(k + half) << group_shift]);
                x = mine[0];
            }}
            for (int stride = group >> 1; stride > 0; stride >>= 1)
                x = gp_combine(x, gp_shuffle<false>(x, stride));
            if (i < group_slots && (i & (group - 1)) == 0)
                local[(i >> group_shift) << replication_shift] = x;
        }}
        __syncthreads();
    }}
    double l1 = 0.0;
    unsigned long long activated = 0, activated_out_edges = 0;
    const int split_slot = shard_split_slot[shard];
    if (split_slot >= 0) {{
        if (threadIdx.x == 0) gp_atomic_combine(&split_accum[split_slot], local[0]);
    }} else {{
        for (int i = threadIdx.x; i < shard_vertices; i += blockDim.x)
            gp_update(attrs, aggregates, num_vertices, iteration, first_vertex + i,
                      local[i << replication_shift], values, out, active, &l1, &activated,
                      &activated_out_edges);
    }}
    gp_block_totals(l1, activated, activated_out_edges, l1_total, counters, gp_shared);
}}

// Vertices split over several shards: apply once all their partial sums are in.
extern "C" __global__ void gp_apply_split(const long long* __restrict__ split_vertices,
                                          int num_split, const value_t* values, value_t* out,
                                          unsigned char* __restrict__ active,
                                          accum_t* split_accum, GP_ATTR_PARAMETERS,
                                          const double* __restrict__ aggregates,
                                          long long num_vertices, long long iteration,
                                          double* l1_total, unsigned long long* counters) {{
    extern __shared__ __align__(16) unsigned char gp_split_shared[];
    GP_ATTRS
    double l1 = 0.0;
    unsigned long long activated = 0, activated_out_edges = 0;
    for (int slot = blockIdx.x * blockDim.x + threadIdx.x; slot < num_split;
         slot += gridDim.x * blockDim.x) {{
        gp_update(attrs, aggregates, num_vertices, iteration, split_vertices[slot],
                  split_accum[slot], values, out, active, &l1, &activated,
                  &activated_out_edges);
        split_accum[slot] = gp_accum_identity();
    }}
    gp_block_totals(l1, activated, activated_out_edges, l1_total, counters, gp_split_shared);
}}

extern "C" __global__ void gp_contributions(const value_t* __restrict__ values,
                                            accum_t* __restrict__ contributions,
                                            GP_ATTR_PARAMETERS, long long num_vertices) {{
    GP_ATTRS
    for (long long u = blockIdx.x * (long long)blockDim.x + threadIdx.x; u < num_vertices;
         u += (long long)gridDim.x * blockDim.x)
        contributions[u] = gp_gather(values, (const weight_t*)0, attrs, u, 0, 0);
}}

extern "C" __global__ void gp_init_values(value_t* __restrict__ values, GP_ATTR_PARAMETERS,
                                          long long num_vertices) {{
    GP_ATTRS
    for (long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x; v < num_vertices;
         v += (long long)gridDim.x * blockDim.x)
        values[v] = gp_init(attrs, num_vertices, v);
}}

extern "C" __global__ void gp_aggregates(const value_t* __restrict__ values,
                                         GP_ATTR_PARAMETERS, long long num_vertices,
                                         long long iteration, double* totals) {{
#if GP_NUM_AGGREGATES > 0
    GP_ATTRS
    double partial[GP_NUM_AGGREGATES];
    for (int i = 0; i < GP_NUM_AGGREGATES; ++i) partial[i] = gp_aggregate_identity(i);
    for (long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x; v < num_vertices;
         v += (long long)gridDim.x * blockDim.x)
        gp_aggregate(values, attrs, num_vertices, iteration, v, partial);
    for (int i = 0; i < GP_NUM_AGGREGATES; ++i) {{
        double x = partial[i];
        for (int offset = 16; offset > 0; offset >>= 1)
            x = gp_aggregate_merge(i, x, __shfl_down_sync(0xffffffffu, x, offset));
        if ((threadIdx.x & 31) == 0) gp_atomic_merge_double(i, &totals[i], x);
    }}
#endif
}}
"""

_DOUBLE_ATOMIC = {
    "add": "atomicAdd(address, x);",
    "min": ("unsigned long long* bits = (unsigned long long*)address;\n"
            "        unsigned long long seen = *bits, assumed;\n"
            "        while (x < __longlong_as_double(seen)) {\n"
            "            assumed = seen;\n"
            "            seen = atomicCAS(bits, assumed, __double_as_longlong(x));\n"
            "            if (seen == assumed) break;\n"
            "        }"),
}
_DOUBLE_ATOMIC["max"] = _DOUBLE_ATOMIC["min"].replace("x < __longlong", "x > __longlong")
_DOUBLE_MERGE = {"add": "a + b", "min": "(b < a ? b : a)", "max": "(b > a ? b : a)"}


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


def kernel_source(program: CudaProgram, vertex_dtype) -> str:
    """The whole CUDA C++ translation unit for ``program``: its device
    functions followed by the kernels, for a store with ``vertex_dtype`` ids.

    Raises
    ------
    ConfigError
        When ``config.GPU_MERGE_LANES`` is not one of :data:`MERGE_LANES_CHOICES`.
    """
    lanes = config.GPU_MERGE_LANES
    if lanes not in MERGE_LANES_CHOICES or isinstance(lanes, (bool, float)):
        raise ConfigError(f"config.GPU_MERGE_LANES={lanes!r}: expected one of "
                          f"{MERGE_LANES_CHOICES}")
    monoids = program.aggregate_monoids
    merge = "\n".join(f"    if (i == {i}) return {_DOUBLE_MERGE[m]};"
                      for i, m in enumerate(monoids)) + "\n    return a;"
    atomic = "\n".join(f"    if (i == {i}) {{\n        {_DOUBLE_ATOMIC[m]}\n        return;\n    }}"
                       for i, m in enumerate(monoids)) or "    (void)i; (void)address; (void)x;"
    kernels = _KERNELS.format(vid_type=ctype(vertex_dtype), threads=config.GPU_THREADS_PER_BLOCK,
                              merge_lanes=config.GPU_MERGE_LANES,
                              aggregate_merge=merge, aggregate_atomic=atomic)
    return program.source + "\n" + kernels


@dataclass
class GpuKernels:
    """The compiled kernels of one program (cupy RawKernel objects).

    ``pull[(precomputed, warp_combine)]`` is the pull kernel reading
    precomputed contributions or gathering per edge, with or without the
    warp-level combining of same-destination runs before the replica atomics.
    """

    module: object
    pull: dict
    apply_split: object
    contributions: object
    init_values: object
    aggregates: object
    source: str


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
        variants = [(precomputed, combine) for precomputed in (False, True)
                    for combine in (False, True)]
        names = {variant: f"gp_pull<{str(variant[0]).lower()}, {str(variant[1]).lower()}, "
                          f"{edges_per_thread}>" for variant in variants}
        module = cupy.RawModule(code=source, options=("-std=c++17",),
                                name_expressions=tuple(names.values()))
        try:
            module.compile()
        except cupy.cuda.compiler.CompileException as error:
            from ..program import ProgramError

            raise ProgramError(f"{type(program.program).__name__}: NVRTC rejected the "
                               f"generated CUDA code:\n{error.get_message()}") from None
        kernels = GpuKernels(
            module=module,
            pull={variant: module.get_function(name) for variant, name in names.items()},
            apply_split=module.get_function("gp_apply_split"),
            contributions=module.get_function("gp_contributions"),
            init_values=module.get_function("gp_init_values"),
            aggregates=module.get_function("gp_aggregates"), source=source)
        _MODULES[key] = kernels
        return kernels


def contributions_pay(program: CudaProgram) -> bool:
    """Whether computing the gathers once per source vertex saves work.

    True when the gather reads only the source (its value and degrees) and
    reads a degree besides the value: that degree is a second random read per
    edge the precompute removes.  A gather of ``src`` alone reads one array
    either way (the same rule as the CPU's,
    :func:`garaphpy.scheduler.policy.precompute_source_gathers`).
    """
    parameters = set(type(program.program).functions["gather"].parameters)
    return parameters <= SOURCE_SIDE_PARAMETERS and bool(parameters - {"src"})


def accumulator_bytes(shards: np.ndarray, accum_dtype) -> np.ndarray:
    """Bytes of accumulators (``|V_i| * R_i`` slots) each shard's block needs.

    Rounded up to 4 bytes: an accumulator narrower than 32 bits is combined
    atomically through the aligned word that holds it, which must not leave
    the shard's region (and the next region must start aligned).
    """
    slots = shards["num_vertices"].astype(np.int64) * shards["replication"].astype(np.int64)
    return (slots * np.dtype(accum_dtype).itemsize + 3) // 4 * 4
