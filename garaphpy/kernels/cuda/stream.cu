// garaphpy's kernels for pages that are not resident, appended after
// pull.cu and sparse.cu (same prelude and program functions) by
// garaphpy/kernels/gpu.py; driven by GpuEngine's selective iterations
// (garaphpy/scheduler/gpu_engine.py, garaphpy/scheduler/transfer.py).
//
// For a program declaring apply_keeps_best, a streamed page whose active
// in-edges are few is not copied: its active in-edges are pushed instead.
//   gp_stream_push         each listed piece of an active vertex's out-edges
//                          combines its gathers into the destinations'
//                          accumulators with the sum's atomics: from a compacted
//                          buffer the host gathered (Subway's SubCSR) or from
//                          the whole CSR in pinned host memory, read by the GPU
//                          itself (zero-copy, EMOGI; only the edges into the
//                          given vertex ranges count);
//   gp_stream_split_merge  the pushed sums of vertices split over several
//                          shards join the pull's partial sums (apply_split
//                          applies them);
//   gp_stream_apply        every vertex of the pages not pulled (pushed or
//                          skipped) is applied to its accumulator, which goes
//                          back to the identity (a skipped vertex's is the
//                          identity: it keeps its value and is not active).
// The sums are min or max: an edge combined twice (pushed and pulled, a vertex
// of two pages) changes nothing.
//   gp_pull_packed         the pull of a packed page (kept on the device or just
//                          copied) read where it lies (any program);
//   gp_unpack_page         a packed page back to the image gp_pull reads (for
//                          study: config.GPU_PULL_PACKED off).

__device__ __forceinline__ bool gp_in_ranges(const long long* __restrict__ range_first,
                                             const long long* __restrict__ range_end,
                                             int num_ranges, long long v) {
    int lo = 0, hi = num_ranges;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (range_first[mid] <= v) lo = mid + 1;
        else hi = mid;
    }
    return lo > 0 && v < range_end[lo - 1];
}

// Each piece (a vertex and a run of its edges: a hub's edges are cut into
// several) takes GROUP = 1 << group_shift consecutive lanes, which read its
// edges in consecutive runs (coalesced, also over the bus).
extern "C" __global__ void gp_stream_push(const long long* __restrict__ piece_vertex,
                                          long long count,
                                          const long long* __restrict__ piece_begin,
                                          const long long* __restrict__ piece_end,
                                          const vid_t* __restrict__ targets,
                                          const weight_t* __restrict__ weights,
                                          const long long* __restrict__ range_first,
                                          const long long* __restrict__ range_end,
                                          int num_ranges, accum_t* accum, const value_t* values,
                                          GP_ATTR_PARAMETERS, int group_shift) {
    GP_ATTRS
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long threads = (long long)gridDim.x * blockDim.x;
    const int group = 1 << group_shift, sub = threadIdx.x & (group - 1);
    for (long long i = thread >> group_shift; i < count; i += threads >> group_shift) {
        const long long u = piece_vertex[i];
        const long long end = piece_end[i];
        for (long long k = piece_begin[i] + sub; k < end; k += group) {
            const long long v = (long long)targets[k];
            if (num_ranges == 0 || gp_in_ranges(range_first, range_end, num_ranges, v))
                gp_atomic_combine(&accum[v], gp_gather(values, weights, attrs, u, v, k));
        }
    }
}

extern "C" __global__ void gp_stream_split_merge(const long long* __restrict__ split_vertices,
                                                 int num_split, accum_t* accum,
                                                 accum_t* split_accum) {
    const accum_t identity = gp_accum_identity();
    for (int s = blockIdx.x * blockDim.x + threadIdx.x; s < num_split;
         s += gridDim.x * blockDim.x) {
        const long long v = split_vertices[s];
        const accum_t pushed = accum[v];
        if (pushed != identity) {
            split_accum[s] = gp_combine(split_accum[s], pushed);
            accum[v] = identity;
        }
    }
}

// blockIdx.y: the range.
extern "C" __global__ void gp_stream_apply(const long long* __restrict__ range_first,
                                           const long long* __restrict__ range_end,
                                           accum_t* accum, const value_t* values, value_t* out,
                                           unsigned char* __restrict__ active,
                                           GP_ATTR_PARAMETERS,
                                           const double* __restrict__ aggregates,
                                           long long num_vertices, long long iteration,
                                           double* l1_total, unsigned long long* counters) {
    extern __shared__ __align__(16) unsigned char gp_stream_shared[];
    GP_ATTRS
    const long long first = range_first[blockIdx.y], end = range_end[blockIdx.y];
    const accum_t identity = gp_accum_identity();
    double l1 = 0.0;
    unsigned long long activated = 0, activated_out_edges = 0;
    for (long long v = first + (long long)blockIdx.x * blockDim.x + threadIdx.x; v < end;
         v += (long long)gridDim.x * blockDim.x) {
        const accum_t sum = accum[v];
        if (sum != identity) accum[v] = identity;
        gp_update(attrs, aggregates, num_vertices, iteration, v, sum, values, out, active, &l1,
                  &activated, &activated_out_edges);
    }
    gp_block_totals(l1, activated, activated_out_edges, l1_total, counters, gp_stream_shared);
}

