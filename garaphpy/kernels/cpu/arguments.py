"""The argument groups of the CPU kernels (Garaph section 4).

The kernels take their arrays and scalars in a few tuples, each unpacked at
the kernel's top, instead of 20 or 30 positional parameters: numba types a
tuple of arrays and scalars by its members, so a group costs a call no more
than its members passed one by one, and the program's functions stay the
leading parameters that :mod:`garaphpy.kernels.cpu_program` binds.

A group is unpacked at the kernel's top, outside its parallel loops, and
no tuple enters the body of a ``prange`` loop: numba 0.68 cannot hand it a
tuple holding a tuple ("scalar type Tuple(...) given for non scalar
argument"), and stores through an array taken from a tuple there are lost
(the values stay as they were).  So the helpers called inside those loops
(the update tail of :mod:`~garaphpy.kernels.cpu.common`, the gathers, the
levels and rounds of the kept threads) take their arrays one by one.

A group's members must keep their types from call to call (an int64
``iteration``, not sometimes an int32 or a numpy scalar of another width):
numba compiles a kernel once for every distinct tuple type.  The builders
below normalize the scalars for that reason.

=============  ==============================================================
group          members
=============  ==============================================================
``context``    ``(attrs, aggregates, num_vertices, iteration)``: what the
               program's apply reads besides the vertex (:func:`apply_context`)
``edges``      a page's ``(in_offsets, sources, weights, edge_base)``
               (:func:`~garaphpy.kernels.cpu.pull_range`), or the listed
               vertices' ``(sources, weights)``
``page``       ``(edge_begin, edge_end, first_vertex, end_vertex)``
               (:func:`page_range`)
``graph``      the whole CSC (``(in_offsets, sources, weights)``), the CSR, or
               both (a batch's ``(out_offsets, out_targets, in_offsets,
               sources, weights)``)
``values``     ``(values_read, values_write, ...)``: the committed values,
               where new ones go, then what the gather reads
``out``        the arrays a kernel writes its results and statistics to
``settling``   the settled vertices of a run with early exit and their
               companions (bitmaps, claims, counters)
``rules``      a batch's thresholds (the engine's direction rules, the
               tolerance)
``schedule``   a batch's steps and parallel cuts
=============  ==============================================================

Each kernel's docstring lists the members of the groups it takes.
"""

from __future__ import annotations


def apply_context(attrs: tuple, aggregates, num_vertices: int, iteration: int) -> tuple:
    """``(attrs, aggregates, num_vertices, iteration)``: what the program's apply
    reads besides the vertex, the counts as Python ints (one kernel type).

    Parameters
    ----------
    attrs : tuple of arrays
        The per-vertex attributes (:mod:`garaphpy.kernels.cpu_program`).
    aggregates : numpy.ndarray
        The program's aggregates of this iteration.
    num_vertices, iteration : int
    """
    return attrs, aggregates, int(num_vertices), int(iteration)


def page_range(edge_begin: int, edge_end: int, first_vertex: int, end_vertex: int) -> tuple:
    """``(edge_begin, edge_end, first_vertex, end_vertex)`` of a page (or of any
    run of the CSC's edges), as Python ints (one kernel type)."""
    return int(edge_begin), int(edge_end), int(first_vertex), int(end_vertex)

