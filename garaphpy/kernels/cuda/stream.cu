// garaphpy's kernels for pages that are not resident (issue 17), appended after
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
//   gp_unpack_page         a packed page (kept on the device or just copied)
//                          back to the image the pull reads (any program).

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
