"""The engines meet through public interfaces only.

Every module of garaphpy/scheduler/ is read with :mod:`ast`; an attribute
whose name starts with one underscore may be read only on ``self`` or
``cls`` (the object's own insides).  ``engine._pinned``, ``policy._smooth``
or ``module._helper`` anywhere else fails the test with its file and line.

The drivers (driver.py, hybrid_driver.py, hybrid_batches.py, run_choice.py)
are held further, to an allow-list: every name they use on a processor (``self.cpu``,
``self.gpu``, ``self.alone``, ``self.alone_cpu`` or a local bound to one) must be a name of the
:class:`~garaphpy.scheduler.processors.Processor` protocol, written out here
and checked equal to the protocol's, which both processors implement.
``self.gpu.engine.plan`` or ``cpu.state.frontier`` in a driver fails.
"""

from __future__ import annotations

import ast
from pathlib import Path

import garaphpy

SCHEDULER = Path(garaphpy.__file__).parent / "scheduler"


def private_accesses(source: str, filename: str = "<string>") -> list[str]:
    """``file:line: expression`` of every ``x._name`` with ``x`` not self/cls."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        found.append(f"{filename}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_check_finds_a_private_access():
    code = ("class A:\n"
            "    def f(self, other):\n"
            "        self._mine = other._theirs\n"
            "        return self.gpu._pinned, type(self).__name__\n")
    assert [line.split(": ")[1] for line in private_accesses(code)] == \
        ["other._theirs", "self.gpu._pinned"]


def test_no_scheduler_module_reads_another_objects_private_attribute():
    found = []
    for path in sorted(SCHEDULER.rglob("*.py")):
        found += private_accesses(path.read_text(), path.name)
    assert not found, "private attributes read across objects:\n" + "\n".join(found)


# -- the drivers speak the processor protocol alone -----------------------------------------
#: The modules of the drivers, held to :data:`~garaphpy.scheduler.processors.PROTOCOL_NAMES`.
DRIVER_MODULES = ("driver.py", "hybrid_driver.py", "hybrid_batches.py", "run_choice.py")

#: ``self.<name>`` of a driver that holds a processor.
PROCESSOR_ATTRIBUTES = {"cpu", "gpu", "alone", "alone_cpu"}

#: What the drivers may use on a processor, written out: a name added to the
#: protocol is added here too, on purpose.
ALLOWED = {
    "name", "mode", "page_done", "num_edges", "rho", "page_source", "synchronous",
    "threads", "pages", "has_aggregates", "early_exit", "notify_pull", "settles_by_push",
    "gathers_precomputed", "pages_in_flight", "kept_pages", "page_bus_bytes", "bus_rate",
    "sparse_edge_seconds", "on_device", "warm_threads", "probe", "begin", "process",
    "finish", "combine", "decide", "aggregates", "iteration_aggregates", "aggregates_here",
    "iterate", "takes_batch", "iterates_sparse", "iterate_batch", "refresh_settled",
    "num_active", "active_out_edges", "pull_fraction", "values_to_host",
    "values_between_pages", "wait_pages", "checkpoint_state", "restore_checkpoint", "close",
}


def _is_processor(node: ast.AST, local_processors: set[str]) -> bool:
    """``self.cpu`` (a driver's processor attribute) or a local name bound to one."""
    if isinstance(node, ast.Attribute):
        return (isinstance(node.value, ast.Name) and node.value.id == "self"
                and node.attr in PROCESSOR_ATTRIBUTES)
    return isinstance(node, ast.Name) and node.id in local_processors


def _processor_locals(function: ast.AST) -> set[str]:
    """Names a function binds to a processor: ``cpu = self.cpu``, ``cpu, gpu =
    self.cpu, self.gpu``, and parameters named after the driver's processors."""
    names = {arg.arg for arg in function.args.args if arg.arg in PROCESSOR_ATTRIBUTES}
    for node in ast.walk(function):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs = ([(target, node.value)] if not isinstance(target, ast.Tuple) else
                     zip(target.elts, node.value.elts) if isinstance(node.value, ast.Tuple)
                     else [])
            for name, value in pairs:
                if isinstance(name, ast.Name) and _is_processor(value, set()):
                    names.add(name.id)
    return names


def names_used_on_processors(source: str, filename: str = "<string>") -> list[tuple[str, str]]:
    """``(file:line: expression, name)`` of every attribute a driver's code reads
    or calls on one of its processors."""
    found = []
    for function in ast.walk(ast.parse(source, filename)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        local_processors = _processor_locals(function)
        for node in ast.walk(function):
            if isinstance(node, ast.Attribute) and _is_processor(node.value, local_processors):
                found.append((f"{filename}:{node.lineno}: {ast.unparse(node)}", node.attr))
    return found


def test_the_allow_list_is_the_protocol_and_both_processors_implement_it():
    from garaphpy.scheduler.processors import PROTOCOL_NAMES, CpuProcessor, GpuProcessor

    assert PROTOCOL_NAMES == ALLOWED
    for processor in (CpuProcessor, GpuProcessor):
        missing = [name for name in ALLOWED
                   if not hasattr(processor, name)]
        assert not missing, f"{processor.__name__} lacks {missing}"


def test_the_check_finds_a_name_outside_the_protocol():
    code = ("class D:\n"
            "    def __init__(self, cpu, gpu):\n"
            "        self.kept = gpu.plan.resident\n"
            "    def f(self):\n"
            "        cpu, gpu = self.cpu, self.gpu\n"
            "        processor = self.alone\n"
            "        self.cpu.iterate(1, 2, 3)\n"
            "        return gpu.engine.active, cpu.state.values, processor.kept_pages()\n")
    names = [name for _, name in names_used_on_processors(code)]
    assert sorted(set(names) - ALLOWED) == ["engine", "plan", "state"]
    assert "iterate" in names and "kept_pages" in names


def test_the_drivers_use_only_the_processor_protocol():
    found = []
    for module in DRIVER_MODULES:
        path = SCHEDULER / module
        found += [where for where, name in names_used_on_processors(path.read_text(), module)
                  if name not in ALLOWED]
    assert not found, "drivers reach past the processor protocol:\n" + "\n".join(found)
