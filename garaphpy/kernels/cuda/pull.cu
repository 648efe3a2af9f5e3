// garaphpy's GPU kernels (Garaph sections 3.1-3.2): replication-based pull
// over shards, the split-vertex apply, source contributions, init and the
// aggregates. Loaded by garaphpy/kernels/gpu.py, which puts in front of it the
// program's device functions (garaphpy.kernels.cuda_program) and a prelude
// defining vid_t, GP_THREADS_PER_BLOCK, GP_MERGE_LANES, gp_aggregate_merge
// and gp_atomic_merge_double for the program and the store.

template <typename T>
__device__ __forceinline__ T gp_warp_sum(T x) {
    for (int offset = 16; offset > 0; offset >>= 1)
        x += __shfl_down_sync(0xffffffffu, x, offset);
    return x;
}

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
                                                unsigned char* shared) {
    double* warp_l1 = reinterpret_cast<double*>(shared);
    unsigned long long* warp_activated = reinterpret_cast<unsigned long long*>(shared + 256);
    unsigned long long* warp_out_edges = warp_activated + 32;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int warps = (blockDim.x + 31) >> 5;
    l1 = gp_warp_sum(l1);
    activated = gp_warp_sum(activated);
    activated_out_edges = gp_warp_sum(activated_out_edges);
    __syncthreads();  // the shared memory may still be read as accumulators
    if (lane == 0) {
        warp_l1[warp] = l1;
        warp_activated[warp] = activated;
        warp_out_edges[warp] = activated_out_edges;
    }
    __syncthreads();
    if (warp == 0) {
        l1 = lane < warps ? warp_l1[lane] : 0.0;
        activated = lane < warps ? warp_activated[lane] : 0ull;
        activated_out_edges = lane < warps ? warp_out_edges[lane] : 0ull;
        l1 = gp_warp_sum(l1);
        activated = gp_warp_sum(activated);
        activated_out_edges = gp_warp_sum(activated_out_edges);
        if (lane == 0) {
            if (l1 != 0.0) atomicAdd(l1_total, l1);
            if (activated != 0) {
                atomicAdd(&counters[0], activated);
                atomicAdd(&counters[1], activated_out_edges);
            }
        }
    }
}

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
                                          unsigned long long* activated_out_edges) {
    value_t old_value = values[v];
    value_t new_value = gp_apply(attrs, aggregates, num_vertices, iteration, v, old_value,
                                 accum);
    out[v] = new_value;
    bool is_active = gp_activate(new_value, old_value);
    active[v] = is_active;
    *l1 += fabs((double)new_value - (double)old_value);
    if (is_active) {
        *activated += 1;
        *activated_out_edges += (unsigned long long)attrs.out_degree[v];
    }
}

template <int BYTES> struct gp_bits { typedef int type; };
template <> struct gp_bits<8> { typedef long long type; };

// __shfl_up_sync (UP) or __shfl_down_sync for any accumulator type: moved as its
// bit pattern
template <bool UP, typename T>
__device__ __forceinline__ T gp_shuffle(T x, int delta) {
    union { T value; typename gp_bits<sizeof(T)>::type bits; } word;
    word.bits = 0;
    word.value = x;
    word.bits = UP ? __shfl_up_sync(0xffffffffu, word.bits, delta)
                   : __shfl_down_sync(0xffffffffu, word.bits, delta);
    return word.value;
}

// N consecutive elements from p (aligned to N * sizeof(T) bytes), in 16-, 8- or
// 4-byte loads where the size allows
template <typename T, int N>
__device__ __forceinline__ void gp_load_run(const T* __restrict__ p, T (&out)[N]) {
    constexpr int BYTES = (int)sizeof(T) * N;
    if constexpr (BYTES % 16 == 0) {
        union { uint4 words[BYTES / 16]; T items[N]; } run;
#pragma unroll
        for (int i = 0; i < BYTES / 16; ++i) run.words[i] = __ldg(reinterpret_cast<const uint4*>(p) + i);
#pragma unroll
        for (int i = 0; i < N; ++i) out[i] = run.items[i];
    } else if constexpr (BYTES % 8 == 0) {
        union { uint2 words[BYTES / 8]; T items[N]; } run;
#pragma unroll
        for (int i = 0; i < BYTES / 8; ++i) run.words[i] = __ldg(reinterpret_cast<const uint2*>(p) + i);
#pragma unroll
        for (int i = 0; i < N; ++i) out[i] = run.items[i];
    } else {
#pragma unroll
        for (int i = 0; i < N; ++i) out[i] = p[i];
    }
}

