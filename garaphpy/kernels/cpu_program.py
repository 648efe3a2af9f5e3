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
``aggregate_tuple(array) -> tuple``   (the first entries of ``array``, one per
aggregate, which apply may read as constants of a loop; ``(0.0,)`` for a
program without aggregates)

and, for a program with aggregates,
``aggregate_call(values, attrs, num_vertices, iteration, v, out, sums) -> 0``   (v's
share of each min or max aggregate folded into ``out``, of each add aggregate
added to its exact accumulator ``sums[i]``, :mod:`garaphpy.kernels.cpu.exact_sum`),
and the same fold over a tuple that a kernel's loop keeps in registers,
``aggregate_fold(values, attrs, num_vertices, iteration, v, running, sums) -> tuple``,
written out by ``aggregate_write(running, out, row) -> 0`` (``out[row, i] = running[i]``);
for an integer ``value_dtype``, ``first_out_of_range(attrs, num_vertices) -> (vertex,
value)``, the host's check of the init values before their conversion.

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

Caching across processes: all of this is generated as the source of one
module (:func:`program_module_source`) together with copies of the
kernels of :mod:`garaphpy.kernels.cpu` that call program functions, in
which those functions are the module's globals instead of dispatcher
arguments (numba cannot cache a function whose arguments are
dispatchers, nor code from ``exec``).  The module is written to the cache
directory under a key of what its source is made from (:func:`program_key`,
so that a later process finds it without making the source again) and
imported, so numba's ``cache=True`` applies to
every function in it; numba compiles each on its first call, so a run
compiles only the kernels of the paths it takes.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import hashlib
import importlib.util
import inspect
import logging
import os
import sys
import tempfile
import types
from dataclasses import dataclass, field
from pathlib import Path

import numba
import numpy as np

from .._version import __version__
from .. import _numba_setup  # noqa: F401  (threading layer first)
from .. import progress
from ..monoids import MONOIDS, monoid_identity
from ..program import VertexProgram
from . import cpu as cpu_kernels

logger = logging.getLogger(__name__)

#: Compilation that lasts longer than this (seconds) is announced at INFO.
ANNOUNCE_AFTER_SECONDS = 1.0

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
    kernels : module
        The program's generated module: besides the functions above, the
        kernels of :data:`SPECIALIZED_KERNELS`, which take the arguments of
        their :mod:`garaphpy.kernels.cpu` namesakes less the program's
        functions.
    module_cached : bool
        Whether the module's file was already in the cache directory.
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
    kernels: object = None
    module_cached: bool = False
    _announced: bool = field(default=False, repr=False)

    @contextlib.contextmanager
    def compiling(self):
        """Context of first calls of the program's kernels: a compilation that
        lasts over :data:`ANNOUNCE_AFTER_SECONDS` is announced at INFO (once)."""
        if self._announced:
            yield
            return
        name = type(self.program).__name__
        when = "first run; cached afterwards" if getattr(self.kernels, "CACHE", False) \
            else "not cached: no writable cache directory"
        message = f"compiling {name} for the CPU ({when})"
        key = progress.DELAYED.schedule(ANNOUNCE_AFTER_SECONDS,
                                        lambda: self._announce(message))
        try:
            yield
        finally:
            progress.DELAYED.withdraw(key)

    def _announce(self, message: str) -> None:
        if not self._announced:
            self._announced = True
            logger.info(message)

    def fused_pull_kernel(self):
        """The fused pull of this program: the one that also folds the next
        iteration's aggregates where the program has some."""
        return self.kernels.pull_fused if self.aggregate_call is None \
            else self.kernels.pull_fused_aggregates

    def cache_hits(self) -> int:
        """Functions of the program's module numba loaded from its disk cache."""
        return sum(sum(dispatcher.stats.cache_hits.values())
                   for dispatcher in vars(self.kernels).values()
                   if isinstance(dispatcher, numba.core.registry.CPUDispatcher)
                   and dispatcher.py_func.__module__ == self.kernels.__name__)


