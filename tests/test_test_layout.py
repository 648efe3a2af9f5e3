"""The test suite's own layout: test files share code through tests/helpers.py
and tests/conftest.py only, never by importing one another.

Every file under tests/ is read with :mod:`ast`, function-level imports
included.  A test file importing another one runs the other's module-level
code in its own process and ties the two files' edits together; a file's own
``sys.path`` edit makes its imports depend on where it lies (``tests/`` is on
the path once, through the ``pythonpath`` option in setup.cfg).
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from helpers import FAST_TESTS

TESTS = Path(__file__).resolve().parent
PYTHON_FILES = sorted(TESTS.rglob("*.py"))


def imported_modules(tree: ast.AST) -> set[str]:
    """The top-level names of every module ``tree`` imports."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def is_test_module(name: str) -> bool:
    return name.startswith("test_") or name == "conftest"


def sys_path_edits(tree: ast.AST) -> list[int]:
    """Lines that call ``sys.path.insert`` or ``sys.path.append``."""
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("insert", "append")
            and ast.unparse(node.func.value) == "sys.path"]


@pytest.mark.parametrize("path", PYTHON_FILES, ids=lambda path: str(path.relative_to(TESTS)))
def test_no_file_imports_a_test_file(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    wrong = sorted(name for name in imported_modules(tree) if is_test_module(name))
    assert not wrong, (f"{path.relative_to(TESTS)} imports {', '.join(wrong)}: move what is "
                       f"shared to tests/helpers.py (fixtures to tests/conftest.py)")
    assert not sys_path_edits(tree), (f"{path.relative_to(TESTS)} edits sys.path at lines "
                                      f"{sys_path_edits(tree)}: tests/ is on it already")


def test_the_checks_see_a_cross_import_and_a_path_edit():
    tree = ast.parse("import sys\nsys.path.insert(0, 'x')\n"
                     "def f():\n    from test_driver import built_drivers\n    import conftest\n")
    assert sorted(filter(is_test_module, imported_modules(tree))) == ["conftest", "test_driver"]
    assert sys_path_edits(tree) == [2]
    assert not sys_path_edits(ast.parse("code = 'sys.path.insert(0, REPO)'"))


def test_test_file_names_are_unique():
    """Test files are imported by their base name (no __init__.py), so two of
    the same name in different folders would clash."""
    counts = Counter(path.name for path in PYTHON_FILES if path.name.startswith("test_"))
    assert [name for name, count in counts.items() if count > 1] == []


def test_no_test_folder_is_a_package():
    assert list(TESTS.rglob("__init__.py")) == []


def test_every_fast_entry_names_a_test_file_or_function():
    """tests/fast.txt names what exists: a renamed or deleted test drops out
    of the fast loop with an error here, not silently."""
    wrong = []
    for entry in sorted(FAST_TESTS):
        file, _, function = entry.partition("::")
        path = TESTS.parent / file
        if not (path.is_file() and path.name.startswith("test_")):
            wrong.append(entry)
        elif function:
            tree = ast.parse(path.read_text(), filename=str(path))
            defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
            if function not in defined:
                wrong.append(entry)
    assert wrong == []
