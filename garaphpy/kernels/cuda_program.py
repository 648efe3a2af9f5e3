"""Translating a vertex program into CUDA C++ device functions (Garaph section 2.3, Figure 4).

Garaph's users write one program for both processors; its ``sum`` is a
unified operation, a plain operation on the CPU and an atomic on the GPU
(``unifiedAdd``, Figure 4).  :mod:`garaphpy.kernels.cpu_program` compiles the
program's Python functions with numba; this module translates the very same
checked syntax trees (:class:`garaphpy.program.Function`) into CUDA C++
device functions that the GPU kernels (:mod:`garaphpy.kernels.gpu`) inline:

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

Semantics: numba's, exactly
---------------------------
The GPU must compute what the CPU computes, so the translation follows
numba's typing and lowering rather than C++'s:

* **Types.**  Every operation is typed by numba's own typing context (the
  one ``numba.njit`` uses), so mixed int/float promotion, ``int32 + int32 ->
  int64``, ``int / int -> float64``, ``float32 op int64 -> float64``,
  comparisons of signed with unsigned, ``min``/``max`` over mixed types and
  ``math.floor`` returning int64 are numba's, quirks included.  Operands are
  converted explicitly to the types of the signature numba picks.
* **Constants.**  Integer and bool constants have numba's literal types;
  CPython's constant folding (``-1``, ``2 ** 0.5``) is replayed with its own
  limits, so folded values are Python's; floats are written with ``repr``
  (shortest round-trip, exact).  Program constants become named ``const``
  locals of the functions that read them.
* **Locals** follow numba's SSA: a name re-assigned with another type is a
  new C++ variable; where branches join, the name takes the unification of
  its types (a phi).  A name assigned on only some paths and read after the
  join is refused, as numba cannot type it either.  Returns are unified the
  same way, and branches whose condition numba finds constant are pruned.
* **Operators.**  Python's ``//`` and ``%`` (floor semantics, CPython's
  float algorithm), ``**`` (numba's exponentiation by squaring for integer
  exponents, ``pow`` otherwise), ``and``/``or`` returning an operand, chained
  comparisons, ``min``/``max`` keeping Python's choice among equal or NaN
  arguments.  Integer arithmetic wraps (done on unsigned integers, where C++
  defines it).  Floating products use ``__dmul_rn``/``__fmul_rn``, which
  are never fused into a multiply-add: numba never fuses.

Known differences, documented rather than emulated
--------------------------------------------------
* Division or modulo by zero: Python and numba (``error_model="python"``)
  raise ZeroDivisionError; the GPU cannot raise, so it gives what numba's
  ``error_model="numpy"`` gives: inf/nan for floats, 0 for integer ``//``
  and ``%``, the most negative integer for ``0 ** negative``.
* Signed integer overflow: numba leaves it undefined (LLVM ``nsw``), and
  LLVM may compute as if it had not happened (``a - b > 0.5`` with ``a - b``
  overflowing); the GPU wraps.  Unsigned arithmetic wraps on both.
* ``int()``, ``math.floor``/``ceil`` and casts to an integer value type of
  NaN, infinity or a float out of the integer's range (a negative float to
  an unsigned type included) are undefined in numba (LLVM ``fptosi``) and
  differ between the CPU (0x8000...) and the GPU (saturation, NaN -> 0).
* Transcendental functions (``exp``, ``log``, ``sin``, ``pow``, ``erf``, ...)
  come from CUDA's math library on the GPU and from the C library on the
  CPU; they agree within CUDA's documented ulp bounds, not bit for bit.
  ``+ - * /``, ``sqrt``, ``fabs``, ``floor``, ``ceil``, ``copysign`` and
  ``fmod`` are exact on both.
* The order of the atomic ``sum`` is not deterministic: float additions may
  round differently from the CPU's order, and ``min``/``max`` with a NaN
  operand depend on the order on both processors (``gp_combine(a, b)`` keeps
  numba's ``a if a <= b else b``, which is not symmetric under NaN).

Atomics
-------
``gp_atomic_combine`` uses ``atomicAdd``/``atomicMin``/``atomicMax`` where
the hardware has them for the accumulator type (32- and 64-bit integers,
``atomicAdd`` on float and double), and a compare-and-swap loop on the bit
pattern otherwise (``min``/``max`` on float and double).  Accumulators
narrower than 32 bits (bool, 8- and 16-bit integers) are kept, not widened
or refused: they are updated by a compare-and-swap of the aligned 32-bit
word that holds them, so their arrays, in shared or global memory, must
start 4-byte aligned and be padded to a multiple of 4 bytes
(:attr:`CudaProgram.accum_alignment`).
"""

from __future__ import annotations

import ast
import copy
import functools
import hashlib
import math
import operator
import os
import re
import struct
from dataclasses import dataclass

import numpy as np

from ..monoids import MONOIDS, monoid_identity
from ..program import ALLOWED_CALLS, Function, ProgramError, VertexProgram, register_class_check