// The end of a pull block (gp_pull, gp_pull_packed), once every edge is in the
// replicas: the two-way merge with strides R_i/2, ..., 1 (the paper's pairing), no
// barrier: the R_i replicas of a vertex belong to G = min(R_i, MERGE_LANES)
// consecutive lanes of one warp; lane l merges its own slots l, l + G, l + 2G, ... with
// the strides R_i/2 .. G, then the G lanes merge by shuffles with the strides G/2 .. 1.
// Then each vertex is applied (or a split vertex's partial sum joins the others).
__device__ __forceinline__ void gp_pull_finish(
        accum_t* local, int replication, int replication_shift, int shard_vertices,
        long long first_vertex, int split_slot, accum_t* split_accum, const gp_attrs& attrs,
        const double* __restrict__ aggregates, long long num_vertices, long long iteration,
        const value_t* values, value_t* out, unsigned char* __restrict__ active,
        double* l1_total, unsigned long long* counters, unsigned char* shared) {
    const accum_t identity = gp_accum_identity();
    // the two-way merge with strides R_i/2, ..., 1 (the paper's pairing), no barrier: the
    // R_i replicas of a vertex belong to G = min(R_i, MERGE_LANES) consecutive lanes of one
    // warp; lane l merges its own slots l, l + G, l + 2G, ... with the strides R_i/2 .. G,
    // then the G lanes merge by shuffles with the strides G/2 .. 1
    if (replication > 1) {
        constexpr int MERGE_LANES = GP_MERGE_LANES;
        const int group_shift = min(replication_shift, __ffs(MERGE_LANES) - 1);
        const int group = 1 << group_shift;
        const int lane_slots = replication >> group_shift;
        const int group_slots = shard_vertices << group_shift;
        for (int base = threadIdx.x & ~31; base < group_slots; base += blockDim.x) {
            const int i = base + (threadIdx.x & 31);
            accum_t x = identity;
            if (i < group_slots) {
                accum_t* mine = local + ((i >> group_shift) << replication_shift)
                                + (i & (group - 1));
                for (int half = lane_slots >> 1; half > 0; half >>= 1)
                    for (int k = 0; k < half; ++k)
                        mine[k << group_shift] = gp_combine(mine[k << group_shift],
                                                            mine[(k + half) << group_shift]);
                x = mine[0];
            }
            for (int stride = group >> 1; stride > 0; stride >>= 1)
                x = gp_combine(x, gp_shuffle<false>(x, stride));
            if (i < group_slots && (i & (group - 1)) == 0)
                local[(i >> group_shift) << replication_shift] = x;
        }
        __syncthreads();
    }
    double l1 = 0.0;
    unsigned long long activated = 0, activated_out_edges = 0;
    if (split_slot >= 0) {
        if (threadIdx.x == 0) gp_atomic_combine(&split_accum[split_slot], local[0]);
    } else {
        for (int i = threadIdx.x; i < shard_vertices; i += blockDim.x)
            gp_update(attrs, aggregates, num_vertices, iteration, first_vertex + i,
                      local[i << replication_shift], values, out, active, &l1, &activated,
                      &activated_out_edges);
    }
    gp_block_totals(l1, activated, activated_out_edges, l1_total, counters, shared);
}

template <bool PRECOMPUTED, int EDGES_PER_THREAD>
__global__ void __launch_bounds__(GP_THREADS_PER_BLOCK)
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
        unsigned long long* counters) {
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
    if (EDGES_PER_THREAD > 1) {
        // each thread takes a run of consecutive edges (runs aligned to their length in
        // the arrays, loaded as vectors, their gathers in flight at once), combines each
        // destination's edges of the run in registers and takes one replica atomic per
        // destination; a run straddling the shard's ends ignores the other shards' edges
        constexpr int RUN = EDGES_PER_THREAD;
        const long long first_run = edge_begin / RUN, end_run = (edge_end + RUN - 1) / RUN;
        for (long long r = first_run + threadIdx.x; r < end_run; r += blockDim.x) {
            const long long e0 = r * RUN;
            const int lo = (int)max(edge_begin - e0, 0ll);
            const int hi = (int)min(edge_end - e0, (long long)RUN);
            vid_t u[RUN];
            unsigned short key[RUN];
            gp_load_run(sources + e0, u);
            gp_load_run(idxoff + e0, key);
            accum_t x[RUN];
#pragma unroll
            for (int j = 0; j < RUN; ++j) {
                x[j] = identity;
                if (j >= lo && j < hi) {
                    if (PRECOMPUTED) x[j] = contributions[u[j]];
                    else x[j] = gp_gather(values, weights, attrs, (long long)u[j],
                                          first_vertex + key[j], e0 + j);
                }
            }
            int run_key = -1;
            accum_t run = identity;
#pragma unroll
            for (int j = 0; j < RUN; ++j) {
                if (j >= lo && j < hi) {
                    if ((int)key[j] != run_key) {
                        if (run_key >= 0)
                            gp_atomic_combine(&local[(run_key << replication_shift) + replica], run);
                        run_key = key[j];
                        run = x[j];
                    } else {
                        run = gp_combine(run, x[j]);
                    }
                }
            }
            if (run_key >= 0) gp_atomic_combine(&local[(run_key << replication_shift) + replica], run);
        }
    } else {
        for (long long e = edge_begin + threadIdx.x; e < edge_end; e += blockDim.x) {
            const long long u = (long long)sources[e];
            const int offset = idxoff[e];
            accum_t x;
            if (PRECOMPUTED) x = contributions[u];
            else x = gp_gather(values, weights, attrs, u, first_vertex + offset, e);
            gp_atomic_combine(&local[(offset << replication_shift) + replica], x);
        }
    }
    __syncthreads();
    gp_pull_finish(local, replication, replication_shift, shard_vertices, first_vertex,
                   shard_split_slot[shard], split_accum, attrs, aggregates, num_vertices,
                   iteration, values, out, active, l1_total, counters, gp_shared);
}

