"""garaphpy calls no BLAS.

A BLAS call (numpy's or numba's ``@``, ``dot``, ``matmul``, ``inner``,
``vdot``, ``linalg``) wakes OpenBLAS's pool, one thread per core, which then
spins for a while beside the run's own numba threads: on the 16-core H200
host one float dot of the in-degrees cost a hybrid run 100-160 ms of set-up
and a 16-thread CPU SSSP of ca-HepPh ran 124 ms against 7 ms at 2 threads
(BENCHMARKS.md, "Hybrid").  Every module of the package is read with
:mod:`ast`; such a call fails the test with its file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import garaphpy

PACKAGE = Path(garaphpy.__file__).parent
BLAS_FUNCTIONS = {"dot", "matmul", "inner", "vdot", "tensordot"}


def blas_calls(source: str, filename: str = "<string>") -> list[str]:
    """``file:line: expression`` of every BLAS call in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            found.append(f"{filename}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name, owner = node.func.attr, ast.unparse(node.func.value)
            if name in BLAS_FUNCTIONS or owner.endswith("linalg"):
                found.append(f"{filename}:{node.lineno}: {ast.unparse(node.func)}")
    return found


def test_the_finder_sees_each_form():
    source = "a @ b\nnp.dot(a, b)\nx.dot(y)\nnp.linalg.norm(a)\nnp.einsum('i,i->', a, a)\n"
    assert [line.split(": ", 1)[1] for line in blas_calls(source)] == [
        "a @ b", "np.dot", "x.dot", "np.linalg.norm"]


def test_no_module_calls_blas():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += blas_calls(path.read_text(), str(path.relative_to(PACKAGE.parent)))
    assert found == []
