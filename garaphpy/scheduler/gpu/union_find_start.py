"""The GPU's union-find start of min-label propagation (Afforest on the device;
Garaph section 6's CC, beyond the paper).

A run on the GPU of a program declaring ``shortcut_labels`` on a symmetric
graph whose pages are all resident (:func:`decisions.gpu_union_find_start`,
chosen by :func:`~garaphpy.scheduler.gpu.plan.plan_gpu`) starts its first
iteration from the labels of a sampled union-find over the resident CSC
(:class:`~garaphpy.kernels.gpu_union_find.DeviceUnionFind`): every label is
then its component's smallest user id, and the iteration's own pull confirms
them (none drops, no vertex is activated, the run ends after it), as the
CPU's start does (:mod:`garaphpy.scheduler.cpu.settling`).  A run resumed
from a checkpoint does not start again; a hybrid run takes the start when
its GPU runs the first iteration alone.
"""

from __future__ import annotations

import time

import numpy as np

from ...kernels.gpu_union_find import DeviceUnionFind


def device_ids(cupy, ids: np.ndarray) -> tuple:
    """The user ids as the label kernels read them: ``(array, dense)``, the
    first id alone where they are consecutive (``dense``), else all of them."""
    ids = np.ascontiguousarray(ids, np.int64)
    dense = bool(ids.size and ids[-1] - ids[0] == ids.size - 1)
    kept = ids[:1] if dense else ids if ids.size else np.zeros(1, np.int64)
    return cupy.asarray(kept), dense


def union_find_bytes(num_vertices: int, vertex_itemsize: int, offsets_shared: bool) -> int:
    """Device bytes the start adds: a parent per vertex, and the CSC's offsets
    unless the device loop's are shared (``offsets_shared``)."""
    return int(num_vertices * vertex_itemsize + 16
               + (0 if offsets_shared else (num_vertices + 1) * 8))


class UnionFindStart:
    """The union-find start of one GPU run, made at set-up and taken once.

    Parameters
    ----------
    cupy : module
    in_offsets : cupy.ndarray of int64
        The CSC's offsets on the device (the device loop's, where it has them).
    sources : cupy.ndarray
        The resident in-edges' sources.
    ids : numpy.ndarray of int64
        The vertices' user ids, increasing.
    value_dtype : numpy.dtype
    multiprocessors : int
    entry : dict
        The plan's entry (:func:`decisions.gpu_union_find_start`), whose
        inputs the record repeats.
    """

    def __init__(self, cupy, in_offsets, sources, ids: np.ndarray, value_dtype,
                 multiprocessors: int, entry: dict):
        self.union_find = DeviceUnionFind(cupy, in_offsets, sources, value_dtype,
                                          multiprocessors)
        self.ids, self.dense = device_ids(cupy, ids)
        self.entry = entry
        #: the start is still to be taken (only before iteration 0)
        self.pending = True
        #: its entry, taken and not yet in a record
        self.unrecorded = None

    def take(self, iteration: int, state) -> None:
        """Before ``iteration``, once: where it is the run's first, the labels of
        the union-find in ``state``'s values (both buffers of a synchronous
        run), and :attr:`unrecorded` its entry (the plan's inputs, the labels
        that dropped, the root skipped, the seconds)."""
        if not self.pending:
            return
        self.pending = False
        if iteration != 0:
            return
        started = time.perf_counter()
        stream = state.main_stream
        self.union_find.write_labels(self.ids, self.dense, state.values, state.next, stream)
        largest, dropped = self.union_find.result(stream)
        self.unrecorded = {
            **{key: value for key, value in self.entry.items() if key != "choice"},
            "dropped": dropped, "largest_root": largest,
            "seconds": time.perf_counter() - started, "choice": True}

    def note(self, record) -> None:
        """The start's entry, once taken, as ``record.decisions["gpu_union_find_start"]``
        (the first record made after it)."""
        if self.unrecorded is not None:
            record.decisions["gpu_union_find_start"], self.unrecorded = self.unrecorded, None
