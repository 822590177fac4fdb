"""Running one behaviour tick by tick on the admittance controller (see :mod:`.spec`).

A :class:`BehaviourRun` is made when its state starts (not in the servo loop's steady
state: once per behaviour) and then stepped once per tick with the :class:`PhaseView`
(what the post-capture phase measured this tick). It moves the controller's attractor,
checks its exits in a fixed order (wrench limit, watchdog, success, time) and, on the
tick one of them holds, returns the result word and freezes the attractor. Per tick it
only does float arithmetic on preallocated arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from robot.admittance import AdmittanceController, AdmittanceGains
from trials.behaviours.spec import AXES, Behaviour, Jiggle, Open, Ptwl, Rwe

Vec = NDArray[np.float64]


class PhaseView(Protocol):
    """What a behaviour reads each tick (task frame, SI); arrays are refilled in place.

    Attributes:
        t_s: the tick's time [s].
        port_m, port_velocity_m_s: the measured end effector (the interaction port).
        force_n, torque_n_m: the contact wrench on the payload (torque about the port).
        post_force_n: the normal force on each post [N].
        base_attitude_rad: the base's rotation vector from its start [rad].
        tracking_error_m: |port − admittance command| [m].
        slave_fault, singular, limited: the slave's status this tick.
        sigma_ratio: the reaction-singularity gauge of the slave's IK.
        controller: the admittance controller (its attractor is the behaviour's to move).
        command_delay_s: the trial's one-way command delay [s] (0: none).
        compensator: the trial's compensator name (``none`` without one).
        tool_open: the tool has opened (the payload released); away_m: then the unit
            vector from the grapple fixture's centre to the end effector at the release
            (task frame); tool_gap_m: the surface gap between tool and fixture [m].
        hand_present: the commander measures the hand's force on the stylus.
        hand_force_n: the hand's force on the stylus [N], task frame, as it arrived on the
            arm's side over the command path (zeros without a hand).
        master_force_n: (1,) the master force a ``mixed`` behaviour used this tick [N]
            (it writes it; the phase zeroes it every tick).
    """

    t_s: float
    port_m: Vec
    port_velocity_m_s: Vec
    force_n: Vec
    torque_n_m: Vec
    post_force_n: Vec
    base_attitude_rad: Vec
    tracking_error_m: float
    slave_fault: bool
    singular: bool
    limited: bool
    sigma_ratio: float
    controller: AdmittanceController
    command_delay_s: float
    compensator: str
    tool_open: bool
    away_m: Vec
    tool_gap_m: float
    hand_present: bool
    hand_force_n: Vec
    master_force_n: Vec

    def open_tool(self) -> str | None:
        """Ask for the tool to open (it opens after this tick's plant step); None, or the
        reason it cannot (the scene cannot release, the tool is open already)."""
        ...

    def contact_gap(self, axis: Vec) -> tuple[float, float, float] | None:
        """The distance [m] the payload's pin can move along the unit ``axis`` before it
        touches a post, with that contact's stiffness [N/m] and damping [N s/m]; None: no
        post on that line."""
        ...

    def seat_goal(self, out: Vec) -> str | None:
        """The port position [m] at which the pin touches both posts, into ``out``;
        None, or the reason there is none (a post out of reach, posts too far apart)."""
        ...


@dataclass
class BehaviourResult:
    """How one behaviour ended, with its figures.

    Attributes:
        state: the machine state that ran it; behaviour: its kind (``ptwl`` ...).
        result: one of :data:`trials.behaviours.spec.RESULTS`; reason: one line.
        started_s, ended_s: [s]; peak_force_n: the largest contact force [N];
        limit_n: its wrench limit [N] (inf: none); peak_torque_n_m: [N m];
        final_force_n: the contact force at the end [N];
        pose_error_m: |port − goal| at the end [m] (NaN: no pose goal);
        base_attitude_change_rad: |base attitude at the end − at the start| [rad];
        peak_base_attitude_change_rad: its largest value during the behaviour [rad];
        min_sigma_ratio: the smallest reaction-singularity gauge;
        singular_ticks, limited_ticks: ticks the IK reported a (reaction) singularity or
            a joint limit: where reactionless tracking was not possible.
    """

    state: str
    behaviour: str
    result: str = ""
    reason: str = ""
    started_s: float = 0.0
    ended_s: float = math.nan
    peak_force_n: float = 0.0
    limit_n: float = math.inf
    peak_torque_n_m: float = 0.0
    final_force_n: float = 0.0
    pose_error_m: float = math.nan
    base_attitude_change_rad: float = 0.0
    peak_base_attitude_change_rad: float = 0.0
    min_sigma_ratio: float = math.inf
    singular_ticks: int = 0
    limited_ticks: int = 0
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def duration_s(self) -> float:
        """[s]."""
        return self.ended_s - self.started_s

    def as_dict(self) -> dict[str, Any]:
        """For the trial log's metadata (non-finite numbers as None)."""
        out: dict[str, Any] = {}
        for key, value in self.__dict__.items():
            out[key] = None if isinstance(value, float) and not math.isfinite(value) else value
        out["duration_s"] = self.duration_s if math.isfinite(self.duration_s) else None
        return out


def gains_of(behaviour: Behaviour) -> AdmittanceGains:
    """The admittance gains a behaviour asks for (critically damped when it gives no D)."""
    if behaviour.damping_n_s_m is None:
        return AdmittanceGains.critically_damped(behaviour.stiffness_n_m, behaviour.mass_kg)
    return AdmittanceGains(behaviour.mass_kg, behaviour.damping_n_s_m, behaviour.stiffness_n_m)


def _norm(v: Vec) -> float:
    return math.sqrt(float(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]))


class BehaviourRun:
    """One behaviour from its start to its result (subclasses: one per kind).

    Attributes:
        drives_port: the run writes the controller's port command itself (``mixed``);
            the phase then does not integrate the admittance law (A2) that tick.
    """

    drives_port = False

    def __init__(self, state: str, behaviour: Behaviour, view: PhaseView) -> None:
        self.behaviour = behaviour
        self.record = BehaviourResult(state, behaviour.kind, started_s=view.t_s, limit_n=behaviour.limit_n())
        self._attitude0 = view.base_attitude_rad.copy()
        self._bad_since = math.nan
        self._scratch = np.zeros(3)
        self.goal_m = np.full(3, math.nan)
        self.result = ""
        view.controller.set_gains(gains_of(behaviour))

    def step(self, view: PhaseView) -> str:
        """One tick: move the attractor, check the exits; the result word once it ends
        ("" while it runs)."""
        if self.result:
            return self.result
        record = self.record
        force = _norm(view.force_n)
        torque = _norm(view.torque_n_m)
        record.peak_force_n = max(record.peak_force_n, force)
        record.peak_torque_n_m = max(record.peak_torque_n_m, torque)
        record.min_sigma_ratio = min(record.min_sigma_ratio, view.sigma_ratio)
        record.singular_ticks += view.singular
        record.limited_ticks += view.limited
        np.subtract(view.base_attitude_rad, self._attitude0, out=self._scratch)
        record.peak_base_attitude_change_rad = max(record.peak_base_attitude_change_rad, _norm(self._scratch))
        result, reason = self._exits(view, force, torque)
        if result:
            self.finish(view, result, reason)
        return self.result

    def _exits(self, view: PhaseView, force: float, torque: float) -> tuple[str, str]:
        """The first exit that holds this tick, in the order: wrench limit, watchdog,
        the kind's own (success, time)."""
        limit = self.behaviour.limit_n()
        if force > limit:
            return "wrench_limit", f"contact force {force:.3f} N over the limit {limit:.3f} N"
        torque_limit = getattr(self.behaviour, "torque_limit_n_m", math.inf)
        if torque > torque_limit:
            return "wrench_limit", f"contact torque {torque:.3f} N m over the limit {torque_limit:.3f} N m"
        bad = view.slave_fault or view.tracking_error_m > self.behaviour.max_tracking_error_m
        if not bad:
            self._bad_since = math.nan
        elif self._bad_since != self._bad_since:
            self._bad_since = view.t_s
        elif view.t_s - self._bad_since >= self.behaviour.watchdog_s:
            why = ("the slave's solution was non-finite" if view.slave_fault else
                   f"the arm lagged its command by {view.tracking_error_m * 1e3:.1f} mm "
                   f"(> {self.behaviour.max_tracking_error_m * 1e3:.1f} mm; sigma_ratio {view.sigma_ratio:.2g}"
                   f"{', reaction singularity' if view.singular else ''}{', joint limit' if view.limited else ''})")
            return "watchdog", f"{why} for {self.behaviour.watchdog_s:.3f} s"
        return self._own_exit(view)

    def _own_exit(self, view: PhaseView) -> tuple[str, str]:
        return "", ""

    def finish(self, view: PhaseView, result: str, reason: str) -> None:
        """End now with ``result``: the attractor freezes where it is (the commanded
        port's for a released spring), the figures are taken."""
        record = self.record
        self.result = record.result = result
        record.reason = reason
        record.ended_s = view.t_s
        record.final_force_n = _norm(view.force_n)
        np.subtract(view.base_attitude_rad, self._attitude0, out=self._scratch)
        record.base_attitude_change_rad = _norm(self._scratch)
        if not math.isnan(self.goal_m[0]):
            np.subtract(view.port_m, self.goal_m, out=self._scratch)
            record.pose_error_m = _norm(self._scratch)


class PtwlRun(BehaviourRun):
    """PTWL: the attractor moves at constant velocity to the goal, then waits."""

    behaviour: Ptwl

    def __init__(self, state: str, behaviour: Ptwl, view: PhaseView) -> None:
        super().__init__(state, behaviour, view)
        self._from = view.controller.attractor_m.copy()
        self._problem = ""
        if behaviour.to == "seat":
            reason = view.seat_goal(self.goal_m)
            if reason is not None:
                self._problem = reason
                self.goal_m[:] = self._from
        else:
            self.goal_m[:] = self._from
        self.goal_m += behaviour.displacement_m
        self._path = self.goal_m - self._from

    def _own_exit(self, view: PhaseView) -> tuple[str, str]:
        b = self.behaviour
        if self._problem:
            return "aborted", self._problem
        elapsed = view.t_s - self.record.started_s
        fraction = min(elapsed / b.duration_s, 1.0)
        attractor = view.controller.attractor_m
        np.multiply(self._path, fraction, out=attractor)
        attractor += self._from
        if b.seat_force_n > 0.0:
            pressing = view.post_force_n
            if pressing.size and float(pressing.min()) >= b.seat_force_n:
                return "succeeded", (f"seated: every post presses with >= {b.seat_force_n:.1f} N "
                                     f"({', '.join(f'{f:.1f}' for f in pressing)} N)")
        else:
            np.subtract(view.port_m, self.goal_m, out=self._scratch)
            error, speed = _norm(self._scratch), _norm(view.port_velocity_m_s)
            if fraction >= 1.0 and error <= b.pose_tolerance_m and speed <= b.speed_tolerance_m_s:
                return "succeeded", f"at the goal within {error * 1e3:.1f} mm, {speed * 1e3:.1f} mm/s"
        if elapsed >= b.duration_s + b.settle_s:
            np.subtract(view.port_m, self.goal_m, out=self._scratch)
            if b.seat_force_n > 0.0:
                touching = [f"{f:.1f}" for f in view.post_force_n]
                return "timeout", (f"not seated {b.settle_s:.2f} s after the attractor arrived: post forces "
                                   f"{', '.join(touching)} N (need >= {b.seat_force_n:.1f} N each)")
            return "timeout", (f"{_norm(self._scratch) * 1e3:.1f} mm from the goal {b.settle_s:.2f} s after the "
                               f"attractor arrived (tolerance {b.pose_tolerance_m * 1e3:.1f} mm)")
        return "", ""


class RweRun(BehaviourRun):
    """RWE: the attractor follows the commanded port on the released axes."""

    behaviour: Rwe

    def __init__(self, state: str, behaviour: Rwe, view: PhaseView) -> None:
        super().__init__(state, behaviour, view)
        self._axes = [AXES.index(a) for a in behaviour.axes]
        self._calm_since = math.nan

    def _own_exit(self, view: PhaseView) -> tuple[str, str]:
        b = self.behaviour
        controller = view.controller
        force = 0.0
        for i in self._axes:
            controller.attractor_m[i] = controller.position_m[i]
            force = max(force, abs(float(view.force_n[i])))
        if force > b.tolerance_n:
            self._calm_since = math.nan
        elif self._calm_since != self._calm_since:
            self._calm_since = view.t_s
        if self._calm_since == self._calm_since and view.t_s - self._calm_since >= b.hold_s:
            return "succeeded", f"contact force within {b.tolerance_n:.2f} N on {','.join(b.axes)} for {b.hold_s:.3f} s"
        if view.t_s - self.record.started_s >= b.duration_s:
            return "timeout", f"contact force still {force:.2f} N (> {b.tolerance_n:.2f} N) after {b.duration_s:.2f} s"
        return "", ""


class JiggleRun(BehaviourRun):
    """Translational jiggle: the attractor circles about the axis while pushed along it."""

    behaviour: Jiggle

    def __init__(self, state: str, behaviour: Jiggle, view: PhaseView) -> None:
        super().__init__(state, behaviour, view)
        axis = np.asarray(behaviour.axis, dtype=float)
        helper = np.array([0.0, 0.0, 1.0]) if abs(axis[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
        self._u = np.cross(axis, helper)
        self._u /= np.linalg.norm(self._u)
        self._w = np.cross(axis, self._u)
        self._axis = axis
        self._from = view.controller.attractor_m.copy()
        self._port0 = view.port_m.copy()
        self.goal_m[:] = self._from + behaviour.push_m * axis

    def _own_exit(self, view: PhaseView) -> tuple[str, str]:
        b = self.behaviour
        elapsed = view.t_s - self.record.started_s
        push = b.push_m * min(2.0 * elapsed / b.duration_s, 1.0)
        phase = 2.0 * math.pi * b.frequency_hz * elapsed
        # a circle through the start point: no jump at t = 0
        along_u, along_w = b.amplitude_m * math.sin(phase), b.amplitude_m * (math.cos(phase) - 1.0)
        attractor = view.controller.attractor_m
        for i in range(3):
            attractor[i] = self._from[i] + push * self._axis[i] + along_u * self._u[i] + along_w * self._w[i]
        np.subtract(view.port_m, self._port0, out=self._scratch)
        progress = float(self._scratch @ self._axis)
        if progress >= b.push_m - b.pose_tolerance_m:
            return "succeeded", f"advanced {progress * 1e3:.1f} mm along the axis (needed {(b.push_m - b.pose_tolerance_m) * 1e3:.1f})"
        if elapsed >= b.duration_s:
            return "timeout", f"advanced only {progress * 1e3:.1f} mm of {b.push_m * 1e3:.1f} in {b.duration_s:.2f} s"
        return "", ""


class OpenRun(BehaviourRun):
    """Open: the tool opens after this tick's plant step, then the attractor backs the
    tool away from the payload at constant velocity."""

    behaviour: Open

    def __init__(self, state: str, behaviour: Open, view: PhaseView) -> None:
        super().__init__(state, behaviour, view)
        self._problem = view.open_tool() or ""
        self._opened_s = math.nan
        self._from = np.zeros(3)
        self._away = np.zeros(3)

    def _own_exit(self, view: PhaseView) -> tuple[str, str]:
        b = self.behaviour
        if self._problem:
            return "aborted", f"the tool cannot open: {self._problem}"
        if not view.tool_open:
            return "", ""
        if self._opened_s != self._opened_s:  # the first tick with the tool open
            self._opened_s = view.t_s
            self._from[:] = view.controller.attractor_m
            self._away[:] = view.away_m
            self.goal_m[:] = self._from + b.retreat_m * self._away
        elapsed = view.t_s - self._opened_s
        fraction = min(elapsed / b.duration_s, 1.0)
        attractor = view.controller.attractor_m
        np.multiply(self._away, fraction * b.retreat_m, out=attractor)
        attractor += self._from
        gap = view.tool_gap_m
        if fraction >= 1.0 and gap >= b.clearance_m:
            return "succeeded", (f"the tool opened at {self._opened_s:.3f} s and is {gap * 1e3:.1f} mm clear of "
                                 f"the fixture (>= {b.clearance_m * 1e3:.1f} mm)")
        if elapsed >= b.duration_s + b.settle_s:
            return "timeout", (f"the tool opened at {self._opened_s:.3f} s but is only {gap * 1e3:.1f} mm clear of "
                               f"the fixture {b.settle_s:.2f} s after the retreat (need {b.clearance_m * 1e3:.1f} mm)")
        return "", ""