#: Parameters of the kernels in :mod:`garaphpy.kernels.cpu` that take a
#: program function; a generated kernel binds them to the program module's
#: function of the same name instead.
PROGRAM_ROLES = ("gather_call", "source_gather_call", "apply_call", "activate_call",
                 "init_call", "combine", "aggregate_call", "aggregate_tuple", "aggregate_fold",
                 "aggregate_write")

#: The kernels generated per program: name -> (kernel of
#: :mod:`garaphpy.kernels.cpu`, as ``family.name``, parameters bound to other
#: names, the role or roles it needs).
SPECIALIZED_KERNELS = {
    "init_values": ("vertices.init_values", {}, None),
    "compute_aggregates": ("vertices.compute_aggregates", {}, "aggregate_call"),
    "source_contributions": ("vertices.source_contributions", {}, "source_gather_call"),
    "listed_source_contributions": ("vertices.listed_source_contributions", {},
                                    "source_gather_call"),
    "pull_range": ("pull.pull_range", {}, None),
    "pull_range_precomputed": ("pull.pull_range",
                               {"gather_call": "read_source_contribution"},
                               "source_gather_call"),
    "apply_vertices": ("pull.apply_vertices", {}, None),
    "pull_fused": ("pull.pull_fused", {"aggregate_fold": "no_aggregates_fold",
                                       "aggregate_write": "no_aggregates_write"},
                   "source_gather_call"),
    "pull_fused_aggregates": ("pull.pull_fused", {}, ("source_gather_call", "aggregate_fold")),
    "pull_range_settling": ("pull.pull_range_settling", {}, None),
    "pull_settling_whole": ("pull.pull_settling_whole", {}, None),
    "pull_vertices": ("pull.pull_vertices", {}, None),
    "push_settling": ("notify.push_settling", {}, None),
    "sparse_iterations": ("batches.sparse_iterations", {}, None),
    "priority_iterations": ("priority.priority_iterations", {}, None),
    "priority_push_rounds": ("push_rounds.priority_push_rounds", {}, None),
    "settle_push_rounds": ("settle_rounds.settle_push_rounds", {}, None),
    # helpers: a kernel passing them a function would need it as a value
    # (inside a parallel loop, a pointer to a Python object numba cannot cache)
    "_update_vertex": ("common._update_vertex", {}, None),
    "_update_and_flag": ("common._update_and_flag", {}, None),
    "_sparse_step": ("batches._sparse_step", {}, None),
    "_push_step": ("priority._push_step", {}, None),
    "_settle_step": ("batches._settle_step", {}, None),
    "_push_relax": ("push_rounds._push_relax", {}, None),
    "_push_round": ("push_rounds._push_round", {}, None),
    "_settle_from": ("settle_rounds._settle_from", {}, None),
    "_serial_level": ("settle_rounds._serial_level", {}, None),
    "_shared_level": ("settle_rounds._shared_level", {}, None),
    "_gather_in_edges": ("pull._gather_in_edges", {}, None),
    "_finish_cut_vertex": ("pull._finish_cut_vertex", {}, None),
}


def _kernel(path: str):
    """The dispatcher ``family.name`` of :mod:`garaphpy.kernels.cpu`."""
    family, name = path.split(".")
    return getattr(importlib.import_module(f"{cpu_kernels.__name__}.{family}"), name)


#: Files whose text is part of a program module's key, besides those of the
#: kernel package (``cpu/*.py``): the generated module calls their helpers,
#: which numba's cache does not track.
_KEYED_FILES = ("cpu_program.py", "../_numba_setup.py", "../program.py", "../monoids.py")


def _constant_source(value) -> str:
    """A constant as exact Python source (floats through their hex form; inf and
    nan included), keeping numpy scalar types."""
    if isinstance(value, np.generic):
        return f"np.{value.dtype.name}({_constant_source(value.item())})"
    if isinstance(value, float):
        return f"float.fromhex({value.hex()!r})"
    return repr(int(value))


