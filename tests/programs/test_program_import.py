"""The built-in programs pass the class checks a backend registers (the GPU's
translatability), which therefore do not run each time they are imported;
a user's program class is still checked as it is defined."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from garaphpy import program
from garaphpy.kernels.cuda_program import check_translatable
from garaphpy.programs import BUILTIN_PROGRAMS

from helpers import REPOSITORY


@pytest.mark.parametrize("name", sorted(BUILTIN_PROGRAMS))
def test_every_builtin_program_passes_the_class_checks(name):
    cls = BUILTIN_PROGRAMS[name]
    assert check_translatable in program._CLASS_CHECKS
    for check in program._CLASS_CHECKS:
        check(cls)


def test_importing_the_builtin_programs_runs_no_class_check(tmp_path):
    script = ("import json, garaphpy.program as p\n"
              "seen = []\n"
              "p._CLASS_CHECKS[:] = [lambda cls: seen.append(cls.__name__)]\n"
              "import garaphpy.programs\n"
              "class Mine(p.VertexProgram):\n"
              "    def init(vertex):\n"
              "        return 0.0\n"
              "    def gather(src):\n"
              "        return src\n"
              "    def apply(accum):\n"
              "        return accum\n"
              "    def activate(new, old):\n"
              "        return False\n"
              "print(json.dumps(seen))\n")
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPOSITORY), os.environ.get("PYTHONPATH", "")])}
    path = tmp_path / "mine.py"     # a program's source must be in a file
    path.write_text(script)
    output = subprocess.run([sys.executable, str(path)], env=environment, check=True,
                            capture_output=True, text=True).stdout
    assert json.loads(output.strip().splitlines()[-1]) == ["Mine"]
