"""The engines meet through public interfaces only (no engine reads
another's private attribute).

Every module of garaphpy/scheduler/ is read with :mod:`ast`; an attribute
whose name starts with one underscore may be read only on ``self`` or
``cls`` (the object's own insides).  ``engine._pinned``, ``policy._smooth``
or ``module._helper`` anywhere else fails the test with its file and line.
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
