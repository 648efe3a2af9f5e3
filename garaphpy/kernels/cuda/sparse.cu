// garaphpy's device-side loop of sparse iterations: notify-pull over
// the frontier, its state kept on the GPU so that the host queues many
// iterations without waiting. Appended after pull.cu (same prelude and program
// functions) by garaphpy/kernels/gpu.py; driven by
// garaphpy/scheduler/device_loop.py, which documents the state's layout.
//
// One iteration is two launches, each a no-op once the loop has stopped:
//   gp_sparse_notify  (synchronous runs) commits the previous iteration's
//                     applied values; then the frontier's out-edges (CSR)
//                     mark their destinations, each queued once, and their
//                     in-edges are counted (the pull's cost);
//   gp_sparse_pull    each queued vertex gathers over all its in-edges (CSC),
//                     is applied, and joins the next frontier if activated;
//                     when the queued vertices have too many in-edges for a
//                     sparse pull, the iteration is called off instead (the
//                     host runs it as a pull over every shard). The block
//                     that finishes last writes the iteration's record,
//                     turns to the next frontier and applies the stop test.
// A vertex takes GROUP consecutive lanes of a warp (a power of two, from the
// graph's mean degree). The activity bitmap is not kept during the loop: the
// host sets it from the frontier queue when a batch ends. The push (below)
// replaces both launches for programs that allow it, and, in order of value,
// gp_priority_split opens each bucket before the push.

// the loop state, one long long each (device_loop.LOOP_FIELDS keeps the same order)
#define GP_LOOP_ITERATION 0
#define GP_LOOP_END 1
#define GP_LOOP_STOP 2
#define GP_LOOP_PARITY 3
#define GP_LOOP_FRONTIER_SIZE 4     // two: the frontier of each parity
#define GP_LOOP_NOTIFIED 6          // two: the notified queue of each parity
#define GP_LOOP_FIRST 8
#define GP_LOOP_DENSE_EDGES 9
#define GP_LOOP_PULL_EDGES 10
#define GP_LOOP_CAPACITY 11
#define GP_LOOP_FRONTIER_OUT_EDGES 12
#define GP_LOOP_ACTIVATED 13
#define GP_LOOP_ACTIVATED_OUT_EDGES 14
#define GP_LOOP_EDGES_PULLED 15
#define GP_LOOP_L1 16               // a double's bits
#define GP_LOOP_EDGES_NOTIFIED 17
#define GP_LOOP_TOLERANCE 18        // a double's bits
#define GP_LOOP_BLOCKS_DONE 19
#define GP_LOOP_FRONTIER_MAX_DEGREE 20  // two: the largest out-degree of each frontier
#define GP_LOOP_NOTIFIED_MAX_DEGREE 22  // the largest in-degree of the notified vertices
#define GP_LOOP_SPAN_EDGES 23           // the most edges one group of lanes may take
// the push in order of value (device_loop's priority; 0 off, 1 smaller first, 2 larger)
#define GP_LOOP_PRIORITY 24
#define GP_LOOP_BUCKET_WIDTH 25         // a double's bits
#define GP_LOOP_THRESHOLD 26            // a double's bits: keys below it are near
#define GP_LOOP_FLOOR 27                // a double's bits: far keys below it are stale
#define GP_LOOP_FAR_PARITY 28           // the far queue appended to
#define GP_LOOP_FAR_SIZE 29             // two: the far queue of each parity
#define GP_LOOP_FAR_MIN 31              // the least order bits appended to the far queue
#define GP_LOOP_SPLIT_DUE 32            // the next iteration's frontier comes from the far queue
#define GP_LOOP_SPLITS 33               // buckets opened
#define GP_LOOP_FIELDS 34

// why the loop stopped (device_loop.STOP_REASONS)
#define GP_STOP_NONE 0
#define GP_STOP_NO_ACTIVE 1
#define GP_STOP_END 2
#define GP_STOP_TOLERANCE 3
#define GP_STOP_DENSE 4
#define GP_STOP_CAPACITY 5
#define GP_STOP_DENSE_PULL 6

// the record of one iteration (device_loop.RECORD_FIELDS)
#define GP_RECORD_FIELDS 8

// Appends the calling lanes' items to queue[*size ...]: one atomic per warp.
// Every lane of the warp calls it (take: whether this lane has an item).
__device__ __forceinline__ void gp_warp_append(bool take, vid_t item, vid_t* queue,
                                               unsigned long long* size) {
    const unsigned ballot = __ballot_sync(0xffffffffu, take);
    if (ballot == 0) return;
    const int lane = threadIdx.x & 31;
    const int leader = __ffs(ballot) - 1;
    unsigned long long base = 0;
    if (lane == leader) base = atomicAdd(size, (unsigned long long)__popc(ballot));
    base = __shfl_sync(0xffffffffu, base, leader);
    if (take) queue[base + __popc(ballot & ((1u << lane) - 1u))] = item;
}

__device__ __forceinline__ unsigned long long gp_warp_total(unsigned long long x) {
    for (int offset = 16; offset > 0; offset >>= 1)
        x += __shfl_down_sync(0xffffffffu, x, offset);
    return x;
}

// Whether the iteration is called off (the host pulls over every shard instead):
// its notified vertices have too many in-edges in all, or one vertex of the
// frontier or of the notified ones has more edges than one group of lanes should
// take (a hub would hold the whole pass up).
// (Its inputs were written by earlier launches: plain loads.)
__device__ __forceinline__ bool gp_called_off(const long long* loop, long long parity) {
    return loop[GP_LOOP_EDGES_PULLED] > loop[GP_LOOP_PULL_EDGES]
        || loop[GP_LOOP_NOTIFIED_MAX_DEGREE] > loop[GP_LOOP_SPAN_EDGES]
        || loop[GP_LOOP_FRONTIER_MAX_DEGREE + parity] > loop[GP_LOOP_SPAN_EDGES];
}

__device__ __forceinline__ void gp_warp_max_into(unsigned long long x, long long* address) {
    for (int offset = 16; offset > 0; offset >>= 1)
        x = max(x, __shfl_down_sync(0xffffffffu, x, offset));
    // most warps hold no new maximum: a read first keeps them off the atomic
    if ((threadIdx.x & 31) == 0 && x > (unsigned long long)*(volatile long long*)address)
        atomicMax(reinterpret_cast<unsigned long long*>(address), x);
}