// Vertices split over several shards: apply once all their partial sums are in.
extern "C" __global__ void gp_apply_split(const long long* __restrict__ split_vertices,
                                          int num_split, const value_t* values, value_t* out,
                                          unsigned char* __restrict__ active,
                                          accum_t* split_accum, GP_ATTR_PARAMETERS,
                                          const double* __restrict__ aggregates,
                                          long long num_vertices, long long iteration,
                                          double* l1_total, unsigned long long* counters) {
    extern __shared__ __align__(16) unsigned char gp_split_shared[];
    GP_ATTRS
    double l1 = 0.0;
    unsigned long long activated = 0, activated_out_edges = 0;
    for (int slot = blockIdx.x * blockDim.x + threadIdx.x; slot < num_split;
         slot += gridDim.x * blockDim.x) {
        gp_update(attrs, aggregates, num_vertices, iteration, split_vertices[slot],
                  split_accum[slot], values, out, active, &l1, &activated,
                  &activated_out_edges);
        split_accum[slot] = gp_accum_identity();
    }
    gp_block_totals(l1, activated, activated_out_edges, l1_total, counters, gp_split_shared);
}

extern "C" __global__ void gp_contributions(const value_t* __restrict__ values,
                                            accum_t* __restrict__ contributions,
                                            GP_ATTR_PARAMETERS, long long num_vertices) {
    GP_ATTRS
    for (long long u = blockIdx.x * (long long)blockDim.x + threadIdx.x; u < num_vertices;
         u += (long long)gridDim.x * blockDim.x)
        contributions[u] = gp_gather(values, (const weight_t*)0, attrs, u, 0, 0);
}

extern "C" __global__ void gp_init_values(value_t* __restrict__ values, GP_ATTR_PARAMETERS,
                                          long long num_vertices) {
    GP_ATTRS
    for (long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x; v < num_vertices;
         v += (long long)gridDim.x * blockDim.x)
        values[v] = gp_init(attrs, num_vertices, v);
}

// The program's aggregates over the vertices first..end-1 (every vertex, or a
// partition's share), merged into totals (set to the identities beforehand).
__device__ __forceinline__ void gp_aggregates_over(const value_t* __restrict__ values,
                                                   const gp_attrs& attrs,
                                                   long long num_vertices, long long iteration,
                                                   long long first, long long end,
                                                   double* totals) {
#if GP_NUM_AGGREGATES > 0
    double partial[GP_NUM_AGGREGATES];
    for (int i = 0; i < GP_NUM_AGGREGATES; ++i) partial[i] = gp_aggregate_identity(i);
    for (long long v = first + blockIdx.x * (long long)blockDim.x + threadIdx.x; v < end;
         v += (long long)gridDim.x * blockDim.x)
        gp_aggregate(values, attrs, num_vertices, iteration, v, partial);
    for (int i = 0; i < GP_NUM_AGGREGATES; ++i) {
        double x = partial[i];
        for (int offset = 16; offset > 0; offset >>= 1)
            x = gp_aggregate_merge(i, x, __shfl_down_sync(0xffffffffu, x, offset));
        if ((threadIdx.x & 31) == 0) gp_atomic_merge_double(i, &totals[i], x);
    }
#endif
}

extern "C" __global__ void gp_aggregates(const value_t* __restrict__ values,
                                         GP_ATTR_PARAMETERS, long long num_vertices,
                                         long long iteration, double* totals) {
#if GP_NUM_AGGREGATES > 0
    GP_ATTRS
    gp_aggregates_over(values, attrs, num_vertices, iteration, 0, num_vertices, totals);
#endif
}
