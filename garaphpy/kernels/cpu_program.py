"""Compiling a vertex program for the CPU kernels (numba).

Garaph section 2.3: users write one program; on the CPU, ``sum`` is a plain
operation (unifiedAdd without the atomic, Figure 4).  Each user function is
re-created from its checked source with the program's constants in scope and
compiled by numba; thin generated wrappers give the kernels one fixed
signature per role, binding the user's parameters by name:

``gather_call(values, weights, attrs, u, v, e) -> accum``
``source_gather_call(values, attrs, u) -> accum``   (source-side gathers only)
``apply_call(attrs, aggregates, num_vertices, iteration, v, value, accum) -> value``
``activate_call(new, old) -> bool``
``init_call(attrs, num_vertices, v) -> value``
``combine(a, b) -> accum``   (the sum monoid)

``attrs`` is the tuple of per-vertex arrays
``(out_degree, in_degree, weighted_in_degree, vertex, is_source)``.

Everything is compiled with numba's numpy error model: a division by zero
gives inf or nan (0 for integers) instead of raising, as IEEE floats and
the GPU do.  The exception paths of the Python model also kept numba's
reference counting of the wrappers' array arguments alive once inlined
into a kernel: atomic updates of shared counters for every vertex, which
cost the pull about 30% of its throughput at 16 threads (BENCHMARKS.md).

A gather that asks only for its source's side of the edge (``src``,
``src_out_degree``, ``src_in_degree``) is a function of the source vertex
alone, so it also gets ``source_gather_call``: the engine may then compute
it once per vertex and let the edge loop read the result
(:func:`garaphpy.kernels.cpu.source_contributions`).
"""

from __future__ import annotations

import ast
import copy
import math
from dataclasses import dataclass

import numba
import numpy as np

from .. import _numba_setup  # noqa: F401  (threading layer first)
from ..program import ProgramError, VertexProgram, monoid_identity

#: How every program function and wrapper is compiled (see the module docstring).
JIT_OPTIONS = {"nogil": True, "error_model": "numpy"}

#: Position of each per-vertex attribute in the ``attrs`` tuple.
ATTRIBUTE_INDEX = {"out_degree": 0, "in_degree": 1, "weighted_in_degree": 2, "vertex": 3,
                   "is_source": 4}

_GATHER_ARGUMENTS = {
    "src": "values[u]", "dst": "values[v]", "weight": "weights[e]",
    "src_out_degree": "attrs[0][u]", "src_in_degree": "attrs[1][u]",
    "dst_out_degree": "attrs[0][v]", "dst_in_degree": "attrs[1][v]",
}

#: Gather parameters that belong to the edge's source: a gather asking for no
#: others is a function of the source vertex alone.
SOURCE_SIDE_GATHER_PARAMETERS = frozenset({"src", "src_out_degree", "src_in_degree"})


def _vertex_arguments(role_parameters, aggregate_names=()):
    mapping = {name: f"attrs[{index}][v]" for name, index in ATTRIBUTE_INDEX.items()}
    mapping.update({"num_vertices": "num_vertices", "iteration": "iteration",
                    "value": "value", "accum": "accum"})
    mapping.update({name: f"aggregates[{i}]" for i, name in enumerate(aggregate_names)})
    return mapping


def _combine_source(monoid: str, cast: bool = False) -> str:
    """The sum monoid as Python source; ``cast`` wraps it in ``ACCUM(...)`` (numba
    sums narrow integers and bools in int64; the GPU translator casts on its own)."""
    body = {"add": "a + b", "min": "a if a <= b else b", "max": "a if a >= b else b"}[monoid]
    return f"def combine(a, b):\n    return {f'ACCUM({body})' if cast else body}\n"


@dataclass
class CpuProgram:
    """A vertex program compiled for the CPU kernels.

    Attributes
    ----------
    program : VertexProgram
        The instance compiled (its constants are baked in).
    value_dtype, accum_dtype : numpy.dtype
    identity : numpy scalar
        The sum monoid's identity in ``accum_dtype``.
    gather_call, apply_call, activate_call, init_call, combine : numba dispatchers
    source_gather_call : numba dispatcher or None
        ``source_gather_call(values, attrs, u)``: the gather of any edge
        leaving u, when the gather asks only for source-side parameters
        (:data:`SOURCE_SIDE_GATHER_PARAMETERS`); None otherwise.
    gather_parameters : frozenset of str
        The parameters the gather asks for.
    aggregate_monoids : tuple of str
        The monoid of each aggregate, in declaration order.
    aggregate_call : numba dispatcher or None
        ``aggregate_call(values, attrs, num_vertices, iteration, v, out)``
        combines vertex v's contribution into ``out`` (one slot per aggregate).
    uses : set of str
        Every parameter name any function asks for.
    """

    program: VertexProgram
    value_dtype: np.dtype
    accum_dtype: np.dtype
    identity: object
    gather_call: object
    apply_call: object
    activate_call: object
    init_call: object
    combine: object
    source_gather_call: object
    gather_parameters: frozenset
    aggregate_monoids: tuple
    aggregate_call: object
    uses: set


def _user_function(function, new_name: str, namespace: dict):
    definition = copy.deepcopy(function.tree)
    definition.name = new_name
    definition.decorator_list = []
    tree = ast.Module(body=[definition], type_ignores=[])
    code = compile(tree, function.filename, "exec")
    exec(code, namespace)
    namespace[new_name] = numba.njit(**JIT_OPTIONS)(namespace[new_name])


