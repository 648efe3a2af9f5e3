"""The typing bridge of the CUDA translator: numba's types and their CUDA C++ scalars.

Garaph's users write one program for both processors (section 2.3); the
CPU runs it compiled by numba (section 4), the GPU pull kernel (sections
3.1-3.2) runs its translation.  For both to compute the same values, the
translator (:mod:`.emitter`) asks numba's own typing context -- the one
``numba.njit`` uses -- for the signature of every operation, and writes each
numba scalar type as the CUDA C++ scalar of the same width and kind.
"""

from __future__ import annotations

import functools

import numpy as np

from ...program import ProgramError

#: numpy (kind, itemsize) -> the CUDA C++ scalar type of that exact width.
C_TYPES = {
    ("b", 1): "bool",
    ("i", 1): "signed char", ("i", 2): "short", ("i", 4): "int", ("i", 8): "long long",
    ("u", 1): "unsigned char", ("u", 2): "unsigned short", ("u", 4): "unsigned int",
    ("u", 8): "unsigned long long",
    ("f", 4): "float", ("f", 8): "double",
}


def ctype(dtype) -> str:
    """The CUDA C++ type of a numpy scalar dtype.

    Parameters
    ----------
    dtype : numpy dtype or anything ``np.dtype`` accepts

    Returns
    -------
    str
        ``'double'``, ``'float'``, ``'long long'``, ``'int'``, ``'short'``,
        ``'signed char'``, ``'bool'`` or ``'unsigned ...'``.

    Raises
    ------
    ProgramError
        For dtypes without an exact CUDA C++ scalar (float16, complex, ...).
    """
    dtype = np.dtype(dtype)
    try:
        return C_TYPES[dtype.kind, dtype.itemsize]
    except KeyError:
        raise ProgramError(f"dtype {dtype} has no CUDA C++ scalar type here (supported: bool, "
                           "int8-64, uint8-64, float32, float64)") from None


class NumbaTyping:
    """numba's typing context, asked what each operation's signature is."""

    def __init__(self):
        from numba.core import types
        from numba.core.compiler_lock import global_compiler_lock
        from numba.core.registry import cpu_target
        from numba.np import numpy_support

        self.types = types
        self.lock = global_compiler_lock
        self.numpy_support = numpy_support
        with self.lock:
            self.context = cpu_target.typing_context
            self.context.refresh()
        self._signatures = {}

    def resolve(self, function, argument_types):
        """numba's signature of ``function(*argument_types)``, or None."""
        key = (function, tuple(argument_types))
        if key not in self._signatures:
            with self.lock:
                try:
                    signature = self.context.resolve_function_type(function, key[1], {})
                except Exception:  # numba's TypingError: no implementation
                    signature = None
            self._signatures[key] = signature
        return self._signatures[key]

    def unify(self, *argument_types):
        """numba's unification of several types (a phi, returns), or None."""
        with self.lock:
            return self.context.unify_types(*argument_types)

    def from_dtype(self, dtype):
        """numba's scalar type of a numpy dtype."""
        return self.numpy_support.from_dtype(np.dtype(dtype))

    def literal(self, value):
        """The type numba gives a constant: a literal for ints and bools."""
        try:
            return self.types.literal(value)
        except Exception:  # floats have no literal type
            return self.context.resolve_value_type(value)


@functools.cache
def numba_typing() -> NumbaTyping:
    """The one :class:`NumbaTyping` of the process (numba's context is loaded once)."""
    return NumbaTyping()
