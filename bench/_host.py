"""What the scripts of bench/ share: what ran a benchmark (the host's name, CPU
model and count, and the versions of Python, numpy, numba and garaphpy), where
their data lives, progress lines, medians, and the log-scale axis of their plots."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path


def host_info() -> dict:
    """The fields every benchmark's JSON records about the machine."""
    import numba
    import numpy as np

    import garaphpy

    model = ""
    try:
        with open("/proc/cpuinfo") as handle:
            model = next((line.split(":", 1)[1].strip() for line in handle
                          if line.startswith("model name")), "")
    except OSError:
        pass
    return {"machine": platform.node(), "cpu_model": model, "cpu_count": os.cpu_count(),
            "python": platform.python_version(), "numpy": np.__version__,
            "numba": numba.__version__, "garaphpy": getattr(garaphpy, "__version__", "")}


def log(message: str) -> None:
    """Progress to stderr (stdout carries the tables)."""
    print(message, file=sys.stderr, flush=True)


def median(values) -> float:
    """Median of a sequence, NaN for an empty one."""
    import numpy as np

    values = list(values)
    return float(np.median(values)) if values else float("nan")


def file_system(path: Path) -> str:
    """Type and device of the mount holding ``path`` (from /proc/mounts)."""
    path = Path(path).resolve()
    best = ("?", "?", "")
    try:
        with open("/proc/mounts") as handle:
            for line in handle:
                device, mount, kind = line.split()[:3]
                if (path == Path(mount) or Path(mount) in path.parents) and \
                        len(mount) > len(best[2]):
                    best = (kind, device, mount)
    except OSError:
        pass
    return f"{best[0]} ({best[1]} on {best[2] or '?'})"


def milliseconds_log_axis(axis) -> None:
    """A log-scale y axis in ms per iteration over an integer x axis of iterations,
    labelled at 1, 2 and 5 of each decade."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    axis.set_yscale("log")
    axis.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    axis.yaxis.set_minor_formatter(FuncFormatter(
        lambda y, _: f"{y:g}" if f"{y:.0e}"[0] in "25" else ""))
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.set_xlabel("iteration")
    axis.set_ylabel("ms per iteration")


def gpu_problem() -> str | None:
    """None when the GPU engine can run here, else why not (the engine's own check,
    :func:`garaphpy.kernels.gpu.cupy_module`, whose message says how to install)."""
    from garaphpy.kernels.gpu import GpuUnavailableError, cupy_module

    try:
        cupy_module()
    except GpuUnavailableError as error:
        return str(error)
    return None


def free_gpu_memory() -> None:
    """Return the memory of dropped arrays and engines to the device and host
    (only the garbage collection where no GPU is usable)."""
    import gc

    gc.collect()
    if gpu_problem() is not None:
        return
    import cupy

    cupy.cuda.Device().synchronize()
    cupy.get_default_memory_pool().free_all_blocks()
    cupy.get_default_pinned_memory_pool().free_all_blocks()
