"""garaphpy: a CPU-GPU co-processing graph engine after Garaph (USENIX ATC'17).

A graph is preprocessed once into CSC shards grouped into pages (Garaph
section 2.1), stored on disk; engines stream pages to the CPU and the GPU.

Quick use::

    import garaphpy
    graph = garaphpy.Graph.load("web-NotreDame.txt.gz")
    print(graph.describe())
"""

import logging as _logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # what type checkers see: the lazily imported names of __getattr__ below,
    # and garaphpy.run the function (garaphpy/run.py is the command line module)
    from .api import (GpuFallbackWarning, IgnoredSourcesWarning, NotConvergedError,
                      NotConvergedWarning, ThreadsCappedWarning, run)
    from .graph import Graph
    from .program import ProgramError, ToleranceIgnoredWarning, VerifyReport, VertexProgram
    from .scheduler.policy import Decision, HybridPolicy
    from .scheduler.records import Result

from . import config as _config
# before any kernel module: numba's disk cache keyed on the package's text
from . import _numba_cache  # noqa: F401  (isort: skip)

# the machine's load is sampled over the imports that follow (garaphpy._numba_setup)
_config.start_load_sample()

from .errors import (CheckpointError, ConfigError, GaraphError, GraphInputError, RunInterrupted,
                     StoreCorruptError, StoreError)

# Registers the GPU translatability check with garaphpy.program before any
# program class is defined (the check runs at class definition; the model
# does not import its backend).  Light: the translator is imported by the
# first check, or the first run that translates.
from .kernels import cuda_program as _cuda_program  # noqa: F401  (isort: skip)

# Progress and status messages go to the "garaphpy" loggers (garaphpy.progress);
# a library prints nothing until its user configures logging.
_logging.getLogger("garaphpy").addHandler(_logging.NullHandler())
from ._version import __version__

__all__ = ["Graph", "run", "Result", "VertexProgram", "ProgramError", "VerifyReport",
           "ToleranceIgnoredWarning", "NotConvergedError",
           "NotConvergedWarning", "GaraphError", "GraphInputError", "ConfigError", "StoreError",
           "StoreCorruptError", "CheckpointError", "RunInterrupted", "HybridPolicy",
           "Decision", "GpuFallbackWarning", "IgnoredSourcesWarning", "ThreadsCappedWarning", "__version__"]


def __getattr__(name):
    # Graph pulls in numba and the readers: imported on first use only.
    if name == "Graph":
        from .graph import Graph

        return Graph
    if name == "run":
        # the function; the command line is garaphpy.cli (python -m garaphpy.run)
        from .api import run

        return run
    if name in ("HybridPolicy", "Decision"):
        from .scheduler import policy

        return getattr(policy, name)
    if name in ("NotConvergedError", "NotConvergedWarning", "GpuFallbackWarning",
                "IgnoredSourcesWarning", "ThreadsCappedWarning"):
        from . import api

        return getattr(api, name)
    if name == "Result":
        from .scheduler.records import Result

        return Result
    if name in ("VertexProgram", "ProgramError", "VerifyReport", "ToleranceIgnoredWarning"):
        from . import program

        return getattr(program, name)
    raise AttributeError(f"module 'garaphpy' has no attribute {name!r}")