__device__ __forceinline__ void gp_warp_min_into(unsigned long long x, long long* address) {
    for (int offset = 16; offset > 0; offset >>= 1)
        x = min(x, __shfl_down_sync(0xffffffffu, x, offset));
    if ((threadIdx.x & 31) == 0 && x < (unsigned long long)*(volatile long long*)address)
        atomicMin(reinterpret_cast<unsigned long long*>(address), x);
}

// ---- the order of values (a program declaring value_priority, run asynchronously):
// a vertex's key is its value (smaller first) or minus it (larger first); vertices
// activated with a key at or above the threshold wait in the far queue, and when
// the frontier runs dry the threshold moves up by the bucket width (near-far
// delta-stepping, as in Davidson et al.'s GPU SSSP and HyTGraph's priority).

// Unsigned integers in the order of the doubles (for atomicMin).
__device__ __forceinline__ unsigned long long gp_key_order(double key) {
    const unsigned long long bits = (unsigned long long)__double_as_longlong(key);
    return (bits >> 63) ? ~bits : (bits | 0x8000000000000000ull);
}

__device__ __forceinline__ double gp_key_of_order(unsigned long long order) {
    const unsigned long long bits = (order >> 63) ? (order & 0x7fffffffffffffffull) : ~order;
    return __longlong_as_double((long long)bits);
}

__device__ __forceinline__ double gp_priority_key(value_t value, bool larger_first) {
    const double key = (double)value;
    return larger_first ? -key : key;
}

// Opens the next bucket when the far queue holds vertices, by one thread: later
// appends go to the other far queue, the next split reads this one. Returns
// whether it did. (Word: volatile long long for the loop state in global memory,
// long long for a block's own copy of it, the fused push's.)
template <typename Word>
__device__ bool gp_priority_turn(Word* state) {
    const long long far = state[GP_LOOP_FAR_PARITY];
    if (state[GP_LOOP_FAR_SIZE + far] == 0) return false;
    state[GP_LOOP_FAR_PARITY] = far ^ 1;
    state[GP_LOOP_FAR_SIZE + (far ^ 1)] = 0;
    const double width = __longlong_as_double(state[GP_LOOP_BUCKET_WIDTH]);
    const double floor = __longlong_as_double(state[GP_LOOP_THRESHOLD]);
    const unsigned long long lowest = (unsigned long long)state[GP_LOOP_FAR_MIN];
    double threshold = floor + width;
    if (lowest != ~0ull) {
        const double least = gp_key_of_order(lowest);
        threshold = fmax(threshold, least + width);
        // the least key must go near, even where adding the width changes nothing
        // (an infinite key: SSWP's sources; or one beyond the width's precision)
        if (!(threshold > least))
            threshold = nextafter(least, __longlong_as_double(0x7ff0000000000000LL));
    }
    state[GP_LOOP_FLOOR] = __double_as_longlong(floor);
    state[GP_LOOP_THRESHOLD] = __double_as_longlong(threshold);
    state[GP_LOOP_FAR_MIN] = -1;
    state[GP_LOOP_SPLIT_DUE] = 1;
    state[GP_LOOP_SPLITS] = state[GP_LOOP_SPLITS] + 1;
    return true;
}

extern "C" __global__ void gp_sparse_notify(long long* loop,
                                            const long long* __restrict__ out_offsets,
                                            const vid_t* __restrict__ out_targets,
                                            const long long* __restrict__ in_offsets,
                                            const vid_t* __restrict__ frontiers,
                                            unsigned int* __restrict__ notified_flags,
                                            vid_t* __restrict__ notified,
                                            const value_t* out, value_t* values,
                                            int commit, int group_shift,
                                            long long num_vertices) {
    if (loop[GP_LOOP_STOP]) return;
    const long long parity = loop[GP_LOOP_PARITY];
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long threads = (long long)gridDim.x * blockDim.x;
    if (commit) {
        const long long committed = loop[GP_LOOP_NOTIFIED + (parity ^ 1)];
        const vid_t* previous = notified + (parity ^ 1) * num_vertices;
        for (long long i = thread; i < committed; i += threads) {
            const long long v = (long long)previous[i];
            values[v] = out[v];
        }
    }
    // a hub in the frontier: no notify (the pull calls the iteration off)
    const long long size = loop[GP_LOOP_FRONTIER_MAX_DEGREE + parity] > loop[GP_LOOP_SPAN_EDGES]
        ? 0 : loop[GP_LOOP_FRONTIER_SIZE + parity];
    const vid_t* frontier = frontiers + parity * num_vertices;
    vid_t* queue = notified + parity * num_vertices;
    unsigned long long* queued = reinterpret_cast<unsigned long long*>(loop + GP_LOOP_NOTIFIED + parity);
    const int lane = threadIdx.x & 31, group = 1 << group_shift, sub = lane & (group - 1);
    const long long per_warp = 32 >> group_shift;
    const long long warps = threads >> 5;
    unsigned long long scanned = 0, planned = 0, widest = 0;
    // rounds of one vertex per group, the same number of rounds for every lane of a warp
    for (long long base = (thread >> 5) * per_warp; base < size; base += warps * per_warp) {
        const long long i = base + (lane >> group_shift);
        long long begin = 0, end = 0;
        if (i < size) {
            const long long u = (long long)frontier[i];
            begin = out_offsets[u];
            end = out_offsets[u + 1];
            if (sub == 0) scanned += (unsigned long long)(end - begin);
        }
        const unsigned span = __reduce_max_sync(0xffffffffu, (unsigned)(end - begin));
        for (unsigned k0 = sub; k0 < span + sub; k0 += group) {
            const long long k = begin + k0;
            bool fresh = false;
            vid_t v = 0;
            if (k < end) {
                v = out_targets[k];
                fresh = notified_flags[v] == 0u && atomicExch(&notified_flags[v], 1u) == 0u;
                if (fresh) {
                    const unsigned long long degree =
                        (unsigned long long)(in_offsets[(long long)v + 1] - in_offsets[v]);
                    planned += degree;
                    widest = max(widest, degree);
                }
            }
            gp_warp_append(fresh, v, queue, queued);
        }
    }
    gp_warp_max_into(widest, loop + GP_LOOP_NOTIFIED_MAX_DEGREE);
    scanned = gp_warp_total(scanned);
    planned = gp_warp_total(planned);
    if (lane == 0) {
        if (scanned)
            atomicAdd(reinterpret_cast<unsigned long long*>(loop + GP_LOOP_EDGES_NOTIFIED), scanned);
        if (planned)
            atomicAdd(reinterpret_cast<unsigned long long*>(loop + GP_LOOP_EDGES_PULLED), planned);
    }
}