def _user_function_source(function, new_name: str) -> str:
    definition = copy.deepcopy(function.tree)
    definition.name = new_name
    definition.decorator_list = []
    return (f"# {function.name}, {function.filename}:{function.first_line}\n"
            f"@numba.njit(cache=CACHE, **JIT_OPTIONS)\n{ast.unparse(definition)}\n")


class _BindRoles(ast.NodeTransformer):
    """Renames the reads of bound parameters in a kernel's body, and drops the
    function arguments of calls to other specialized kernels."""

    def __init__(self, bindings: dict):
        self.bindings = bindings

    def visit_Name(self, node):
        if node.id in self.bindings:
            return ast.copy_location(ast.Name(self.bindings[node.id], node.ctx), node)
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in SPECIALIZED_KERNELS:
            kernel = _kernel(SPECIALIZED_KERNELS[node.func.id][0])
            parameters = inspect.signature(kernel.py_func).parameters
            node.args = [argument for argument, parameter in zip(node.args, parameters)
                         if parameter not in PROGRAM_ROLES]
        return node


def _specialized_kernel_source(name: str, kernel, bindings: dict,
                               parallel: bool = True) -> tuple[str, set]:
    """The source of ``kernel`` (a dispatcher of :mod:`garaphpy.kernels.cpu`) named
    ``name``, with its program-function parameters removed and read as the
    module's globals; also the global names its body reads."""
    definition = ast.parse(inspect.getsource(kernel.py_func)).body[0]
    bound = {p: bindings.get(p, p) for p in (a.arg for a in definition.args.args)
             if p in PROGRAM_ROLES}
    definition.name = name
    definition.decorator_list = []
    definition.args.args = [a for a in definition.args.args if a.arg not in bound]
    if isinstance(definition.body[0], ast.Expr) and \
            isinstance(definition.body[0].value, ast.Constant):
        definition.body = definition.body[1:]      # the docstring names the parameters removed
    docstring = f":func:`{kernel.__module__}.{kernel.__name__}` for this program" + \
        "".join(f", {role} = {target}" for role, target in bound.items() if role != target)
    definition.body.insert(0, ast.Expr(ast.Constant(docstring + ".")))
    definition = _BindRoles(bound).visit(definition)
    names = {node.id for node in ast.walk(definition) if isinstance(node, ast.Name)}
    targetoptions = dict(kernel.targetoptions)
    if not parallel:
        targetoptions.pop("parallel", None)
    options = ", ".join(f"{key}={value!r}" for key, value in sorted(targetoptions.items())
                        if value is not None and key != "nopython")
    return f"@numba.njit(cache=CACHE, {options})\n{ast.unparse(definition)}\n", names


def _init_check_source(init_call: str, value_dtype: np.dtype) -> str:
    """``first_out_of_range(attrs, num_vertices) -> (vertex, value)`` for an
    integer ``value_dtype``: the first vertex whose init value, before its
    conversion, the dtype cannot hold (inf, nan, out of range), else
    ``(-1, 0.0)``.

    Runs on the host before either processor initializes its values, so the
    CPU and the GPU refuse the same programs
    (:func:`garaphpy.program.check_initial_values`); part of the program's
    module, so numba's disk cache keeps it with the program's kernels.
    """
    info = np.iinfo(value_dtype)
    return "\n".join([
        f"_INIT_LOW = {_constant_source(float(info.min))}",
        f"_INIT_HIGH = {_constant_source(float(info.max))}",
        "@numba.njit(cache=CACHE, **JIT_OPTIONS)",
        "def first_out_of_range(attrs, num_vertices):",
        "    for v in range(num_vertices):",
        f"        x = {init_call}",
        # range first (float compares are exact for float x); then the conversion's
        # round trip catches the one float the rounded high lets through (2**63)
        "        if x != x or x < _INIT_LOW or x > _INIT_HIGH or abs(x - VALUE(x)) >= 1:",
        "            return v, np.float64(x)",
        "    return -1, np.float64(0.0)",
    ]) + "\n"


