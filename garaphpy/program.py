"""The vertex program: Garaph's GAS interface (section 2.3, Figure 3).

A program is a class with four plain Python functions and a few declared
facts::

    class SSSP(VertexProgram):
        value_dtype = np.float64
        sum = "min"                      # the accumulator monoid, by name
        initially_active = "sources"
        needs_weights = True

        def init(is_source):
            return 0.0 if is_source else math.inf

        def gather(src, weight):         # along every in-edge (u, v) of v
            return src + weight

        def apply(value, accum):
            return min(value, accum)

        def activate(new, old):
            return new < old

``sum`` is named, not written: the engine maps it to a plain operation on
the CPU and to an atomic on the GPU (Garaph's unifiedAdd, Figure 4).  The
functions' parameters are bound *by name* (see :data:`PARAMETERS`), so a
function asks only for what it uses.  Names listed in ``constants`` are read
as free names in any function; ``apply`` may also ask for the program's
``aggregates`` by name, as parameters.

The functions must stay inside a small subset of Python — arithmetic,
comparisons, boolean logic, if/else, local names, ``math`` functions,
``min``/``max``/``abs`` — so that the very same source can be compiled by
numba for the CPU and translated to CUDA C++ for the GPU.  The subset is
checked through :mod:`ast` when the class is defined, and translated once
for the GPU (:mod:`garaphpy.kernels.cuda_program`); anything outside it, or
anything the translation cannot reproduce, is a :class:`ProgramError`
naming the file and line.

Values and their dtype.  ``init`` and ``apply`` results are converted to
``value_dtype``, gather results to the accumulator's dtype, on both
processors alike.  A value an integer dtype cannot hold is refused, never
wrapped: a constant result (``math.inf``, ``-math.inf``, ``1e30``,
``2**63``, directly, through an ``if``/else or a local name) is refused when
the class is defined, and ``init``'s values are computed and checked on the
host before every run (:func:`check_initial_values`); both errors name the
file and line.  ``math.nan`` is outside the subset.  What is defined beyond
that follows numpy and C: integer arithmetic inside ``apply`` or ``gather``
wraps around on overflow (``int64`` max + 1 is ``int64`` min), so a marker
that ``init`` or ``apply`` returns beyond half the range (beyond 2**62 for
``int64``) is refused when ``gather`` does unguarded arithmetic on ``src``
(``src + 1`` with no comparison), naming a marker that cannot wrap; a float
converted to an integer truncates toward zero, and a float result that
computes to inf, nan or a value out of the integer range in ``apply`` or
``gather`` is the program's responsibility (keep an integer program's
arithmetic in integers, or use a float ``value_dtype``).
"""

from __future__ import annotations

import ast
import inspect
import math
import textwrap
import warnings
from dataclasses import dataclass

import numpy as np

from .errors import GaraphError, caller_stacklevel
from .monoids import NAMES as MONOIDS
from .monoids import monoid_identity  # noqa: F401  (re-exported: engines and tests use it)

#: The edge-value domains a program may declare it is correct for
#: (``weight_domain``): any value, values >= 0, values > 0.
WEIGHT_DOMAINS = ("any", "nonnegative", "positive")

#: Parameters each function may ask for, by role.
PARAMETERS = {
    "init": ("vertex", "out_degree", "in_degree", "weighted_in_degree", "is_source",
             "num_vertices"),
    "gather": ("src", "dst", "weight", "src_out_degree", "src_in_degree", "dst_out_degree",
               "dst_in_degree"),
    "apply": ("value", "accum", "vertex", "out_degree", "in_degree", "weighted_in_degree",
              "is_source", "num_vertices", "iteration"),
    "activate": ("new", "old"),
    # an aggregate's function sees what apply sees, less accum
    "aggregate": ("value", "vertex", "out_degree", "in_degree", "weighted_in_degree",
                  "is_source", "num_vertices", "iteration"),
}

#: What each parameter is, for documentation and error messages.
PARAMETER_MEANING = {
    "vertex": "the vertex's id as the user gave it (int64)",
    "out_degree": "out-degree of the vertex", "in_degree": "in-degree of the vertex",
    "weighted_in_degree": "sum of the weights of the vertex's in-edges (float64)",
    "is_source": "True for the run's source vertices",
    "num_vertices": "|V|", "iteration": "the iteration number, from 0",
    "src": "value D_u of the edge's source", "dst": "value D_v of the edge's destination",
    "weight": "the edge's value D_(u,v)",
    "src_out_degree": "out-degree of u", "src_in_degree": "in-degree of u",
    "dst_out_degree": "out-degree of v", "dst_in_degree": "in-degree of v",
    "value": "D_v before the update", "accum": "the summed gathers of v's in-edges",
    "new": "D_v after apply", "old": "D_v before apply",
}

#: Functions a program may call, besides its own locals.
ALLOWED_CALLS = {"min", "max", "abs", "float", "int", "bool"}
#: Functions and constants of :mod:`math` a program may use.
ALLOWED_MATH = {"exp", "log", "log2", "log10", "sqrt", "sin", "cos", "tan", "tanh", "atan",
                "fabs", "floor", "ceil", "pow", "isinf", "isnan", "inf", "pi", "e", "copysign",
                "expm1", "log1p", "hypot", "erf"}
