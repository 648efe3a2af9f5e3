"""Assembling a vertex program's CUDA translation unit (Garaph sections 2.3, 3.1-3.2).

The GPU pull kernel (sections 3.1-3.2) calls a program through fixed entry
points (``gp_gather`` in its gather phase, ``gp_atomic_combine`` into the
shard's replicas, ``gp_apply`` and ``gp_activate`` in its apply phase; the
list is in :mod:`garaphpy.kernels.cuda_program`).  This module translates each
of the program's functions with :class:`.emitter.FunctionTranslator`, binds
them to the entry points by parameter name as the CPU's wrappers do (section
4, :mod:`garaphpy.kernels.cpu_program`), writes the sum monoid's combine and
atomic (Garaph's ``unifiedAdd``, Figure 4) and the aggregates, and joins it
all, with the helpers used, into :attr:`CudaProgram.source`.

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
import dataclasses
import hashlib
import os
from dataclasses import dataclass

import numpy as np

from ...monoids import MONOIDS, monoid_identity
from ...program import Function, ProgramError, VertexProgram
from .emitter import CFunction, FunctionTranslator, float_text, signature_lines
from .helpers import HelperLibrary
from .numba_typing import ctype, numba_typing


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
    constants = program.constants
    try:
        key = (cls, tuple(sorted(constants.items())), np.dtype(weight_dtype),
               np.dtype(degree_dtype))
        hash(key)
    except TypeError:               # a constant that cannot be a key: translate again
        return _translate(cls, constants, program, weight_dtype, degree_dtype)
    translated = _TRANSLATED.get(key)
    if translated is None:
        translated = _translate(cls, constants, program, weight_dtype, degree_dtype)
        while _TRANSLATED and len(_TRANSLATED) >= TRANSLATED_KEPT:
            _TRANSLATED.pop(next(iter(_TRANSLATED)))
        _TRANSLATED[key] = translated
    return dataclasses.replace(translated, program=program)


#: Translations kept for the next runs of the same program class, constants and
#: dtypes (1.2-1.4 ms each on the dev VM, every GPU run's set-up).
TRANSLATED_KEPT = 64
_TRANSLATED: dict = {}


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
_GATHER_SIGNATURE = signature_lines(f"{_ENTRY}accum_t gp_gather", [
    "const value_t* values", "const weight_t* weights", "const gp_attrs& attrs", "long long u",
    "long long v", "long long e"])
_APPLY_SIGNATURE = signature_lines(f"{_ENTRY}value_t gp_apply", [
    "const gp_attrs& attrs", "const double* aggregates", "long long num_vertices",
    "long long iteration", "long long v", "value_t value", "accum_t accum"])
_ACTIVATE_SIGNATURE = signature_lines(f"{_ENTRY}bool gp_activate",
                                      ["value_t new_value", "value_t old_value"])
_INIT_SIGNATURE = signature_lines(f"{_ENTRY}value_t gp_init", [
    "const gp_attrs& attrs", "long long num_vertices", "long long v"])
_AGGREGATE_SIGNATURE = signature_lines(f"{_ENTRY}void gp_aggregate", [
    "const value_t* values", "const gp_attrs& attrs", "long long num_vertices",
    "long long iteration", "long long v", "double* out"])


def _parameter_types(role: str, dtypes: dict, aggregate_names) -> dict:
    typing = numba_typing()
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
    # names the module as it was before it became a package: the text is part
    # of every program's source, hence of its compile-cache key
    return (f"// garaphpy: the vertex program {cls.__qualname__} as CUDA C++ device functions\n"
            f"// (Garaph section 2.3; numba's semantics, see garaphpy/kernels/cuda_program/).\n"
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
    helpers = HelperLibrary()
    typing = numba_typing()

    def translate(role, cxx_name, **options):
        function = functions[role]
        parameter_types = _parameter_types(role.split(":")[0], dtypes, aggregate_names)
        what = (f"{cls.__qualname__}.{role}" if ":" not in role else
                f"aggregate {role.split(':', 1)[1]!r} of {cls.__qualname__}: {function.name}")
        comment = f"{what} ({os.path.basename(function.filename)}:{function.first_line})"
        translator = FunctionTranslator(function, parameter_types, constants, helpers,
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


def _call(translated: CFunction, function: Function, mapping: dict) -> str:
    return f"{translated.name}({_arguments(function, mapping)})"


def _identity_text(identity, accum_dtype: np.dtype, helpers: HelperLibrary) -> str:
    kind = accum_dtype.kind
    if kind == "b":
        return "true" if identity else "false"
    if kind == "f":
        return float_text(float(identity), ctype(accum_dtype), helpers)
    value = int(identity)
    c_type = ctype(accum_dtype)
    if kind == "u":
        return f"({c_type}){value}ULL" if accum_dtype.itemsize < 8 else f"{value}ULL"
    text = "(-9223372036854775807LL - 1)" if value == -2 ** 63 else f"{value}LL"
    if value < 0 and value != -2 ** 63:
        text = f"({text})"
    return text if accum_dtype.itemsize == 8 else f"({c_type}){text}"


def _combine_function(monoid: str, dtypes: dict, helpers: HelperLibrary) -> CFunction:
    """gp_combine: the monoid's combine source (as cpu_program compiles it),
    translated like a user function."""
    tree = ast.parse(MONOIDS[monoid].combine_source()).body[0]
    function = Function("combine", "combine", ("a", "b"), tree, ast.unparse(tree),
                        "<sum monoid>", 1)
    typing = numba_typing()
    accum = typing.from_dtype(dtypes["accum"])
    translator = FunctionTranslator(
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
                    helpers: HelperLibrary) -> str:
    lines = list(_AGGREGATE_SIGNATURE)
    if any("value" in functions[f"aggregate:{n}"].parameters for n in aggregate_names):
        lines.append("    const value_t value = values[v];")
    identities = []
    typing = numba_typing()
    for i, (name, translated) in enumerate(zip(aggregate_names, aggregates)):
        monoid = cls.aggregates[name][0]
        term = _call(translated, functions[f"aggregate:{name}"], vertex_arguments)
        if translated.return_type != typing.types.float64:
            term = f"(double){term}"
        if monoid == "add":
            lines.append(f"    out[{i}] = out[{i}] + {term};  // {name}")
        else:
            helpers.minmax(monoid, MONOIDS[monoid].cuda_compare)
            lines.append(f"    out[{i}] = gp_py_{monoid}(out[{i}], {term});  // {name}")
        identities.append(float_text(float(monoid_identity(monoid, np.float64)), "double",
                                     helpers))
    lines += ["}", "", "__device__ __forceinline__ double gp_aggregate_identity(int i) {"]
    for i, text in enumerate(identities):
        lines.append(f"    if (i == {i}) return {text};")
    lines += ["    return 0.0;" if identities else "    (void)i;\n    return 0.0;", "}", ""]
    return "\n".join(lines)