def program_module_source(program: VertexProgram, parallel: bool = True) -> str:
    """The Python module that compiles ``program`` for the CPU kernels.

    It holds the program's constants, its checked functions, the wrappers of
    the module docstring, ``combine`` and the kernels of
    :data:`SPECIALIZED_KERNELS` with the program's functions bound as
    globals: no kernel takes a function argument, so numba's on-disk cache
    (``cache=CACHE``) applies to all of them once the module is a file.
    """
    cls = type(program)
    functions = cls.functions
    value_dtype = np.dtype(cls.value_dtype)
    accum_dtype = np.dtype(cls.accum_dtype) if cls.accum_dtype is not None else value_dtype
    aggregate_names = tuple(cls.aggregates)
    vertex_args = _vertex_arguments(None, aggregate_names)

    def call(role, mapping):
        function = functions[role]
        arguments = ", ".join(mapping[p] for p in function.parameters)
        return f"user_{role.replace(':', '_')}({arguments})"

    def wrapper(signature, *body):
        return "\n".join(["@numba.njit(cache=CACHE, **JIT_OPTIONS)", f"def {signature}:",
                          *(f"    {line}" for line in body)]) + "\n"

    lines = [f'"""{cls.__name__} compiled for the CPU kernels (generated by {__name__})."""',
             "import math", "import numba", "import numpy as np", "",
             "CACHE = True", f"JIT_OPTIONS = {JIT_OPTIONS!r}",
             f"VALUE = np.{value_dtype.name}", f"ACCUM = np.{accum_dtype.name}"]
    lines += [f"{name} = {_constant_source(value)}"
              for name, value in sorted(program.constants.items())]
    lines.append("")
    lines += [_user_function_source(function, "user_" + role.replace(":", "_"))
              for role, function in functions.items()]
    lines.append(wrapper("gather_call(values, weights, attrs, u, v, e)",
                         f"return ACCUM({call('gather', _GATHER_ARGUMENTS)})"))
    lines.append(wrapper("apply_call(attrs, aggregates, num_vertices, iteration, v, value, accum)",
                         f"return VALUE({call('apply', vertex_args)})"))
    lines.append(wrapper("activate_call(new, old)",
                         f"return bool({call('activate', {'new': 'new', 'old': 'old'})})"))
    lines.append(wrapper("init_call(attrs, num_vertices, v)",
                         f"return VALUE({call('init', {**vertex_args, 'iteration': '0'})})"))
    if value_dtype.kind in "iu":
        lines.append(_init_check_source(call('init', {**vertex_args, 'iteration': '0'}),
                                        value_dtype))
    roles = {"gather_call", "apply_call", "activate_call", "init_call", "combine"}
    if frozenset(functions["gather"].parameters) <= SOURCE_SIDE_GATHER_PARAMETERS:
        roles.add("source_gather_call")
        lines.append(wrapper("source_gather_call(values, attrs, u)",
                             f"return ACCUM({call('gather', _GATHER_ARGUMENTS)})"))
    if aggregate_names:
        # an add aggregate goes to its exact accumulator (the same bits in any
        # order of parts, threads or partitions); min and max fold as floats
        lines.insert(4, "from garaphpy.kernels.cpu.exact_sum import add_term")
        monoid_names = [cls.aggregates[name][0] for name in aggregate_names]
        roles.add("aggregate_call")
        body = ["value = values[v]"]
        for i, name in enumerate(aggregate_names):
            body.append(f"x = np.float64({call('aggregate:' + name, vertex_args)})")
            body.append(f"add_term(sums, {i}, x)" if monoid_names[i] == "add" else
                        f"out[{i}] = " + MONOIDS[monoid_names[i]].python_fold.format(
                            a=f"out[{i}]", b="x"))
        lines.append(wrapper(
            "aggregate_call(values, attrs, num_vertices, iteration, v, out, sums)",
            *body, "return 0"))
        # the same fold over a tuple that a kernel's loop keeps in registers
        roles |= {"aggregate_fold", "aggregate_write"}
        count = len(aggregate_names)
        body = ["value = values[v]"]
        for i, name in enumerate(aggregate_names):
            body.append(f"x{i} = np.float64({call('aggregate:' + name, vertex_args)})")
            if monoid_names[i] == "add":
                body += [f"add_term(sums, {i}, x{i})", f"y{i} = running[{i}]"]
            else:
                body.append(f"y{i} = " + MONOIDS[monoid_names[i]].python_fold.format(
                    a=f"running[{i}]", b=f"x{i}"))
        lines.append(wrapper(
            "aggregate_fold(values, attrs, num_vertices, iteration, v, running, sums)",
            *body, "return (" + "".join(f"y{i}, " for i in range(count)) + ")"))
        lines.append(wrapper("aggregate_write(running, out, row)",
                             *(f"out[row, {i}] = running[{i}]" for i in range(count)),
                             "return 0"))
    # (0.0,) without aggregates: a placeholder apply never reads
    entries = "".join(f"array[{i}], " for i in range(len(aggregate_names))) or "0.0,"
    lines.append(wrapper("aggregate_tuple(array)", f"return ({entries})"))
    roles.add("aggregate_tuple")
    lines.append("@numba.njit(cache=CACHE, **JIT_OPTIONS)\n"
                 + MONOIDS[cls.sum].combine_source(cast=True))
    helpers = {}        # name -> the family module the kernels read it from
    for name, (kernel_path, bindings, needs) in SPECIALIZED_KERNELS.items():
        if needs is None or set((needs,) if isinstance(needs, str) else needs) <= roles:
            kernel = _kernel(kernel_path)
            source, names = _specialized_kernel_source(name, kernel, bindings, parallel)
            lines.append(source)
            # a helper of the kernel's own family, or a function bound to a role
            family = sys.modules[kernel.py_func.__module__]
            for read in sorted(names - set(SPECIALIZED_KERNELS) - {"np", "numba"}):
                for module in (family, cpu_kernels):
                    if read in vars(module):
                        helpers.setdefault(read, module.__name__)
                        break
    lines[4:4] = [f"from {family} import "
                  + ", ".join(sorted(n for n in helpers if helpers[n] == family))
                  for family in sorted(set(helpers.values()))]
    return "\n".join(lines) + "\n"