_ALLOWED_NODES = (
    ast.Module, ast.FunctionDef, ast.arguments, ast.arg, ast.Return, ast.Assign, ast.AugAssign,
    ast.AnnAssign, ast.If, ast.IfExp, ast.Expr, ast.Pass, ast.BinOp, ast.UnaryOp, ast.BoolOp,
    ast.Compare, ast.Name, ast.Load, ast.Store, ast.Constant, ast.Call, ast.Attribute,
    ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.USub, ast.UAdd,
    ast.Not, ast.And, ast.Or, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE,
)
_ROLES = ("init", "gather", "apply", "activate")


class ProgramError(GaraphError, TypeError):
    """A vertex program is malformed or uses Python outside the subset."""


@dataclass(frozen=True)
class Function:
    """One checked function of a program.

    Attributes
    ----------
    role : str
        ``init``, ``gather``, ``apply``, ``activate`` or ``aggregate:NAME``.
    name : str
        The Python function's name.
    parameters : tuple of str
        Its parameter names, in order.
    tree : ast.FunctionDef
        Its syntax tree (the GPU translator reads it).
    source : str
        Its dedented source.
    filename : str
        Where it was defined.
    first_line : int
        Line of its ``def`` in that file.
    """

    role: str
    name: str
    parameters: tuple
    tree: ast.FunctionDef
    source: str
    filename: str
    first_line: int


def _line_error(function_name: str, filename: str, line: int, message: str) -> ProgramError:
    return ProgramError(f"{filename}:{line}: in {function_name}: {message}")


def check_function(function, role: str, extra_names: set[str],
                   extra_parameters: tuple = ()) -> Function:
    """Check that ``function`` stays inside the subset; return its checked form.

    Parameters
    ----------
    function : function
        A plain Python function (not a lambda).
    role : str
        Which program function it is (selects the allowed parameters).
    extra_names : set of str
        Constants the function may read as free names.
    extra_parameters : tuple of str
        Further parameter names it may ask for (apply: the aggregates).

    Raises
    ------
    ProgramError
        Naming the file and line of the first construct outside the subset.
    """
    if isinstance(function, (staticmethod, classmethod)):
        function = function.__func__
    if not inspect.isfunction(function):
        raise ProgramError(f"{role} must be a plain function, got {type(function).__name__}")
    filename = inspect.getsourcefile(function) or "<unknown>"
    try:
        lines, first_line = inspect.getsourcelines(function)
    except (OSError, TypeError):
        raise ProgramError(f"{role}: the source of {function.__name__} is not available "
                           "(define programs in a file or a notebook cell)") from None
    source = textwrap.dedent("".join(lines))
    tree = ast.parse(source)
    definition = tree.body[0]
    if not isinstance(definition, ast.FunctionDef):
        raise _line_error(function.__name__, filename, first_line,
                          f"{role} must be defined with def, not a lambda")
    ast.increment_lineno(tree, first_line - 1)
    allowed_parameters = PARAMETERS[role.split(":")[0]] + tuple(extra_parameters)
    arguments = definition.args
    if arguments.vararg or arguments.kwarg or arguments.kwonlyargs or arguments.defaults \
            or arguments.posonlyargs:
        raise _line_error(function.__name__, filename, definition.lineno,
                          "only plain positional parameters are allowed")
    parameters = tuple(a.arg for a in arguments.args)
    for parameter in parameters:
        if parameter not in allowed_parameters:
            raise _line_error(function.__name__, filename, definition.lineno,
                              f"unknown parameter {parameter!r}; {role} may ask for "
                              f"{', '.join(allowed_parameters)}")
    definition.decorator_list = []
    body = definition.body
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        definition.body = body[1:]  # a docstring documents; it is not program code
    _SubsetChecker(function.__name__, filename, set(parameters), extra_names).visit_body(
        definition)
    return Function(role, function.__name__, parameters, definition, ast.unparse(definition),
                    filename, first_line)


