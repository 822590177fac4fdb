"""Dynamic guidance (DG, Li & Yan 2019 eq. 11) along a re-planned optimum capture path.

Errors and frames
-----------------
Everything is in the **task frame** (the robot's inertial frame), SI units. The capture
error is the paper's ``e = x_ee − x_target`` (end effector minus capture point) and
``ė = v_ee − v_target``. Errors are taken in the robot's task space, not at the stylus:
the stylus moves a few centimetres, and eq. 11 on stylus errors would give forces of a
tenth of a newton that a hand cannot feel.

The capture path
----------------
The optimum capture path is the trajectory the autonomous capture law (eq. 10) produces
from the current state: the error follows

    ε̈ + k_d ε̇ + k_p ε = 0,   ε(t0) = e(t0),  ε̇(t0) = ė(t0)

(closed form, :class:`CapturePath`), so the path reaches the moving target with the
target's velocity; its travel time and distance follow from the gains and the initial
error. The path is planned when guidance starts and **re-planned** from the current
state whenever the person takes charge (§2: "after the engagement the optimum path is
calculated again"): when the part of the hand's force that does not help the guidance
exceeds ``takeover_force_n`` for ``takeover_hold_s``, or when the end effector is more
than ``max_path_deviation_m`` from the path.

The force (eq. 11, with the feed-forward it needs for a moving path)
-------------------------------------------------------------------
With the path point ``p``, ``v``, ``a`` (= target + ε, its derivatives), the force on the
hand, pushing the end effector toward the path, is

    f = m k_p (p − x_ee) + (m k_d + c)(v − v_ee) + m a + c v

The first two terms are eq. 11 (its ``f_d`` is the actuator force of eq. 8, of opposite
sign, so ``f = −f_d`` with the errors taken relative to the path). The last two are the
force the eq. 8 hand model ``m ẍ + c ẋ = f`` needs to move along the path itself:
without them a hand that goes along lags a moving target by ``c |v| / (m k_p)``. A
passive hand that starts on the path therefore stays on it, and the capture error obeys
eq. 10 exactly; off the path the deviation decays as ``δ̈ + (k_d + 2c/m) δ̇ + k_p δ = 0``.
At the start of a trial (hand at rest on the path) the force reduces to
``m k_p (x_t − x_ee) + m k_d (v_t − v_ee)``: eq. 11 on the target errors.

Choice of ``m`` and ``c`` (task frame, with ``force_scale = 1`` device N per task N):
``m = 5 kg`` reproduces the paper's calculated forces at the paper's start (Fig. 9:
about 8 N in x and −3.8 N in y at 0.28 m; APF with the same stiffness ``m k_p = 38.5 N/m``
gives Fig. 14's 10 N and −3.8 N). ``c = 0.7 N s/m`` makes the deviation dynamics
critically damped (``k_d + 2c/m = 2 √k_p``), so a hand pushed off the path returns
without overshoot. See ``docs/guidance.md``.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from capture_trainer.params import Param
from guidance._kernels import CRITICAL, OVER, UNDER, capture_basis, dynamic_guidance_force, dynamic_guidance_step
from guidance.state import GuidanceState


#: DG's parameters (the keyword arguments of :class:`DynamicGuidance`), with unit and
#: range: the constructor checks its arguments with these and a scenario file's
#: ``[guidance.dg]`` table is checked with the same declarations.
DG_PARAMS: tuple[Param, ...] = (
    Param("m_kg", "kg", minimum=0.0, strict=True),
    Param("c_n_s_m", "N s/m", minimum=0.0),
    Param("k_p", "1/s^2", minimum=0.0, strict=True),
    Param("k_d", "1/s", minimum=0.0),
    Param("takeover_force_n", "N", minimum=0.0, strict=True),
    Param("takeover_hold_s", "s", minimum=0.0),
    Param("max_path_deviation_m", "m", minimum=0.0),
    Param("replan_interval_s", "s", minimum=0.0),
)
_PARAM = {param.name: param for param in DG_PARAMS}


class CapturePath:
    """Closed-form solution of the capture law ``ε̈ + k_d ε̇ + k_p ε = 0`` (eq. 10).

    ``ε`` is the planned capture error (end effector minus target) [m], task frame.
    Handles the under-, critically and over-damped cases.
    """

    def __init__(self, k_p: float, k_d: float) -> None:
        self.k_p = _PARAM["k_p"].check(k_p)
        self.k_d = _PARAM["k_d"].check(k_d)
        self.t0_s = 0.0
        self.e0_m = np.zeros(3)
        self.de0_m_s = np.zeros(3)
        alpha = 0.5 * self.k_d
        disc = alpha * alpha - self.k_p
        self._alpha = alpha
        if disc < -1e-12 * self.k_p:
            self._kind = UNDER
            self._w = math.sqrt(-disc)
        elif disc > 1e-12 * self.k_p:
            self._kind = OVER
            self._w = math.sqrt(disc)
        else:
            self._kind = CRITICAL
            self._w = 0.0

    def start(self, t0_s: float, e0_m: NDArray[np.float64], de0_m_s: NDArray[np.float64]) -> None:
        """Plan from the error ``e0_m`` [m] and its rate ``de0_m_s`` [m/s] at ``t0_s`` [s]."""
        self.t0_s = float(t0_s)
        self.e0_m[:] = e0_m
        self.de0_m_s[:] = de0_m_s

    def basis(self, tau_s: float) -> tuple[float, float, float, float]:
        """Fundamental solutions at ``tau_s`` after the start.

        Returns:
            ``(φ1, φ2, φ1', φ2')`` with ``ε(τ) = φ1 e0 + φ2 ė0`` and
            ``ε̇(τ) = φ1' e0 + φ2' ė0``.
        """
        return capture_basis(self._kind, self._alpha, self._w, self.k_p, float(tau_s))  # type: ignore[no-any-return]

    def errors(self, times_s: NDArray[np.float64]) -> NDArray[np.float64]:
        """Planned capture errors ``ε`` [m] at absolute ``times_s`` (n,), as (n, 3) (not for the tick)."""
        phis = np.array([self.basis(t - self.t0_s)[:2] for t in np.asarray(times_s, dtype=float)])
        return phis[:, :1] * self.e0_m + phis[:, 1:2] * self.de0_m_s


class DynamicGuidance:
    """Dynamic guidance, eq. 11, along a re-planned optimum capture path (module docstring).

    Args:
        m_kg: mass of the eq. 8 hand-device model, task frame [kg].
        c_n_s_m: damping of the eq. 8 model, task frame [N s/m].
        k_p: capture-law stiffness gain [1/s²] (paper: 7.7).
        k_d: capture-law damping gain [1/s] (paper: 5).
        takeover_force_n: the person takes charge when the part of the hand's force that
            does not help the guidance (all of it, minus its positive component along the
            guidance force) exceeds this [N], task frame...
        takeover_hold_s: ...for at least this long [s] (rejects force-estimate noise).
        max_path_deviation_m: ...or when the end effector is farther than this from the
            path [m] (``0`` disables the test).
        replan_interval_s: smallest time between two re-plans [s]; while the person keeps
            taking charge the path is re-planned at this interval.
    """

    name = "dg"
    PARAMS: ClassVar[tuple[Param, ...]] = DG_PARAMS

    def __init__(
        self,
        m_kg: float = 5.0,
        c_n_s_m: float = 0.7,
        k_p: float = 7.7,
        k_d: float = 5.0,
        *,
        takeover_force_n: float = 1.0,
        takeover_hold_s: float = 0.03,
        max_path_deviation_m: float = 0.1,
        replan_interval_s: float = 0.1,
    ) -> None:
        self.m_kg = _PARAM["m_kg"].check(m_kg)
        self.c_n_s_m = _PARAM["c_n_s_m"].check(c_n_s_m)
        self.path = CapturePath(k_p, k_d)
        self.k_p = self.path.k_p
        self.k_d = self.path.k_d
        self.takeover_force_n = _PARAM["takeover_force_n"].check(takeover_force_n)
        self.takeover_hold_s = _PARAM["takeover_hold_s"].check(takeover_hold_s)
        self.max_path_deviation_m = _PARAM["max_path_deviation_m"].check(max_path_deviation_m)
        self.replan_interval_s = _PARAM["replan_interval_s"].check(replan_interval_s)
        self._out = np.zeros(3)
        # For the compiled tick: gains and thresholds, and when a take-over started [s].
        self._gains = np.array([
            self.k_p, self.k_d, self.m_kg, self.c_n_s_m,
            self.max_path_deviation_m, self.takeover_force_n, self.takeover_hold_s,
        ])
        self._takeover_since_s = np.full(1, math.nan)
        scratch = GuidanceState()  # load the compiled kernels now, not in the first tick
        dynamic_guidance_step(
            self.path._kind, 0.0, self.path._w, self._gains, 0.0, scratch.ee_position_m, scratch.ee_position_m,
            scratch.ee_position_m, scratch.ee_position_m, scratch.ee_position_m, scratch.ee_position_m,
            scratch.ee_position_m, scratch.ee_position_m, self._takeover_since_s.copy(), 0.0, True, np.zeros(3),
        )
        self._evaluate(scratch)
        self.reset()

    def reset(self) -> None:
        """Forget the path, the take-over timer and the counters."""
        self._planned = False
        self._last_plan_s = -math.inf
        self._takeover_since_s[0] = math.nan
        self._out[:] = 0.0
        self.replanned = False
        self.replan_count = 0

    def params(self) -> dict[str, object]:
        """Gains and re-planning thresholds as plain data."""
        return {
            "law": self.name,
            "m_kg": self.m_kg,
            "c_n_s_m": self.c_n_s_m,
            "k_p": self.k_p,
            "k_d": self.k_d,
            "takeover_force_n": self.takeover_force_n,
            "takeover_hold_s": self.takeover_hold_s,
            "max_path_deviation_m": self.max_path_deviation_m,
            "replan_interval_s": self.replan_interval_s,
        }

    def planned_positions(self, times_s: NDArray[np.float64], target_positions_m: NDArray[np.float64]) -> NDArray[np.float64]:
        """The current capture path for drawing (not for the tick).

        Args:
            times_s: (n,) absolute trial times [s].
            target_positions_m: (n, 3) capture-point positions at those times [m], task
                frame (e.g. from ``TargetMotion.sample``).

        Returns:
            (n, 3) planned end-effector positions [m], task frame.
        """
        return np.asarray(target_positions_m, dtype=float) + self.path.errors(times_s)

    def _plan(self, state: GuidanceState) -> None:
        """Start a new path at the current capture error (allocation-free)."""
        np.subtract(state.ee_position_m, state.target_position_m, out=self.path.e0_m)
        np.subtract(state.ee_velocity_m_s, state.target_velocity_m_s, out=self.path.de0_m_s)
        self.path.t0_s = state.t_s
        self._last_plan_s = state.t_s
        self._takeover_since_s[0] = math.nan

    def force(self, state: GuidanceState) -> NDArray[np.float64]:
        """Guidance force on the hand [N], task frame (owned buffer).

        Compiled (``guidance._kernels.dynamic_guidance_step``): the force along the
        current path and, once ``replan_interval_s`` has passed since the last plan, the
        take-over test; on a take-over the path is re-planned from the current state.
        """
        t = state.t_s
        self.replanned = False
        if not self._planned:
            self._plan(state)
            self._planned = True
        path = self.path
        if dynamic_guidance_step(
            path._kind, path._alpha, path._w, self._gains, t - path.t0_s, path.e0_m, path.de0_m_s,
            state.target_position_m, state.target_velocity_m_s, state.target_acceleration_m_s2,
            state.ee_position_m, state.ee_velocity_m_s, state.hand_force_n, self._takeover_since_s,
            t, t - self._last_plan_s >= self.replan_interval_s, self._out,
        ):
            self._plan(state)
            self.replanned = True
            self.replan_count += 1
            self._evaluate(state)
        return self._out

    def _evaluate(self, state: GuidanceState) -> float:
        """Write the force for the current path into ``_out``; return the distance to the path [m]."""
        path = self.path
        return dynamic_guidance_force(  # type: ignore[no-any-return]
            path._kind, path._alpha, path._w, self.k_p, self.k_d, self.m_kg, self.c_n_s_m,
            state.t_s - path.t0_s, path.e0_m, path.de0_m_s,
            state.target_position_m, state.target_velocity_m_s, state.target_acceleration_m_s2,
            state.ee_position_m, state.ee_velocity_m_s, self._out,
        )
