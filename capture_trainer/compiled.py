"""How the servo tick's kernels are compiled: numba, cached on disk, without reference counting.

Numba counts references to the arrays a compiled function passes around (its runtime,
NRT): calls to ``NRT_incref``/``NRT_decref`` around calls and loops, each a call even on
the untracked views the tick works in (:func:`robot._kernels._untracked`, the fused
tick's table), and, for every array argument from Python, a ``MemInfo`` allocated and
freed. The tick's kernels never allocate (their scratch is an arena the caller owns)
and never hand an array back to Python, so they need none of it: :func:`kernel`
compiles them with the runtime off (numba's ``_nrt=False``, the option its own test suite
compiles with). Measured on the 7-joint arm's controller (the 20,500 recorded calls of a
bench trial replayed in one compiled loop): 10.9 µs a call with the counting, 8.7 µs
without, outputs equal to the bit.

A kernel compiled this way cannot allocate: ``np.empty`` inside it is a typing error at
its first compilation (the public wrappers that allocate their scratch stay plain
``njit``). Nor may it return an array it made (a view of an arena or of an address)
unless it is inlined (``inline="always"``), as the arena's and the table's view makers
are.
"""

from __future__ import annotations

from typing import Any

from numba import njit


def kernel(function: Any = None, /, **options: Any) -> Any:
    """``@kernel`` or ``@kernel(**options)``: ``njit(cache=True, _nrt=False, **options)``
    (module docstring)."""
    settings: dict[str, Any] = {"cache": True, "_nrt": False, **options}  # _nrt: not in numba's stubs
    decorate = njit(**settings)
    return decorate if function is None else decorate(function)