class _SubsetChecker(ast.NodeVisitor):
    """Walks a function and rejects everything outside the documented subset."""

    def __init__(self, function_name, filename, parameters, extra_names):
        self.function_name = function_name
        self.filename = filename
        self.known = set(parameters) | set(extra_names)
        self.extra_names = extra_names

    def fail(self, node, message):
        raise _line_error(self.function_name, self.filename, getattr(node, "lineno", 0), message)

    def visit_body(self, definition: ast.FunctionDef) -> None:
        if not any(isinstance(node, ast.Return) and node.value is not None
                   for node in ast.walk(definition)):
            self.fail(definition, "the function must return a value")
        for statement in definition.body:
            self.visit(statement)

    def generic_visit(self, node):
        if not isinstance(node, _ALLOWED_NODES):
            what = type(node).__name__
            hint = {"For": "loops", "While": "loops", "Subscript": "indexing",
                    "Lambda": "lambdas", "ListComp": "comprehensions", "List": "lists",
                    "Tuple": "tuples", "Dict": "dicts", "Import": "imports",
                    "ImportFrom": "imports", "Global": "global statements",
                    "Nonlocal": "nonlocal statements", "FunctionDef": "nested functions",
                    "Try": "try blocks", "With": "with blocks", "Raise": "raise",
                    "JoinedStr": "f-strings", "Await": "await", "Yield": "yield",
                    "NamedExpr": "assignment expressions"}.get(what, what)
            self.fail(node, f"{hint} are outside the vertex-program subset "
                            "(arithmetic, comparisons, boolean logic, if/else, local names, "
                            "math functions, min/max/abs)")
        super().generic_visit(node)

    def visit_FunctionDef(self, node):
        self.fail(node, "nested functions are outside the vertex-program subset")

    def visit_Assign(self, node):
        for target in node.targets:
            if not isinstance(target, ast.Name):
                self.fail(node, "only assignments to local names are allowed")
        self.visit(node.value)
        for target in node.targets:
            self.known.add(target.id)

    def visit_AugAssign(self, node):
        if not isinstance(node.target, ast.Name):
            self.fail(node, "only assignments to local names are allowed")
        if node.target.id not in self.known:
            self.fail(node, f"{node.target.id!r} is used before it is assigned")
        self.visit(node.value)

    def visit_AnnAssign(self, node):
        self.fail(node, "annotated assignments are outside the vertex-program subset")

    def visit_If(self, node):
        self.visit(node.test)
        before = set(self.known)
        for statement in node.body:
            self.visit(statement)
        assigned_in_body = self.known - before
        self.known = set(before)
        for statement in node.orelse:
            self.visit(statement)
        # a name is known after the if when it could be assigned on the path taken;
        # numba and the CUDA translator both require it on every path, checked there
        self.known |= assigned_in_body

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load) and node.id not in self.known \
                and node.id not in ALLOWED_CALLS and node.id not in ("math", "True", "False"):
            self.fail(node, f"unknown name {node.id!r} (parameters, local names, constants "
                            "and aggregates may be used)")

    def visit_Attribute(self, node):
        if not (isinstance(node.value, ast.Name) and node.value.id == "math"):
            self.fail(node, "attribute access is outside the subset (only math.NAME)")
        if node.attr not in ALLOWED_MATH:
            self.fail(node, f"math.{node.attr} is not supported (supported: "
                            f"{', '.join(sorted(ALLOWED_MATH))})")

    def visit_Call(self, node):
        if node.keywords:
            self.fail(node, "keyword arguments are outside the subset")
        function = node.func
        if isinstance(function, ast.Name):
            if function.id not in ALLOWED_CALLS:
                self.fail(node, f"calling {function.id}() is outside the subset (allowed: "
                                f"{', '.join(sorted(ALLOWED_CALLS))} and math functions)")
        elif isinstance(function, ast.Attribute):
            self.visit_Attribute(function)
            if function.attr in ("inf", "pi", "e"):
                self.fail(node, f"math.{function.attr} is a constant, not a function")
        else:
            self.fail(node, "only named functions may be called")
        for argument in node.args:
            self.visit(argument)

    def visit_Constant(self, node):
        if not isinstance(node.value, (bool, int, float)) or isinstance(node.value, complex):
            self.fail(node, f"constant {node.value!r}: only numbers and True/False are allowed")


