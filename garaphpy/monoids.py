"""The sum monoids (Garaph's unified operators), each declared once.

A vertex program's ``sum`` and each of its aggregates name a commutative
monoid: ``add``, ``min`` or ``max``.  Everything a backend spells for a
monoid is here: its identity in a dtype, the Python expression of its
combine (numba compiles it for the CPU; the GPU translator translates the
same source), the fold of an aggregate in Python and numpy, the CUDA merge
of two doubles and the CUDA atomics.  The CPU program module, the CUDA
translator, the GPU kernels and the engines derive their text from these
declarations.  The module imports nothing from garaphpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Monoid:
    """One sum monoid and its spelling in each backend.

    Attributes
    ----------
    name : str
        ``"add"``, ``"min"`` or ``"max"``, as programs declare it.
    combine : str
        Python expression of ``combine(a, b)``.
    python_fold : str
        Python expression folding ``{b}`` into ``{a}`` (aggregates on the CPU).
    numpy_reduce : str
        The ``numpy.ndarray`` method reducing an array with the monoid.
    cuda_merge_double : str
        CUDA C++ expression merging doubles ``a`` and ``b``.
    cuda_compare : str or None
        The CUDA C++ comparison ``b OP a`` picking the result (None for add).
    cuda_atomic : str
        The CUDA hardware atomic (``atomicAdd``...).
    cuda_atomic_types : tuple of (str, int or None)
        The (dtype kind, itemsize) the hardware atomic takes (None: any size).
    """

    name: str
    combine: str
    python_fold: str
    numpy_reduce: str
    cuda_merge_double: str
    cuda_compare: str | None
    cuda_atomic: str
    cuda_atomic_types: tuple

    def identity(self, dtype) -> float | int | bool:
        """The identity element in ``dtype``."""
        dtype = np.dtype(dtype)
        if self.name == "add":
            return dtype.type(0)
        if dtype.kind == "f":
            return dtype.type(math.inf if self.name == "min" else -math.inf)
        if dtype.kind == "b":
            return np.bool_(self.name == "min")
        info = np.iinfo(dtype)
        return dtype.type(info.max if self.name == "min" else info.min)

    def combine_source(self, cast: bool = False) -> str:
        """``def combine(a, b)`` as Python source; ``cast`` wraps the result in
        ``ACCUM(...)`` (numba sums narrow integers and bools in int64; the GPU
        translator casts on its own)."""
        body = f"ACCUM({self.combine})" if cast else self.combine
        return f"def combine(a, b):\n    return {body}\n"

    def has_cuda_atomic(self, dtype) -> bool:
        """Whether the hardware atomic takes ``dtype`` as it is."""
        dtype = np.dtype(dtype)
        return any(dtype.kind == kind and size in (None, dtype.itemsize)
                   for kind, size in self.cuda_atomic_types)

    def cuda_double_atomic(self) -> str:
        """CUDA C++ statements merging double ``x`` into ``*address`` atomically."""
        if self.cuda_compare is None:
            return f"{self.cuda_atomic}(address, x);"
        return ("unsigned long long* bits = (unsigned long long*)address;\n"
                "        unsigned long long seen = *bits, assumed;\n"
                f"        while (x {self.cuda_compare} __longlong_as_double(seen)) {{\n"
                "            assumed = seen;\n"
                "            seen = atomicCAS(bits, assumed, __double_as_longlong(x));\n"
                "            if (seen == assumed) break;\n"
                "        }")


_ADD = Monoid("add", combine="a + b", python_fold="{a} + {b}", numpy_reduce="sum",
              cuda_merge_double="a + b", cuda_compare=None, cuda_atomic="atomicAdd",
              cuda_atomic_types=(("i", 4), ("u", 4), ("u", 8), ("f", None)))
_MIN = Monoid("min", combine="a if a <= b else b", python_fold="min({a}, {b})",
              numpy_reduce="min", cuda_merge_double="(b < a ? b : a)", cuda_compare="<",
              cuda_atomic="atomicMin", cuda_atomic_types=(("i", 4), ("u", 4), ("u", 8), ("i", 8)))
_MAX = Monoid("max", combine="a if a >= b else b", python_fold="max({a}, {b})",
              numpy_reduce="max", cuda_merge_double="(b > a ? b : a)", cuda_compare=">",
              cuda_atomic="atomicMax", cuda_atomic_types=(("i", 4), ("u", 4), ("u", 8), ("i", 8)))

#: Name -> monoid, in the order error messages list them.
MONOIDS: dict[str, Monoid] = {monoid.name: monoid for monoid in (_ADD, _MIN, _MAX)}

#: The monoid names a program may declare.
NAMES = tuple(MONOIDS)


def monoid_identity(monoid: str, dtype) -> float | int | bool:
    """The identity element of monoid ``monoid`` (a name) in ``dtype``."""
    return MONOIDS[monoid].identity(dtype)
