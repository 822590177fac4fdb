"""Mixed force/motion commands to a massive payload over a delayed link (Yang & Konno 2018).

After the capture the arm holds a payload far heavier than itself (500-4500 kg in their
hardware-in-the-loop tests). The operator on the ground commands a *force* ``f_m`` on a
master (a haptic stylus in joystick mode); the slave on orbit turns it into a velocity
command, with local force feedback from its wrist sensor and a restraint toward a
ground-side **virtual arm** that predicts it (their eqs. 3-10, translation only, so the
orientation map ``B`` is the identity):

    v_s,c(t) = K_s (G f_m(t−T) − f_s(t)) + K_c (x_vir(t−T) − x_s(t))
               − D (v_s(t−Δt) − v_s(t−2Δt))                                      (3)
    v_vir(t) = K_s (G f_m(t) − f_vir(t)) − D (v_vir(t−Δt) − v_vir(t−2Δt))         (4, 5)
    x_vir(t) = x_vir(t−Δt) + v_vir(t) Δt                                          (6)
    f_vir(t) = K_t (x_vir(t−Δt) − x_t(t−Δt)) + D_t (v_vir(t−Δt) − v_t(t−Δt))        (7)
    v̇_t = f_vir / m,  v_t(t) = v_t(t−Δt) + v̇_t Δt,  x_t(t) = x_t(t−Δt) + v_t Δt    (8-10)

``T`` is the one-way delay, ``G`` the force scaling (the operator's newtons to the
slave's), ``K_s`` the force-feedback gain, ``K_c`` the restraint gain (``K_v`` in their
Table 2), ``D`` the damping on the command's change, ``K_t``, ``D_t`` the spring-damper
of the grip in the virtual model. The slave is velocity-commanded (their appendix A:
high-ratio gears, ``v_s ≈ v_s,c``); here its velocity servo follows the command with a
first-order lag ``τ`` (``servo_lag_s``, 20 ms), on both sides (the virtual arm models the
slave): with ``v = v_c`` exactly, eqs. (5) and (7) at ``Δt`` = 1 ms with Table 2's gains
close an algebraic loop ``v(t) = −(K_s D_t + D) v(t−Δt) + D v(t−2Δt) + ...`` whose pole
at ``−1.25`` diverges within a few ticks.

Sign convention: ``f_s`` and ``f_vir`` are the force the arm exerts **on the payload**
(``robot.debris.DebrisReading.force_on_debris_n``), so that ``−K_s f_s`` slows an arm
that pulls hard; the paper's eq. (7) is written with the opposite sign for the force
on the arm.

:func:`simulate_transfer` runs the post-capture transfer of their HILS 2 against a
simulated slave side (a velocity-commanded arm holding a payload of true mass
``mass_kg`` through the grip spring-damper) and a simulated operator that pushes the
payload to a goal and stops it. Schemes:

* ``virtual``: eq. (3) in full; the operator looks at the virtual arm's payload (the
  prediction, undelayed);
* ``direct``: direct delayed commands: eq. (3) without the virtual arm (no ``K_c`` term;
  the slave keeps its local force feedback); the operator looks at the real payload one
  delay late;
* ``velocity``: the slave just follows ``K_s G f_m(t−T) − D (...)``, no local force
  feedback either (their "without force feedback"); the operator as in ``direct``.

Their metric is the mean square of the slave's force (eq. 11), :func:`force_mse`.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

#: The transfer schemes of :func:`simulate_transfer`.
SCHEMES: tuple[str, ...] = ("virtual", "direct", "velocity")


@dataclass(frozen=True)
class MixedCommandGains:
    """Gains of eqs. 3-7 (Yang & Konno, Table 2; translation rows).

    Attributes:
        force_gain_m_s_n: ``K_s`` [m/(s N)] (1/1400).
        restraint_gain_1_s: ``K_c`` (their ``K_v``) [1/s] (80/1000).
        damping: ``D`` (dimensionless) (0.3).
        grip_stiffness_n_m: ``K_t`` of the virtual grip [N/m] (746 000).
        grip_damping_n_s_m: ``D_t`` [N s/m] (1000).
        force_scale: ``G``, slave newtons per master newton (not in their tables: 10 lets
            a 1.4 N push on a Touch command 0.01 m/s, their transfer speed).
        servo_lag_s: the time constant of the arm's velocity servo ``τ`` [s] (module
            docstring; > 0).
    """

    force_gain_m_s_n: float = 1.0 / 1400.0
    restraint_gain_1_s: float = 80.0 / 1000.0
    damping: float = 0.3
    grip_stiffness_n_m: float = 746_000.0
    grip_damping_n_s_m: float = 1000.0
    force_scale: float = 10.0
    servo_lag_s: float = 0.02

    def __post_init__(self) -> None:
        for name in ("force_gain_m_s_n", "restraint_gain_1_s", "damping", "grip_stiffness_n_m",
                     "grip_damping_n_s_m", "force_scale"):
            value = getattr(self, name)
            if not (value >= 0.0 and math.isfinite(value)):
                raise ValueError(f"{name} must be finite and >= 0, got {value}")
        if not (self.servo_lag_s > 0.0 and math.isfinite(self.servo_lag_s)):
            raise ValueError(f"servo_lag_s must be finite and > 0, got {self.servo_lag_s}")

    def servo(self, velocity_m_s: float, command_m_s: float, dt_s: float) -> float:
        """The velocity servo's next velocity [m/s]: a first-order lag toward the command."""
        return velocity_m_s + (command_m_s - velocity_m_s) * min(dt_s / self.servo_lag_s, 1.0)


