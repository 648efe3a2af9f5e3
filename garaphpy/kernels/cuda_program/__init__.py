"""Translating a vertex program into CUDA C++ device functions (Garaph section 2.3, Figure 4).

Garaph's users write one program for both processors; its ``sum`` is a
unified operation, a plain operation on the CPU and an atomic on the GPU
(``unifiedAdd``, Figure 4).  :mod:`garaphpy.kernels.cpu_program` compiles the
program's Python functions with numba; this package translates the very same
checked syntax trees (:class:`garaphpy.program.Function`) into CUDA C++
device functions that the GPU kernels inline (:mod:`garaphpy.kernels.gpu`, the
pull kernel of sections 3.1-3.2):

``gp_gather(values, weights, attrs, u, v, e) -> accum_t``
``gp_apply(attrs, aggregates, num_vertices, iteration, v, value, accum) -> value_t``
``gp_activate(new_value, old_value) -> bool``
``gp_init(attrs, num_vertices, v) -> value_t``
``gp_combine(a, b) -> accum_t``                the sum monoid
``gp_atomic_combine(address, x)``              the same, atomically (shared or global memory)
``gp_accum_identity()``                        the monoid's identity
``gp_aggregate(values, attrs, num_vertices, iteration, v, out)``
    combines v's term of aggregate i into ``out[i]`` with its monoid, plainly
    (``out`` holds one thread's partials; merging them is the kernel's part)
``gp_aggregate_identity(i)``

Each user function becomes ``gp_user_ROLE`` with the user's own parameters;
the entry points bind them by name exactly as cpu_program's wrappers do and
cast the result like ``VALUE(...)``, ``ACCUM(...)`` and ``bool(...)`` there.
The source also defines ``value_t``, ``accum_t``, ``weight_t``, ``degree_t``,
``struct gp_attrs`` and ``GP_NUM_AGGREGATES``, and the ``gp_py_*`` helpers
it uses; no kernels.

The package, in the order a translation runs through it:

:mod:`.build`
    the glue: :func:`translate_program` assembles the translation unit from
    the program's functions, the entry points, the monoid's combine and
    atomic and the aggregates, into a :class:`CudaProgram`;
:mod:`.emitter`
    one Python function -> one CUDA C++ device function, with numba's
    semantics (types, constants, SSA locals, operators) and the differences
    it documents rather than emulates;
:mod:`.numba_typing`
    numba's typing context, asked the signature of every operation, and the
    CUDA C++ scalar of each type (:func:`ctype`);
:mod:`.helpers`
    the ``gp_py_*`` helpers (Python's ``//``, ``%``, ``**``, wrapping
    integers, ``min``/``max``) cut from ``kernels/cuda/python_semantics.cu``.

Importing the package registers :func:`check_translatable` with
:mod:`garaphpy.program`, so that a program class the GPU cannot run is
refused, with its line, when it is defined.  The package's own import is
light: the translator's modules (numba's typing context among them) are
imported when a name of theirs is first used, or a user's program class is
first checked, so that a run that never translates (a CPU run of a built-in
program) does not pay for them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ...program import register_class_check

if TYPE_CHECKING:
    from .build import CudaProgram, translate_program
    from .numba_typing import ctype

__all__ = ["CudaProgram", "check_translatable", "ctype", "translate_program"]

#: The package's names -> the module of the package that defines each.
_LAZY_NAMES = {"CudaProgram": "build", "translate_program": "build", "ctype": "numba_typing"}


def __getattr__(name: str):
    if name in _LAZY_NAMES:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_translatable(cls) -> None:
    """Translate ``cls``'s functions once, with float64 weights and int32
    degrees (:func:`.build.check_translatable`), importing the translator
    on first use.

    Raises
    ------
    ProgramError
        ``file:line: in FUNCTION: ...``.
    """
    from .build import check_translatable as translate_once

    translate_once(cls)


# the GPU runs the same functions: refuse what cannot be translated at class
# definition, not at launch
register_class_check(check_translatable)
