"""numba's disk cache keyed on a whole package (garaphpy._numba_cache).

numba keys a cached function on its own file's text: a cached caller whose
callee in another file changed still runs the old callee.  A package keyed
with :func:`key_on_package` compiles its functions again after a change to
any of its files.  Each run is a fresh process, as a user's next run is.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import garaphpy
from garaphpy import _numba_cache

REPOSITORY = Path(garaphpy.__file__).resolve().parent.parent

RUN = """
import sys
sys.path.insert(0, {root!r})
if {keyed!r}:
    from garaphpy._numba_cache import key_on_package
    assert key_on_package({package!r})
from {name}.caller import caller
print(caller())
"""


def write_package(root: Path, name: str, returns: int) -> Path:
    """A package whose cached ``caller`` calls a cached ``callee`` in another file."""
    package = root / name
    package.mkdir(exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "callee.py").write_text(textwrap.dedent(f"""
        import numba

        @numba.njit(cache=True)
        def callee():
            return {returns}
        """))
    (package / "caller.py").write_text(textwrap.dedent("""
        import numba

        from .callee import callee

        @numba.njit(cache=True)
        def caller():
            return callee()
        """))
    return package


def run_caller(root: Path, name: str, keyed: bool) -> int:
    environment = {key: value for key, value in os.environ.items()
                   if key != "NUMBA_CACHE_DIR"}
    environment["PYTHONPATH"] = str(REPOSITORY)
    script = RUN.format(root=str(root), keyed=keyed, package=str(root / name), name=name)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=environment, timeout=300, check=True)
    return int(done.stdout.split()[-1])


@pytest.mark.parametrize("keyed", [False, True])
def test_a_changed_callee_reaches_its_cached_caller_only_when_keyed(tmp_path, keyed):
    name = f"package_{'keyed' if keyed else 'plain'}"
    write_package(tmp_path, name, 1)
    assert run_caller(tmp_path, name, keyed) == 1
    assert list((tmp_path / name / "__pycache__").glob("caller.*.nbi"))     # cached
    write_package(tmp_path, name, 2)
    # numba alone runs the cached caller with the callee it was compiled against
    assert run_caller(tmp_path, name, keyed) == (2 if keyed else 1)


def test_garaphpy_keys_its_own_kernels():
    from numba.core import caching

    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl")
    assert all(locator.__name__.startswith("PackageKeyed")
               for locator in impl._locator_classes)
    kernel_file = str(Path(garaphpy.__file__).parent / "kernels" / "cpu" / "pull.py")
    digest = _numba_cache._digest_of(kernel_file)
    assert digest == _numba_cache._package_digest(Path(garaphpy.__file__).resolve().parent)
    assert _numba_cache._digest_of(str(REPOSITORY / "tests" / "helpers.py")) is None
