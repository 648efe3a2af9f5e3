"""What a command-line run imports: only what it uses, before it uses it.

Every module a process imports costs its start (the first minute of a user,
and the end-to-end time of a short run).  A CPU run of a built-in program
needs none of the GPU's translator, checkpoints, partitioned runs, the
other built-in programs or the NetworkX backend; each is imported where it
is used.  The run goes in a new process, so that the suite's own imports do
not count, and its ``sys.modules`` is compared with the modules it must not
hold.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from garaphpy import api

from helpers import REPOSITORY

#: Modules (and packages: everything in them) a CPU PageRank run of the
#: command line has no use for.
NOT_IMPORTED_BY_A_CPU_RUN = (
    "garaphpy.kernels.cuda_program.build",     # the GPU's translator ...
    "garaphpy.kernels.cuda_program.emitter",
    "garaphpy.kernels.cuda_program.numba_typing",
    "garaphpy.kernels.gpu",                    # ... and its kernels, engine, transfers
    "garaphpy.kernels.gpu_subgraph",
    "garaphpy.scheduler.gpu",
    "garaphpy.scheduler.gpu_engine",
    "garaphpy.scheduler.hybrid_driver",        # a run on one processor
    "garaphpy.scheduler.checkpoint",           # no checkpoint option
    "garaphpy.distributed",                    # no Dask scheduler
    "garaphpy.nx_backend",
    "garaphpy.programs.bfs",                   # the other built-in programs
    "garaphpy.programs.sssp",
    "garaphpy.programs.components",
    "garaphpy.programs.delta_pagerank",
    "garaphpy.programs.sswp",
    "garaphpy.programs.neural",
    "garaphpy.programs.heat",
    "garaphpy.programs.circuit",
    "cupy", "dask", "distributed", "networkx", "pandas", "scipy.sparse", "tqdm",
)

_RUN = """
import json, sys
from pathlib import Path
from garaphpy import api
api._program_cache_directory = lambda: Path(sys.argv[1])    # the suite's compiled programs
from garaphpy.console import main
code = main(["pagerank", "g.el", *sys.argv[2:], "--store", "store", "-o", "values.txt",
             "--max-iterations", "3", "-q"])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _modules_of_a_run(directory, mode_arguments) -> list[str]:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPOSITORY), os.environ.get("PYTHONPATH", "")])}
    ran = subprocess.run([sys.executable, "-c", _RUN, str(api._program_cache_directory()),
                          *mode_arguments],
                         cwd=directory, env=environment, capture_output=True, text=True,
                         timeout=600)
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout.strip().splitlines()[-1])
    assert report["code"] in (0, 3), ran.stderr        # 3: stopped at the iteration limit
    return report["modules"]


def _unwanted(modules) -> list[str]:
    return sorted(name for name in modules
                  if any(name == banned or name.startswith(banned + ".")
                         for banned in NOT_IMPORTED_BY_A_CPU_RUN))


# the default mode: a hybrid run this small goes to the CPU alone before the GPU is
# set up (its set-up would cost more than the whole run), cupy not imported
@pytest.mark.parametrize("mode_arguments", [["--mode", "cpu"], []], ids=["cpu", "default"])
def test_a_cpu_pagerank_run_imports_nothing_it_does_not_use(tmp_path, mode_arguments):
    (tmp_path / "g.el").write_text("".join(f"{i} {(i * 7 + 1) % 50}\n{i} {(i + 3) % 50}\n"
                                           for i in range(50)))
    modules = _modules_of_a_run(tmp_path, mode_arguments)     # it builds the store too
    assert (tmp_path / "values.txt").is_file()
    assert "garaphpy.programs.pagerank" in modules and "garaphpy.scheduler.cpu_engine" in modules
    assert _unwanted(modules) == []


def test_the_check_sees_a_module_and_a_package_member():
    assert _unwanted(["garaphpy.scheduler.checkpoint", "garaphpy.distributed.worker",
                      "garaphpy.scheduler.checkpoints_of_another_kind", "numpy"]) == \
        ["garaphpy.distributed.worker", "garaphpy.scheduler.checkpoint"]