def program_key(program: VertexProgram, parallel: bool = True) -> str:
    """The cache key of a program's module: everything
    :func:`program_module_source` makes it from (the program's functions,
    constants, dtypes, sum and aggregates, the kernels' files and the
    generator's own), and the versions that compile it.  Computed without
    generating the source, so that a process whose module is cached reads
    it without making it again."""
    cls = type(program)
    digest = hashlib.sha256()
    for role, function in cls.functions.items():
        digest.update(f"{role} {function.name} {function.filename}:{function.first_line} "
                      f"{ast.dump(function.tree)}\n".encode())
    accum_dtype = None if cls.accum_dtype is None else np.dtype(cls.accum_dtype).name
    digest.update(repr((cls.__name__, np.dtype(cls.value_dtype).name, accum_dtype, cls.sum,
                        [(name, cls.aggregates[name][0]) for name in cls.aggregates],
                        sorted((name, _constant_source(value))
                               for name, value in program.constants.items()),
                        bool(parallel))).encode())
    here = Path(__file__).parent
    for path in [*sorted((here / "cpu").glob("*.py")), *(here / name for name in _KEYED_FILES)]:
        digest.update(path.read_bytes())
    digest.update(f"{__version__} numba {numba.__version__} numpy {np.__version__} "
                  f"{sys.version}".encode())
    return digest.hexdigest()