// A packed page (garaphpy/kernels/packed.py) back to the image the pull reads, in
// device memory: one block per shard of the page.  Sources are source_bytes
// little-endian bytes each; the shard's column starts (one per vertex, from the
// shard's first edge) give IdxOff, written by a warp per vertex (coalesced); values
// are 8-bit (weight_code 1), 16-bit (2) or the store's type (3), or absent (0).
extern "C" __global__ void gp_unpack_page(const unsigned char* __restrict__ packed,
                                          int source_bytes, long long columns_offset,
                                          long long weights_offset, int weight_code,
                                          const long long* __restrict__ shard_edge_begin,
                                          const long long* __restrict__ shard_edge_end,
                                          const int* __restrict__ shard_num_vertices,
                                          const long long* __restrict__ shard_column_begin,
                                          int first_shard, vid_t* __restrict__ sources,
                                          unsigned short* __restrict__ idxoff,
                                          weight_t* __restrict__ weights) {
    const int s = first_shard + blockIdx.x;
    const long long begin = shard_edge_begin[s], end = shard_edge_end[s];
    for (long long e = begin + threadIdx.x; e < end; e += blockDim.x) {
        const unsigned char* p = packed + e * source_bytes;
        unsigned long long v = 0;
        for (int b = 0; b < source_bytes; ++b) v |= (unsigned long long)p[b] << (8 * b);
        sources[e] = (vid_t)v;
        if (weight_code == 1)
            weights[e] = (weight_t)packed[weights_offset + e];
        else if (weight_code == 2)
            weights[e] = (weight_t)reinterpret_cast<const unsigned short*>(
                packed + weights_offset)[e];
        else if (weight_code == 3)
            weights[e] = reinterpret_cast<const weight_t*>(packed + weights_offset)[e];
    }
    const unsigned int* columns = reinterpret_cast<const unsigned int*>(packed + columns_offset)
        + (shard_column_begin[s] - shard_column_begin[first_shard]);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const int count = shard_num_vertices[s];
    const long long edges = end - begin;
    for (int j = warp; j < count; j += warps) {
        const long long first = columns[j];
        const long long last = j + 1 < count ? (long long)columns[j + 1] : edges;
        for (long long i = first + lane; i < last; i += 32)
            idxoff[begin + i] = (unsigned short)j;
    }
}

// The pull of a packed page read where it lies: gp_pull's runs of EDGES_PER_THREAD
// edges and replicated accumulators, with each run's sources, values and
// destinations decoded from the packed image.  A destination is the shard's vertex
// whose column start is the last at or before the edge: the image holds it for
// every (1 << key_shift)-th edge of the page, and a run walks the column starts
// from there (one L1 read for each vertex it passes).
template <int RUN>
__device__ __forceinline__ void gp_packed_sources(const unsigned char* __restrict__ packed,
                                                  int source_bytes, long long e0,
                                                  unsigned long long (&u)[RUN]) {
    if constexpr (RUN == 8) {
        if (source_bytes == 3) {        // 24 bytes from an 8-byte boundary: three words
            const unsigned long long* p =
                reinterpret_cast<const unsigned long long*>(packed + e0 * 3);
            const unsigned long long w[3] = {__ldg(p), __ldg(p + 1), __ldg(p + 2)};
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const int bit = 24 * j, word = bit >> 6, shift = bit & 63;
                unsigned long long v = w[word] >> shift;
                if (shift > 40) v |= w[word + 1] << (64 - shift);
                u[j] = v & 0xFFFFFFull;
            }
            return;
        }
    }
#pragma unroll
    for (int j = 0; j < RUN; ++j) {
        const unsigned char* p = packed + (e0 + j) * source_bytes;
        unsigned long long v = 0;
        for (int b = 0; b < source_bytes; ++b) v |= (unsigned long long)__ldg(p + b) << (8 * b);
        u[j] = v;
    }
}

template <int RUN>
__device__ __forceinline__ void gp_packed_weights(const unsigned char* __restrict__ packed,
                                                  long long weights_offset, int weight_code,
                                                  long long e0, weight_t (&w)[RUN]) {
    if (weight_code == 1) {
        unsigned char raw[RUN];
        gp_load_run(packed + weights_offset + e0, raw);
#pragma unroll
        for (int j = 0; j < RUN; ++j) w[j] = (weight_t)raw[j];
    } else if (weight_code == 2) {
        unsigned short raw[RUN];
        gp_load_run(reinterpret_cast<const unsigned short*>(packed + weights_offset) + e0, raw);
#pragma unroll
        for (int j = 0; j < RUN; ++j) w[j] = (weight_t)raw[j];
    } else if (weight_code == 3) {
        gp_load_run(reinterpret_cast<const weight_t*>(packed + weights_offset) + e0, w);
    } else {
#pragma unroll
        for (int j = 0; j < RUN; ++j) w[j] = (weight_t)0;
    }
}