class VertexProgram:
    """Base class of vertex programs; see the module docstring.

    Class attributes
    ----------------
    value_dtype : numpy dtype
        Type of D_v (float64, float32, int64, int32, bool).
    accum_dtype : numpy dtype or None
        Type of the accumulator; None means ``value_dtype``.
    sum : {"add", "min", "max"}
        The accumulator monoid.
    execution : {"sync", "async"}
        Default execution, on every processor: synchronous (committed at
        the end of each iteration, deterministic) or asynchronous (visible
        at once).  Declare ``"async"`` only for a program whose values do
        not depend on the order of updates: a min or max sum whose apply
        keeps the better of the old value and the sum and whose gather is
        monotone (SSSP, CC and SSWP declare it), which then reaches the
        same fixed point in fewer iterations (updates made earlier in an
        iteration are read later in it).
    cpu_execution : {"sync", "async"} or None
        Deprecated: declare ``execution``.  It named the default of runs on
        the CPU alone and hybrid runs when the GPU alone ran synchronously;
        the asynchronous run was faster on the GPU too (BENCHMARKS.md,
        twenty-ninth session).  Where declared, it takes the place of
        ``execution`` (with a DeprecationWarning).
    final_once_set : bool
        Declares that, in a synchronous run, a vertex once active (a source
        at the start, or activated by an update) never changes its value
        again, and that a vertex not yet active takes its final value from
        any in-neighbour that is (an in-neighbour not yet active
        contributes nothing: BFS, a vertex reached in level i has depth
        i + 1 from any parent in level i).  A run on the CPU alone (and a
        hybrid run's CPU, in the iterations it runs alone) then
        skips settled vertices in its pulls, gathers from settled
        in-neighbours only, stops at the first that activates the vertex
        (Beamer's bottom-up step), writes a vertex from the first frontier
        edge that reaches it in a sparse iteration when the gather reads no
        edge value (the top-down step) and picks its directions by Beamer's
        rule (``scheduler.decisions``).  Only for a
        ``min`` or ``max`` sum whose vertices start inactive except the
        sources; a program defined outside garaphpy that declares it has its
        result checked at the end of the run by one full pull (a false
        declaration raises :class:`ProgramError`).  Default False.
    shortcut_labels : bool
        Declares min-label propagation over vertex ids: integer values, a
        vertex's initial value is its own user id (``init`` returns
        ``vertex``), ``gather(src)`` passes the in-neighbour's label on
        unchanged, the sum is ``min`` and ``apply`` keeps the smaller of
        the old value and the sum (CC).  A vertex's label is then always
        the id of a vertex that reaches it and whose own label is no
        larger, and a run on the CPU alone shortcuts labels after each
        iteration: a vertex takes the label of the vertex its label names,
        as long as it drops (pointer jumping, Shiloach-Vishkin's shortcut;
        the same fixed point in far fewer iterations on high-diameter
        graphs); on a symmetric graph, its first iteration starts from the
        labels of a sampled union-find (Afforest: the fixed point, which the
        iteration confirms).  Checked: the declarations here when the class is
        defined; at the start of a run, the initial values against the
        user ids and ``gather`` and ``apply`` on probe values (a false
        declaration raises :class:`ProgramError`).  Default False.
    value_priority : bool
        Declares that an asynchronous run may take its active vertices in
        order of value, smaller values first for a ``min`` sum and larger
        for ``max``: a vertex set off from a worse value would be set off
        again by a better one, so waiting for the better saves work (SSSP,
        SSWP; not CC, whose values are ids).  A run on the CPU alone then
        takes its sparse iterations in buckets of values
        (delta-stepping, HyTGraph's priority scheduling: each iteration
        notifies from the lowest bucket's vertices only; width
        ``config.CPU_BUCKET_WIDTH`` or the rule of
        ``scheduler.decisions.bucket_width``), and an asynchronous run on
        the GPU alone pushes its device loop's frontier in buckets
        (near-far; the GPU engine's ``value_priority``,
        ``scheduler.decisions.gpu_value_priority``).  The order changes the work,
        not the result, for a program whose ``execution = "async"``
        already declares that its values do not depend on the order of
        updates; so it needs sum ``min`` or ``max``, numeric values and
        ``execution = "async"``.  Default False.
    apply_keeps_best : bool
        Declares that ``apply`` returns the better of the old value and the
        sum (the sum's ``min`` or ``max`` of the two) and that ``gather``
        reads the source side and the edge alone: a vertex's new value then
        follows from its in-neighbours that changed in the last iteration
        alone (those that did not were combined into it before; so, too,
        the initial values of the vertices not active at the start must
        improve no neighbour, as infinite distances do).  The GPU's
        device loop then runs its sparse iterations as a push over the
        frontier's out-edges with the sum's atomics, instead of a notify
        and a pull over every in-edge of the notified vertices (BFS, SSSP,
        CC, SSWP), and so do the CPU's steps in buckets of values
        (``value_priority``) that one thread takes.  Checked: the sum and
        the gather's parameters when the class is defined; ``apply`` on
        probe values at the start of a run that pushes (a false
        declaration raises :class:`ProgramError`).  Default False.
    gather_no_better_than_source : bool
        Declares, with ``apply_keeps_best``, that no gather is better than
        its source's value (for sum ``min``: ``gather(u, v) >= value(u)``;
        for ``max``: ``<=``).  A vertex whose value is already as good as
        the best value of any vertex with out-edges can then not change, and
        the CPU's pulls, run alone, read none of its in-edges (Afforest's
        skip of the largest component, for label propagation: its vertices
        hold the least label).  A user program's declaration is checked at
        the end of such a run (one full pull must change nothing).  Default
        False.
    float32_gather_tolerance : float or None
        Declares the least run tolerance at which the CPU may hold the
        gathers it computes once per source vertex (a source-side gather,
        :func:`garaphpy.scheduler.decisions.precompute_source_gathers`) in
        float32, half the bytes read per edge: rounding each gather to
        float32 must move a converged run's result, as the program's
        verifier measures it, by less than such a tolerance.  Only for an
        ``add`` sum of floats; the CPU alone takes it where the run's
        tolerance is at least this
        (:func:`garaphpy.scheduler.decisions.float32_contributions`).
        PageRank derives its bound from its damping.  Default None: never.
    max_iterations : int
        Default iteration limit.
    initially_active : {"all", "sources"}
        Which vertices are active before the first iteration.
    needs_weights, needs_undirected, needs_sources : bool
        What the program requires of the graph and of the run.
    weight_domain : {"any", "nonnegative", "positive"}
        The edge values the program is correct for (default ``"any"``).  A
        run on a store holding a value outside it is refused with the file
        and line (or byte offset) of the input's first such edge: SSSP and
        SSWP declare ``"nonnegative"`` (a negative weight gives wrong
        distances, a negative cycle never converges), HS and CS
        ``"positive"``.  The store records where its first negative and
        first non-positive value came from (its summary).
    run_until_limit : bool
        True for fixed-iteration programs: running all ``max_iterations``
        is success, not non-convergence.
    tolerance : float or None
        When set, the run also stops (converged) once the L1 change of the
        values in an iteration, sum |new - old|, falls below it.
    fixed_point : bool
        Declares that the answer is the exact fixed point the run reaches
        when no vertex is active (SSSP, BFS, CC, SSWP): an L1 change below
        any tolerance can still leave vertices to update, so such a run
        stops only when nothing is active, and a tolerance given to it is
        ignored with a :class:`ToleranceIgnoredWarning`
        (:func:`run_tolerance`).  Needs ``tolerance = None``.  Default False.
    constants : dict
        Names (numbers) the functions may read, e.g. ``{"damping": 0.85}``;
        an instance may override them: ``PageRank(damping=0.9)``.
    aggregates : dict
        ``name -> (monoid, function)``: before every iteration the engine
        reduces ``function(...)`` over all vertices with the monoid (in
        float64); apply may ask for the result as a parameter of that name
        (PageRank's dangling mass).  A program whose apply reads one (or
        ``iteration``) pulls every iteration: the value may change at every
        vertex, not only where an in-neighbour's did, which is all that
        notify-pull recomputes (:func:`apply_reads_per_iteration`).
    value_name : str
        What a value is, as a column name (:meth:`Result.to_pandas
        <garaphpy.scheduler.records.Result.to_pandas>`, cuGraph's
        convention: ``"pagerank"``, ``"distance"``, ``"depth"``,
        ``"component"``...); ``"value"`` unless a program says.
    """

    value_dtype = np.float64
    value_name = "value"
    accum_dtype = None
    sum = "add"
    execution = "sync"
    cpu_execution = None
    final_once_set = False
    shortcut_labels = False
    value_priority = False
    apply_keeps_best = False
    gather_no_better_than_source = False
    float32_gather_tolerance = None
    max_iterations = 100
    initially_active = "all"
    needs_weights = False
    needs_undirected = False
    needs_sources = False
    weight_domain = "any"
    run_until_limit = False
    tolerance = None
    fixed_point = False
    constants: dict = {}
    aggregates: dict = {}

    #: Set by __init_subclass__: the checked functions, by role.
    functions: dict = {}

    def __init__(self, **constants):
        unknown = set(constants) - set(type(self).constants)
        if unknown:
            raise ProgramError(f"{type(self).__name__}: unknown constant(s) "
                               f"{', '.join(sorted(unknown))} (known: "
                               f"{', '.join(sorted(type(self).constants)) or 'none'})")
        for name, value in constants.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ProgramError(f"{type(self).__name__}: constant {name}={value!r} "
                                   "must be a number")
        self.constants = {**type(self).constants, **constants}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("abstract", False):
            return
        cls.functions = _check_program_class(cls)

    @classmethod
    def describe(cls) -> str:
        """One line: name, monoid, value type and defaults."""
        return (f"{cls.__name__}: sum={cls.sum}, value {np.dtype(cls.value_dtype).name}, "
                f"{default_execution(cls)}, at most {cls.max_iterations} iterations")

    def finalize(self, values: np.ndarray) -> np.ndarray:
        """Turn engine values into the values users see (e.g. unreachable -> -1).

        Runs on the host with numpy after the last iteration; identity by
        default.  ``values`` is the run's own copy of the engine's values:
        it may be changed in place and returned.
        """
        return values

    def verify(self, graph, result) -> "VerifyReport":  # pragma: no cover - interface
        """Check a result by a method independent of the engine (GAPBS-style)."""
        raise NotImplementedError(f"{type(self).__name__} has no verifier")