// The end of an iteration, by one thread once every block is done: its record
// (none where records is null), the next frontier, the stop test. (Word: as
// gp_priority_turn's.)
template <typename Word>
__device__ void gp_sparse_finish_state(Word* state, long long* records) {
    const long long iteration = state[GP_LOOP_ITERATION];
    const long long parity = state[GP_LOOP_PARITY];
    const long long pulled = state[GP_LOOP_EDGES_PULLED];
    state[GP_LOOP_NOTIFIED + (parity ^ 1)] = 0;     // committed by this iteration's notify
    if (gp_called_off(const_cast<const long long*>(state), parity)) {   // the host pulls instead
        state[GP_LOOP_NOTIFIED + parity] = 0;
        state[GP_LOOP_EDGES_PULLED] = 0;
        state[GP_LOOP_EDGES_NOTIFIED] = 0;
        state[GP_LOOP_NOTIFIED_MAX_DEGREE] = 0;
        state[GP_LOOP_STOP] = GP_STOP_DENSE_PULL;
        return;
    }
    const long long row = iteration - state[GP_LOOP_FIRST];
    const long long activated = state[GP_LOOP_ACTIVATED];
    const long long activated_out_edges = state[GP_LOOP_ACTIVATED_OUT_EDGES];
    const long long l1_bits = state[GP_LOOP_L1];
    if (records != nullptr) {
        long long* record = records + row * GP_RECORD_FIELDS;
        record[0] = state[GP_LOOP_FRONTIER_SIZE + parity];
        record[1] = state[GP_LOOP_FRONTIER_OUT_EDGES];
        record[2] = state[GP_LOOP_NOTIFIED + parity];
        record[3] = pulled;
        record[4] = activated;
        record[5] = activated_out_edges;
        record[6] = l1_bits;
        record[7] = state[GP_LOOP_EDGES_NOTIFIED];
    }
    const long long next_size = state[GP_LOOP_FRONTIER_SIZE + (parity ^ 1)];
    const double l1 = __longlong_as_double(l1_bits);
    const double tolerance = __longlong_as_double(state[GP_LOOP_TOLERANCE]);
    state[GP_LOOP_FRONTIER_SIZE + parity] = 0;
    state[GP_LOOP_FRONTIER_MAX_DEGREE + parity] = 0;
    state[GP_LOOP_NOTIFIED_MAX_DEGREE] = 0;
    state[GP_LOOP_PARITY] = parity ^ 1;
    state[GP_LOOP_FRONTIER_OUT_EDGES] = activated_out_edges;
    state[GP_LOOP_ACTIVATED] = 0;
    state[GP_LOOP_ACTIVATED_OUT_EDGES] = 0;
    state[GP_LOOP_EDGES_PULLED] = 0;
    state[GP_LOOP_L1] = 0;
    state[GP_LOOP_EDGES_NOTIFIED] = 0;
    state[GP_LOOP_ITERATION] = iteration + 1;
    bool waiting = false;           // the far queue holds the next frontier
    if (state[GP_LOOP_PRIORITY]) {
        if (state[GP_LOOP_SPLIT_DUE]) {     // this iteration's split emptied its far queue
            state[GP_LOOP_FAR_SIZE + (state[GP_LOOP_FAR_PARITY] ^ 1)] = 0;
            state[GP_LOOP_SPLIT_DUE] = 0;
        }
        if (next_size == 0) waiting = gp_priority_turn(state);
    }
    long long stop = GP_STOP_NONE;
    if (next_size == 0 && !waiting) stop = GP_STOP_NO_ACTIVE;
    else if (l1 < tolerance) stop = GP_STOP_TOLERANCE;
    else if (iteration + 1 >= state[GP_LOOP_END]) stop = GP_STOP_END;
    else if (activated_out_edges > state[GP_LOOP_DENSE_EDGES]) stop = GP_STOP_DENSE;
    else if (row + 1 >= state[GP_LOOP_CAPACITY]) stop = GP_STOP_CAPACITY;
    state[GP_LOOP_STOP] = stop;
}

__device__ void gp_sparse_finish(long long* loop, long long* records) {
    gp_sparse_finish_state<volatile long long>(loop, records);
}

// The end of a looped kernel's block: its totals added to the iteration's, then
// the last block to finish ends the iteration (last_block: the kernel's shared flag).
__device__ __forceinline__ void gp_sparse_block_done(long long* loop, long long* records,
                                                     double l1, unsigned long long activated,
                                                     unsigned long long activated_out_edges,
                                                     unsigned char* shared, int* last_block) {
    gp_block_totals(l1, activated, activated_out_edges,
                    reinterpret_cast<double*>(loop + GP_LOOP_L1),
                    reinterpret_cast<unsigned long long*>(loop + GP_LOOP_ACTIVATED), shared);
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        const unsigned long long done = atomicAdd(
            reinterpret_cast<unsigned long long*>(loop + GP_LOOP_BLOCKS_DONE), 1ull);
        *last_block = done == gridDim.x - 1;
    }
    __syncthreads();
    if (*last_block && threadIdx.x == 0) {
        __threadfence();
        loop[GP_LOOP_BLOCKS_DONE] = 0;
        gp_sparse_finish(loop, records);
    }
}

// The update tail of the loop's kernels (pull.cu's gp_update for a vertex that
// is listed, not flagged): v applied from the sum of its gathers into out[v]
// (out may be values), its change added to l1; whether it activates, counted
// in activated.
__device__ __forceinline__ bool gp_sparse_update(const gp_attrs& attrs,
                                                 const double* aggregates,
                                                 long long num_vertices, long long iteration,
                                                 long long v, accum_t accum,
                                                 const value_t* values, value_t* out,
                                                 double* l1, unsigned long long* activated) {
    const value_t old_value = values[v];
    const value_t new_value = gp_apply(attrs, aggregates, num_vertices, iteration, v,
                                       old_value, accum);
    out[v] = new_value;
    *l1 += fabs((double)new_value - (double)old_value);
    const bool joins = gp_activate(new_value, old_value);
    if (joins) *activated += 1;
    return joins;
}

// A vertex that joins the next frontier: its out-edges counted, and the widest.
__device__ __forceinline__ void gp_sparse_joins(const gp_attrs& attrs, long long v,
                                                unsigned long long* activated_out_edges,
                                                unsigned long long* widest) {
    const unsigned long long degree = (unsigned long long)attrs.out_degree[v];
    *activated_out_edges += degree;
    *widest = max(*widest, degree);
}

