"""Host and device copies of the vertex data and the copies between them (Garaph sections 2.2, 4.1).

Host memory holds GlobalVertices (the CPU engine's
:class:`~garaphpy.scheduler.cpu_engine.RunState`: values, the synchronous
next buffer, the activity), the GPU a copy (the GPU engine's values, next
buffer and activity).  :class:`VertexState` is the one object that moves
vertex data between them:

* at set-up it moves the host arrays into pinned memory (so that copies are
  asynchronous) and times one copy each way: the price of bringing a stale
  copy up to date, which the dispatcher weighs (section 5.1);
* a copy that is not current (the GPU's after CPU-only iterations, the
  host's after GPU-only ones) is brought up to date as a whole before an
  iteration that needs it (:meth:`make_host_current`,
  :meth:`make_device_current`);
* during a hybrid iteration, the vertex range of each CPU page goes to the
  GPU on a stream of its own (:meth:`send_range`), and vertices applied on
  the host after the pages go to the GPU at the end (:meth:`send_vertices`);
  the GPU's own pages come back on its streams (the GPU processor).

The engines allocate their arrays (the device copy swaps its buffers at the
end of each synchronous iteration); this object reads them through the
engines' public attributes each time and owns every copy between the two.
"""

from __future__ import annotations

import time

import numpy as np

from .frontier import Frontier


class VertexState:
    """Host and device copies of the vertex data of one hybrid run.

    Parameters
    ----------
    host : RunState
        The CPU engine's state (its arrays are moved into pinned memory here).
    device : GpuEngine
        The GPU engine holding the device copy.
    threads : int
        Threads of the host's frontier scan after a download.
    smooth : callable
        ``smooth(previous, measured)``: how measured copy times update the
        estimates (the policy's smoothing).

    Attributes
    ----------
    host_current, device_current : bool
        Whether each copy holds the committed values.
    upload_seconds, download_seconds : float
        Estimated time of a whole copy each way.
    """

    def __init__(self, host, device, threads: int, smooth):
        self.host = host
        self.device = device
        self.cupy = device.cupy
        self.threads = threads
        self.smooth = smooth
        self._pin_host()
        self.upload_stream = self.cupy.cuda.Stream(non_blocking=True)
        # both copies start from the host's initial values; the copy's speed prices
        # the synchronization a switch of processor needs
        started = time.perf_counter()
        self.upload_values()
        self.upload_seconds = time.perf_counter() - started
        started = time.perf_counter()
        self.download()      # the same data back: the price of a switch to the CPU
        self.download_seconds = time.perf_counter() - started
        self.host_current = True
        self.device_current = True

    def _pin_host(self) -> None:
        """Move the host's values, next buffer and activity into pinned memory, so
        that the copies to and from the GPU are asynchronous."""
        state = self.host
        pinned = self.device.pinned_array
        values = pinned(state.values.size, state.values.dtype)
        values[:] = state.values
        if state.synchronous:
            following = pinned(state.next.size, state.next.dtype)
            following[:] = state.next
        else:
            following = values
        active = pinned(state.active.size, np.bool_)
        active[:] = state.active
        state.values, state.next, state.active = values, following, active

    # -- whole copies -------------------------------------------------------------------
    def upload_values(self) -> int:
        """The host's committed values to the GPU; returns the bytes copied."""
        values, device = self.host.values, self.device
        runtime = self.cupy.cuda.runtime
        runtime.memcpyAsync(device.values.data.ptr, values.ctypes.data, values.nbytes,
                            runtime.memcpyHostToDevice, device.main_stream.ptr)
        device.main_stream.synchronize()
        return values.nbytes

    def download(self) -> int:
        """The GPU's committed values and activity to the host, and the frontier
        from them; returns the bytes copied."""
        state, device = self.host, self.device
        runtime = self.cupy.cuda.runtime
        stream = device.main_stream.ptr
        n = state.values.size
        runtime.memcpyAsync(state.values.ctypes.data, device.values.data.ptr,
                            state.values.nbytes, runtime.memcpyDeviceToHost, stream)
        runtime.memcpyAsync(state.active.ctypes.data, device.active.data.ptr, n,
                            runtime.memcpyDeviceToHost, stream)
        device.main_stream.synchronize()
        # a synchronous CPU iteration writes every vertex of the next buffer it reads
        # back (pull), or only the notified ones and commits just those (notify-pull)
        state.frontier = Frontier.of_flags(state.active, self.threads).ids
        return state.values.nbytes + n

    def sync_seconds(self) -> tuple[float, float]:
        """``(cpu, gpu)``: the estimated time to bring each copy up to date now."""
        return (0.0 if self.host_current else self.download_seconds,
                0.0 if self.device_current else self.upload_seconds)

    def make_host_current(self) -> int:
        """Download when the host's copy is stale; returns the bytes copied."""
        if self.host_current:
            return 0
        started = time.perf_counter()
        copied = self.download()
        self.download_seconds = self.smooth(self.download_seconds,
                                            time.perf_counter() - started)
        self.host_current = True
        return copied

    def make_device_current(self) -> int:
        """Upload when the GPU's copy is stale: the values, and the activity from
        the host's frontier (the GPU's own is that of its last iteration,
        before the CPU's; a sparse pass and the device loop start from it).
        Returns the bytes copied."""
        if self.device_current:
            return 0
        started = time.perf_counter()
        copied = self.upload_values()
        self.upload_seconds = self.smooth(self.upload_seconds, time.perf_counter() - started)
        self.device.set_frontier(Frontier.of_ids(self.host.frontier, self.device.num_vertices))
        self.device_current = True
        return copied + self.device.num_vertices

    def written_by(self, processors: str) -> None:
        """An iteration ran on ``"cpu"``, ``"gpu"`` or ``"both"`` (both copies
        current after a hybrid iteration's synchronization)."""
        self.host_current = processors in ("cpu", "both")
        self.device_current = processors in ("gpu", "both")

    # -- during a hybrid iteration ----------------------------------------------------------
    def send_range(self, first: int, end: int) -> int:
        """The host's new values and activity of vertices ``first..end-1`` (a CPU
        page's range) to the GPU's, asynchronously on :attr:`upload_stream`;
        returns the bytes sent."""
        if end <= first:
            return 0
        state, device = self.host, self.device
        runtime = self.cupy.cuda.runtime
        value_size = state.values.dtype.itemsize
        runtime.memcpyAsync(device.next[first:end].data.ptr, state.next[first:end].ctypes.data,
                            (end - first) * value_size, runtime.memcpyHostToDevice,
                            self.upload_stream.ptr)
        runtime.memcpyAsync(device.active[first:end].data.ptr,
                            state.active[first:end].ctypes.data, end - first,
                            runtime.memcpyHostToDevice, self.upload_stream.ptr)
        return (end - first) * (value_size + 1)

    def wait_sends(self) -> None:
        """Wait for the ranges :meth:`send_range` queued."""
        self.upload_stream.synchronize()

    def send_vertices(self, applied: set) -> int:
        """The committed values and activity of vertices applied on the host after
        the pages (:meth:`CpuEngine.finish_pull`) to the GPU; returns the bytes
        sent (index included)."""
        if not applied:
            return 0
        device, state = self.device, self.host
        vertices = np.fromiter(applied, np.int64, len(applied))
        with device.main_stream:
            index = self.cupy.asarray(vertices)
            device.values[index] = self.cupy.asarray(state.values[vertices])
            device.active[index] = self.cupy.asarray(state.active[vertices].view(np.uint8))
        device.main_stream.synchronize()
        return int(vertices.size) * (state.values.dtype.itemsize + 1 + 8)
