// garaphpy's device loop in one launch: many sparse iterations of the push
// (sparse.cu's passes) in a persistent cooperative kernel, a grid-wide barrier
// between the passes of an iteration and between iterations. Appended after the
// kernels' unit, in a unit of its own, by garaphpy/kernels/gpu.py
// (persistent_kernel); driven by garaphpy/scheduler/device_loop.py.
//
// One iteration is the graph-launched loop's, pass for pass:
//   gp_split_pass  (in order of value, when a bucket was opened) the far queue
//                  split into the frontier and the vertices still waiting;
//   gp_push_pass   the frontier's out-edges into the accumulators;
//   gp_apply_pass  the vertices reached applied; the last block to finish writes
//                  the iteration's record and applies the stop test.
// The kernel leaves after an iteration that stops the loop (no vertex activated,
// the batch's end, a frontier too large for the sparse pass, one called off, the
// records' capacity: gp_sparse_finish's codes), or after launch_steps iterations
// (the host's share of one launch: it reads the records and state between
// launches). The state and records are those the graph-launched loop writes.
//
// With fused (the GPU plan's fused_push: an asynchronous push of a program whose
// apply keeps the best and whose activate is a change), an iteration is instead one
// pass and one grid barrier (gp_fused_iterations below): the records and the
// state the host reads are those of the same loop, the iterations those of an
// asynchronous run.
//
// It needs a cooperative launch (cuLaunchCooperativeKernel: every block
// co-resident) for cooperative_groups' grid barrier, and no separate
// compilation (-rdc). Where NVRTC cannot compile this unit, the loop launches
// its graphs of kernels alone.

// (only the grid barrier is used: no libcu++ headers behind it, whose versions
// in NVRTC's include path need not match the toolkit's)
#define _CG_LIMIT_INCLUDED_DEPENDENCIES
#include <cooperative_groups.h>

// ---- the fused push's iterations (sparse.cu's gp_fused_push_pass)
// Each block keeps its own copy of the loop state in shared memory: read from the
// loop state as the launch starts, and brought up to date after each barrier by its
// first thread, from the iteration's counters, with the finish of the other loop
// (gp_sparse_finish_state: the same record, turn of buckets and stop test). So every
// block takes the same decisions without a second barrier, and the loop state in
// global memory is written once, by block 0, as the launch ends. The counters of
// iteration i are slot i % 3 of slots (the loop state's layout): added to during
// i, read after its barrier, cleared by block 0 during i + 2 (every block read them
// before the barrier of i + 1); all three are cleared as the launch starts.

// The block's copy after the split of a bucket (its first thread): the frontier it made.
__device__ void gp_fused_take_split(long long* state, const long long* slot) {
    const volatile long long* counts = slot;
    const long long parity = state[GP_LOOP_PARITY];
    const long long size = counts[GP_LOOP_FRONTIER_SIZE + parity];
    const unsigned long long widest = counts[GP_LOOP_FRONTIER_MAX_DEGREE + parity];
    const long long edges = counts[GP_LOOP_FRONTIER_OUT_EDGES];
    state[GP_LOOP_FRONTIER_SIZE + parity] += size;
    state[GP_LOOP_FRONTIER_MAX_DEGREE + parity] =
        (long long)max((unsigned long long)state[GP_LOOP_FRONTIER_MAX_DEGREE + parity], widest);
    state[GP_LOOP_FRONTIER_OUT_EDGES] += edges;
}