@dataclass
class VerifyReport:
    """What a verifier found.

    Attributes
    ----------
    ok : bool
    checked : str
        What was checked, in a few words.
    mismatches : int
        Vertices that failed the check.
    detail : str
        The first mismatches or the error measured.
    """

    ok: bool
    checked: str
    mismatches: int = 0
    detail: str = ""

    def __str__(self) -> str:
        verdict = "PASSED" if self.ok else "FAILED"
        text = f"verify: {verdict}: {self.checked}"
        if self.mismatches:
            text += f"; {self.mismatches} mismatches"
        if self.detail:
            text += f"; {self.detail}"
        return text


#: Checks a backend runs on every program class when it is defined, after the
#: checks here (see :func:`register_class_check`).
_CLASS_CHECKS: list = []


def register_class_check(check) -> None:
    """Have ``check(cls)`` run on every VertexProgram subclass as it is defined.

    A backend registers what it must refuse at definition rather than at
    launch: :mod:`garaphpy.kernels.cuda_program` registers its
    translatability check (the GPU runs the same functions), and the
    package's ``__init__`` imports it before any program class exists.
    The built-in programs (:mod:`garaphpy.programs`) are left out: their
    tests run the checks instead of every process that imports them.

    Parameters
    ----------
    check : callable
        Called with the class; raises :class:`ProgramError` to refuse it.
    """
    if check not in _CLASS_CHECKS:
        _CLASS_CHECKS.append(check)


class ToleranceIgnoredWarning(UserWarning):
    """A tolerance was given to a program whose answer is an exact fixed point
    (``fixed_point = True``: SSSP, BFS, CC, SSWP); the run ignores it."""


def run_tolerance(program, tolerance):
    """The L1 tolerance a run of ``program`` stops on, or None.

    ``tolerance`` is the run's argument (None: the program's own).  A
    ``fixed_point`` program stops only when no vertex is active: a small L1
    change there means vertices still to update, not an answer close to the
    right one (a synchronous SSSP under 1e-6 stopped with 28 of 31 distances
    wrong), so a tolerance given to it is ignored with a
    :class:`ToleranceIgnoredWarning`.

    Raises
    ------
    ConfigError
        ``tolerance`` is not a non-negative number.
    """
    from .errors import ConfigError

    if tolerance is not None and (isinstance(tolerance, bool)
                                  or not isinstance(tolerance, (int, float))
                                  or not tolerance >= 0):
        raise ConfigError(f"tolerance={tolerance!r}: expected a non-negative number")
    if program.fixed_point:
        if tolerance is not None:
            import warnings

            warnings.warn(f"tolerance={tolerance!r}: {type(program).__name__} computes an exact "
                          "fixed point and stops only when no vertex is active; ignoring the "
                          "tolerance", ToleranceIgnoredWarning,
                          stacklevel=caller_stacklevel())
        return None
    return program.tolerance if tolerance is None else tolerance