extern "C" __global__ void gp_sparse_pull(long long* loop, long long* records,
                                          const long long* __restrict__ in_offsets,
                                          const vid_t* __restrict__ sources,
                                          const weight_t* __restrict__ weights,
                                          const vid_t* __restrict__ notified,
                                          unsigned int* __restrict__ notified_flags,
                                          vid_t* __restrict__ frontiers,
                                          const value_t* values, value_t* out,
                                          GP_ATTR_PARAMETERS,
                                          const double* __restrict__ aggregates,
                                          int group_shift, long long num_vertices) {
    extern __shared__ __align__(16) unsigned char gp_sparse_shared[];
    __shared__ int gp_last_block, gp_off;
    if (loop[GP_LOOP_STOP]) return;
    GP_ATTRS
    const long long parity = loop[GP_LOOP_PARITY];
    const long long iteration = loop[GP_LOOP_ITERATION];
    const long long count = loop[GP_LOOP_NOTIFIED + parity];
    const vid_t* queue = notified + parity * num_vertices;
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long threads = (long long)gridDim.x * blockDim.x;
    double l1 = 0.0;
    unsigned long long activated = 0, activated_out_edges = 0;
    unsigned long long widest = 0;
    if (threadIdx.x == 0) gp_off = gp_called_off(loop, parity);
    __syncthreads();
    if (gp_off) {
        for (long long i = thread; i < count; i += threads) notified_flags[queue[i]] = 0u;
    } else {
        vid_t* next_frontier = frontiers + (parity ^ 1) * num_vertices;
        unsigned long long* next_size =
            reinterpret_cast<unsigned long long*>(loop + GP_LOOP_FRONTIER_SIZE + (parity ^ 1));
        const int lane = threadIdx.x & 31, group = 1 << group_shift, sub = lane & (group - 1);
        const long long per_warp = 32 >> group_shift;
        const long long warps = threads >> 5;
        const accum_t identity = gp_accum_identity();
        for (long long base = (thread >> 5) * per_warp; base < count; base += warps * per_warp) {
            const long long i = base + (lane >> group_shift);
            long long v = 0, begin = 0, end = 0;
            if (i < count) {
                v = (long long)queue[i];
                begin = in_offsets[v];
                end = in_offsets[v + 1];
            }
            accum_t accum = identity;
            for (long long e = begin + sub; e < end; e += group)
                accum = gp_combine(accum, gp_gather(values, weights, attrs,
                                                    (long long)sources[e], v, e));
            // the group's lanes combine into its first lane (the others' results unused)
            for (int offset = group >> 1; offset > 0; offset >>= 1)
                accum = gp_combine(accum, gp_shuffle<false>(accum, offset));
            bool joins = false;
            if (i < count && sub == 0) {
                notified_flags[v] = 0u;
                joins = gp_sparse_update(attrs, aggregates, num_vertices, iteration, v, accum,
                                         values, out, &l1, &activated);
                if (joins) gp_sparse_joins(attrs, v, &activated_out_edges, &widest);
            }
            gp_warp_append(joins, (vid_t)v, next_frontier, next_size);
        }
    }
    gp_warp_max_into(widest, loop + GP_LOOP_FRONTIER_MAX_DEGREE + (parity ^ 1));
    gp_sparse_block_done(loop, records, l1, activated, activated_out_edges, gp_sparse_shared,
                         &gp_last_block);
}

// Pointer jumping for min-label propagation (Shiloach-Vishkin's shortcut; the
// CPU's kernels.cpu.shortcut_labels): each vertex takes the label of the vertex
// its label names, then of the vertex that one names, while the label drops.
// ids: the user ids of the vertices, increasing (consecutive: dense). A vertex
// whose label dropped becomes active, and is counted if it was not.
extern "C" __global__ void gp_shortcut_labels(value_t* values, const long long* __restrict__ ids,
                                              int dense, unsigned char* __restrict__ active,
                                              const degree_t* __restrict__ out_degree,
                                              unsigned long long* counters,
                                              unsigned long long* dropped_total,
                                              long long num_vertices) {
    extern __shared__ __align__(16) unsigned char gp_shortcut_shared[];
    unsigned long long activated = 0, activated_out_edges = 0, dropped = 0;
    for (long long v = blockIdx.x * (long long)blockDim.x + threadIdx.x; v < num_vertices;
         v += (long long)gridDim.x * blockDim.x) {
        const value_t start = values[v];
        value_t label = start;
        while (true) {
            long long u;
            if (dense) {
                u = (long long)label - ids[0];
            } else {
                long long low = 0, high = num_vertices - 1;
                while (low < high) {
                    const long long middle = (low + high) >> 1;
                    if (ids[middle] < (long long)label) low = middle + 1;
                    else high = middle;
                }
                u = low;
            }
            const value_t jumped = *((volatile value_t*)(values + u));
            if (!(jumped < label)) break;
            label = jumped;
        }
        if (label < start) {
            values[v] = label;
            dropped += 1;
            if (!active[v]) {
                active[v] = 1;
                activated += 1;
                activated_out_edges += (unsigned long long)out_degree[v];
            }
        }
    }
    gp_block_totals(0.0, activated, activated_out_edges, (double*)0, counters,
                    gp_shortcut_shared);
    dropped = gp_warp_total(dropped);
    if ((threadIdx.x & 31) == 0 && dropped) atomicAdd(dropped_total, dropped);
}

// The loop's set-up and hand-overs, so that the loop needs no other kernels.

// Out-edges (CSR) from the resident in-edges (CSC): each edge u -> v is placed at
// out_offsets[u] + the next free slot of u (cursor: |V| zeros), with its value
// when asked (the push reads them in this order). The order of a vertex's
// out-edges is arbitrary; neither pass depends on it.
extern "C" __global__ void gp_loop_out_edges(const long long* __restrict__ in_offsets,
                                             const vid_t* __restrict__ sources,
                                             const weight_t* __restrict__ weights,
                                             const long long* __restrict__ out_offsets,
                                             unsigned int* __restrict__ cursor,
                                             vid_t* __restrict__ out_targets,
                                             weight_t* __restrict__ out_weights,
                                             int with_weights, double* weight_total,
                                             long long num_vertices) {
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    double total = 0.0;
    for (long long v = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; v < num_vertices;
         v += warps) {
        for (long long e = in_offsets[v] + lane; e < in_offsets[v + 1]; e += 32) {
            const long long u = (long long)sources[e];
            const long long slot = out_offsets[u] + atomicAdd(&cursor[u], 1u);
            out_targets[slot] = (vid_t)v;
            if (with_weights) {         // the push's edge values, and their sum
                out_weights[slot] = weights[e];
                total += (double)weights[e];
            }
        }
    }
    if (with_weights) {
        for (int offset = 16; offset > 0; offset >>= 1)
            total += __shfl_down_sync(0xffffffffu, total, offset);
        if (lane == 0 && total != 0.0) atomicAdd(weight_total, total);
    }
}

