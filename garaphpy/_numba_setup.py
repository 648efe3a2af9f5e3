"""numba's threading layer, chosen before the first parallel launch.

The CPU engine runs its kernels while another Python thread feeds the GPU,
so the layer must be thread-safe: TBB or OpenMP ("threadsafe").  numba's
default fallback, workqueue, is not; where neither library is installed
garaphpy serializes its parallel launches through :data:`PARALLEL_LOCK`.
A user's own ``NUMBA_THREADING_LAYER`` is respected.

The OpenMP wait policy stays libgomp's default (workers spin a while after
a parallel region): on 16 cores a shorter spin (``GOMP_SPINCOUNT=10000``)
made in-memory iterations 15% slower and sleeping at once
(``OMP_WAIT_POLICY=PASSIVE``) two to three times slower, while neither
sped up PageRank streamed from storage beside the page readers
(``bench/wait_policy.py``, BENCHMARKS.md).  Spinning workers do hurt where
the machine is shared with other busy processes; users set those
variables themselves there.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading

import numba

#: Held around parallel kernel launches when only workqueue is available.
PARALLEL_LOCK = threading.Lock()


def _threadsafe_layer_available() -> bool:
    for module in ("tbbpool", "omppool"):
        try:
            importlib.import_module(f"numba.np.ufunc.{module}")
            return True
        except ImportError:
            continue
    return False


if "NUMBA_THREADING_LAYER" not in os.environ and _threadsafe_layer_available():
    numba.config.THREADING_LAYER = "threadsafe"
    THREADSAFE = True
else:
    THREADSAFE = os.environ.get("NUMBA_THREADING_LAYER", "") in ("tbb", "omp", "threadsafe",
                                                                  "safe")


def parallel_section():
    """Context for a parallel launch: a no-op with a thread-safe layer."""
    return contextlib.nullcontext() if THREADSAFE else PARALLEL_LOCK