def default_execution(program) -> str:
    """The execution a run of ``program`` (class or instance) takes when none
    is asked for: its ``execution``, or the deprecated ``cpu_execution``
    where it declares one."""
    return program.cpu_execution or program.execution


def _check_program_class(cls) -> dict:
    """Check a VertexProgram subclass's declarations and functions."""
    where = f"{cls.__module__}.{cls.__qualname__}"
    if cls.sum not in MONOIDS:
        raise ProgramError(f"{where}: sum = {cls.sum!r}; expected one of {MONOIDS}")
    if cls.weight_domain not in WEIGHT_DOMAINS:
        raise ProgramError(f"{where}: weight_domain = {cls.weight_domain!r}; expected one of "
                           f"{WEIGHT_DOMAINS}")
    if cls.execution not in ("sync", "async"):
        raise ProgramError(f"{where}: execution = {cls.execution!r}; expected 'sync' or 'async'")
    if cls.cpu_execution not in (None, "sync", "async"):
        raise ProgramError(f"{where}: cpu_execution = {cls.cpu_execution!r}; expected None, "
                           "'sync' or 'async'")
    if cls.initially_active not in ("all", "sources"):
        raise ProgramError(f"{where}: initially_active = {cls.initially_active!r}; expected "
                           "'all' or 'sources'")
    for declaration in ("final_once_set", "shortcut_labels", "value_priority",
                        "apply_keeps_best", "gather_no_better_than_source"):
        declared = getattr(cls, declaration)
        if not isinstance(declared, bool):
            raise ProgramError(f"{where}: {declaration} = {declared!r}; expected True or False")
    if cls.final_once_set and cls.sum not in ("min", "max"):
        raise ProgramError(f"{where}: final_once_set = True needs sum 'min' or 'max' (a "
                           f"{cls.sum!r} sum reads every in-edge); got sum = {cls.sum!r}")
    if cls.final_once_set and cls.initially_active != "sources":
        raise ProgramError(f"{where}: final_once_set = True with initially_active = "
                           f"{cls.initially_active!r}: every vertex would be settled from the "
                           "start and none could change; expected 'sources'")
    if cls.__dict__.get("cpu_execution") is not None:     # where declared, not inherited
        warnings.warn(f"{where}: cpu_execution is deprecated; a program's execution now holds "
                      f"on every processor: declare execution = {cls.cpu_execution!r}",
                      DeprecationWarning, stacklevel=3)
    if cls.value_priority and (cls.sum not in ("min", "max")
                               or default_execution(cls) != "async"):
        raise ProgramError(f"{where}: value_priority = True needs sum 'min' or 'max' and "
                           "execution = 'async' (an order of updates that changes no "
                           f"value); got sum = {cls.sum!r}, execution = "
                           f"{default_execution(cls)!r}")
    if cls.value_priority and np.dtype(cls.value_dtype).kind not in "iuf":
        raise ProgramError(f"{where}: value_priority = True needs numeric values (buckets of "
                           f"values); got value_dtype = {np.dtype(cls.value_dtype).name}")
    if cls.gather_no_better_than_source and not cls.apply_keeps_best:
        raise ProgramError(f"{where}: gather_no_better_than_source = True needs "
                           "apply_keeps_best = True (a vertex as good as every source keeps "
                           "its value only if apply keeps the better)")
    if cls.apply_keeps_best and cls.sum not in ("min", "max"):
        raise ProgramError(f"{where}: apply_keeps_best = True needs sum 'min' or 'max' (the "
                           f"better of two); got sum = {cls.sum!r}")
    try:
        value = np.dtype(cls.value_dtype)
        accum = np.dtype(cls.accum_dtype) if cls.accum_dtype is not None else value
    except TypeError as error:
        raise ProgramError(f"{where}: value_dtype/accum_dtype: {error}") from None
    for name, dtype in (("value_dtype", value), ("accum_dtype", accum)):
        if dtype.kind not in "biuf" or dtype.itemsize > 8:
            raise ProgramError(f"{where}: {name} = {dtype}; expected a numeric dtype")
    bound = cls.float32_gather_tolerance
    if bound is not None and (isinstance(bound, bool) or not isinstance(bound, (int, float))
                              or not 0 < bound < math.inf):
        raise ProgramError(f"{where}: float32_gather_tolerance = {bound!r}; expected None or "
                           "a positive number")
    if bound is not None and (cls.sum != "add" or accum.kind != "f"):
        raise ProgramError(f"{where}: float32_gather_tolerance needs an 'add' sum of floats "
                           "(rounding a min or max, or integers, is not bounded by a "
                           f"tolerance); got sum = {cls.sum!r}, accum_dtype = {accum.name}")
    if not isinstance(cls.max_iterations, int) or cls.max_iterations < 1:
        raise ProgramError(f"{where}: max_iterations must be a positive integer")
    if cls.fixed_point and cls.tolerance is not None:
        raise ProgramError(f"{where}: fixed_point = True stops only when no vertex is active; "
                           f"tolerance = {cls.tolerance!r} contradicts it (set it to None)")
    for name, constant in cls.constants.items():
        if not name.isidentifier() or isinstance(constant, bool) or \
                not isinstance(constant, (int, float)):
            raise ProgramError(f"{where}: constant {name!r} = {constant!r}; constants are "
                               "numbers with identifier names")
    reserved = set().union(*PARAMETERS.values()) | ALLOWED_CALLS | {"math"}
    names = set(cls.constants) | set(cls.aggregates)
    clash = names & reserved
    if clash:
        raise ProgramError(f"{where}: constant or aggregate names {sorted(clash)} clash with "
                           "parameter or function names")
    functions = {}
    for role in _ROLES:
        function = cls.__dict__.get(role)
        if function is None:
            function = next((getattr(base, role) for base in cls.__mro__[1:]
                             if role in base.__dict__ and base is not VertexProgram), None)
        if function is None:
            raise ProgramError(f"{where}: missing function {role}()")
        aggregate_parameters = tuple(cls.aggregates) if role == "apply" else ()
        functions[role] = check_function(function, role, set(cls.constants),
                                         aggregate_parameters)
    for name, declaration in cls.aggregates.items():
        if not (isinstance(declaration, tuple) and len(declaration) == 2
                and declaration[0] in MONOIDS):
            raise ProgramError(f"{where}: aggregate {name!r} must be (monoid, function) with "
                               f"monoid in {MONOIDS}")
        functions[f"aggregate:{name}"] = check_function(declaration[1], "aggregate",
                                                        set(cls.constants))
    if cls.shortcut_labels:
        _check_shortcut_declaration(cls, where, value, functions)
    if cls.apply_keeps_best:
        read = set(functions["gather"].parameters) - KEEPS_BEST_GATHER_PARAMETERS
        if read:
            raise ProgramError(
                f"{where}: apply_keeps_best = True needs a gather of the source side and the "
                f"edge alone (got gather{tuple(functions['gather'].parameters)}, which reads "
                f"{sorted(read)})")
    cls.functions = functions
    _check_constant_results(cls, functions, value, accum)
    # the built-in programs pass them (tests/test_program_import.py): checked at
    # each import, they cost every process seconds before its first line
    if not cls.__module__.startswith(f"{__package__}.programs."):
        for check in _CLASS_CHECKS:
            check(cls)
    return functions