# ----------------------------------------------------------------- C types --
_C_TYPES = {
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
        return _C_TYPES[dtype.kind, dtype.itemsize]
    except KeyError:
        raise ProgramError(f"dtype {dtype} has no CUDA C++ scalar type here (supported: bool, "
                           "int8-64, uint8-64, float32, float64)") from None


# ------------------------------------------------------------ the result --
@dataclass(frozen=True)
class CudaProgram:
    """A vertex program translated to CUDA C++ device functions.

    Attributes
    ----------
    program : VertexProgram
        The instance translated (its constants are baked in).
    value_dtype, accum_dtype, weight_dtype, degree_dtype : numpy.dtype
        What ``value_t``, ``accum_t``, ``weight_t`` and ``degree_t`` are.
    source : str
        CUDA C++: the typedefs, ``struct gp_attrs``, ``GP_NUM_AGGREGATES``
        and the device functions of the module docstring; no kernels.
    aggregate_monoids : tuple of str
        The monoid of each aggregate, in declaration order.
    uses : frozenset of str
        Every parameter name any function asks for.
    key : str
        SHA-256 of ``source`` (for compile caches).
    aggregate_names : tuple of str
        The aggregates, in declaration order (``aggregates[i]`` of gp_apply).
    identity : numpy scalar
        The sum monoid's identity in ``accum_dtype`` (what
        ``gp_accum_identity()`` returns).
    accum_alignment : int
        Arrays of ``accum_t`` that ``gp_atomic_combine`` updates must start
        at a multiple of this many bytes and span a multiple of it: 4 when
        ``accum_t`` is narrower than 32 bits (its atomic is a compare-and-swap
        of the enclosing word), else the itemsize.
    """

    program: VertexProgram
    value_dtype: np.dtype
    accum_dtype: np.dtype
    weight_dtype: np.dtype
    degree_dtype: np.dtype
    source: str
    aggregate_monoids: tuple
    uses: frozenset
    key: str
    aggregate_names: tuple = ()
    identity: object = None
    accum_alignment: int = 4


def translate_program(program: VertexProgram, *, weight_dtype=np.float64,
                      degree_dtype=np.int32) -> CudaProgram:
    """Translate ``program`` (an instance) into CUDA C++ device functions.

    Parameters
    ----------
    program : VertexProgram
        Its constants (``program.constants``) are baked into the source.
    weight_dtype : numpy dtype, default float64
        Type of the edge values the gather reads (``weight_t``).
    degree_dtype : numpy dtype, default int32
        Type of the stored degrees (``degree_t``).

    Raises
    ------
    ProgramError
        ``file:line: in FUNCTION: ...`` for a construct that cannot be
        translated (or that numba cannot type) with these dtypes.
    """
    cls = type(program)
    return _translate(cls, program.constants, program, weight_dtype, degree_dtype)


def check_translatable(cls) -> None:
    """Translate ``cls``'s functions once, with float64 weights and int32 degrees.

    Called when a program class is defined, so that a construct the GPU
    cannot run is refused with its line then, not at launch.

    Raises
    ------
    ProgramError
        ``file:line: in FUNCTION: ...``.
    """
    _translate(cls, dict(cls.constants), None, np.float64, np.int32)


# the GPU runs the same functions: refuse what cannot be translated at class
# definition, not at launch
register_class_check(check_translatable)


# ------------------------------------------------------------ numba typing --
class _NumbaTyping:
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
        return self.numpy_support.from_dtype(np.dtype(dtype))

    def literal(self, value):
        """The type numba gives a constant: a literal for ints and bools."""
        try:
            return self.types.literal(value)
        except Exception:  # floats have no literal type
            return self.context.resolve_value_type(value)


@functools.cache
def _typing() -> _NumbaTyping:
    return _NumbaTyping()


# --------------------------------------------------------- translation unit --
_NOT_CONSTANT = object()

_BINARY_OPERATORS = {
    ast.Add: (operator.add, operator.iadd, "+"), ast.Sub: (operator.sub, operator.isub, "-"),
    ast.Mult: (operator.mul, operator.imul, "*"),
    ast.Div: (operator.truediv, operator.itruediv, "/"),
    ast.FloorDiv: (operator.floordiv, operator.ifloordiv, "//"),
    ast.Mod: (operator.mod, operator.imod, "%"), ast.Pow: (operator.pow, operator.ipow, "**"),
}
_COMPARISONS = {
    ast.Eq: (operator.eq, "=="), ast.NotEq: (operator.ne, "!="), ast.Lt: (operator.lt, "<"),
    ast.LtE: (operator.le, "<="), ast.Gt: (operator.gt, ">"), ast.GtE: (operator.ge, ">="),
}
#: math functions of one float argument that map to the C function of that name.
_FLOAT_MATH = {"exp", "log", "log2", "log10", "sqrt", "sin", "cos", "tan", "tanh", "atan",
               "fabs", "expm1", "log1p", "erf"}
_MATH_CONSTANTS = {"inf": math.inf, "pi": math.pi, "e": math.e}

#: C++ and CUDA names a Python name must not take.
_RESERVED = set("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
co_return co_yield decltype default delete do double dynamic_cast else enum explicit export
extern false float for friend goto if inline int long mutable namespace new noexcept not not_eq
nullptr operator or or_eq private protected public register reinterpret_cast requires restrict
return short signed sizeof static static_assert static_cast struct switch template this
thread_local throw true try typedef typeid typename union unsigned using virtual void volatile
wchar_t while xor xor_eq
threadIdx blockIdx blockDim gridDim warpSize main
value_t accum_t weight_t degree_t gp_attrs
NULL INFINITY NAN EOF assert errno isnan isinf isfinite signbit fpclassify
exp expf log logf log2 log2f log10 log10f sqrt sqrtf sin sinf cos cosf tan tanf tanh tanhf
atan atanf fabs fabsf expm1 expm1f log1p log1pf erf erff floor floorf ceil ceilf pow powf
fmod fmodf copysign copysignf hypot hypotf min max abs
""".split())


class _Helpers:
    """The Python-semantics helpers a translation unit uses, emitted once each."""

    def __init__(self):
        self.used: dict[str, str] = {}

    def use(self, name: str, definition: str) -> None:
        self.used.setdefault(name, definition)

    def source(self) -> str:
        return "\n".join(self.used.values())  # insertion order: dependencies come first


_SIGNED_WRAP = """\
__device__ __forceinline__ long long gp_py_{name}(long long a, long long b) {{
    return (long long)((unsigned long long)a {op} (unsigned long long)b);
}}
"""

_FLOAT_MUL = """\
__device__ __forceinline__ {t} gp_py_mul({t} a, {t} b) {{
    return {intrinsic}(a, b);
}}
"""

_NEG = """\
__device__ __forceinline__ long long gp_py_neg(long long a) {
    return (long long)(0ULL - (unsigned long long)a);
}
"""

_ABS = """\
template <class T>
__device__ __forceinline__ T gp_py_abs(T a) {
    return a < 0 ? (T)(0ULL - (unsigned long long)a) : a;
}
"""

_MINMAX = """\
template <class T>
__device__ __forceinline__ T gp_py_{name}(T a, T b) {{
    return b {op} a ? b : a;
}}
"""

_INF = """\
__device__ __forceinline__ double gp_py_inf() {
    return __longlong_as_double(0x7ff0000000000000LL);
}
"""

_SIGNED_DIVMOD = """\
__device__ __forceinline__ long long gp_py_floordiv(long long x, long long y) {
    if (y == 0 || (x == (-9223372036854775807LL - 1) && y == -1)) return 0;
    const long long quotient = x / y, remainder = x % y;
    return remainder != 0 && (y ^ remainder) < 0 ? quotient - 1 : quotient;
}
__device__ __forceinline__ long long gp_py_mod(long long x, long long y) {
    if (y == 0 || (x == (-9223372036854775807LL - 1) && y == -1)) return 0;
    const long long remainder = x % y;
    return remainder != 0 && (y ^ remainder) < 0 ? remainder + y : remainder;
}
"""

_UNSIGNED_DIVMOD = """\
__device__ __forceinline__ unsigned long long gp_py_floordiv(unsigned long long x,
                                                             unsigned long long y) {
    return y == 0 ? 0 : x / y;
}
__device__ __forceinline__ unsigned long long gp_py_mod(unsigned long long x,
                                                        unsigned long long y) {
    return y == 0 ? 0 : x % y;
}
"""

_FLOAT_DIVMOD = """\
// CPython's float_divmod, as numba compiles it; y == 0 gives numba's numpy-error-model result
__device__ __forceinline__ {t} gp_py_divmod({t} x, {t} y, {t}* remainder) {{
    if (y == 0) {{
        *remainder = {fmod}(x, y);
        return x / y;
    }}
    {t} mod = {fmod}(x, y);
    {t} div = (x - mod) / y;
    if (mod != 0) {{
        if ((y < 0) != (mod < 0)) {{
            mod += y;
            div -= 1;
        }}
    }} else {{
        mod = y < 0 ? -{zero} : {zero};
    }}
    {t} floordiv;
    if (div < 0 || div > 0) {{
        floordiv = {floor}(div);
        if (div - floordiv > {half}) floordiv += 1;
    }} else {{
        div = div * div;
        floordiv = div * x / y;
    }}
    *remainder = mod;
    return floordiv;
}}
__device__ __forceinline__ {t} gp_py_floordiv({t} x, {t} y) {{
    {t} remainder;
    return gp_py_divmod(x, y, &remainder);
}}
__device__ __forceinline__ {t} gp_py_mod({t} x, {t} y) {{
    {t} remainder;
    gp_py_divmod(x, y, &remainder);
    return remainder;
}}
"""

_POW_LOOP = """\
// base ** exponent by squaring, numba's int_power loop
template <class T>
__device__ __forceinline__ T gp_py_pow_loop(T base, unsigned long long exponent) {
    T result = 1;
    while (exponent != 0) {
        if (exponent & 1) result *= base;
        exponent >>= 1;
        base *= base;
    }
    return result;
}
"""

_POW_INTEGER = """\
// numba's int_power for an integer result; 0 ** negative as numba's numpy error model
__device__ __forceinline__ {t} gp_py_pow({t} base, {e} exponent) {{
{negative}    if (exponent > 0x10000) return ({t})pow((double)base, (double)exponent);
    return ({t})gp_py_pow_loop((unsigned long long)base, (unsigned long long)exponent);
}}
"""

_POW_INTEGER_NEGATIVE = """\
    if (exponent < 0) {
        if (base == 0) return -9223372036854775807LL - 1;
        if (base != 1 && base != -1) return 0;
        return (exponent & 1) ? base : 1;
    }
"""

_POW_FLOAT = """\
// numba's int_power for a floating-point base and an integer exponent
__device__ __forceinline__ {t} gp_py_pow({t} base, {e} exponent) {{
{magnitude}    if (magnitude > 0x10000) return ({t})pow((double)base, (double)exponent);
    const {t} result = gp_py_pow_loop(base, magnitude);
    return {result};
}}
"""

_POW_FLOAT_SIGNED = """\
    const bool invert = exponent < 0;
    const unsigned long long magnitude =
        invert ? 0ULL - (unsigned long long)exponent : (unsigned long long)exponent;
"""


def _power_helper(c_type: str, kind: str, signed_exponent: bool) -> str:
    exponent = "long long" if signed_exponent else "unsigned long long"
    if kind in "iu":
        negative = _POW_INTEGER_NEGATIVE if signed_exponent else ""
        return _POW_INTEGER.format(t=c_type, e=exponent, negative=negative)
    if signed_exponent:
        return _POW_FLOAT.format(t=c_type, e=exponent, magnitude=_POW_FLOAT_SIGNED,
                                 result=f"invert ? ({c_type})(1.0 / (double)result) : result")
    return _POW_FLOAT.format(t=c_type, e=exponent,
                             magnitude="    const unsigned long long magnitude = exponent;\n",
                             result="result")


# C++ precedence levels of the expressions generated (lower binds tighter)
_PRIMARY, _UNARY, _MULTIPLICATIVE, _ADDITIVE = 0, 3, 5, 6
_RELATIONAL, _EQUALITY, _AND, _OR, _CONDITIONAL = 9, 10, 14, 15, 16
_COMPARISON_PRECEDENCE = {"==": _EQUALITY, "!=": _EQUALITY, "<": _RELATIONAL,
                          "<=": _RELATIONAL, ">": _RELATIONAL, ">=": _RELATIONAL}


@dataclass(frozen=True)
class _Value:
    """A translated expression: C++ text, numba type, and what numba knows of it."""

    text: str
    type: object
    precedence: int = _PRIMARY
    #: Python value when numba sees a constant (literal, global, constant local)
    constant: object = _NOT_CONSTANT
    #: Python value of a one-operator expression on two constants (numba prunes on it)
    condition: object = _NOT_CONSTANT
    #: the same value before a widening that represents it exactly (casts collapse to it)
    widened_from: "_Value | None" = None

    def operand(self, loosest: int = _PRIMARY) -> str:
        """The text as an operand that binds no looser than ``loosest``."""
        return self.text if self.precedence <= loosest else f"({self.text})"

    def static_truth(self):
        """True/False when numba would prune a branch on this value, else None."""
        for known in (self.constant, self.condition):
            if known is not _NOT_CONSTANT:
                try:
                    return bool(known)
                except Exception:
                    return None
        return None


@dataclass(frozen=True)
class _Binding:
    cvar: str
    type: object


@dataclass(frozen=True)
class _Partial:
    """A name assigned on only some of the paths that reach this point."""

    line: int


@dataclass
class _If:
    condition: str
    then: list
    orelse: list


@dataclass
class _Return:
    value: _Value
    line: int


@dataclass
class _CFunction:
    name: str
    return_type: object
    text: str


def _signature(head: str, parameters: list[str], width: int = 99) -> list[str]:
    """``head(parameters) {``, the parameters wrapped under the parenthesis."""
    lines, line = [], f"{head}("
    indent = " " * len(line)
    for i, parameter in enumerate(parameters):
        last = i == len(parameters) - 1
        piece = parameter + (") {" if last else ", ")
        if len(line) + len(piece.rstrip()) > width and line != f"{head}(":
            lines.append(line.rstrip())
            line = indent
        line += piece
    lines.append(line if parameters else line + ") {")
    return lines


def _cxx_identifier(name: str) -> str:
    if not name.isascii():
        name = "".join(c if c.isascii() else f"_u{ord(c):x}" for c in name)
    if "__" in name:  # reserved anywhere in a C++ name
        name = name.replace("__", "_u5f_")
    if name in _RESERVED or name.startswith("gp_") or name.startswith("_") and \
            name[1:2].isupper():
        name = f"{name}_"
    return name


class _FunctionTranslator:
    """Translates one checked function (numba semantics; see the module docstring)."""

    def __init__(self, function: Function, parameter_types: dict, constants: dict,
                 helpers: _Helpers, cxx_name: str, *, signature_ctypes: dict | None = None,
                 return_ctype: str | None = None, final_type=None, comment: str = ""):
        self.function = function
        self.typing = _typing()
        self.types = self.typing.types
        self.constants = constants
        self.helpers = helpers
        self.cxx_name = cxx_name
        self.signature_ctypes = signature_ctypes or {}
        self.return_ctype = return_ctype
        self.final_type = final_type
        self.comment = comment
        self.declared: dict[str, object] = {}      # C++ variable -> its (unliteral) type
        self.locals_order: list[str] = []
        self.constants_used: dict[str, str] = {}   # constant name -> C++ name
        self.returns: list[_Return] = []
        self.tree = _fold_constants(copy.deepcopy(function.tree))
        self.assigned = _assigned_names(self.tree)
        self.parameter_types = parameter_types
        self.constant_locals = self._constant_locals()

    # -- errors and types ------------------------------------------------------
    def fail(self, node, message: str):
        line = getattr(node, "lineno", self.function.first_line)
        raise ProgramError(f"{self.function.filename}:{line}: in {self.function.name}: "
                           f"{message}")

    def unliteral(self, numba_type):
        return self.types.unliteral(numba_type)

    def c_type(self, numba_type) -> str:
        numba_type = self.unliteral(numba_type)
        try:
            dtype = self.typing.numpy_support.as_dtype(numba_type)
        except Exception:
            dtype = None
        if dtype is None or (dtype.kind, dtype.itemsize) not in _C_TYPES:
            raise _Untranslatable(f"values of type {numba_type} cannot be translated")
        return _C_TYPES[dtype.kind, dtype.itemsize]

    def kind(self, numba_type) -> str:
        """'b', 'i', 'u' or 'f' for a scalar numba type."""
        numba_type = self.unliteral(numba_type)
        if isinstance(numba_type, self.types.Boolean):
            return "b"
        if isinstance(numba_type, self.types.Integer):
            return "i" if numba_type.signed else "u"
        if isinstance(numba_type, self.types.Float):
            return "f"
        return "?"

    def resolve(self, node, function, argument_types, what: str):
        signature = self.typing.resolve(function, argument_types)
        if signature is None:
            shown = ", ".join(str(self.unliteral(t)) for t in argument_types)
            self.fail(node, f"numba cannot type {what} on ({shown}), so neither the CPU nor "
                            "the GPU can run it")
        return signature

    def unify(self, node, *numba_types):
        unified = self.typing.unify(*numba_types)
        if unified is None:
            shown = ", ".join(str(self.unliteral(t)) for t in numba_types)
            self.fail(node, f"numba cannot unify the types {shown} (a name, return or "
                            "conditional takes each of them)")
        return unified

    def check_scalar(self, node, numba_type):
        try:
            self.c_type(numba_type)
        except _Untranslatable as error:
            self.fail(node, str(error))
        return numba_type

    # -- conversions -----------------------------------------------------------
    def convert(self, value: _Value, target) -> _Value:
        """``value`` as numba converts it to ``target`` (C++ casts, explicit)."""
        source = self.unliteral(value.type)
        target = self.unliteral(target)
        if source == target:
            return value
        if value.widened_from is not None:
            # (T)(wide)x == (T)x when wide holds every value of x's type
            return self.convert(value.widened_from, target)
        if value.constant is not _NOT_CONSTANT and value.text in _literal_texts(value.constant):
            converted = _convert_constant(value.constant, self.kind(target), self.c_type(target))
            if converted is not None:
                text = self.literal_text(converted, target)
                return _Value(text, target, constant=converted)
        exact = self.represents(target, source)
        return _Value(f"({self.c_type(target)}){value.operand(_UNARY)}", target, _UNARY,
                      widened_from=value if exact else None)

    def represents(self, wide, narrow) -> bool:
        """Whether type ``wide`` holds every value of type ``narrow`` exactly."""
        wide_kind, narrow_kind = self.kind(wide), self.kind(narrow)
        if narrow_kind == "b":
            return True
        if wide_kind == "b":
            return False
        wide_bits, narrow_bits = wide.bitwidth, narrow.bitwidth
        if wide_kind == "f":
            return narrow_bits <= (wide_bits if narrow_kind == "f" else
                                   {32: 16, 64: 32}[wide_bits])
        if wide_kind == "i":
            return narrow_kind == "i" and narrow_bits <= wide_bits or \
                narrow_kind == "u" and narrow_bits < wide_bits
        if wide_kind == "u":
            return narrow_kind == "u" and narrow_bits <= wide_bits
        return False

    def convert_via(self, value: _Value, *steps) -> _Value:
        for step in steps:
            value = self.convert(value, step)
        return value

    def truth(self, node, value: _Value) -> _Value:
        """Python's truth of ``value`` (numba: ``bool(x)``; NaN is true)."""
        if self.kind(value.type) == "b":
            return value
        self.resolve(node, bool, (value.type,), "truth testing")
        return _Value(f"{value.operand(_ADDITIVE)} != 0", self.types.boolean, _EQUALITY)

    # -- literals --------------------------------------------------------------
    def literal_text(self, constant, numba_type=None) -> str:
        if isinstance(constant, (bool, np.bool_)) and numba_type is not None and \
                self.kind(numba_type) == "b":
            return "true" if constant else "false"
        kind = self.kind(numba_type) if numba_type is not None else None
        if isinstance(constant, (int, np.integer)) and kind != "f":
            constant = int(constant)
            if kind == "u" or constant >= 2 ** 63:
                return f"{constant}ULL"
            if constant == -2 ** 63:
                return "(-9223372036854775807LL - 1)"
            return f"{constant}LL" if constant >= 0 else f"({constant}LL)"
        return _float_text(float(constant), self.c_type(numba_type) if numba_type else "double",
                           self.helpers)

    def constant_value(self, node, constant) -> _Value:
        if isinstance(constant, complex) or not isinstance(constant, (bool, int, float)):
            self.fail(node, f"the constant {constant!r} is not a bool, int or float "
                            "(numba would type it otherwise)")
        if isinstance(constant, int) and not isinstance(constant, bool) and \
                not -2 ** 63 <= constant < 2 ** 64:
            self.fail(node, f"the integer {constant} does not fit in 64 bits")
        numba_type = self.typing.literal(constant)
        return _Value(self.literal_text(constant, numba_type), numba_type, constant=constant)

    # -- the function ----------------------------------------------------------
    def translate(self) -> _CFunction:
        environment = {}
        parameters = []
        for name in self.function.parameters:
            numba_type = self.parameter_types[name]
            cvar = self.new_variable(name, numba_type, declare=False)
            environment[name] = _Binding(cvar, numba_type)
            parameters.append(f"{self.signature_ctypes.get(name, self.c_type(numba_type))} "
                              f"{cvar}")
        body, environment = self.block(self.tree.body, environment)
        if environment is not None:
            last = self.tree.body[-1]
            self.fail(last, "not every path returns a value (Python would return None)")
        if not self.returns:
            self.fail(self.tree, "the function never returns a value")
        return_type = self.unliteral(self.unify(self.tree, *(r.value.type for r in self.returns)))
        self.check_scalar(self.tree, return_type)
        lines = []
        if self.comment:
            lines.append(f"// {self.comment}")
        return_ctype = self.return_ctype or self.c_type(return_type)
        lines.extend(_signature(f"__device__ __forceinline__ {return_ctype} {self.cxx_name}",
                                parameters))
        statements = self.render(body, 1, return_type)
        used = set(re.findall(r"\b\w+\b", "\n".join(statements)))
        for name, cvar in self.constants_used.items():
            if cvar in used:  # not those only a pruned branch condition read
                constant = self.constants[name]
                numba_type = self.typing.literal(constant)
                lines.append(f"    const {self.c_type(numba_type)} {cvar} = "
                             f"{self.literal_text(constant, numba_type)};")
        for cvar in self.locals_order:
            lines.append(f"    {self.c_type(self.declared[cvar])} {cvar};")
        lines.extend(statements)
        lines.append("}")
        return _CFunction(self.cxx_name, return_type, "\n".join(lines) + "\n")

    def render(self, items, depth: int, return_type) -> list[str]:
        indent = "    " * depth
        lines = []
        for item in items:
            if isinstance(item, str):
                lines.append(indent + item)
            elif isinstance(item, _Return):
                value = self.convert(item.value, return_type)
                if self.final_type is not None:
                    value = self.convert(value, self.final_type)
                lines.append(f"{indent}return {value.text};")
            else:
                lines.extend(self.render_if(item, depth, return_type))
        return lines

    def render_if(self, item: _If, depth: int, return_type, prefix: str = "if") -> list[str]:
        indent = "    " * depth
        lines = [f"{indent}{prefix} ({item.condition}) {{"]
        lines.extend(self.render(item.then, depth + 1, return_type))
        if len(item.orelse) == 1 and isinstance(item.orelse[0], _If):
            chained = self.render_if(item.orelse[0], depth, return_type, "} else if")
            return lines + chained
        if item.orelse:
            lines.append(f"{indent}}} else {{")
            lines.extend(self.render(item.orelse, depth + 1, return_type))
        lines.append(f"{indent}}}")
        return lines

    def unused_name(self, name: str) -> str:
        """A C++ name for Python ``name`` that no variable or constant has taken."""
        base = _cxx_identifier(name)
        joiner = "" if base.endswith("_") else "_"  # C++ reserves names holding "__"
        cvar, suffix = base, 0
        while cvar in self.declared or cvar in self.constants_used.values() \
                or cvar in _RESERVED:
            suffix += 1
            cvar = f"{base}{joiner}{suffix}"
        return cvar

    def new_variable(self, name: str, numba_type, declare: bool = True) -> str:
        cvar = self.unused_name(name)
        self.declared[cvar] = self.unliteral(numba_type)
        if declare:
            self.check_scalar(None, numba_type)
            self.locals_order.append(cvar)
        return cvar

    def _constant_locals(self) -> dict:
        """Names numba's dead-branch pruning sees as constants: one definition, a constant."""
        definitions: dict[str, list] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    definitions.setdefault(target.id, []).append(node.value)
            elif isinstance(node, ast.AugAssign):
                definitions.setdefault(node.target.id, []).append(None)
        known = {}
        changed = True
        while changed:
            changed = False
            for name, values in definitions.items():
                if name in known or name in self.function.parameters or len(values) != 1:
                    continue
                value = values[0]
                if isinstance(value, ast.Constant):
                    known[name] = value.value
                elif isinstance(value, ast.Name):
                    if value.id in known:
                        known[name] = known[value.id]
                    elif value.id in self.constants and value.id not in self.assigned:
                        known[name] = self.constants[value.id]
                    else:
                        continue
                else:
                    continue
                changed = True
        return known

    # -- statements ------------------------------------------------------------
    def block(self, statements, environment):
        """Translate statements; returns (items, environment after, or None if all returned)."""
        items = []
        for statement in statements:
            if environment is None:
                break  # unreachable code after a return: neither Python nor numba runs it
            environment = self.statement(statement, environment, items)
        return items, environment

    def statement(self, node, environment, items):
        if isinstance(node, ast.Return):
            if node.value is None:
                self.fail(node, "a bare return gives None; return a value")
            value = self.expression(node.value, environment)
            self.check_scalar(node, value.type)
            self.returns.append(_Return(value, node.lineno))
            items.append(self.returns[-1])
            return None
        if isinstance(node, ast.Assign):
            value = self.expression(node.value, environment)
            environment = dict(environment)
            for target in node.targets:
                self.assign(node, target.id, value, environment, items)
            return environment
        if isinstance(node, ast.AugAssign):
            target = node.target.id
            current = self.name(node.target, environment)
            right = self.expression(node.value, environment)
            value = self.binary(node, node.op, current, right, inplace=True)
            environment = dict(environment)
            self.assign(node, target, value, environment, items)
            return environment
        if isinstance(node, ast.If):
            return self.if_statement(node, environment, items)
        if isinstance(node, ast.Expr):
            self.expression(node.value, environment)  # typed as numba would, has no effect
            return environment
        if isinstance(node, ast.Pass):
            return environment
        self.fail(node, f"{type(node).__name__} statements cannot be translated")

    def assign(self, node, name: str, value: _Value, environment, items) -> None:
        if name in ALLOWED_CALLS or name == "math":
            self.fail(node, f"assigning to {name!r} hides the function of that name")
        self.check_scalar(node, value.type)
        current = environment.get(name)
        if isinstance(current, _Binding) and \
                self.declared[current.cvar] == self.unliteral(value.type):
            cvar = current.cvar
        else:
            cvar = self.new_variable(name, value.type)
        environment[name] = _Binding(cvar, value.type)
        value = self.convert(value, self.declared[cvar])
        items.append(f"{cvar} = {value.text};")

    def if_statement(self, node, environment, items):
        test = self.expression(node.test, environment)
        static = test.static_truth()
        if static is not None:  # numba prunes a branch on a constant condition
            taken, environment = self.block(node.body if static else node.orelse,
                                            dict(environment))
            items.extend(taken)
            return environment
        condition = self.truth(node.test, test)
        then, then_environment = self.block(node.body, dict(environment))
        orelse, else_environment = self.block(node.orelse, dict(environment))
        merged = self.merge(node, [(then_environment, then), (else_environment, orelse)])
        items.append(_If(condition.text, then, orelse))
        return merged

    def merge(self, node, branches):
        """Join the environments of the branches that fall through (numba's phis)."""
        live = [(environment, items) for environment, items in branches
                if environment is not None]
        if not live:
            return None
        if len(live) == 1:
            return live[0][0]
        (first, first_items), (second, second_items) = live
        merged = {}
        for name in dict.fromkeys([*first, *second]):  # a stable order: deterministic text
            a, b = first.get(name), second.get(name)
            if not isinstance(a, _Binding) or not isinstance(b, _Binding):
                merged[name] = _Partial(node.lineno)
                continue
            if a == b:
                merged[name] = a
                continue
            unified = self.unify(node, a.type, b.type)
            if a.cvar == b.cvar:
                merged[name] = _Binding(a.cvar, unified)
                continue
            target_type = self.unliteral(unified)
            self.check_scalar(node, target_type)
            if self.declared[a.cvar] == target_type:
                target = a.cvar
            elif self.declared[b.cvar] == target_type:
                target = b.cvar
            else:
                target = self.new_variable(name, target_type)
            for binding, items in ((a, first_items), (b, second_items)):
                if binding.cvar != target:
                    value = self.convert(_Value(binding.cvar, binding.type), target_type)
                    items.append(f"{target} = {value.text};")
            merged[name] = _Binding(target, unified)
        return merged

    # -- expressions -----------------------------------------------------------
    def expression(self, node, environment) -> _Value:
        if isinstance(node, ast.Constant):
            return self.constant_value(node, node.value)
        if isinstance(node, ast.Name):
            return self.name(node, environment)
        if isinstance(node, ast.Attribute):
            return self.attribute(node)
        if isinstance(node, ast.BinOp):
            left = self.expression(node.left, environment)
            right = self.expression(node.right, environment)
            return self.binary(node, node.op, left, right)
        if isinstance(node, ast.UnaryOp):
            return self.unary(node, self.expression(node.operand, environment))
        if isinstance(node, ast.Compare):
            return self.compare(node, environment)
        if isinstance(node, ast.BoolOp):
            return self.boolean(node, environment)
        if isinstance(node, ast.IfExp):
            return self.conditional(node, environment)
        if isinstance(node, ast.Call):
            return self.call(node, environment)
        self.fail(node, f"{type(node).__name__} expressions cannot be translated")

    def name(self, node, environment) -> _Value:
        name = node.id
        binding = environment.get(name)
        if isinstance(binding, _Binding):
            constant = self.constant_locals.get(name, _NOT_CONSTANT)
            return _Value(binding.cvar, binding.type, constant=constant)
        if isinstance(binding, _Partial):
            self.fail(node, f"{name!r} is assigned on only some of the paths joining at line "
                            f"{binding.line}; assign it on every path (numba cannot type it)")
        if name in self.assigned:
            self.fail(node, f"{name!r} is used before it is assigned")
        if name in self.constants:
            constant = self.constants[name]
            if name not in self.constants_used:
                self.constants_used[name] = self.unused_name(name)
            numba_type = self.typing.literal(constant)
            self.check_scalar(node, numba_type)
            return _Value(self.constants_used[name], numba_type, constant=constant)
        if name in ALLOWED_CALLS:
            self.fail(node, f"{name} is a function; call it")
        self.fail(node, f"unknown name {name!r}")

    def attribute(self, node) -> _Value:
        if not (isinstance(node.value, ast.Name) and node.value.id == "math"):
            self.fail(node, "only math.NAME attributes can be translated")
        if node.attr not in _MATH_CONSTANTS:
            self.fail(node, f"math.{node.attr} is a function; call it")
        value = _MATH_CONSTANTS[node.attr]
        # math.pi is a global's attribute to numba: a float64, not a constant it prunes on
        return _Value(_float_text(value, "double", self.helpers), self.types.float64)

    def binary(self, node, op, left: _Value, right: _Value, inplace: bool = False) -> _Value:
        plain, in_place, symbol = _BINARY_OPERATORS[type(op)]
        function = in_place if inplace else plain
        signature = self.resolve(node, function, (left.type, right.type), f"'{symbol}'")
        result_type = self.unliteral(signature.return_type)
        self.check_scalar(node, result_type)
        condition = _NOT_CONSTANT
        if left.constant is not _NOT_CONSTANT and right.constant is not _NOT_CONSTANT:
            try:
                condition = plain(left.constant, right.constant)
            except Exception:
                pass
        a = self.convert(left, signature.args[0])
        b = self.convert(right, signature.args[1])
        if isinstance(op, ast.Pow):
            value = self.power(signature, a, b)
            return _Value(value.text, value.type, value.precedence, condition=condition)
        result_kind = self.kind(result_type)
        # numba's implementations convert both operands to the result type
        a, b = self.convert(a, result_type), self.convert(b, result_type)
        if isinstance(op, (ast.FloorDiv, ast.Mod)):
            name = "floordiv" if isinstance(op, ast.FloorDiv) else "mod"
            self.use_divmod(result_type)
            text, precedence = f"gp_py_{name}({a.text}, {b.text})", _PRIMARY
        elif isinstance(op, ast.Mult) and result_kind in "fi":
            self.use_multiply(result_type)
            text, precedence = f"gp_py_mul({a.text}, {b.text})", _PRIMARY
        elif isinstance(op, (ast.Add, ast.Sub)) and result_kind == "i":
            name = "add" if isinstance(op, ast.Add) else "sub"
            self.helpers.use(f"gp_py_{name}", _SIGNED_WRAP.format(
                name=name, op="+" if name == "add" else "-"))
            text, precedence = f"gp_py_{name}({a.text}, {b.text})", _PRIMARY
        else:
            precedence = _ADDITIVE if symbol in "+-" else _MULTIPLICATIVE
            text = f"{a.operand(precedence)} {symbol} {b.operand(precedence - 1)}"
        return _Value(text, result_type, precedence, condition=condition)

    def use_multiply(self, numba_type) -> None:
        kind = self.kind(numba_type)
        if kind == "i":
            self.helpers.use("gp_py_mul", _SIGNED_WRAP.format(name="mul", op="*"))
            return
        c_type = self.c_type(numba_type)
        intrinsic = "__fmul_rn" if c_type == "float" else "__dmul_rn"
        self.helpers.use(f"gp_py_mul_{c_type}", _FLOAT_MUL.format(t=c_type,
                                                                  intrinsic=intrinsic))

    def use_divmod(self, numba_type) -> None:
        kind, c_type = self.kind(numba_type), self.c_type(numba_type)
        if kind == "i":
            self.helpers.use("gp_py_divmod_signed", _SIGNED_DIVMOD)
        elif kind == "u":
            self.helpers.use("gp_py_divmod_unsigned", _UNSIGNED_DIVMOD)
        else:
            suffix = "f" if c_type == "float" else ""
            self.helpers.use(f"gp_py_divmod_{c_type}", _FLOAT_DIVMOD.format(
                t=c_type, fmod=f"fmod{suffix}", floor=f"floor{suffix}",
                zero=f"0.0{suffix}", half=f"0.5{suffix}"))

    def power(self, signature, base: _Value, exponent: _Value) -> _Value:
        """``base ** exponent`` with numba's signature (operands already converted)."""
        result_type = self.unliteral(signature.return_type)
        exponent_type = self.unliteral(signature.args[1])
        c_type = self.c_type(result_type)
        if isinstance(exponent_type, self.types.Integer):
            base = self.convert(base, result_type)
            exponent_c = "long long" if exponent_type.signed else "unsigned long long"
            exponent = self.convert(exponent, self.types.int64 if exponent_type.signed
                                    else self.types.uint64)
            self.helpers.use("gp_py_pow_loop", _POW_LOOP)
            self.helpers.use(f"gp_py_pow {c_type} {exponent_c}", _power_helper(
                c_type, self.kind(result_type), exponent_type.signed))
            return _Value(f"gp_py_pow({base.text}, {exponent.text})", result_type)
        base, exponent = self.convert(base, result_type), self.convert(exponent, result_type)
        function = "powf" if c_type == "float" else "pow"
        return _Value(f"{function}({base.text}, {exponent.text})", result_type)

    def unary(self, node, operand: _Value) -> _Value:
        op = node.op
        if isinstance(op, ast.Not):
            self.resolve(node, operator.not_, (operand.type,), "'not'")
            truth = self.truth(node, operand)
            known = operand.static_truth()
            condition = (not known) if known is not None else _NOT_CONSTANT
            return _Value(f"!{truth.operand(_UNARY)}", self.types.boolean, _UNARY,
                          condition=condition)
        function, symbol = (operator.neg, "-") if isinstance(op, ast.USub) else (operator.pos, "+")
        signature = self.resolve(node, function, (operand.type,), f"unary '{symbol}'")
        result_type = self.unliteral(signature.return_type)
        value = self.convert(self.convert(operand, signature.args[0]), result_type)
        if isinstance(op, ast.UAdd):
            return value
        kind = self.kind(result_type)
        if kind == "i":
            self.helpers.use("gp_py_neg", _NEG)
            return _Value(f"gp_py_neg({value.text})", result_type)
        text = value.operand(_UNARY)
        return _Value(f"-({text})" if text.startswith(("-", "+")) else f"-{text}", result_type,
                      _UNARY)

    def compare(self, node, environment) -> _Value:
        operands = [self.expression(node.left, environment)]
        operands += [self.expression(c, environment) for c in node.comparators]
        parts = []
        condition = _NOT_CONSTANT
        for op, left, right in zip(node.ops, operands, operands[1:]):
            function, symbol = _COMPARISONS[type(op)]
            signature = self.resolve(node, function, (left.type, right.type), f"'{symbol}'")
            a = self.convert(left, signature.args[0])
            b = self.convert(right, signature.args[1])
            parts.append(_Value(f"{a.operand(_ADDITIVE)} {symbol} {b.operand(_ADDITIVE)}",
                                self.types.boolean, _COMPARISON_PRECEDENCE[symbol]))
            if len(node.ops) == 1 and left.constant is not _NOT_CONSTANT \
                    and right.constant is not _NOT_CONSTANT:
                condition = function(left.constant, right.constant)
        if len(parts) == 1:
            return _Value(parts[0].text, self.types.boolean, parts[0].precedence,
                          condition=condition)
        return _Value(" && ".join(p.operand(_EQUALITY) for p in parts), self.types.boolean, _AND)

    def boolean(self, node, environment) -> _Value:
        """``and``/``or``: Python returns an operand; numba unifies their types."""
        is_and = isinstance(node.op, ast.And)
        kept = []
        for position, operand_node in enumerate(node.values):
            operand = self.expression(operand_node, environment)
            static = operand.static_truth()
            if static is not None and position < len(node.values) - 1:
                # numba prunes the branch on a constant operand
                if static == is_and:
                    continue  # control always passes to the next operand
                kept.append((operand_node, operand))
                break  # this operand is the result whenever it is reached
            kept.append((operand_node, operand))
        if len(kept) == 1:
            return kept[0][1]
        operands = [operand for _, operand in kept]
        unified = self.unliteral(self.unify(node, *(o.type for o in operands)))
        if self.kind(unified) == "b" and all(self.kind(o.type) == "b" for o in operands):
            joiner = " && " if is_and else " || "
            return _Value(joiner.join(o.operand(_EQUALITY) for o in operands), unified,
                          _AND if is_and else _OR)
        result = self.convert(operands[-1], unified)
        for (operand_node, operand) in reversed(kept[:-1]):
            truth = self.truth(operand_node, operand)
            mine = self.convert(operand, unified)
            chosen = (result, mine) if is_and else (mine, result)
            text = f"{truth.operand(_OR)} ? {chosen[0].operand(_OR)} : {chosen[1].operand(_OR)}"
            result = _Value(text, unified, _CONDITIONAL)
        return result

    def conditional(self, node, environment) -> _Value:
        test = self.expression(node.test, environment)
        static = test.static_truth()
        if static is not None:
            return self.expression(node.body if static else node.orelse, environment)
        truth = self.truth(node.test, test)
        body = self.expression(node.body, environment)
        orelse = self.expression(node.orelse, environment)
        unified = self.unliteral(self.unify(node, body.type, orelse.type))
        body, orelse = self.convert(body, unified), self.convert(orelse, unified)
        return _Value(f"{truth.operand(_OR)} ? {body.operand(_OR)} : {orelse.operand(_OR)}",
                      unified, _CONDITIONAL)

    def call(self, node, environment) -> _Value:
        function = node.func
        arguments = [self.expression(a, environment) for a in node.args]
        types = tuple(a.type for a in arguments)
        if isinstance(function, ast.Name):
            if function.id in self.assigned:
                self.fail(node, f"{function.id!r} is a local name, not a function")
            return self.builtin_call(node, function.id, arguments, types)
        if isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name) \
                and function.value.id == "math":
            return self.math_call(node, function.attr, arguments, types)
        self.fail(node, "only min, max, abs, int, float, bool and math functions can be called")

    def builtin_call(self, node, name, arguments, types) -> _Value:
        if name in ("min", "max"):
            if len(arguments) < 2:
                self.fail(node, f"{name}() needs two or more arguments (one would be an "
                                "iterable)")
            signature = self.resolve(node, min if name == "min" else max, types, f"{name}()")
            self.helpers.use(f"gp_py_{name}", _MINMAX.format(
                name=name, op="<" if name == "min" else ">"))
            accumulated = arguments[0]
            for argument in arguments[1:]:
                # numba's do_minmax: unify pairwise, keep the earlier argument unless the
                # later one is strictly smaller (larger)
                pair_type = self.unliteral(self.unify(node, accumulated.type, argument.type))
                a = self.convert(accumulated, pair_type)
                b = self.convert(argument, pair_type)
                accumulated = _Value(f"gp_py_{name}({a.text}, {b.text})", pair_type)
            return self.convert(accumulated, signature.return_type)
        if len(arguments) != 1:
            self.fail(node, f"{name}() takes exactly one argument here")
        argument = arguments[0]
        python_function = {"abs": abs, "int": int, "float": float, "bool": bool}[name]
        signature = self.resolve(node, python_function, types, f"{name}()")
        result_type = self.unliteral(signature.return_type)
        self.check_scalar(node, result_type)
        if name == "bool":
            return self.truth(node, argument)
        value = self.convert(argument, signature.args[0])
        if name != "abs":
            return self.convert(value, result_type)
        value = self.convert(value, result_type)
        kind = self.kind(result_type)
        if kind == "i":
            self.helpers.use("gp_py_abs", _ABS)
            return _Value(f"gp_py_abs({value.text})", result_type)
        if kind == "f":
            suffix = "f" if self.c_type(result_type) == "float" else ""
            return _Value(f"fabs{suffix}({value.text})", result_type)
        return value

    def math_call(self, node, name, arguments, types) -> _Value:
        if name in _MATH_CONSTANTS:
            self.fail(node, f"math.{name} is a constant, not a function")
        python_function = getattr(math, name)
        signature = self.resolve(node, python_function, types, f"math.{name}()")
        result_type = self.unliteral(signature.return_type)
        self.check_scalar(node, result_type)
        converted = [self.convert(a, t) for a, t in zip(arguments, signature.args)]
        argument_kinds = [self.kind(t) for t in signature.args]
        float64 = self.types.float64
        if name == "pow":
            return self.power(signature, *converted)
        if name in ("isinf", "isnan"):
            if argument_kinds[0] != "f":
                return _Value("false", self.types.boolean)  # numba: false_bit, not a constant
            return _Value(f"{name}({converted[0].text})", self.types.boolean)
        if name in _FLOAT_MATH or name in ("floor", "ceil"):
            (value,) = converted
            if argument_kinds[0] != "f":
                # numba: an integer argument goes through the float64 implementation
                value = self.convert(value, float64)
            suffix = "f" if self.c_type(value.type) == "float" else ""
            call = _Value(f"{name}{suffix}({value.text})", self.unliteral(value.type))
            return self.convert(call, result_type)
        if name == "copysign":
            suffix = "f" if self.c_type(result_type) == "float" else ""
            return _Value(f"copysign{suffix}({converted[0].text}, {converted[1].text})",
                          result_type)
        if name == "hypot":
            if argument_kinds[0] in "iu":
                # numba converts both integer kinds with sitofp (as signed)
                converted = [self.convert_via(a, self.types.int64, float64) for a in converted]
            suffix = "f" if self.c_type(converted[0].type) == "float" else ""
            call = _Value(f"hypot{suffix}({converted[0].text}, {converted[1].text})",
                          self.unliteral(converted[0].type))
            return self.convert(call, result_type)
        self.fail(node, f"math.{name} cannot be translated")


class _Untranslatable(Exception):
    pass


def _literal_texts(constant) -> set:
    """Whether a value's text is a plain literal (safe to re-emit converted)."""
    if isinstance(constant, bool):
        return {"true", "false"}
    if isinstance(constant, int):
        return {f"{constant}LL", f"({constant}LL)", f"{constant}ULL"}
    return set()


def _convert_constant(constant, kind: str, c_type: str):
    """A literal int/bool converted as numba would convert it, or None to cast at run time."""
    if isinstance(constant, bool):
        return {"b": constant, "i": int(constant), "u": int(constant),
                "f": float(constant)}[kind]
    if kind == "f":
        value = np.float64(constant) if c_type == "double" else np.float32(constant)
        return float(value) if np.isfinite(value) else None
    if kind == "b":
        return constant != 0
    return None


def _float_text(value: float, c_type: str, helpers: _Helpers) -> str:
    """An exact C++ literal of a float64 value (converted to float if ``c_type`` says so)."""
    if math.isinf(value):
        helpers.use("gp_py_inf", _INF)
        text = "gp_py_inf()" if value > 0 else "(-gp_py_inf())"
    elif math.isnan(value):
        bits = struct.unpack("<q", struct.pack("<d", value))[0]
        text = f"__longlong_as_double({bits}LL)"
    else:
        text = repr(float(value))
        if value < 0 or text.startswith("-"):
            text = f"({text})"
    if c_type == "float":
        single = np.float32(value)
        if not np.isfinite(single):
            return f"(float){text}"
        text = f"{single}f"  # numpy prints a float32 shortest-exact
        return f"({text})" if text.startswith("-") else text
    return text


def _assigned_names(tree) -> set:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


# ----------------------------------------------- CPython's constant folding --
_MAX_INT_BITS = 128  # CPython's ast_opt.c limit on folded integer sizes


def _fold_constants(tree):
    """Fold constant unary and binary operations as CPython's compiler does.

    numba sees the bytecode, where ``-1`` or ``2 ** 0.5`` are already
    constants computed by Python; replaying the fold keeps their values (and
    literal types) identical.  Limits and failures are CPython 3.11's.
    """

    class Folder(ast.NodeTransformer):
        def visit_UnaryOp(self, node):
            self.generic_visit(node)
            if not isinstance(node.operand, ast.Constant):
                return node
            value = node.operand.value
            try:
                result = {ast.USub: operator.neg, ast.UAdd: operator.pos,
                          ast.Not: operator.not_}[type(node.op)](value)
            except Exception:
                return node
            return ast.copy_location(ast.Constant(result), node)

        def visit_BinOp(self, node):
            self.generic_visit(node)
            if not (isinstance(node.left, ast.Constant) and isinstance(node.right, ast.Constant)):
                return node
            left, right = node.left.value, node.right.value
            integers = isinstance(left, int) and isinstance(right, int)
            if integers and isinstance(node.op, ast.Mult) and left and right and \
                    abs(left).bit_length() + abs(right).bit_length() > _MAX_INT_BITS:
                return node
            if integers and isinstance(node.op, ast.Pow) and left and right > 0 and \
                    abs(left).bit_length() > _MAX_INT_BITS // right:
                return node
            try:
                result = _BINARY_OPERATORS[type(node.op)][0](left, right)
            except Exception:
                return node
            return ast.copy_location(ast.Constant(result), node)

    return ast.fix_missing_locations(Folder().visit(tree))


# -------------------------------------------------- the program's functions --
_GATHER_ARGUMENTS = {
    "src": "values[u]", "dst": "values[v]", "weight": "weights[e]",
    "src_out_degree": "attrs.out_degree[u]", "src_in_degree": "attrs.in_degree[u]",
    "dst_out_degree": "attrs.out_degree[v]", "dst_in_degree": "attrs.in_degree[v]",
}
_VERTEX_ARGUMENTS = {
    "vertex": "attrs.vertex[v]", "out_degree": "attrs.out_degree[v]",
    "in_degree": "attrs.in_degree[v]", "weighted_in_degree": "attrs.weighted_in_degree[v]",
    "is_source": "attrs.is_source[v]", "num_vertices": "num_vertices",
    "iteration": "iteration", "value": "value", "accum": "accum",
}
_ACTIVATE_ARGUMENTS = {"new": "new_value", "old": "old_value"}

_ATTRIBUTES = """\
struct gp_attrs {
    const degree_t* out_degree;
    const degree_t* in_degree;
    const double* weighted_in_degree;
    const long long* vertex;
    const bool* is_source;
};
"""
_ENTRY = "__device__ __forceinline__ "
_GATHER_SIGNATURE = _signature(f"{_ENTRY}accum_t gp_gather", [
    "const value_t* values", "const weight_t* weights", "const gp_attrs& attrs", "long long u",
    "long long v", "long long e"])
_APPLY_SIGNATURE = _signature(f"{_ENTRY}value_t gp_apply", [
    "const gp_attrs& attrs", "const double* aggregates", "long long num_vertices",
    "long long iteration", "long long v", "value_t value", "accum_t accum"])
_ACTIVATE_SIGNATURE = _signature(f"{_ENTRY}bool gp_activate",
                                 ["value_t new_value", "value_t old_value"])
_INIT_SIGNATURE = _signature(f"{_ENTRY}value_t gp_init",
                             ["const gp_attrs& attrs", "long long num_vertices", "long long v"])
_AGGREGATE_SIGNATURE = _signature(f"{_ENTRY}void gp_aggregate", [
    "const value_t* values", "const gp_attrs& attrs", "long long num_vertices",
    "long long iteration", "long long v", "double* out"])


def _parameter_types(role: str, dtypes: dict, aggregate_names) -> dict:
    typing = _typing()
    types = typing.types
    value, accum = typing.from_dtype(dtypes["value"]), typing.from_dtype(dtypes["accum"])
    degree = typing.from_dtype(dtypes["degree"])
    if role == "gather":
        return {"src": value, "dst": value, "weight": typing.from_dtype(dtypes["weight"]),
                "src_out_degree": degree, "src_in_degree": degree, "dst_out_degree": degree,
                "dst_in_degree": degree}
    if role == "activate":
        return {"new": value, "old": value}
    vertex = {"vertex": types.int64, "out_degree": degree, "in_degree": degree,
              "weighted_in_degree": types.float64, "is_source": types.boolean,
              "num_vertices": types.int64, "iteration": types.int64, "value": value,
              "accum": accum}
    vertex.update({name: types.float64 for name in aggregate_names})
    return vertex


def _arguments(function: Function, mapping: dict) -> str:
    return ", ".join(mapping[p] for p in function.parameters)


def _header(cls, dtypes: dict) -> str:
    return (f"// garaphpy: the vertex program {cls.__qualname__} as CUDA C++ device functions\n"
            f"// (Garaph section 2.3; numba's semantics, see garaphpy/kernels/cuda_program.py).\n"
            f"// value {dtypes['value'].name}, accum {dtypes['accum'].name}, weight "
            f"{dtypes['weight'].name}, degree {dtypes['degree'].name}, sum = {cls.sum}. "
            f"Generated; do not edit.\n")


def _translate(cls, constants: dict, program, weight_dtype, degree_dtype) -> CudaProgram:
    functions = cls.functions
    value_dtype = np.dtype(cls.value_dtype)
    accum_dtype = np.dtype(cls.accum_dtype) if cls.accum_dtype is not None else value_dtype
    dtypes = {"value": value_dtype, "accum": accum_dtype, "weight": np.dtype(weight_dtype),
              "degree": np.dtype(degree_dtype)}
    where = f"{cls.__module__}.{cls.__qualname__}"
    for name, dtype in dtypes.items():
        try:
            ctype(dtype)
        except ProgramError as error:
            raise ProgramError(f"{where}: {name} type: {error}") from None
    aggregate_names = tuple(cls.aggregates)
    helpers = _Helpers()
    typing = _typing()

    def translate(role, cxx_name, **options):
        function = functions[role]
        parameter_types = _parameter_types(role.split(":")[0], dtypes, aggregate_names)
        what = (f"{cls.__qualname__}.{role}" if ":" not in role else
                f"aggregate {role.split(':', 1)[1]!r} of {cls.__qualname__}: {function.name}")
        comment = f"{what} ({os.path.basename(function.filename)}:{function.first_line})"
        translator = _FunctionTranslator(function, parameter_types, constants, helpers,
                                         cxx_name, comment=comment, **options)
        return translator.translate()

    user = {role: translate(role, f"gp_user_{role}")
            for role in ("init", "gather", "apply", "activate")}
    aggregates = [translate(f"aggregate:{name}", f"gp_user_aggregate_{i}")
                  for i, name in enumerate(aggregate_names)]
    combine = _combine_function(cls.sum, dtypes, helpers)
    vertex_arguments = {**_VERTEX_ARGUMENTS,
                        **{name: f"aggregates[{i}]" for i, name in enumerate(aggregate_names)}}

    def entry(role, signature, mapping, result_ctype, result_dtype) -> str:
        """An entry point: the user's function, its parameters bound by name, its result
        cast like cpu_program's VALUE(...), ACCUM(...) or bool(...)."""
        call = _call(user[role], functions[role], mapping)
        if user[role].return_type != typing.from_dtype(result_dtype):
            call = f"({result_ctype}){call}"
        return "\n".join(signature) + f"\n    return {call};\n}}\n"

    identity = monoid_identity(cls.sum, accum_dtype)
    lines = [_header(cls, dtypes),
             f"typedef {ctype(value_dtype)} value_t;",
             f"typedef {ctype(accum_dtype)} accum_t;",
             f"typedef {ctype(weight_dtype)} weight_t;",
             f"typedef {ctype(degree_dtype)} degree_t;",
             "",
             _ATTRIBUTES,
             f"#define GP_NUM_AGGREGATES {len(aggregate_names)}",
             ""]
    body = [f.text for f in (*user.values(), *aggregates)]
    entries = [
        "__device__ __forceinline__ accum_t gp_accum_identity() {\n"
        f"    return {_identity_text(identity, accum_dtype, helpers)};\n}}\n",
        entry("gather", _GATHER_SIGNATURE, _GATHER_ARGUMENTS, "accum_t", accum_dtype),
        entry("apply", _APPLY_SIGNATURE, vertex_arguments, "value_t", value_dtype),
        entry("activate", _ACTIVATE_SIGNATURE, _ACTIVATE_ARGUMENTS, "bool", np.dtype(bool)),
        entry("init", _INIT_SIGNATURE, vertex_arguments, "value_t", value_dtype),
        combine.text,
        _atomic_combine_text(cls.sum, accum_dtype),
        _aggregate_text(cls, functions, aggregates, aggregate_names, vertex_arguments,
                        helpers),
    ]
    helper_source = helpers.source()
    source = "\n".join(lines) + "\n"
    if helper_source:
        source += "// ---- Python's semantics (numba's lowering)\n" + helper_source + "\n"
    source += "// ---- the program's functions\n" + "\n".join(body) + "\n"
    source += "// ---- the engine's entry points\n" + "\n".join(entries)
    source = source.rstrip("\n") + "\n"
    uses = frozenset(p for f in functions.values() for p in f.parameters)
    alignment = 4 if accum_dtype.itemsize < 4 else accum_dtype.itemsize
    return CudaProgram(
        program=program, value_dtype=value_dtype, accum_dtype=accum_dtype,
        weight_dtype=dtypes["weight"], degree_dtype=dtypes["degree"], source=source,
        aggregate_monoids=tuple(cls.aggregates[n][0] for n in aggregate_names), uses=uses,
        key=hashlib.sha256(source.encode()).hexdigest(), aggregate_names=aggregate_names,
        identity=identity, accum_alignment=alignment)


def _call(translated: _CFunction, function: Function, mapping: dict) -> str:
    return f"{translated.name}({_arguments(function, mapping)})"


def _identity_text(identity, accum_dtype: np.dtype, helpers: _Helpers) -> str:
    kind = accum_dtype.kind
    if kind == "b":
        return "true" if identity else "false"
    if kind == "f":
        return _float_text(float(identity), ctype(accum_dtype), helpers)
    value = int(identity)
    c_type = ctype(accum_dtype)
    if kind == "u":
        return f"({c_type}){value}ULL" if accum_dtype.itemsize < 8 else f"{value}ULL"
    text = "(-9223372036854775807LL - 1)" if value == -2 ** 63 else f"{value}LL"
    if value < 0 and value != -2 ** 63:
        text = f"({text})"
    return text if accum_dtype.itemsize == 8 else f"({c_type}){text}"


def _combine_function(monoid: str, dtypes: dict, helpers: _Helpers) -> _CFunction:
    """gp_combine: the monoid's combine source (as cpu_program compiles it),
    translated like a user function."""
    tree = ast.parse(MONOIDS[monoid].combine_source()).body[0]
    function = Function("combine", "combine", ("a", "b"), tree, ast.unparse(tree),
                        "<sum monoid>", 1)
    typing = _typing()
    accum = typing.from_dtype(dtypes["accum"])
    translator = _FunctionTranslator(
        function, {"a": accum, "b": accum}, {}, helpers, "gp_combine",
        signature_ctypes={"a": "accum_t", "b": "accum_t"}, return_ctype="accum_t",
        final_type=accum, comment=f"the sum monoid ({monoid}), cast to accum_t")
    return translator.translate()


_NARROW = {  # accum dtype (kind, itemsize) -> (bits -> accum_t, accum_t -> bits)
    ("b", 1): ("(bits & mask) != 0", "(unsigned int)updated"),
    ("i", 1): ("(signed char)((bits & mask) >> shift)", "(unsigned int)(unsigned char)updated"),
    ("u", 1): ("(unsigned char)((bits & mask) >> shift)", "(unsigned int)updated"),
    ("i", 2): ("(short)((bits & mask) >> shift)", "(unsigned int)(unsigned short)updated"),
    ("u", 2): ("(unsigned short)((bits & mask) >> shift)", "(unsigned int)updated"),
}


def _atomic_combine_text(monoid: str, accum_dtype: np.dtype) -> str:
    kind, size = accum_dtype.kind, accum_dtype.itemsize
    head = "__device__ __forceinline__ void gp_atomic_combine(accum_t* address, accum_t x) {"
    if MONOIDS[monoid].has_cuda_atomic(accum_dtype):
        body = [f"    {MONOIDS[monoid].cuda_atomic}(address, x);"]
    elif kind == "i" and size == 8:
        body = ["    // two's complement: the unsigned sum has the same bits",
                "    atomicAdd((unsigned long long*)address, (unsigned long long)x);"]
    elif kind == "f":
        bits, width = ("unsigned long long", "longlong") if size == 8 else ("unsigned int", "uint")
        to_float = f"__{width}_as_double((long long)assumed)" if size == 8 else \
            "__uint_as_float(assumed)"
        to_bits = f"({bits})__double_as_longlong(updated)" if size == 8 else \
            "__float_as_uint(updated)"
        body = [f"    // no hardware {monoid} on floating point: compare-and-swap the bit pattern",
                f"    {bits}* word = ({bits}*)address;",
                f"    {bits} seen = *word, assumed;",
                "    do {",
                "        assumed = seen;",
                f"        const accum_t updated = gp_combine({to_float}, x);",
                f"        const {bits} replacement = {to_bits};",
                "        if (replacement == assumed) return;",
                "        seen = atomicCAS(word, assumed, replacement);",
                "    } while (seen != assumed);"]
    else:
        to_accum, to_bits = _NARROW[kind, size]
        mask = "0xffu" if size == 1 else "0xffffu"
        body = ["    // narrower than 32 bits: compare-and-swap the aligned word that holds it",
                "    unsigned int* word = (unsigned int*)((unsigned long long)address & ~3ULL);",
                "    const unsigned int shift = (unsigned int)((unsigned long long)address & 3ULL)"
                " * 8u;",
                f"    const unsigned int mask = {mask} << shift;",
                "    unsigned int seen = *word, bits;",
                "    do {",
                "        bits = seen;",
                f"        const accum_t updated = gp_combine({to_accum}, x);",
                f"        const unsigned int replacement = (bits & ~mask) | (({to_bits} << shift)"
                " & mask);",
                "        if (replacement == bits) return;",
                "        seen = atomicCAS(word, bits, replacement);",
                "    } while (seen != bits);"]
    return "\n".join([head, *body, "}", ""])


def _aggregate_text(cls, functions, aggregates, aggregate_names, vertex_arguments,
                    helpers: _Helpers) -> str:
    lines = list(_AGGREGATE_SIGNATURE)
    if any("value" in functions[f"aggregate:{n}"].parameters for n in aggregate_names):
        lines.append("    const value_t value = values[v];")
    identities = []
    typing = _typing()
    for i, (name, translated) in enumerate(zip(aggregate_names, aggregates)):
        monoid = cls.aggregates[name][0]
        term = _call(translated, functions[f"aggregate:{name}"], vertex_arguments)
        if translated.return_type != typing.types.float64:
            term = f"(double){term}"
        if monoid == "add":
            lines.append(f"    out[{i}] = out[{i}] + {term};  // {name}")
        else:
            helpers.use(f"gp_py_{monoid}", _MINMAX.format(
                name=monoid, op=MONOIDS[monoid].cuda_compare))
            lines.append(f"    out[{i}] = gp_py_{monoid}(out[{i}], {term});  // {name}")
        identities.append(_float_text(float(monoid_identity(monoid, np.float64)), "double",
                                      helpers))
    lines += ["}", "", "__device__ __forceinline__ double gp_aggregate_identity(int i) {"]
    for i, text in enumerate(identities):
        lines.append(f"    if (i == {i}) return {text};")
    lines += ["    return 0.0;" if identities else "    (void)i;\n    return 0.0;", "}", ""]
    return "\n".join(lines)