def grip_force_n(stiffness_n_m: float, damping_n_s_m: float, arm_m: float, arm_m_s: float, payload_m: float,
                 payload_m_s: float) -> float:
    """The grip's force on the payload [N]: ``K (x_arm − x_t) + D (v_arm − v_t)`` (eq. 7)."""
    return stiffness_n_m * (arm_m - payload_m) + damping_n_s_m * (arm_m_s - payload_m_s)


class VirtualArm:
    """The ground-side prediction of the slave and its payload (eqs. 4-10), one axis.

    Args:
        gains: eqs. 3-7.
        model_mass_kg: the payload mass the ground believes [kg].
        dt_s: the sampling period ``Δt`` [s].
    """

    def __init__(self, gains: MixedCommandGains, model_mass_kg: float, dt_s: float) -> None:
        if not (model_mass_kg > 0.0 and math.isfinite(model_mass_kg)):
            raise ValueError(f"model_mass_kg must be positive, got {model_mass_kg}")
        self.gains, self.mass_kg, self.dt_s = gains, float(model_mass_kg), float(dt_s)
        self.x_m = self.v_m_s = self.v_prev_m_s = 0.0
        self.payload_m = self.payload_m_s = 0.0
        self.force_n = 0.0

    def step(self, master_force_n: float) -> float:
        """Advance one period under the operator's force ``f_m`` [N]; return ``x_vir`` [m]."""
        g, dt = self.gains, self.dt_s
        self.force_n = grip_force_n(g.grip_stiffness_n_m, g.grip_damping_n_s_m, self.x_m, self.v_m_s,
                                    self.payload_m, self.payload_m_s)  # eq. 7, at t − Δt
        command = (g.force_gain_m_s_n * (g.force_scale * master_force_n - self.force_n)
                   - g.damping * (self.v_m_s - self.v_prev_m_s))  # eqs. 4, 5
        self.v_prev_m_s, self.v_m_s = self.v_m_s, g.servo(self.v_m_s, command, dt)
        v = self.v_m_s
        self.x_m += v * dt  # eq. 6
        self.payload_m_s += self.force_n / self.mass_kg * dt  # eqs. 8, 9
        self.payload_m += self.payload_m_s * dt  # eq. 10
        return self.x_m


def slave_command_m_s(gains: MixedCommandGains, master_force_n: float, slave_force_n: float, virtual_m: float,
                      slave_m: float, v_prev_m_s: float, v_prev2_m_s: float, *, force_feedback: bool = True,
                      restraint: bool = True) -> float:
    """Eq. (3): the slave's velocity command [m/s] from the delayed master force and
    virtual-arm position and the local force and position (``force_feedback`` and
    ``restraint`` switch the ``−K_s f_s`` and ``K_c`` terms off for the direct schemes)."""
    g = gains
    v = g.force_gain_m_s_n * g.force_scale * master_force_n - g.damping * (v_prev_m_s - v_prev2_m_s)
    if force_feedback:
        v -= g.force_gain_m_s_n * slave_force_n
    if restraint:
        v += g.restraint_gain_1_s * (virtual_m - slave_m)
    return v


@dataclass(frozen=True)
class TransferOperator:
    """A simulated operator moving the payload to a goal: a saturated PD on what they see.

    Attributes:
        goal_m: how far to move the payload [m].
        stiffness_n_m: master newtons per metre of remaining distance.
        damping_n_s_m: master newtons per m/s of the seen velocity.
        max_force_n: what the hand pushes at most [N] (a Touch's peak).
    """

    goal_m: float = 0.1
    stiffness_n_m: float = 20.0
    damping_n_s_m: float = 60.0
    max_force_n: float = 3.0

    def force_n(self, seen_m: float, seen_m_s: float) -> float:
        raw = self.stiffness_n_m * (self.goal_m - seen_m) - self.damping_n_s_m * seen_m_s
        return max(-self.max_force_n, min(self.max_force_n, raw))


