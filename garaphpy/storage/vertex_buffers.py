"""Per-vertex buffers that one opened store's runs lend each other (Garaph section 2.2).

A run on the CPU writes several arrays of one entry a vertex beside the
store's own: GlobalVertices and its temporary copy (the values and the
synchronous next buffer), the active flags, the claims of the notify, the
settled flags of a run with early exit, the source-side contributions of a
pull.  Made new by every run, each of their pages is faulted in and zeroed
by the kernel again at its first write: for kron:22 (4.2M vertices) some
150 MB a BFS set-up, the larger part of a warm CPU set-up on a machine
whose page faults are slow.  A graph's later runs take them from here
instead, already mapped.

The pool only keeps what a run gave back (:meth:`VertexBuffers.put`) and
hands each buffer to one taker at a time (:meth:`VertexBuffers.take`),
under a lock: two runs sharing a graph never share a buffer.  What it holds
is bounded by a number of bytes (the store's
``config.HOST_BYTES_PER_VERTEX`` per vertex, what the host budget counts for
a run's vertex data), the least recently given back dropped first.
"""

from __future__ import annotations

import threading

import numpy as np


class VertexBuffers:
    """Free buffers of a store's runs, by length and dtype; thread safe.

    Parameters
    ----------
    limit_bytes : int
        The most bytes held at once.
    """

    def __init__(self, limit_bytes: int):
        self.limit_bytes = int(limit_bytes)
        self._lock = threading.Lock()
        #: the free buffers, the least recently given back first
        self._free: list[np.ndarray] = []

    @property
    def held_bytes(self) -> int:
        """Bytes of the buffers held now."""
        with self._lock:
            return sum(buffer.nbytes for buffer in self._free)

    def take(self, length: int, dtype) -> np.ndarray | None:
        """A free buffer of ``length`` entries of ``dtype``, now the caller's
        alone (its contents are an earlier run's), or None where none is held."""
        dtype = np.dtype(dtype)
        with self._lock:
            for i in range(len(self._free) - 1, -1, -1):
                buffer = self._free[i]
                if buffer.shape == (length,) and buffer.dtype == dtype:
                    return self._free.pop(i)
        return None

    def put(self, buffers) -> None:
        """Hold ``buffers`` for later runs: the caller no longer reads or
        writes them, and nothing else refers to them.  Only whole,
        one-dimensional, C-contiguous arrays that own their memory are held;
        the least recently given back are dropped past :attr:`limit_bytes`."""
        with self._lock:
            held = {id(buffer) for buffer in self._free}
            for buffer in buffers:
                if (isinstance(buffer, np.ndarray) and buffer.ndim == 1
                        and buffer.base is None and buffer.flags.c_contiguous
                        and buffer.flags.writeable and id(buffer) not in held
                        and buffer.nbytes <= self.limit_bytes):
                    self._free.append(buffer)
                    held.add(id(buffer))
            total = sum(buffer.nbytes for buffer in self._free)
            while total > self.limit_bytes:
                total -= self._free.pop(0).nbytes

    def clear(self) -> bool:
        """Drop every buffer held; returns whether one was."""
        with self._lock:
            held = bool(self._free)
            self._free.clear()
        return held