// The frontier queue of parity 0 from the activity bitmap (entering the loop
// after a pull over every shard).
extern "C" __global__ void gp_loop_enter(long long* loop, const unsigned char* __restrict__ active,
                                         const degree_t* __restrict__ out_degree,
                                         vid_t* __restrict__ frontiers, long long num_vertices) {
    unsigned long long* size =
        reinterpret_cast<unsigned long long*>(loop + GP_LOOP_FRONTIER_SIZE);
    const long long threads = (long long)gridDim.x * blockDim.x;
    unsigned long long widest = 0;
    // every lane of a warp takes the same number of rounds (the append is warp-wide)
    for (long long base = (long long)blockIdx.x * blockDim.x + (threadIdx.x & ~31);
         base < num_vertices; base += threads) {
        const long long v = base + (threadIdx.x & 31);
        const bool take = v < num_vertices && active[v];
        if (take) widest = max(widest, (unsigned long long)out_degree[v]);
        gp_warp_append(take, (vid_t)v, frontiers, size);
    }
    gp_warp_max_into(widest, loop + GP_LOOP_FRONTIER_MAX_DEGREE);
}

// Leaving the loop: the last iteration's values committed (synchronous runs,
// count > 0) and the activity bitmap (cleared before) set from the frontier.
extern "C" __global__ void gp_loop_leave(const vid_t* __restrict__ committed, long long count,
                                         const value_t* __restrict__ out, value_t* values,
                                         const vid_t* __restrict__ frontier, long long size,
                                         unsigned char* __restrict__ active) {
    const long long threads = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < (count > size ? count : size); i += threads) {
        if (i < count) {
            const long long v = (long long)committed[i];
            values[v] = out[v];
        }
        if (i < size) active[frontier[i]] = 1;
    }
}

// ---- the push pass: programs whose apply keeps the better of the value and the sum
// (VertexProgram.apply_keeps_best: BFS, SSSP, CC, SSWP). A vertex's value then
// follows from its in-neighbours that changed alone, so an iteration is two
// launches over the frontier's out-edges only:
//   gp_sparse_push   each out-edge u -> v of the frontier combines its gather into
//                    v's accumulator with the sum's atomic; v is queued once;
//   gp_sparse_apply  each queued vertex is applied in place (every read of the
//                    iteration's values is done: a synchronous run needs no second
//                    buffer) and joins the next frontier if activated; its
//                    accumulator goes back to the identity. The last block
//                    finishes the iteration.
// Each is a kernel around a pass (gp_push_pass, gp_apply_pass, gp_split_pass) that
// persistent.cu's kernel runs too, many iterations in one launch. The arrays a
// pass writes in one iteration and reads in the next (queues, flags, values,
// accumulators) are not __restrict__ in the passes: in the persistent kernel they
// change while it runs, so they must not be read through the read-only cache.

extern "C" __global__ void gp_loop_identity(accum_t* accum, long long count) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count;
         i += (long long)gridDim.x * blockDim.x)
        accum[i] = gp_accum_identity();
}

__device__ __forceinline__ void gp_push_pass(long long* loop,
                                             const long long* __restrict__ out_offsets,
                                             const vid_t* __restrict__ out_targets,
                                             const weight_t* __restrict__ out_weights,
                                             const vid_t* frontiers,
                                             unsigned int* touched_flags, vid_t* touched,
                                             accum_t* accum, const value_t* values,
                                             const gp_attrs& attrs, int group_shift,
                                             long long num_vertices) {
    const long long parity = loop[GP_LOOP_PARITY];
    // a hub in the frontier: no push (the apply calls the iteration off)
    const long long size = loop[GP_LOOP_FRONTIER_MAX_DEGREE + parity] > loop[GP_LOOP_SPAN_EDGES]
        ? 0 : loop[GP_LOOP_FRONTIER_SIZE + parity];
    const vid_t* frontier = frontiers + parity * num_vertices;
    vid_t* queue = touched + parity * num_vertices;
    unsigned long long* queued =
        reinterpret_cast<unsigned long long*>(loop + GP_LOOP_NOTIFIED + parity);
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long threads = (long long)gridDim.x * blockDim.x;
    const int lane = threadIdx.x & 31, group = 1 << group_shift, sub = lane & (group - 1);
    const long long per_warp = 32 >> group_shift;
    const long long warps = threads >> 5;
    unsigned long long scanned = 0;
    for (long long base = (thread >> 5) * per_warp; base < size; base += warps * per_warp) {
        const long long i = base + (lane >> group_shift);
        long long u = 0, begin = 0, end = 0;
        if (i < size) {
            u = (long long)frontier[i];
            begin = out_offsets[u];
            end = out_offsets[u + 1];
            if (sub == 0) scanned += (unsigned long long)(end - begin);
        }
        const unsigned span = __reduce_max_sync(0xffffffffu, (unsigned)(end - begin));
        for (unsigned k0 = sub; k0 < span + sub; k0 += group) {
            const long long k = begin + k0;
            bool fresh = false;
            vid_t v = 0;
            if (k < end) {
                v = out_targets[k];
                gp_atomic_combine(&accum[v], gp_gather(values, out_weights, attrs, u,
                                                       (long long)v, k));
                fresh = touched_flags[v] == 0u && atomicExch(&touched_flags[v], 1u) == 0u;
            }
            gp_warp_append(fresh, v, queue, queued);
        }
    }
    scanned = gp_warp_total(scanned);
    if (lane == 0 && scanned) {
        atomicAdd(reinterpret_cast<unsigned long long*>(loop + GP_LOOP_EDGES_NOTIFIED), scanned);
        atomicAdd(reinterpret_cast<unsigned long long*>(loop + GP_LOOP_EDGES_PULLED), scanned);
    }
}

extern "C" __global__ void gp_sparse_push(long long* loop,
                                          const long long* __restrict__ out_offsets,
                                          const vid_t* __restrict__ out_targets,
                                          const weight_t* __restrict__ out_weights,
                                          const vid_t* __restrict__ frontiers,
                                          unsigned int* __restrict__ touched_flags,
                                          vid_t* __restrict__ touched, accum_t* accum,
                                          const value_t* values, GP_ATTR_PARAMETERS,
                                          int group_shift, long long num_vertices) {
    if (loop[GP_LOOP_STOP]) return;
    GP_ATTRS
    gp_push_pass(loop, out_offsets, out_targets, out_weights, frontiers, touched_flags, touched,
                 accum, values, attrs, group_shift, num_vertices);
}

