"""CPU kernels (numba), by family (Garaph section 4).

=================  ========================================================
module             kernels
=================  ========================================================
``common``         the update tail, the atomic claim, floors, bitmaps, chunks
``arguments``      the groups (tuples) the kernels take their arguments in
``vertices``       initial values, aggregates, source-side gathers, sums
``skipping``       floors and settled vertices: what a pull may skip
``pull``           pulls over a page, the whole CSC or a vertex list
``frontier``       frontier ids from flags and back, degree prefixes, in-edges turned
``mirrors``        the exchange's messages between partitions: bitmaps
``notify``         notify (Garaph section 4.2) and the top-down step
``batches``        sparse notify-pull iterations batched in one call
``priority``       notify-pull in order of value (delta-stepping)
``push_rounds``    parallel delta-stepping by push on threads kept
``settle_rounds``  Beamer's top-down steps on threads kept
=================  ========================================================

The names below are the kernels' public ones; callers use them from here
(``from garaphpy.kernels import cpu``).  The program's functions arrive as
numba dispatchers with the fixed signatures of
:mod:`garaphpy.kernels.cpu_program`, which also copies the kernels that take
them into each program's generated module.
"""

from ... import _numba_setup  # noqa: F401  (threading layer first)
from .batches import SPARSE_COUNTERS, sparse_iterations
from .common import FLOOR_MAX, FLOOR_MIN, SERIAL_CONCATENATE_MAX, SETTLED_CLAIM
from .frontier import (PARALLEL_PREFIX_MIN, active_vertex_ids, degree_prefix, flags_of,
                       frontier_degree_prefix, frontier_degree_sum, frontier_degrees, frontier_of,
                       in_range_order, reset_flags, turn_in_edges)
from .mirrors import (bitmap_members, mirror_bitmap, same_bits, settle_received,
                      write_received)
from .notify import mark_out_neighbours, notify, notify_dense, push_settling
from .priority import PRIORITY_BINS, priority_iterations
from .pull import (SETTLING_BLOCK, apply_vertices, pull_fused, pull_range, pull_range_settling,
                   pull_settling_whole, pull_vertices)
from .push_rounds import PUSH_ROUND_BINS, PUSH_ROUND_CHUNK, PUSH_ROUND_FUSE, priority_push_rounds
from .settle_rounds import SETTLE_ROUND_BUFFER, settle_push_rounds
from .skipping import (above_floor, all_at_floor, best_source_value, mark_settled, pack_flags,
                       settled_from_value, settled_from_values, unsettled_in_edges)
from .vertices import (add_weighted_in_degrees, all_vertex_ids, balanced_vertex_starts,
                       commit_vertices, compute_aggregates, count_unequal, gather_vertex_edges,
                       init_values, listed_source_contributions, mapped_zeros,
                       no_aggregates_fold, no_aggregates_write, out_neighbour_in_degrees,
                       read_source_contribution, shortcut_labels, source_contributions, sum_over,
                       total, touch, vertex_ids)

__all__ = [
    "FLOOR_MAX", "FLOOR_MIN", "PARALLEL_PREFIX_MIN", "PRIORITY_BINS", "PUSH_ROUND_BINS",
    "PUSH_ROUND_CHUNK", "PUSH_ROUND_FUSE", "SERIAL_CONCATENATE_MAX", "SETTLED_CLAIM",
    "SETTLE_ROUND_BUFFER", "SETTLING_BLOCK", "SPARSE_COUNTERS",
    "above_floor", "active_vertex_ids", "add_weighted_in_degrees", "all_at_floor",
    "all_vertex_ids",
    "apply_vertices", "balanced_vertex_starts", "best_source_value", "bitmap_members",
    "commit_vertices",
    "compute_aggregates", "count_unequal", "degree_prefix", "flags_of",
    "frontier_degree_prefix", "frontier_degree_sum", "frontier_degrees", "frontier_of",
    "gather_vertex_edges", "in_range_order", "init_values", "listed_source_contributions",
    "mapped_zeros",
    "mark_out_neighbours", "mark_settled", "mirror_bitmap", "no_aggregates_fold",
    "no_aggregates_write", "notify",
    "notify_dense", "out_neighbour_in_degrees", "pack_flags", "priority_iterations",
    "priority_push_rounds", "pull_fused", "pull_range", "pull_range_settling",
    "pull_settling_whole", "pull_vertices", "push_settling", "read_source_contribution",
    "reset_flags", "same_bits", "settle_push_rounds", "settle_received", "settled_from_value",
    "settled_from_values",
    "shortcut_labels", "source_contributions", "sparse_iterations", "sum_over", "total",
    "touch", "turn_in_edges", "unsettled_in_edges", "vertex_ids", "write_received",
]
