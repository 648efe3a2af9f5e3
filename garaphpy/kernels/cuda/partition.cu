// garaphpy's kernels of a partition's GPU worker (a run partitioned over Dask
// workers; Garaph sections 3.1, 4.1): the synchronous pull of the vertices the
// partition owns, over its in-edges only, then the commit that flags the owned
// vertices changed (compacted by the host's cupy.flatnonzero) and the partition's
// share of the next iteration's aggregates. Loaded by garaphpy/kernels/gpu.py
// after pull.cu, whose prelude, program functions, GP_ATTRS, gp_update,
// gp_shuffle and gp_block_totals it uses; driven by
// garaphpy/distributed/gpu_worker.py.
//
// The partition's CSC: in_offsets[i] .. in_offsets[i + 1] are the in-edges of the
// owned vertex first + i, numbered from the partition's first edge; sources and
// weights are the partition's own (the gather's edge number e is that local one,
// as the CPU worker's).

// One iteration's pull of the owned vertices first..end-1: a group of
// 2^group_shift consecutive lanes of one warp per vertex gathers over its in-edges
// (precomputed contributions or the program's gather), the lanes combine by
// shuffles, and the group's first lane applies the vertex into out (gp_update:
// its activity, the L1 change, the activations). Every lane of a warp takes the
// same number of rounds (the shuffles need all 32).
extern "C" __global__ void __launch_bounds__(256)
gp_partition_pull(const long long* __restrict__ in_offsets,
                  const vid_t* __restrict__ sources, const weight_t* __restrict__ weights,
                  long long first, long long end, int group_shift, int precomputed,
                  const value_t* values, value_t* out,
                  const accum_t* __restrict__ contributions,
                  unsigned char* __restrict__ active, GP_ATTR_PARAMETERS,
                  const double* __restrict__ aggregates, long long num_vertices,
                  long long iteration, double* l1_total, unsigned long long* counters) {
    extern __shared__ __align__(16) unsigned char gp_partition_shared[];
    GP_ATTRS
    const long long count = end - first;
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long threads = (long long)gridDim.x * blockDim.x;
    const int lane = threadIdx.x & 31, group = 1 << group_shift, sub = lane & (group - 1);
    const long long per_warp = 32 >> group_shift;
    const long long warps = threads >> 5;
    const accum_t identity = gp_accum_identity();
    double l1 = 0.0;
    unsigned long long activated = 0, activated_out_edges = 0;
    for (long long base = (thread >> 5) * per_warp; base < count; base += warps * per_warp) {
        const long long i = base + (lane >> group_shift);
        const long long v = first + i;
        long long begin = 0, stop = 0;
        if (i < count) {
            begin = in_offsets[i];
            stop = in_offsets[i + 1];
        }
        accum_t accum = identity;
        for (long long e = begin + sub; e < stop; e += group) {
            const long long u = (long long)sources[e];
            accum = gp_combine(accum, precomputed ? contributions[u]
                                                  : gp_gather(values, weights, attrs, u, v, e));
        }
        // the group's lanes combine into its first lane (the others' results unused)
        for (int offset = group >> 1; offset > 0; offset >>= 1)
            accum = gp_combine(accum, gp_shuffle<false>(accum, offset));
        if (i < count && sub == 0)
            gp_update(attrs, aggregates, num_vertices, iteration, v, accum, values, out, active,
                      &l1, &activated, &activated_out_edges);
    }
    gp_block_totals(l1, activated, activated_out_edges, l1_total, counters,
                    gp_partition_shared);
}

// The iteration's owned values committed (out -> values, which the next
// iteration's gathers read), each owned vertex flagged where its value changed.
extern "C" __global__ void gp_partition_commit(const value_t* __restrict__ out, value_t* values,
                                               unsigned char* __restrict__ changed,
                                               long long first, long long end) {
    for (long long v = first + blockIdx.x * (long long)blockDim.x + threadIdx.x; v < end;
         v += (long long)gridDim.x * blockDim.x) {
        const value_t next = out[v];
        changed[v - first] = next != values[v];
        values[v] = next;
    }
}

// The program's aggregates over the owned vertices first..end-1 (the partition's
// share), merged into totals (set to the identities beforehand).
extern "C" __global__ void gp_partition_aggregates(const value_t* __restrict__ values,
                                                   GP_ATTR_PARAMETERS, long long num_vertices,
                                                   long long iteration, long long first,
                                                   long long end, double* totals) {
#if GP_NUM_AGGREGATES > 0
    GP_ATTRS
    gp_aggregates_over(values, attrs, num_vertices, iteration, first, end, totals);
#endif
}