// The apply of the vertices the push reached; the block that finishes last ends
// the iteration (shared: 768 bytes of dynamic shared memory; last_block, off:
// the kernel's shared flags).
__device__ __forceinline__ void gp_apply_pass(long long* loop, long long* records,
                                              const vid_t* touched,
                                              unsigned int* touched_flags,
                                              vid_t* frontiers, accum_t* accum,
                                              vid_t* far, unsigned int* far_flags,
                                              value_t* values, const gp_attrs& attrs,
                                              const double* __restrict__ aggregates,
                                              long long num_vertices, unsigned char* shared,
                                              int* last_block, int* off) {
    const long long parity = loop[GP_LOOP_PARITY];
    const long long iteration = loop[GP_LOOP_ITERATION];
    const long long count = loop[GP_LOOP_NOTIFIED + parity];
    const vid_t* queue = touched + parity * num_vertices;
    const long long threads = (long long)gridDim.x * blockDim.x;
    double l1 = 0.0;
    unsigned long long activated = 0, activated_out_edges = 0, widest = 0;
    // in order of value: activated vertices at or above the threshold wait in the far queue
    const long long priority = loop[GP_LOOP_PRIORITY];
    const double threshold = __longlong_as_double(loop[GP_LOOP_THRESHOLD]);
    const long long far_parity = loop[GP_LOOP_FAR_PARITY];
    vid_t* far_queue = far + far_parity * num_vertices;
    unsigned long long* far_size =
        reinterpret_cast<unsigned long long*>(loop + GP_LOOP_FAR_SIZE + far_parity);
    unsigned long long lowest = ~0ull;
    if (threadIdx.x == 0) *off = gp_called_off(loop, parity);
    __syncthreads();
    const bool called_off = *off;
    vid_t* next_frontier = frontiers + (parity ^ 1) * num_vertices;
    unsigned long long* next_size =
        reinterpret_cast<unsigned long long*>(loop + GP_LOOP_FRONTIER_SIZE + (parity ^ 1));
    const accum_t identity = gp_accum_identity();
    // rounds of one vertex per thread, the same number for every lane of a warp
    for (long long base = (long long)blockIdx.x * blockDim.x + (threadIdx.x & ~31);
         base < count; base += threads) {
        const long long i = base + (threadIdx.x & 31);
        bool joins = false, waits = false;
        long long v = 0;
        if (i < count) {
            v = (long long)queue[i];
            const accum_t sum = accum[v];
            accum[v] = identity;
            touched_flags[v] = 0u;
            if (!called_off) {
                joins = gp_sparse_update(attrs, aggregates, num_vertices, iteration, v, sum,
                                         values, values, &l1, &activated);
                if (joins && priority) {
                    // v's new value, just written by this thread
                    const double key = gp_priority_key(values[v], priority == 2);
                    if (key >= threshold) {
                        joins = false;
                        lowest = min(lowest, gp_key_order(key));
                        // queued once: this thread alone holds v in this iteration
                        waits = far_flags[v] == 0u;
                        if (waits) far_flags[v] = 1u;
                    }
                }
                if (joins) gp_sparse_joins(attrs, v, &activated_out_edges, &widest);
            }
        }
        gp_warp_append(joins, (vid_t)v, next_frontier, next_size);
        if (priority) gp_warp_append(waits, (vid_t)v, far_queue, far_size);
    }
    gp_warp_max_into(widest, loop + GP_LOOP_FRONTIER_MAX_DEGREE + (parity ^ 1));
    if (priority) gp_warp_min_into(lowest, loop + GP_LOOP_FAR_MIN);
    gp_sparse_block_done(loop, records, l1, activated, activated_out_edges, shared, last_block);
}

extern "C" __global__ void gp_sparse_apply(long long* loop, long long* records,
                                           const vid_t* __restrict__ touched,
                                           unsigned int* __restrict__ touched_flags,
                                           vid_t* __restrict__ frontiers, accum_t* accum,
                                           vid_t* __restrict__ far,
                                           unsigned int* __restrict__ far_flags,
                                           value_t* values, GP_ATTR_PARAMETERS,
                                           const double* __restrict__ aggregates,
                                           long long num_vertices) {
    extern __shared__ __align__(16) unsigned char gp_apply_shared[];
    __shared__ int gp_last_block, gp_off;
    if (loop[GP_LOOP_STOP]) return;
    GP_ATTRS
    gp_apply_pass(loop, records, touched, touched_flags, frontiers, accum, far, far_flags,
                  values, attrs, aggregates, num_vertices, gp_apply_shared, &gp_last_block,
                  &gp_off);
}

// ---- the push in order of value: the far queue's hand-overs