// The block's copy at the end of an iteration (its first thread): the iteration's
// counters taken, then the loop's finish (records: null but in block 0).
__device__ void gp_fused_finish(long long* state, const long long* slot, long long* records) {
    const volatile long long* counts = slot;
    const long long parity = state[GP_LOOP_PARITY];
    const long long far_parity = state[GP_LOOP_FAR_PARITY];
    // (all loads first: one round trip)
    const long long next_size = counts[GP_LOOP_FRONTIER_SIZE + (parity ^ 1)];
    const unsigned long long next_widest = counts[GP_LOOP_FRONTIER_MAX_DEGREE + (parity ^ 1)];
    const long long activated = counts[GP_LOOP_ACTIVATED];
    const long long activated_out_edges = counts[GP_LOOP_ACTIVATED_OUT_EDGES];
    const long long l1_bits = counts[GP_LOOP_L1];
    const long long pulled = counts[GP_LOOP_EDGES_PULLED];
    const long long notified = counts[GP_LOOP_EDGES_NOTIFIED];
    const long long far_added = counts[GP_LOOP_FAR_SIZE + far_parity];
    const unsigned long long far_min = counts[GP_LOOP_FAR_MIN];
    state[GP_LOOP_FRONTIER_SIZE + (parity ^ 1)] += next_size;
    state[GP_LOOP_FRONTIER_MAX_DEGREE + (parity ^ 1)] = (long long)max(
        (unsigned long long)state[GP_LOOP_FRONTIER_MAX_DEGREE + (parity ^ 1)], next_widest);
    state[GP_LOOP_ACTIVATED] = activated;
    state[GP_LOOP_ACTIVATED_OUT_EDGES] = activated_out_edges;
    state[GP_LOOP_L1] = l1_bits;
    state[GP_LOOP_EDGES_PULLED] = pulled;
    state[GP_LOOP_EDGES_NOTIFIED] = notified;
    state[GP_LOOP_NOTIFIED + parity] = activated;      // the vertices updated
    state[GP_LOOP_FAR_SIZE + far_parity] += far_added;
    state[GP_LOOP_FAR_MIN] =
        (long long)min((unsigned long long)state[GP_LOOP_FAR_MIN], far_min);
    gp_sparse_finish_state<long long>(state, records);
}

// The block's copy when its frontier holds a hub (its first thread): the split's
// far queue taken, if a bucket was opened, and the iteration called off as the
// other loop's finish does.
__device__ void gp_fused_call_off(long long* state, const long long* slot) {
    const volatile long long* counts = slot;
    const long long far_parity = state[GP_LOOP_FAR_PARITY];
    const long long far_added = counts[GP_LOOP_FAR_SIZE + far_parity];
    const unsigned long long far_min = counts[GP_LOOP_FAR_MIN];
    state[GP_LOOP_FAR_SIZE + far_parity] += far_added;
    state[GP_LOOP_FAR_MIN] =
        (long long)min((unsigned long long)state[GP_LOOP_FAR_MIN], far_min);
    gp_sparse_finish_state<long long>(state, nullptr);
}

__device__ __forceinline__ void gp_fused_clear(long long* slot, int field) {
    slot[field] = field == GP_LOOP_FAR_MIN ? -1 : 0;
}