def compile_program(program: VertexProgram) -> CpuProgram:
    """Compile ``program`` (an instance) for the CPU kernels.

    Raises
    ------
    ProgramError
        When numba cannot type the program (for example a name assigned on
        one branch only); the message names the function.
    """
    cls = type(program)
    functions = cls.functions
    value_dtype = np.dtype(cls.value_dtype)
    accum_dtype = np.dtype(cls.accum_dtype) if cls.accum_dtype is not None else value_dtype
    namespace = {"math": math, "np": np, "VALUE": value_dtype.type, "ACCUM": accum_dtype.type,
                 **program.constants}
    aggregate_names = tuple(cls.aggregates)
    for role, function in functions.items():
        _user_function(function, "user_" + role.replace(":", "_"), namespace)
    vertex_args = _vertex_arguments(None, aggregate_names)

    def call(role, mapping):
        function = functions[role]
        arguments = ", ".join(mapping[p] for p in function.parameters)
        return f"user_{role.replace(':', '_')}({arguments})"

    source = [
        "def gather_call(values, weights, attrs, u, v, e):",
        f"    return ACCUM({call('gather', _GATHER_ARGUMENTS)})",
        "def apply_call(attrs, aggregates, num_vertices, iteration, v, value, accum):",
        f"    return VALUE({call('apply', vertex_args)})",
        "def activate_call(new, old):",
        f"    return bool({call('activate', {'new': 'new', 'old': 'old'})})",
        "def init_call(attrs, num_vertices, v):",
        f"    return VALUE({call('init', {**vertex_args, 'iteration': '0'})})",
    ]
    gather_parameters = frozenset(functions["gather"].parameters)
    if gather_parameters <= SOURCE_SIDE_GATHER_PARAMETERS:
        source.append("def source_gather_call(values, attrs, u):")
        source.append(f"    return ACCUM({call('gather', _GATHER_ARGUMENTS)})")
    if aggregate_names:
        source.append("def aggregate_call(values, attrs, num_vertices, iteration, v, out):")
        source.append("    value = values[v]")
        for i, name in enumerate(aggregate_names):
            monoid = cls.aggregates[name][0]
            term = f"np.float64({call('aggregate:' + name, vertex_args)})"
            combine = {"add": f"out[{i}] + x", "min": f"min(out[{i}], x)",
                       "max": f"max(out[{i}], x)"}[monoid]
            source.append(f"    x = {term}")
            source.append(f"    out[{i}] = {combine}")
        source.append("    return 0")
    exec("\n".join(source) + "\n" + _combine_source(cls.sum, cast=True), namespace)
    compiled = {}
    for name in ("gather_call", "source_gather_call", "apply_call", "activate_call",
                 "init_call", "combine", "aggregate_call"):
        if name in namespace:
            compiled[name] = numba.njit(**JIT_OPTIONS)(namespace[name])
    uses = {p for f in functions.values() for p in f.parameters}
    return CpuProgram(
        program=program, value_dtype=value_dtype, accum_dtype=accum_dtype,
        identity=monoid_identity(cls.sum, accum_dtype),
        gather_call=compiled["gather_call"], apply_call=compiled["apply_call"],
        activate_call=compiled["activate_call"], init_call=compiled["init_call"],
        combine=compiled["combine"], source_gather_call=compiled.get("source_gather_call"),
        gather_parameters=gather_parameters,
        aggregate_monoids=tuple(cls.aggregates[n][0] for n in aggregate_names),
        aggregate_call=compiled.get("aggregate_call"), uses=uses)


def compile_init_check(program: VertexProgram):
    """``first_out_of_range(attrs, num_vertices) -> (vertex, value)`` for an
    integer ``value_dtype``: the first vertex whose init value, before its
    conversion, the dtype cannot hold (inf, nan, out of range), else
    ``(-1, 0.0)``; None for other dtypes (every value converts).

    Runs on the host before either processor initializes its values, so the
    CPU and the GPU refuse the same programs
    (:func:`garaphpy.program.check_initial_values`).
    """
    cls = type(program)
    value_dtype = np.dtype(cls.value_dtype)
    if value_dtype.kind not in "iu":
        return None
    info = np.iinfo(value_dtype)
    namespace = {"math": math, "np": np, "VALUE": value_dtype.type, **program.constants,
                 "LOW": float(info.min), "HIGH": float(info.max)}
    _user_function(cls.functions["init"], "user_init", namespace)
    arguments = ", ".join(_vertex_arguments(None)[p] if p != "iteration" else "0"
                          for p in cls.functions["init"].parameters)
    source = "\n".join([
        "def first_out_of_range(attrs, num_vertices):",
        "    for v in range(num_vertices):",
        f"        x = user_init({arguments})",
        # range first (float compares are exact for float x); then the conversion's
        # round trip catches the one float the rounded HIGH lets through (2**63)
        "        if x != x or x < LOW or x > HIGH or abs(x - VALUE(x)) >= 1:",
        "            return v, np.float64(x)",
        "    return -1, np.float64(0.0)",
    ])
    exec(source + "\n", namespace)
    return numba.njit(**JIT_OPTIONS)(namespace["first_out_of_range"])


def typing_error(program: VertexProgram, error: Exception) -> ProgramError:
    """A numba typing failure as a ProgramError that names the program."""
    first = str(error).strip().splitlines()
    detail = next((line for line in first if "user_" in line or "Cannot" in line
                   or "Invalid" in line), first[0] if first else "")
    return ProgramError(f"{type(program).__name__}: numba could not compile the program "
                        f"({detail.strip()})")