// At the start of an iteration whose frontier comes from the far queue (a bucket
// opened by gp_priority_turn): the queue's vertices below the threshold join the
// frontier, those at or above it wait in the other far queue, and those below
// the floor were taken in an earlier bucket at their present value (stale).
// state: the loop state it reads; counters: where its appends and totals go (the
// state itself, or the fused push's counters of the iteration, whose queues then
// start at frontier_base and kept_base).
__device__ __forceinline__ void gp_split_pass(const long long* state, long long* counters,
                                              long long frontier_base, long long kept_base,
                                              const vid_t* far_in, vid_t* far,
                                              unsigned int* far_flags, vid_t* frontiers,
                                              const value_t* values,
                                              const degree_t* __restrict__ out_degree,
                                              long long num_vertices) {
    const long long parity = state[GP_LOOP_PARITY];
    const long long far_parity = state[GP_LOOP_FAR_PARITY];
    const long long count = state[GP_LOOP_FAR_SIZE + (far_parity ^ 1)];
    const vid_t* source = far_in + (far_parity ^ 1) * num_vertices;
    vid_t* kept = far + far_parity * num_vertices + kept_base;
    vid_t* frontier = frontiers + parity * num_vertices + frontier_base;
    const bool larger_first = state[GP_LOOP_PRIORITY] == 2;
    const double floor = __longlong_as_double(state[GP_LOOP_FLOOR]);
    const double threshold = __longlong_as_double(state[GP_LOOP_THRESHOLD]);
    long long* loop = counters;
    const long long threads = (long long)gridDim.x * blockDim.x;
    unsigned long long edges = 0, widest = 0, lowest = ~0ull;
    // every lane of a warp takes the same number of rounds (the appends are warp-wide)
    for (long long base = (long long)blockIdx.x * blockDim.x + (threadIdx.x & ~31);
         base < count; base += threads) {
        const long long i = base + (threadIdx.x & 31);
        bool near = false, waits = false;
        vid_t v = 0;
        if (i < count) {
            v = source[i];
            const double key = gp_priority_key(values[v], larger_first);
            if (key >= threshold) {
                waits = true;
                lowest = min(lowest, gp_key_order(key));
            } else {
                far_flags[v] = 0u;
                near = key >= floor;
                if (near) {
                    const unsigned long long degree = (unsigned long long)out_degree[v];
                    edges += degree;
                    widest = max(widest, degree);
                }
            }
        }
        gp_warp_append(near, v, frontier,
                       reinterpret_cast<unsigned long long*>(loop + GP_LOOP_FRONTIER_SIZE + parity));
        gp_warp_append(waits, v, kept,
                       reinterpret_cast<unsigned long long*>(loop + GP_LOOP_FAR_SIZE + far_parity));
    }
    gp_warp_max_into(widest, loop + GP_LOOP_FRONTIER_MAX_DEGREE + parity);
    gp_warp_min_into(lowest, loop + GP_LOOP_FAR_MIN);
    edges = gp_warp_total(edges);
    if ((threadIdx.x & 31) == 0 && edges)
        atomicAdd(reinterpret_cast<unsigned long long*>(loop + GP_LOOP_FRONTIER_OUT_EDGES), edges);
}

extern "C" __global__ void gp_priority_split(long long* loop, const vid_t* __restrict__ far_in,
                                             vid_t* __restrict__ far,
                                             unsigned int* __restrict__ far_flags,
                                             vid_t* __restrict__ frontiers, const value_t* values,
                                             const degree_t* __restrict__ out_degree,
                                             long long num_vertices) {
    if (loop[GP_LOOP_STOP] || !loop[GP_LOOP_SPLIT_DUE]) return;
    gp_split_pass(loop, loop, 0, 0, far_in, far, far_flags, frontiers, values, out_degree,
                  num_vertices);
}

// Entering the loop in order of value: the active vertices (the activity bitmap)
// into the far queue of parity 0, flagged, with their least key; gp_loop_turn
// then opens the first bucket.
extern "C" __global__ void gp_loop_enter_far(long long* loop, const unsigned char* __restrict__ active,
                                             const value_t* values,
                                             unsigned int* __restrict__ far_flags,
                                             vid_t* __restrict__ far, long long num_vertices) {
    unsigned long long* size = reinterpret_cast<unsigned long long*>(loop + GP_LOOP_FAR_SIZE);
    const bool larger_first = loop[GP_LOOP_PRIORITY] == 2;
    const long long threads = (long long)gridDim.x * blockDim.x;
    unsigned long long lowest = ~0ull;
    for (long long base = (long long)blockIdx.x * blockDim.x + (threadIdx.x & ~31);
         base < num_vertices; base += threads) {
        const long long v = base + (threadIdx.x & 31);
        const bool take = v < num_vertices && active[v];
        if (take) {
            far_flags[v] = 1u;
            lowest = min(lowest, gp_key_order(gp_priority_key(values[v], larger_first)));
        }
        gp_warp_append(take, (vid_t)v, far, size);
    }
    gp_warp_min_into(lowest, loop + GP_LOOP_FAR_MIN);
}

extern "C" __global__ void gp_loop_turn(long long* loop) {
    if (blockIdx.x == 0 && threadIdx.x == 0) gp_priority_turn<volatile long long>(loop);
}

// ---- the fused push: one pass and one grid barrier an iteration (persistent.cu's
// gp_fused_iterations; asynchronous runs of programs whose apply keeps the better of
// the value and the sum, and whose activate is "the value changed": the GPU
// plan's fused_push). Each out-edge u -> v of the frontier applies its gather straight
// to values[v] (apply(old, gather), in a compare-and-swap loop: apply_keeps_best
// makes it the sum's atomic on the value), so no accumulator, flag or apply pass
// is left. A vertex is stamped with the iteration at its first change in it (2 *
// (iteration + 1); + 1 once it joins the next frontier; stamps only grow, so no
// pass clears them), and the thread whose change stamps it first counts it
// activated and queues it once: in the next frontier, or, in order of value with
// a key at or above the threshold, in the far queue (flagged, queued once, as in
// gp_apply_pass; a vertex that later drops below the threshold in the same
// iteration joins the frontier too, and its far entry is stale: the split drops
// it). The iteration's L1 change is the sum of each change's size, |old - new|,
// which telescopes to the pull's. The updated vertices are the activated ones.

// The unsigned integer of a value's size (pull.cu's gp_bits: the signed one a
// shuffle takes, 4 bytes at least), and a value's bits in it.
template <int Bytes> struct gp_unsigned_of { typedef unsigned char type; };
template <> struct gp_unsigned_of<2> { typedef unsigned short type; };
template <> struct gp_unsigned_of<4> { typedef unsigned int type; };
template <> struct gp_unsigned_of<8> { typedef unsigned long long type; };
typedef gp_unsigned_of<sizeof(value_t)>::type gp_value_bits;

__device__ __forceinline__ gp_value_bits gp_bits_of_value(value_t value) {
    union { value_t value; gp_value_bits bits; } view;
    view.value = value;
    return view.bits;
}

__device__ __forceinline__ bool gp_same_bits(value_t a, value_t b) {
    return gp_bits_of_value(a) == gp_bits_of_value(b);
}

// The value at address, swapped from expected to desired where it still holds
// expected (its bits); returns the value it held. A compare-and-swap takes 4 or 8
// bytes: the fused push runs only for such values (decisions.gpu_fused_push), and
// the unit still compiles for the others (Value: value_t, so that their branch
// is never instantiated).
template <typename Value>
__device__ __forceinline__ Value gp_value_swap(Value* address, Value expected, Value desired) {
    if constexpr (sizeof(Value) == 4 || sizeof(Value) == 8) {
        typedef typename gp_unsigned_of<sizeof(Value)>::type Bits;
        union { Value value; Bits bits; } seen;
        seen.bits = atomicCAS(reinterpret_cast<Bits*>(address), gp_bits_of_value(expected),
                              gp_bits_of_value(desired));
        return seen.value;
    } else {
        __trap();
        return expected;
    }
}

