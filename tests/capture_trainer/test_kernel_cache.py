"""The on-disk kernel cache goes stale with the modules a kernel calls into
(capture_trainer.kernel_cache): numba alone stamps a cached kernel with its own file."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

CALLEE = """
from numba import njit

@njit(cache=True)
def f():
    return {value}
"""

CALLER = """
from numba import njit
from kpkg import callee
{declare}

@njit(cache=True)
def g():
    return callee.f() * 10
"""


def _package(root: Path, declare: bool) -> None:
    package = root / "kpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "callee.py").write_text(textwrap.dedent(CALLEE.format(value=1)))
    line = ("from capture_trainer.kernel_cache import depends_on\ndepends_on(__file__, callee)"
            if declare else "")
    (package / "caller.py").write_text(textwrap.dedent(CALLER.format(declare=line)))


def _call(root: Path) -> tuple[int, int]:
    """g() in a fresh process, and how many of its overloads came from the cache."""
    code = "from kpkg import caller; v = caller.g(); print(v, sum(caller.g.stats.cache_hits.values()))"
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": f"{root}:{Path(__file__).resolve().parents[2]}", "PATH": ""})
    value, hits = out.stdout.split()
    return int(value), int(hits)


def test_a_change_to_a_called_module_alone_recompiles_the_caller(tmp_path: Path) -> None:
    """With the dependency declared, the caller's cache is used while nothing changed and
    dropped when only the callee changed (numba 0.68 alone serves the stale machine code
    here: 10 after the change, measured)."""
    _package(tmp_path, declare=True)
    assert _call(tmp_path) == (10, 0)  # compiled and cached
    assert _call(tmp_path) == (10, 1)  # from the cache
    callee = tmp_path / "kpkg" / "callee.py"
    callee.write_text(callee.read_text().replace("return 1", "return 2"))
    value, _ = _call(tmp_path)
    assert value == 20