__device__ void gp_fused_iterations(cooperative_groups::grid_group& grid, long long* loop,
                                    long long* records, long long* slots,
                                    unsigned int* stamps,
                                    const long long* __restrict__ out_offsets,
                                    const vid_t* __restrict__ out_targets,
                                    const weight_t* __restrict__ out_weights,
                                    vid_t* frontiers, vid_t* far, unsigned int* far_flags,
                                    value_t* values, const gp_attrs& attrs,
                                    const double* __restrict__ aggregates, int group_shift,
                                    long long num_vertices, long long leave_at,
                                    unsigned char* shared) {
    __shared__ long long state[GP_LOOP_FIELDS];
    for (int field = threadIdx.x; field < GP_LOOP_FIELDS; field += blockDim.x)
        state[field] = loop[field];
    if (blockIdx.x == 0)
        for (int field = threadIdx.x; field < 3 * GP_LOOP_FIELDS; field += blockDim.x)
            gp_fused_clear(slots + field / GP_LOOP_FIELDS * GP_LOOP_FIELDS,
                           field % GP_LOOP_FIELDS);
    grid.sync();
    while (true) {
        __syncthreads();        // the block's copy of the state is up to date
        const long long iteration = state[GP_LOOP_ITERATION];
        if (state[GP_LOOP_STOP] || iteration >= leave_at) break;
        long long* slot = slots + (iteration % 3) * GP_LOOP_FIELDS;
        if (blockIdx.x == 0 && threadIdx.x < GP_LOOP_FIELDS)
            gp_fused_clear(slots + ((iteration + 1) % 3) * GP_LOOP_FIELDS, threadIdx.x);
        if (state[GP_LOOP_SPLIT_DUE]) {
            const long long parity = state[GP_LOOP_PARITY];
            const long long far_parity = state[GP_LOOP_FAR_PARITY];
            gp_split_pass(state, slot, state[GP_LOOP_FRONTIER_SIZE + parity],
                          state[GP_LOOP_FAR_SIZE + far_parity], far, far, far_flags, frontiers,
                          values, attrs.out_degree, num_vertices);
            grid.sync();
            if (threadIdx.x == 0) gp_fused_take_split(state, slot);
            __syncthreads();
        }
        // a hub in the frontier: the iteration called off, as the other loop does
        if (gp_called_off(state, state[GP_LOOP_PARITY])) {
            __syncthreads();    // every thread has read the state
            if (threadIdx.x == 0) gp_fused_call_off(state, slot);
            continue;
        }
        gp_fused_push_pass(state, slot, out_offsets, out_targets, out_weights, frontiers,
                           stamps, far, far_flags, values, attrs, aggregates, group_shift,
                           num_vertices, shared);
        grid.sync();
        if (threadIdx.x == 0) gp_fused_finish(state, slot, blockIdx.x == 0 ? records : nullptr);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0)
        for (int field = 0; field < GP_LOOP_FIELDS; ++field) loop[field] = state[field];
}

extern "C" __global__ void gp_persistent_push(long long* loop, long long* records,
                                              const long long* __restrict__ out_offsets,
                                              const vid_t* __restrict__ out_targets,
                                              const weight_t* __restrict__ out_weights,
                                              vid_t* frontiers, unsigned int* touched_flags,
                                              vid_t* touched, accum_t* accum, vid_t* far,
                                              unsigned int* far_flags, value_t* values,
                                              GP_ATTR_PARAMETERS,
                                              const double* __restrict__ aggregates,
                                              long long* slots, unsigned int* stamps,
                                              int fused, int group_shift,
                                              long long num_vertices,
                                              long long launch_steps) {
    extern __shared__ __align__(16) unsigned char gp_persistent_shared[];
    __shared__ int gp_last_block, gp_off;
    cooperative_groups::grid_group grid = cooperative_groups::this_grid();
    GP_ATTRS
    // read by every thread before the first barrier: no iteration has ended yet
    const long long leave_at = loop[GP_LOOP_ITERATION] + launch_steps;
    if (fused) {
        gp_fused_iterations(grid, loop, records, slots, stamps, out_offsets, out_targets,
                            out_weights, frontiers, far, far_flags, values, attrs, aggregates,
                            group_shift, num_vertices, leave_at, gp_persistent_shared);
        return;
    }
    // every state read below follows a grid barrier: all threads see the same values
    while (!loop[GP_LOOP_STOP] && loop[GP_LOOP_ITERATION] < leave_at) {
        if (loop[GP_LOOP_SPLIT_DUE]) {
            gp_split_pass(loop, loop, 0, 0, far, far, far_flags, frontiers, values,
                          out_degree, num_vertices);
            grid.sync();
        }
        gp_push_pass(loop, out_offsets, out_targets, out_weights, frontiers, touched_flags,
                     touched, accum, values, attrs, group_shift, num_vertices);
        grid.sync();
        gp_apply_pass(loop, records, touched, touched_flags, frontiers, accum, far, far_flags,
                      values, attrs, aggregates, num_vertices, gp_persistent_shared,
                      &gp_last_block, &gp_off);
        grid.sync();
    }
}
