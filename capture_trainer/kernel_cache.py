"""Numba's on-disk cache for kernels that call the kernels of other modules.

Numba stamps a cached kernel with the content of the one source file that defines it.
A kernel that calls a compiled function of *another* module has that function compiled
into it, so after a change to the other module alone the stale machine code would be
loaded from the cache (measured with numba 0.68: ``g`` calling ``a.f`` kept returning
the old ``f``'s value). :func:`depends_on` declares a module's kernel dependencies; the
cache of every kernel defined in that module is then stamped with the content of the
module *and* of its dependencies, so a change to any of them compiles it again.

Call it in the composing module before its ``@njit(cache=True)`` decorators run.
"""

from __future__ import annotations

import hashlib
import os
from types import ModuleType
from typing import Any

#: source file (real path) -> the source files its kernels' cache stamps also cover
_DEPENDENCIES: dict[str, tuple[str, ...]] = {}
_LOCATOR: list[type] = []


def depends_on(source_file: str, *modules: ModuleType) -> None:
    """Stamp the cached kernels defined in ``source_file`` with ``modules``' sources too.

    Raises:
        ValueError: a module without a source file.
    """
    paths = []
    for module in modules:
        if not getattr(module, "__file__", None):
            raise ValueError(f"the kernel module {module.__name__} has no source file")
        paths.append(os.path.realpath(str(module.__file__)))
    _DEPENDENCIES[os.path.realpath(source_file)] = tuple(paths)
    _install()


def source_stamp(source_file: str) -> bytes:
    """The cache stamp of ``source_file``'s kernels: a SHA-256 over its own content and
    its declared dependencies' (in the declared order)."""
    path = os.path.realpath(source_file)
    digest = hashlib.sha256()
    for part in (path, *_DEPENDENCIES.get(path, ())):
        with open(part, "rb") as handle:
            digest.update(hashlib.sha256(handle.read()).digest())
    return digest.digest()


def _install() -> None:
    """Put the dependency-aware locator first in numba's list (once)."""
    if _LOCATOR:
        return
    from numba.core import caching, config

    base: Any = caching.UserProvidedCacheLocator if getattr(config, "CACHE_DIR", "") else caching.InTreeCacheLocator

    class DependentSourceLocator(base):
        """numba's own locator for the file, with :func:`source_stamp` as the stamp."""

        def get_source_stamp(self) -> bytes:
            return source_stamp(self._py_file)

        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Any:
            if os.path.realpath(py_file) not in _DEPENDENCIES:
                return None
            return super().from_function(py_func, py_file)

    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl")  # the name before numba 0.60
    impl._locator_classes.insert(0, DependentSourceLocator)
    _LOCATOR.append(DependentSourceLocator)