def _module_from_file(path: Path, module_name: str):
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


def _module_in_memory(source: str, module_name: str):
    module = types.ModuleType(module_name)
    code = compile(source.replace("\nCACHE = True\n", "\nCACHE = False\n", 1),
                   f"<{module_name}>", "exec")
    exec(code, module.__dict__)
    return module


def _write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename, so that a
    reader (another process compiling the same program) sees all or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".",
                                             suffix=".tmp")
    try:
        with os.fdopen(descriptor, "w") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def load_program_module(program: VertexProgram, cache_dir: Path | None,
                        parallel: bool = True):
    """The compiled module of ``program`` (see :func:`program_module_source`).

    Parameters
    ----------
    cache_dir : pathlib.Path or None
        Where program modules are kept, as ``NAME-KEY.py``; numba's cache of
        their functions goes beside them (or to ``NUMBA_CACHE_DIR``).  None,
        or a directory that cannot be written, compiles in memory for this
        process only.
    parallel : bool, default True
        See :func:`compile_program`.

    Returns
    -------
    (module, bool)
        The module and whether its file was already in ``cache_dir``.
    """
    key = program_key(program, parallel)
    module_name = f"_garaphpy_program_{type(program).__name__}_{key[:20]}"
    if module_name in sys.modules:
        return sys.modules[module_name], True
    if cache_dir is not None:
        path = Path(cache_dir) / f"{type(program).__name__}-{key[:20]}.py"
        try:
            existed = path.is_file()        # written whole or not at all
            if not existed:
                _write_atomically(path, program_module_source(program, parallel))
            return _module_from_file(path, module_name), existed
        except (OSError, RuntimeError) as error:
            # unwritable directory, or numba finding no place for its cache
            logger.debug("program cache %s not usable (%s); compiling in memory", cache_dir,
                         error)
    return _module_in_memory(program_module_source(program, parallel), module_name), False


def compile_program(program: VertexProgram, cache_dir: Path | None = None,
                    parallel: bool = True) -> CpuProgram:
    """Compile ``program`` (an instance) for the CPU kernels.

    Parameters
    ----------
    cache_dir : pathlib.Path, optional
        Where the program's generated module is kept across processes
        (:func:`load_program_module`); None compiles in memory.
    parallel : bool, default True
        The specialized kernels with numba's ``parallel=True`` (their
        ``prange`` loops over threads); False gives their serial versions
        (``prange`` is ``range``), for one-thread runs: the same results,
        compiled in a fraction of the time.

    numba compiles each function on its first call (from its disk cache when
    the module came from ``cache_dir`` before): the engine calls only the
    kernels of the paths a run takes, inside :meth:`CpuProgram.compiling`.

    Raises
    ------
    ProgramError
        When numba cannot type the program (for example a name assigned on
        one branch only); the message names the function.
    """
    cls = type(program)
    module, cached = load_program_module(program, cache_dir, parallel)
    value_dtype = np.dtype(cls.value_dtype)
    accum_dtype = np.dtype(cls.accum_dtype) if cls.accum_dtype is not None else value_dtype
    return CpuProgram(
        program=program, value_dtype=value_dtype, accum_dtype=accum_dtype,
        identity=monoid_identity(cls.sum, accum_dtype),
        gather_call=module.gather_call, apply_call=module.apply_call,
        activate_call=module.activate_call, init_call=module.init_call,
        combine=module.combine, source_gather_call=getattr(module, "source_gather_call", None),
        gather_parameters=frozenset(cls.functions["gather"].parameters),
        aggregate_monoids=tuple(cls.aggregates[n][0] for n in cls.aggregates),
        aggregate_call=getattr(module, "aggregate_call", None),
        uses={p for f in cls.functions.values() for p in f.parameters},
        kernels=module, module_cached=cached)
