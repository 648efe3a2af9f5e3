"""The emitter: one checked Python function -> one CUDA C++ device function (Garaph section 2.3).

Garaph's users write one vertex program for both processors (section 2.3,
Figure 4).  The CPU kernel (section 4) runs it compiled by numba; the GPU
pull kernel (sections 3.1-3.2) calls, in its gather and apply phases, the
device functions this module writes from the very same checked syntax trees
(:class:`garaphpy.program.Function`).  :class:`FunctionTranslator` walks one
tree, types every operation with numba (:mod:`.numba_typing`), calls the
``gp_py_*`` helpers (:mod:`.helpers`) where C++ and Python differ, and
renders the function as text; :mod:`.build` assembles a program's functions
into one translation unit.

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

"""

from __future__ import annotations

import ast
import copy
import math
import operator
import re
import struct
from dataclasses import dataclass

import numpy as np

from ...program import ALLOWED_CALLS, Function, ProgramError
from .helpers import HelperLibrary
from .numba_typing import C_TYPES, numba_typing

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
class CFunction:
    """A translated function: its C++ name, numba's type of its result, its definition."""

    name: str
    return_type: object
    text: str


def signature_lines(head: str, parameters: list[str], width: int = 99) -> list[str]:
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


class _ExpressionTranslation:
    """The expressions of :class:`FunctionTranslator`: names, operators, calls
    (numba's typing rules; each returns a :class:`_Value`).  A mixin: it reads
    the translator's ``fail``, ``convert``, ``types`` and ``helpers``."""

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
        return _Value(float_text(value, "double", self.helpers), self.types.float64)

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
            self.helpers.floor_division(self.kind(result_type), self.c_type(result_type))
            text, precedence = f"gp_py_{name}({a.text}, {b.text})", _PRIMARY
        elif isinstance(op, ast.Mult) and result_kind in "fi":
            if result_kind == "i":
                self.helpers.wrapping("mul")
            else:
                self.helpers.float_multiply(self.c_type(result_type))
            text, precedence = f"gp_py_mul({a.text}, {b.text})", _PRIMARY
        elif isinstance(op, (ast.Add, ast.Sub)) and result_kind == "i":
            name = "add" if isinstance(op, ast.Add) else "sub"
            self.helpers.wrapping(name)
            text, precedence = f"gp_py_{name}({a.text}, {b.text})", _PRIMARY
        else:
            precedence = _ADDITIVE if symbol in "+-" else _MULTIPLICATIVE
            text = f"{a.operand(precedence)} {symbol} {b.operand(precedence - 1)}"
        return _Value(text, result_type, precedence, condition=condition)

    def power(self, signature, base: _Value, exponent: _Value) -> _Value:
        """``base ** exponent`` with numba's signature (operands already converted)."""
        result_type = self.unliteral(signature.return_type)
        exponent_type = self.unliteral(signature.args[1])
        c_type = self.c_type(result_type)
        if isinstance(exponent_type, self.types.Integer):
            base = self.convert(base, result_type)
            exponent = self.convert(exponent, self.types.int64 if exponent_type.signed
                                    else self.types.uint64)
            self.helpers.power(c_type, self.kind(result_type), exponent_type.signed)
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
            self.helpers.negate()
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
            self.helpers.minmax(name, "<" if name == "min" else ">")
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
            self.helpers.absolute()
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


class FunctionTranslator(_ExpressionTranslation):
    """Translates one checked function (numba semantics; see the module docstring).

    Parameters
    ----------
    function : Function
        The checked syntax tree.
    parameter_types : dict
        numba's type of each parameter.
    constants : dict
        The program's constants (baked in as ``const`` locals where read).
    helpers : HelperLibrary
        Where the ``gp_py_*`` helpers the function calls are collected.
    cxx_name : str
        The C++ name of the device function.
    signature_ctypes : dict, optional
        C++ types written for some parameters instead of their numba types'.
    return_ctype : str, optional
        The C++ return type written instead of the result type's.
    final_type : numba type, optional
        Every returned value is converted to it last.
    comment : str
        A line of comment above the definition.
    """

    def __init__(self, function: Function, parameter_types: dict, constants: dict,
                 helpers: HelperLibrary, cxx_name: str, *, signature_ctypes: dict | None = None,
                 return_ctype: str | None = None, final_type=None, comment: str = ""):
        self.function = function
        self.typing = numba_typing()
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
        if dtype is None or (dtype.kind, dtype.itemsize) not in C_TYPES:
            raise _Untranslatable(f"values of type {numba_type} cannot be translated")
        return C_TYPES[dtype.kind, dtype.itemsize]

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
        return float_text(float(constant), self.c_type(numba_type) if numba_type else "double",
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
    def translate(self) -> CFunction:
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
        lines.extend(signature_lines(
            f"__device__ __forceinline__ {return_ctype} {self.cxx_name}", parameters))
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
        return CFunction(self.cxx_name, return_type, "\n".join(lines) + "\n")

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


def float_text(value: float, c_type: str, helpers: HelperLibrary) -> str:
    """An exact C++ literal of a float64 value (converted to float if ``c_type`` says so)."""
    if math.isinf(value):
        helpers.infinity()
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

