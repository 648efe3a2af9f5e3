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
// It needs a cooperative launch (cuLaunchCooperativeKernel: every block
// co-resident) for cooperative_groups' grid barrier, and no separate
// compilation (-rdc). Where NVRTC cannot compile this unit, the loop launches
// its graphs of kernels alone.

// (only the grid barrier is used: no libcu++ headers behind it, whose versions
// in NVRTC's include path need not match the toolkit's)
#define _CG_LIMIT_INCLUDED_DEPENDENCIES
#include <cooperative_groups.h>

extern "C" __global__ void gp_persistent_push(long long* loop, long long* records,
                                              const long long* __restrict__ out_offsets,
                                              const vid_t* __restrict__ out_targets,
                                              const weight_t* __restrict__ out_weights,
                                              vid_t* frontiers, unsigned int* touched_flags,
                                              vid_t* touched, accum_t* accum, vid_t* far,
                                              unsigned int* far_flags, value_t* values,
                                              GP_ATTR_PARAMETERS,
                                              const double* __restrict__ aggregates,
                                              int group_shift, long long num_vertices,
                                              long long launch_steps) {
    extern __shared__ __align__(16) unsigned char gp_persistent_shared[];
    __shared__ int gp_last_block, gp_off;
    cooperative_groups::grid_group grid = cooperative_groups::this_grid();
    GP_ATTRS
    // read by every thread before the first barrier: no iteration has ended yet
    const long long leave_at = loop[GP_LOOP_ITERATION] + launch_steps;
    // every state read below follows a grid barrier: all threads see the same values
    while (!loop[GP_LOOP_STOP] && loop[GP_LOOP_ITERATION] < leave_at) {
        if (loop[GP_LOOP_SPLIT_DUE]) {
            gp_split_pass(loop, far, far, far_flags, frontiers, values, out_degree,
                          num_vertices);
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