template <bool PRECOMPUTED, int EDGES_PER_THREAD>
__global__ void __launch_bounds__(GP_THREADS_PER_BLOCK)
gp_pull_packed(const unsigned char* __restrict__ packed, int source_bytes,
               long long columns_offset, long long weights_offset, int weight_code,
               long long keys_offset, int key_shift,
               const long long* __restrict__ shard_first_vertex,
               const int* __restrict__ shard_num_vertices, const int* __restrict__ shard_replication,
               const long long* __restrict__ shard_edge_begin,
               const long long* __restrict__ shard_edge_end, const int* __restrict__ shard_split_slot,
               const long long* __restrict__ shard_scratch, accum_t* scratch,
               const long long* __restrict__ shard_column_begin, int first_shard,
               const value_t* values, value_t* out, const accum_t* __restrict__ contributions,
               unsigned char* __restrict__ active, accum_t* split_accum, GP_ATTR_PARAMETERS,
               const double* __restrict__ aggregates, long long num_vertices,
               long long iteration, double* l1_total, unsigned long long* counters) {
    extern __shared__ __align__(16) unsigned char gp_shared[];
    GP_ATTRS
    const int shard = first_shard + blockIdx.x;
    const long long scratch_offset = shard_scratch[shard];
    accum_t* local = scratch_offset >= 0 ? scratch + scratch_offset
                                         : reinterpret_cast<accum_t*>(gp_shared);
    const long long first_vertex = shard_first_vertex[shard];
    const int shard_vertices = shard_num_vertices[shard];
    const int replication = shard_replication[shard];
    const long long edge_begin = shard_edge_begin[shard];
    const long long edge_end = shard_edge_end[shard];
    const accum_t identity = gp_accum_identity();
    for (int i = threadIdx.x; i < shard_vertices * replication; i += blockDim.x)
        local[i] = identity;
    __syncthreads();
    const int replication_shift = __ffs(replication) - 1;
    const int replica = threadIdx.x & (replication - 1);
    const unsigned int* __restrict__ columns = reinterpret_cast<const unsigned int*>(
        packed + columns_offset) + (shard_column_begin[shard] - shard_column_begin[first_shard]);
    const unsigned short* __restrict__ keys =
        reinterpret_cast<const unsigned short*>(packed + keys_offset);
    const int last_vertex = shard_vertices - 1;
    constexpr int RUN = EDGES_PER_THREAD;
    const long long first_run = edge_begin / RUN, end_run = (edge_end + RUN - 1) / RUN;
    for (long long r = first_run + threadIdx.x; r < end_run; r += blockDim.x) {
        const long long e0 = r * RUN;
        const int lo = (int)max(edge_begin - e0, 0ll);
        const int hi = (int)min(edge_end - e0, (long long)RUN);
        unsigned long long u[RUN];
        gp_packed_sources(packed, source_bytes, e0, u);
        weight_t w[RUN];
        if (!PRECOMPUTED) gp_packed_weights(packed, weights_offset, weight_code, e0, w);
        accum_t x[RUN];
        if (PRECOMPUTED) {      // the gathers in flight before the walk
#pragma unroll
            for (int j = 0; j < RUN; ++j)
                x[j] = j >= lo && j < hi ? contributions[u[j]] : identity;
        }
        // the destination of the run's first edge in this shard: the key of its stride
        // when the stride starts in this shard, else the shard's first vertex
        const long long first_edge = e0 + lo;
        int key = ((first_edge >> key_shift) << key_shift) >= edge_begin
                  ? (int)keys[first_edge >> key_shift] : 0;
        int k[RUN];
#pragma unroll
        for (int j = 0; j < RUN; ++j) {
            k[j] = -1;
            if (j >= lo && j < hi) {
                const long long rel = e0 + j - edge_begin;
                while (key < last_vertex && (long long)__ldg(columns + key + 1) <= rel) ++key;
                k[j] = key;
            }
        }
        if (!PRECOMPUTED) {
#pragma unroll
            for (int j = 0; j < RUN; ++j)
                x[j] = k[j] >= 0 ? gp_gather(values, &w[j], attrs, (long long)u[j],
                                             first_vertex + k[j], 0)
                                 : identity;
        }
        int run_key = -1;
        accum_t run = identity;
#pragma unroll
        for (int j = 0; j < RUN; ++j) {
            if (k[j] < 0) continue;
            if (k[j] != run_key) {
                if (run_key >= 0)
                    gp_atomic_combine(&local[(run_key << replication_shift) + replica], run);
                run_key = k[j];
                run = x[j];
            } else {
                run = gp_combine(run, x[j]);
            }
        }
        if (run_key >= 0) gp_atomic_combine(&local[(run_key << replication_shift) + replica], run);
    }
    __syncthreads();
    gp_pull_finish(local, replication, replication_shift, shard_vertices, first_vertex,
                   shard_split_slot[shard], split_accum, attrs, aggregates, num_vertices,
                   iteration, values, out, active, l1_total, counters, gp_shared);
}