#: What a gather may read under ``apply_keeps_best``: the source side and the edge.
KEEPS_BEST_GATHER_PARAMETERS = frozenset({"src", "src_out_degree", "src_in_degree", "weight"})


def _check_shortcut_declaration(cls, where: str, value: np.dtype, functions: dict) -> None:
    """What ``shortcut_labels = True`` needs of the class itself (the values
    and functions are probed at the start of a run)."""
    needs = []
    if cls.sum != "min":
        needs.append(f"sum 'min' (got {cls.sum!r})")
    if value.kind not in "iu":
        needs.append(f"integer values (got {value})")
    if cls.final_once_set:
        needs.append("final_once_set = False (a shortcut changes a vertex after it was set)")
    if tuple(functions["gather"].parameters) != ("src",):
        needs.append("a gather of the source's label alone, gather(src) "
                     f"(got gather{tuple(functions['gather'].parameters)})")
    if tuple(functions["init"].parameters) != ("vertex",):
        needs.append("an init of the vertex's own id, init(vertex) "
                     f"(got init{tuple(functions['init'].parameters)})")
    if needs:
        raise ProgramError(f"{where}: shortcut_labels = True declares min-label propagation "
                           f"over vertex ids, which needs {'; '.join(needs)}")


def _constant_value(node: ast.AST, constants: dict):
    """The number a constant expression evaluates to, or None when it is not one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
            and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id == "math" and node.attr in ("inf", "nan", "pi", "e"):
        return getattr(math, node.attr)
    if isinstance(node, ast.Name) and node.id in constants:
        return constants[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = _constant_value(node.operand, constants)
        if operand is None:
            return None
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp):
        left = _constant_value(node.left, constants)
        right = _constant_value(node.right, constants)
        if left is None or right is None:
            return None
        operators = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
                     ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b,
                     ast.Pow: lambda a, b: a ** b}
        operator = operators.get(type(node.op))
        try:
            return None if operator is None else operator(left, right)
        except (ArithmeticError, ValueError):
            return None
    return None


def _result_leaves(node: ast.AST, assignments: dict, seen: frozenset = frozenset()):
    """The expressions a returned expression may evaluate to: both arms of a
    conditional, and every value assigned to a returned local name."""
    if isinstance(node, ast.IfExp):
        yield from _result_leaves(node.body, assignments, seen)
        yield from _result_leaves(node.orelse, assignments, seen)
    elif isinstance(node, ast.Name) and node.id in assignments and node.id not in seen:
        for value in assignments[node.id]:
            yield from _result_leaves(value, assignments, seen | {node.id})
    else:
        yield node


def _check_constant_results(cls, functions: dict, value_dtype: np.dtype,
                            accum_dtype: np.dtype) -> None:
    """Refuse constant results that an integer value or accumulator dtype cannot hold."""
    constants = dict(cls.constants)
    for role, dtype in (("init", value_dtype), ("apply", value_dtype), ("gather", accum_dtype)):
        if dtype.kind not in "iu":
            continue
        function = functions[role]
        assignments: dict = {}
        for node in ast.walk(function.tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    assignments.setdefault(target.id, []).append(node.value)
        for node in ast.walk(function.tree):
            if not isinstance(node, ast.Return) or node.value is None:
                continue
            for leaf in _result_leaves(node.value, assignments):
                number = _constant_value(leaf, constants)
                if number is not None and not fits_dtype(number, dtype):
                    raise _line_error(function.name, function.filename,
                                      getattr(leaf, "lineno", node.lineno),
                                      f"{role} returns {ast.unparse(leaf)} = {number!r}, which "
                                      f"{dtype.name} values cannot hold (use a float "
                                      f"value_dtype, or a marker with room for gather's "
                                      f"arithmetic such as {marker_with_headroom(dtype)}: "
                                      f"{np.iinfo(dtype).max} + 1 wraps to "
                                      f"{np.iinfo(dtype).min})")
                if role != "gather" and number is not None \
                        and not _has_headroom(number, dtype):
                    _refuse_marker_that_wraps(function, leaf, node, number, dtype,
                                              functions["gather"])


def marker_with_headroom(dtype) -> int:
    """The largest "unreached" marker an integer program can add to without wrapping
    for any addend up to the same size: half the dtype's range (2**62 for int64)."""
    return (int(np.iinfo(dtype).max) + 1) // 2


