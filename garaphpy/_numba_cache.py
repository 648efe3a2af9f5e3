"""numba's disk cache of garaphpy's kernels, keyed on the whole package.

The CPU kernels (Garaph section 4) are numba functions compiled once and
kept on disk (``cache=True``).  numba keys a cached function on the text of
its own source file only, not on the files of the functions it calls
(numba/numba#8396): a kernel whose callee in another module changed loads
the machine code compiled against the old callee.  A checkout updated by
``git pull`` then runs stale code, which can crash in the first kernel
call (it did: a segmentation fault in a notify-pull warm-up, cured by
emptying the cache) or compute with the old definitions.

:func:`key_on_package` makes every cached function of a package depend on
the text of all of that package's ``.py`` files: any change to any of them
makes numba compile its functions again, once.  garaphpy keys itself on
import, before a kernel module is imported.  Program modules kept in the
program cache are keyed by :func:`garaphpy.kernels.cpu_program.program_key`
(which hashes the kernel files they call) and are left as they are.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

_KEYED_PACKAGES: dict[Path, str | None] = {}


def _package_digest(package: Path) -> str:
    """SHA-256 over the relative path and text of every ``.py`` file under ``package``."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@functools.lru_cache(maxsize=None)
def _digest_of(py_file: str) -> str | None:
    """The digest of the keyed package holding ``py_file`` (None: none does),
    computed once per package and process."""
    path = Path(py_file).resolve()
    for package, digest in _KEYED_PACKAGES.items():
        if path.is_relative_to(package):
            if digest is None:
                digest = _KEYED_PACKAGES[package] = _package_digest(package)
            return digest
    return None


def _keyed(locator_class: type) -> type:
    """``locator_class`` whose source stamp also holds the keyed package's digest."""

    class PackageKeyedLocator(locator_class):
        def get_source_stamp(self):
            stamp = super().get_source_stamp()
            py_file = getattr(self, "_py_file", None)
            digest = _digest_of(py_file) if py_file else None
            return stamp if digest is None else (stamp, digest)

    PackageKeyedLocator.__name__ = f"PackageKeyed{locator_class.__name__}"
    PackageKeyedLocator.__qualname__ = PackageKeyedLocator.__name__
    return PackageKeyedLocator


def key_on_package(package: str | Path) -> bool:
    """Key numba's disk cache of every function defined under ``package`` on
    the text of all of its ``.py`` files (functions decorated after this call).

    Returns
    -------
    bool
        False where this numba keeps its cache locators elsewhere (nothing
        changed; each function is then keyed on its own file, numba's way).
    """
    try:
        from numba.core import caching
    except ImportError:         # pragma: no cover - numba is a dependency
        return False
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    locators = getattr(impl, "_locator_classes", None)
    if not isinstance(locators, list):
        return False
    _KEYED_PACKAGES.setdefault(Path(package).resolve(), None)
    _digest_of.cache_clear()
    if not any(locator.__name__.startswith("PackageKeyed") for locator in locators):
        impl._locator_classes = [_keyed(locator) for locator in locators]
    return True


key_on_package(Path(__file__).parent)
