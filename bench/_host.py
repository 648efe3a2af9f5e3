"""What ran a benchmark: the host's name, CPU model and count, and the versions
of Python, numpy, numba and garaphpy (shared by the scripts of bench/)."""

from __future__ import annotations

import os
import platform


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