@dataclass(frozen=True)
class TransferResult:
    """One simulated transfer.

    Attributes:
        scheme: ``virtual`` | ``direct`` | ``velocity``.
        mass_kg, model_mass_kg: the payload's true and believed mass [kg].
        delay_s: one-way delay [s].
        force_mse_n2: eq. (11), mean of ``|f_s|²`` over the run [N²].
        peak_force_n: largest ``|f_s|`` [N].
        final_error_m: payload distance from the goal at the end [m].
        time_s, slave_force_n, payload_m, virtual_force_n: the sampled traces (every
            ``trace_every`` ticks).
    """

    scheme: str
    mass_kg: float
    model_mass_kg: float
    delay_s: float
    force_mse_n2: float
    peak_force_n: float
    final_error_m: float
    time_s: NDArray[np.float64] = field(repr=False)
    slave_force_n: NDArray[np.float64] = field(repr=False)
    payload_m: NDArray[np.float64] = field(repr=False)
    virtual_force_n: NDArray[np.float64] = field(repr=False)


def force_mse(force_n: NDArray[np.float64]) -> float:
    """Eq. (11): ``(1/N) Σ |f_s|²`` over the samples (rows: vectors or scalars) [N²]."""
    values = np.asarray(force_n, dtype=float)
    if values.size == 0:
        return math.nan
    squares = values ** 2 if values.ndim == 1 else np.einsum("ij,ij->i", values, values)
    return float(np.mean(squares))


def simulate_transfer(scheme: str, *, mass_kg: float = 4500.0, model_error: float = 0.2, delay_s: float = 5.0,
                      duration_s: float = 60.0, dt_s: float = 1e-3, gains: MixedCommandGains | None = None,
                      operator: TransferOperator | None = None, trace_every: int = 100) -> TransferResult:
    """Move a captured payload ``operator.goal_m`` along one axis and stop it.

    The slave side is a velocity-commanded arm (``v_s = v_s,c``) holding a payload of true
    mass ``mass_kg`` through the grip ``K_t``, ``D_t``; the ground's model believes
    ``mass_kg (1 − model_error)``. The operator looks at the virtual arm's payload
    (``virtual``: undelayed, the prediction) or at the real payload one delay late
    (the direct schemes).

    Args:
        scheme: one of :data:`SCHEMES`.
        mass_kg: the payload's true mass [kg].
        model_error: relative error of the ground's mass model.
        delay_s: one-way delay ``T`` [s] (both paths).
        duration_s: simulated time [s].
        dt_s: ``Δt`` [s].
        gains: eqs. 3-7 (Table 2 by default).
        operator: the simulated operator.
        trace_every: keep every n-th sample of the traces.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {', '.join(SCHEMES)}, got {scheme!r}")
    g = gains or MixedCommandGains()
    op = operator or TransferOperator()
    lag = int(round(delay_s / dt_s))
    n = int(round(duration_s / dt_s))
    model_mass = mass_kg * (1.0 - model_error)
    virtual = VirtualArm(g, model_mass, dt_s)
    uplink: deque[tuple[float, float]] = deque([(0.0, 0.0)] * lag)  # (f_m, x_vir) on their way up
    downlink: deque[tuple[float, float]] = deque([(0.0, 0.0)] * lag)  # (x_t, v_t) on their way down
    x_s = v_s = v_s_prev = x_t = v_t = 0.0
    f_s = 0.0
    forces = np.zeros(n)
    keep = np.arange(0, n, trace_every)
    trace_virtual = np.zeros(keep.size)
    trace_payload = np.zeros(keep.size)
    seen_x = seen_v = 0.0
    for k in range(n):
        # the ground: the operator pushes on what they see; the virtual arm moves at once
        if scheme == "virtual":
            f_m = op.force_n(virtual.payload_m, virtual.payload_m_s)
        else:
            f_m = op.force_n(seen_x, seen_v)
        x_vir = virtual.step(f_m)
        uplink.append((f_m, x_vir))
        f_m_late, x_vir_late = uplink.popleft()
        # the orbit: eq. (3) with the measured grip force, then the arm and the payload move
        f_s = grip_force_n(g.grip_stiffness_n_m, g.grip_damping_n_s_m, x_s, v_s, x_t, v_t)
        command = slave_command_m_s(g, f_m_late, f_s, x_vir_late, x_s, v_s, v_s_prev,
                                    force_feedback=scheme != "velocity", restraint=scheme == "virtual")
        v_s_prev, v_s = v_s, g.servo(v_s, command, dt_s)
        x_s += v_s * dt_s
        v_t += f_s / mass_kg * dt_s
        x_t += v_t * dt_s
        forces[k] = f_s
        downlink.append((x_t, v_t))
        seen_x, seen_v = downlink.popleft()
        if k % trace_every == 0:
            index = k // trace_every
            trace_virtual[index] = virtual.force_n
            trace_payload[index] = x_t
    return TransferResult(
        scheme=scheme, mass_kg=mass_kg, model_mass_kg=model_mass, delay_s=delay_s, force_mse_n2=force_mse(forces),
        peak_force_n=float(np.max(np.abs(forces))), final_error_m=abs(op.goal_m - x_t),
        time_s=keep.astype(float) * dt_s,
        slave_force_n=forces[keep], payload_m=trace_payload, virtual_force_n=trace_virtual)
