"""A partition's worker process reuses the memory its iterations free, under a
Dask nanny's ``MALLOC_TRIM_THRESHOLD_`` too (:func:`garaphpy.distributed.worker.reuse_freed_memory`)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")

#: a process under the nanny's setting allocates and writes a 2 MiB array ten
#: times, and prints the page faults of the last nine (below numpy's 4 MiB, from
#: which it advises huge pages: their faults count one a 2 MiB page, where the
#: kernel has one free)
FAULTS = """
import resource, sys
import numpy as np
if sys.argv[1] == "reuse":
    from garaphpy.distributed.worker import reuse_freed_memory
    assert reuse_freed_memory()
np.ones(1 << 18)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(9):
    np.ones(1 << 18)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "MALLOC_TRIM_THRESHOLD_": "65536",
           "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", FAULTS, mode], env=env, capture_output=True,
                          text=True, check=True, timeout=120)
    return int(done.stdout.strip().splitlines()[-1])


def test_a_workers_arrays_reuse_freed_pages_under_the_nannys_trim_threshold():
    pages = 9 * (2 << 20) // 4096
    assert _faults("default") >= pages // 4         # mapped anew and faulted in, each time
    assert _faults("reuse") < pages // 10
