"""The tick's kernels compile without numba's reference counting (capture_trainer.compiled)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit
from numba.core.errors import TypingError
from numba.core.registry import CPUDispatcher

from capture_trainer.compiled import kernel
from guidance import _kernels as guidance_kernels
from haptics import _kernels as haptics_kernels
from robot import _kernels as robot_kernels
from trials import _fused_kernels as fused_kernels

#: the public wrappers that allocate their own scratch (robot._kernels): plain njit
ALLOCATING = {"base_torque", "dynamics_terms", "floating_base_maps", "forward_kinematics", "jjt_of", "link_points",
              "sigma_ascent", "solve_ik"}


def _dot(a, b):
    total = 0.0
    for i in range(a.shape[0]):
        total += a[i] * b[i]
    return total


def _composed(inner):
    def outer(x, rows):
        total = 0.0
        for r in range(rows):
            total += inner(x[r], x[(r + 1) % rows])
        return total
    return outer


@pytest.mark.parametrize("counted", [False, True])
def test_a_kernel_passes_arrays_around_without_reference_counting(counted):
    """The same composition of two kernels over row views, compiled both ways: the same
    sum, and machine code that calls the runtime's reference counting only with it on
    (the check can fail: the plain njit build must show the calls)."""
    decorate = njit if counted else kernel(cache=False)
    outer = decorate(_composed(decorate(_dot)))
    x = np.arange(12.0).reshape(4, 3)
    assert outer(x, 4) == pytest.approx(sum(x[r] @ x[(r + 1) % 4] for r in range(4)))
    assembly = outer.inspect_asm(outer.signatures[0])
    assert ("NRT_incref" in assembly) == counted


def test_a_kernel_may_not_allocate():
    """np.empty needs the runtime: a kernel refuses it when first compiled."""
    @kernel(cache=False)
    def allocates(n):
        return np.empty(n)

    with pytest.raises(TypingError):
        allocates(3)


@pytest.mark.parametrize("module", [robot_kernels, haptics_kernels, guidance_kernels, fused_kernels],
                         ids=lambda module: module.__name__)
def test_every_tick_kernel_is_compiled_without_the_runtime(module):
    """A new kernel in the tick's modules declared with plain njit would bring the
    reference counting back into the tick: every compiled function there but the
    allocating public wrappers is a kernel."""
    counted = sorted(name for name, value in vars(module).items()
                     if isinstance(value, CPUDispatcher) and value.py_func.__module__ == module.__name__
                     and value.targetoptions.get("_nrt", True) and name not in ALLOCATING)
    assert counted == []
    kernels = [value for value in vars(module).values() if isinstance(value, CPUDispatcher)]
    assert len(kernels) >= 10  # not vacuous