// v's value applied with one gather, atomically: whether it changed, and from what
// (before) to what (after). Each retry sees a better value (apply keeps the best),
// so the loop ends; a stale first read costs a retry, never a wrong value.
__device__ __forceinline__ bool gp_fused_apply(value_t* values, long long v, accum_t gathered,
                                               const gp_attrs& attrs,
                                               const double* aggregates,
                                               long long num_vertices, long long iteration,
                                               value_t* before, value_t* after) {
    value_t seen = values[v];
    while (true) {
        const value_t updated = gp_apply(attrs, aggregates, num_vertices, iteration, v, seen,
                                         gathered);
        if (gp_same_bits(updated, seen)) return false;
        const value_t held = gp_value_swap(values + v, seen, updated);
        if (gp_same_bits(held, seen)) {
            *before = seen;
            *after = updated;
            return true;
        }
        seen = held;
    }
}

// The fused push of one iteration: state, the block's copy of the loop state;
// counters, the iteration's (appends to the next frontier and to the far queue,
// the totals: persistent.cu's slots); stamps, one per vertex; shared, the block
// totals' 768 bytes.
__device__ __forceinline__ void gp_fused_push_pass(const long long* state, long long* counters,
                                                   const long long* __restrict__ out_offsets,
                                                   const vid_t* __restrict__ out_targets,
                                                   const weight_t* __restrict__ out_weights,
                                                   vid_t* frontiers, unsigned int* stamps,
                                                   vid_t* far, unsigned int* far_flags,
                                                   value_t* values, const gp_attrs& attrs,
                                                   const double* __restrict__ aggregates,
                                                   int group_shift, long long num_vertices,
                                                   unsigned char* shared) {
    const long long parity = state[GP_LOOP_PARITY];
    const long long iteration = state[GP_LOOP_ITERATION];
    const long long size = state[GP_LOOP_FRONTIER_SIZE + parity];
    const vid_t* frontier = frontiers + parity * num_vertices;
    vid_t* next_frontier = frontiers + (parity ^ 1) * num_vertices;
    unsigned long long* next_size =
        reinterpret_cast<unsigned long long*>(counters + GP_LOOP_FRONTIER_SIZE + (parity ^ 1));
    const long long priority = state[GP_LOOP_PRIORITY];
    const double threshold = __longlong_as_double(state[GP_LOOP_THRESHOLD]);
    const long long far_parity = state[GP_LOOP_FAR_PARITY];
    vid_t* far_queue = far + far_parity * num_vertices + state[GP_LOOP_FAR_SIZE + far_parity];
    unsigned long long* far_size =
        reinterpret_cast<unsigned long long*>(counters + GP_LOOP_FAR_SIZE + far_parity);
    const unsigned int changed = 2u * (unsigned int)(iteration + 1), joined = changed + 1u;
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long threads = (long long)gridDim.x * blockDim.x;
    const int lane = threadIdx.x & 31, group = 1 << group_shift, sub = lane & (group - 1);
    const long long per_warp = 32 >> group_shift;
    const long long warps = threads >> 5;
    double l1 = 0.0;
    unsigned long long scanned = 0, activated = 0, activated_out_edges = 0, widest = 0;
    unsigned long long lowest = ~0ull;
    // rounds of one vertex per group, the same number of rounds for every lane of a warp
    for (long long base = (thread >> 5) * per_warp; base < size; base += warps * per_warp) {
        const long long i = base + (lane >> group_shift);
        long long u = 0, begin = 0, end = 0;
        if (i < size) {
            u = (long long)frontier[i];
            begin = out_offsets[u];
            end = out_offsets[u + 1];
            if (sub == 0) scanned += (unsigned long long)(end - begin);
        }
        const unsigned span = __reduce_max_sync(0xffffffffu, (unsigned)(end - begin));
        for (unsigned k0 = sub; k0 < span + sub; k0 += group) {
            const long long k = begin + k0;
            bool joins = false, waits = false;
            vid_t v = 0;
            value_t before, after;
            if (k < end) {
                v = out_targets[k];
                // in flight beside v's value: the level's round trips are its cost
                const unsigned long long degree = (unsigned long long)attrs.out_degree[v];
                if (gp_fused_apply(values, (long long)v,
                                   gp_gather(values, out_weights, attrs, u, (long long)v, k),
                                   attrs, aggregates, num_vertices, iteration, &before,
                                   &after)) {
                    l1 += fabs((double)after - (double)before);
                    bool near = true;
                    if (priority) {
                        const double key = gp_priority_key(after, priority == 2);
                        if (key >= threshold) {
                            near = false;
                            lowest = min(lowest, gp_key_order(key));
                            waits = far_flags[v] == 0u && atomicExch(&far_flags[v], 1u) == 0u;
                        }
                    }
                    const unsigned int stamp = near ? joined : changed;
                    const unsigned int held = atomicMax(&stamps[v], stamp);
                    if (held < changed) activated += 1;
                    joins = near && held < joined;
                    if (joins) {
                        activated_out_edges += degree;
                        widest = max(widest, degree);
                    }
                }
            }
            gp_warp_append(joins, v, next_frontier, next_size);
            if (priority) gp_warp_append(waits, v, far_queue, far_size);
        }
    }
    // (no read before the atomics, as gp_warp_max_into has: a round trip saved)
    for (int offset = 16; offset > 0; offset >>= 1) {
        widest = max(widest, __shfl_down_sync(0xffffffffu, widest, offset));
        lowest = min(lowest, __shfl_down_sync(0xffffffffu, lowest, offset));
    }
    if (lane == 0 && widest)
        atomicMax(reinterpret_cast<unsigned long long*>(
            counters + GP_LOOP_FRONTIER_MAX_DEGREE + (parity ^ 1)), widest);
    if (lane == 0 && lowest != ~0ull)
        atomicMin(reinterpret_cast<unsigned long long*>(counters + GP_LOOP_FAR_MIN), lowest);
    scanned = gp_warp_total(scanned);
    if (lane == 0 && scanned) {
        atomicAdd(reinterpret_cast<unsigned long long*>(counters + GP_LOOP_EDGES_NOTIFIED),
                  scanned);
        atomicAdd(reinterpret_cast<unsigned long long*>(counters + GP_LOOP_EDGES_PULLED),
                  scanned);
    }
    gp_block_totals(l1, activated, activated_out_edges,
                    reinterpret_cast<double*>(counters + GP_LOOP_L1),
                    reinterpret_cast<unsigned long long*>(counters + GP_LOOP_ACTIVATED), shared);
}