def _has_headroom(number, dtype) -> bool:
    bound = marker_with_headroom(dtype)
    return -bound <= number <= bound


def _refuse_marker_that_wraps(function, leaf, node, number, dtype, gather) -> None:
    """Refuse a marker near the end of an integer range that gather's unguarded
    arithmetic on ``src`` takes past it: ``src + 1`` on 2**63 - 1 gives -2**63 on
    the CPU (numba) and the GPU (two's complement C++) alike, a wrong answer with
    no error.  A gather that compares anything is taken to guard its arithmetic."""
    tree = gather.tree
    if any(isinstance(n, (ast.Compare, ast.If, ast.IfExp)) for n in ast.walk(tree)):
        return
    arithmetic = next((n for n in ast.walk(tree) if isinstance(n, ast.BinOp)
                       and isinstance(n.op, (ast.Add, ast.Sub, ast.Mult, ast.LShift, ast.Pow))
                       and any(isinstance(side, ast.Name) and side.id == "src"
                               for side in (n.left, n.right))), None)
    if arithmetic is None:
        return
    raise _line_error(function.name, function.filename, getattr(leaf, "lineno", node.lineno),
                      f"{function.name} returns {ast.unparse(leaf)} = {number!r}, and gather "
                      f"computes {ast.unparse(arithmetic)} on it, which wraps around in "
                      f"{dtype.name} ({np.iinfo(dtype).max} + 1 is {np.iinfo(dtype).min}); use "
                      f"a marker with headroom such as {marker_with_headroom(dtype)} "
                      f"(2**{marker_with_headroom(dtype).bit_length() - 1}), or a float "
                      "value_dtype")


def fits_dtype(number, dtype) -> bool:
    """Whether ``number`` converts to integer ``dtype`` without wrapping or undefined results."""
    info = np.iinfo(dtype)
    if isinstance(number, float):
        # the range's ends as floats: [min, max + 1), exact powers of two
        return math.isfinite(number) and float(info.min) <= number < float(info.max) + 1.0
    return info.min <= number <= info.max


def check_initial_values(program, find_out_of_range) -> None:
    """Refuse a run whose ``init`` gives a vertex a value its integer dtype cannot hold.

    Parameters
    ----------
    program : VertexProgram
    find_out_of_range : callable
        ``() -> (vertex, value)`` of the first vertex whose unconverted init
        value is out of range, or None (computed by the CPU kernels).

    Raises
    ------
    ProgramError
        Naming init's file and line, the vertex and the value.
    """
    found = find_out_of_range()
    if found is None:
        return
    vertex, number = found
    function = type(program).functions["init"]
    dtype = np.dtype(type(program).value_dtype)
    raise _line_error(function.name, function.filename, function.first_line,
                      f"init gives vertex {vertex} the value {number!r}, which {dtype.name} "
                      "values cannot hold (use a float value_dtype, or a value in range)")


def apply_reads_per_iteration(program) -> list[str]:
    """What ``program``'s apply reads that changes every iteration: its
    aggregates and the iteration number (such a program's notify-pull would
    not give the pull's values:
    :func:`garaphpy.scheduler.decisions.notify_pull_computes_pull`)."""
    return [name for name in type(program).functions["apply"].parameters
            if name in program.aggregates or name == "iteration"]


def activate_is_change(program) -> bool:
    """Whether ``program``'s activate, given the better of the old value and
    another (``apply_keeps_best``: the sum's ``min`` or ``max`` of the two),
    is exactly "the value changed", on probe values of its value type: then
    a vertex changed by several gathers in turn activates once, whichever
    change comes first (the GPU's fused push:
    :func:`garaphpy.scheduler.decisions.gpu_fused_push`).  An activate that
    asks for more (a change above a threshold) or fails on the probes does
    not qualify."""
    cls = type(program)
    if cls.sum not in ("min", "max"):
        return False
    best = min if cls.sum == "min" else max
    dtype = np.dtype(cls.value_dtype)
    if dtype.kind == "f":
        probes = [0.0, 1.0, 1.5, -2.0, 1e-300, 1e300, math.inf, -math.inf]
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        probes = [v for v in (0, 1, 2, -5, 1 << 40, info.max - 1, info.max, info.min)
                  if info.min <= v <= info.max]
    else:
        return False
    values = np.array(probes, dtype)
    try:
        return all(bool(cls.activate(best(old, other), old)) == (best(old, other) != old)
                   for old in values for other in values)
    except Exception:       # an activate beyond plain Python on these values
        return False
