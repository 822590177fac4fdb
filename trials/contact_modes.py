"""What the hand feels after the capture: Campbell's free-body, viscous and damper
behaviours rendered through a clamped virtual coupling (docs/delay.md).

Before the capture, contact feedback renders the contact force on the tool as it
arrives over the state path (:mod:`trials.compensators`). Once the tool holds the payload
that force is zero, and what the hand should feel is the payload itself. Campbell (the
seed ``campbell-cartesian-force-feedback.txt``) coded three behaviours of a force-driven
end point, selectable here as the trial's ``contact_mode`` (registered in
:data:`CONTACT_MODES`; ``contact``: none of them, the contact force as it arrives):

* ``free-body``: "the end point behave[s] as if it were the center of gravity of a mass
  in a zero-g field ... the sum of all previous force measurements [times] the sampling
  period and divided by the mass":  ``v_b(k) = v_b(k−1) + F(k) Δt / m``           (C1)
* ``viscous``: the same, "subtracting a term proportional to the previous velocity
  command":  ``v_b(k) = v_b(k−1) + F(k) Δt / m − (c Δt / m) v_b(k−1)``             (C2)
* ``damper``: "a massless damper ... the velocity command is simply proportional to the
  F/TS measurement":  ``v_b(k) = F(k) / c``                                        (C3)

and the body moves ``x_b(k) = x_b(k−1) + v_b(k) Δt`` (C4). Here the body is the
operator's-side picture of the held payload, and the force that drives it is the hand's,
through a **virtual coupling** (Colgate, Stanley & Brown 1995; Adams & Hannaford 1999),
a spring-damper between the hand ``x_h`` (the task-frame position the stylus commands)
and the body, clamped:

    F(k) = K (x_h(k) − x_b(k−1)) + B (v_h(k) − v_b(k−1)),   |F(k)| ≤ F_max       (VC)

``v_h(k) = (x_h(k) − x_h(k−1)) / Δt``. The hand feels ``−F(k)``, the body's reaction
(task frame; the compensator, the framing ``k_f`` and the device's safety layer follow).

Parameters (:func:`coupling_gains`), all task frame:

* ``m = s m_payload``: the payload's mass scaled as its contact force is (``s``, hand
  newtons per contact newton, ``contact_force_scale``): the force a person feels pushing
  it is ``s`` times the force the arm would need;
* ``c = m / τ`` (``τ`` the viscous body's time constant, ``contact_time_constant_s``); the
  damper has the same ``c`` (the viscous body without its mass);
* ``K``: a share (``coupling_share``, 0.5) of the **device's passive-stiffness bound**:
  the coupling renders ``K k_f p`` at the stylus (``k_f`` device newtons per task newton,
  ``p`` task metres per device metre), kept at ``share · K_dev`` with ``K_dev`` the
  device's ``max_stiffness_n_m`` (a Touch: 1.02 N/mm on its softest axis);
* ``B = 2 ζ sqrt(K m)`` with ``ζ = 0.7`` for the bodies with mass, 0 for the damper (it is
  one);
* ``F_max``: the rendering limit in the task frame, ``max_force_n / k_f``.

Two guards keep the explicit laws stable at the servo's ``Δt`` (each documented in the
compensator's metadata when it acts): the body's mass is at least ``K Δt²`` (the
coupling's ``ω Δt ≤ 1``), the damper's ``c`` at least ``K Δt`` (C3 with (VC) converges
monotonically when ``K Δt / c ≤ 1``).

:meth:`VirtualCoupling.force` is allocation-free (Python floats on preallocated arrays).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from capture_trainer.errors import TrialError
from capture_trainer.registry import Registry

Vec3 = NDArray[np.float64]

#: The post-capture contact modes: ``contact`` (the contact force as it arrives) and
#: Campbell's three bodies; each entry is a one-line description with its equation.
CONTACT_MODES: Registry[str] = Registry("contact mode", error=TrialError)
CONTACT_MODES.register("contact", "the contact force on the tool as it arrives (zero once the tool holds)")
CONTACT_MODES.register("free-body", "the payload as a free mass: v(k) = v(k-1) + F dt / m (C1)")
CONTACT_MODES.register("viscous", "a mass in a viscous fluid: v(k) = v(k-1) + F dt / m - (c dt / m) v(k-1) (C2)")
CONTACT_MODES.register("damper", "a massless damper: v(k) = F / c (C3)")

#: The coupling damping ratio of the bodies with mass.
COUPLING_DAMPING_RATIO = 0.7


@dataclass(frozen=True)
class CouplingGains:
    """The coupling (VC) and the body (C1-C3), task frame.

    Attributes:
        mode: ``free-body`` | ``viscous`` | ``damper``.
        stiffness_n_m: ``K`` [N/m]; damping_n_s_m: ``B`` [N s/m].
        mass_kg: ``m`` [kg] (unused by the damper).
        body_damping_n_s_m: ``c`` [N s/m] (unused by the free body).
        max_force_n: ``F_max`` [N].
    """

    mode: str
    stiffness_n_m: float
    damping_n_s_m: float
    mass_kg: float
    body_damping_n_s_m: float
    max_force_n: float

    def __post_init__(self) -> None:
        if self.mode not in CONTACT_MODES or self.mode == "contact":
            raise TrialError(f"a coupling's mode must be free-body, viscous or damper, got {self.mode!r}")
        for name in ("stiffness_n_m", "mass_kg", "body_damping_n_s_m", "max_force_n"):
            value = getattr(self, name)
            if not (value > 0.0 and math.isfinite(value)):
                raise TrialError(f"coupling {name} must be finite and > 0, got {value}")
        if not (self.damping_n_s_m >= 0.0 and math.isfinite(self.damping_n_s_m)):
            raise TrialError(f"coupling damping_n_s_m must be finite and >= 0, got {self.damping_n_s_m}")
        if self.mode == "damper" and self.damping_n_s_m != 0.0:  # (C3) with B: v_b(k) ∝ −(B/c) v_b(k−1)
            raise TrialError("the damper's coupling has no damper of its own (damping_n_s_m = 0)")

    def as_dict(self) -> dict[str, float | str]:
        return {"mode": self.mode, "stiffness_n_m": self.stiffness_n_m, "damping_n_s_m": self.damping_n_s_m,
                "mass_kg": self.mass_kg, "body_damping_n_s_m": self.body_damping_n_s_m,
                "max_force_n": self.max_force_n}


def coupling_gains(mode: str, *, payload_mass_kg: float, contact_force_scale: float, time_constant_s: float,
                   device_stiffness_n_m: float, coupling_share: float, position_scale: float, force_scale: float,
                   max_force_dev_n: float, dt_s: float) -> CouplingGains:
    """The gains of ``mode`` (module docstring): the body from the payload, the coupling
    from the device's passive-stiffness bound.

    Args:
        payload_mass_kg: the payload's mass [kg]; contact_force_scale: ``s``.
        time_constant_s: ``τ`` [s]; device_stiffness_n_m: ``K_dev`` [N/m], device frame.
        coupling_share: the share of ``K_dev`` the coupling may render, in (0, 1].
        position_scale: ``p``, task metres per device metre; force_scale: ``k_f``.
        max_force_dev_n: the rendering limit [N], device frame.
        dt_s: the servo period [s].
    """
    if not 0.0 < coupling_share <= 1.0:
        raise TrialError(f"coupling_share must be within (0, 1], got {coupling_share}")
    if not (time_constant_s > 0.0 and math.isfinite(time_constant_s)):
        raise TrialError(f"contact_time_constant_s must be finite and > 0, got {time_constant_s}")
    stiffness = coupling_share * device_stiffness_n_m / (force_scale * position_scale)
    mass = max(contact_force_scale * payload_mass_kg, stiffness * dt_s * dt_s)
    body_damping = mass / time_constant_s
    damping = 2.0 * COUPLING_DAMPING_RATIO * math.sqrt(stiffness * mass)
    if mode == "damper":
        body_damping, damping = max(body_damping, stiffness * dt_s), 0.0
    return CouplingGains(mode, stiffness, damping, mass, body_damping, max_force_dev_n / force_scale)


class VirtualCoupling:
    """The hand coupled to a Campbell body (module docstring); one call per tick.

    Args:
        gains: the coupling and the body.
        dt_s: the servo period ``Δt`` [s].

    Attributes:
        active: the body exists (after :meth:`start`).
        body_position_m, body_velocity_m_s: ``x_b``, ``v_b`` [m], [m/s].
        clamped_ticks: ticks the coupling force was clamped to ``F_max``.
    """

    def __init__(self, gains: CouplingGains, dt_s: float) -> None:
        self.gains = gains
        self.dt_s = float(dt_s)
        self.active = False
        self.body_position_m = np.zeros(3)
        self.body_velocity_m_s = np.zeros(3)
        self.clamped_ticks = 0
        self._last_hand = np.zeros(3)
        self._hand_velocity = np.zeros(3)
        self._tracking = False
        self._fresh = False

    def track(self, hand_m: Vec3) -> None:
        """Follow the hand [m] (its velocity over the last tick) while the body does not exist."""
        last, velocity, dt = self._last_hand, self._hand_velocity, self.dt_s
        for i in range(3):
            x = float(hand_m[i])
            if not math.isfinite(x):
                return  # a non-finite hand is not a displacement: keep the last one
            velocity[i] = (x - last[i]) / dt if self._tracking else 0.0
        last[:] = hand_m
        self._tracking = True

    def start(self) -> None:
        """The body appears on the next :meth:`force`: at the hand, moving with it (no
        force on that tick)."""
        self.active = True
        self._fresh = True

    def force(self, hand_m: Vec3, out: Vec3) -> None:
        """One tick: (VC) with the hand at ``hand_m`` [m], then the body's law (C1-C4);
        the hand's force ``−F`` [N] into ``out`` (task frame)."""
        self.track(hand_m)
        g, dt = self.gains, self.dt_s
        x_b, v_b = self.body_position_m, self.body_velocity_m_s
        if self._fresh:
            x_b[:] = self._last_hand
            v_b[:] = self._hand_velocity
            self._fresh = False
        h0, h1, h2 = self._last_hand.tolist()
        u0, u1, u2 = self._hand_velocity.tolist()
        x0, x1, x2 = x_b.tolist()
        w0, w1, w2 = v_b.tolist()
        k, b = g.stiffness_n_m, g.damping_n_s_m
        f0 = k * (h0 - x0) + b * (u0 - w0)
        f1 = k * (h1 - x1) + b * (u1 - w1)
        f2 = k * (h2 - x2) + b * (u2 - w2)
        norm = math.sqrt(f0 * f0 + f1 * f1 + f2 * f2)
        if norm > g.max_force_n:  # clamped along its direction
            shrink = g.max_force_n / norm
            f0, f1, f2 = f0 * shrink, f1 * shrink, f2 * shrink
            self.clamped_ticks += 1
        mode, m, c = g.mode, g.mass_kg, g.body_damping_n_s_m
        if mode == "free-body":  # (C1)
            w0, w1, w2 = w0 + f0 * dt / m, w1 + f1 * dt / m, w2 + f2 * dt / m
        elif mode == "viscous":  # (C2)
            r = c * dt / m
            w0, w1, w2 = w0 + f0 * dt / m - r * w0, w1 + f1 * dt / m - r * w1, w2 + f2 * dt / m - r * w2
        else:  # (C3)
            w0, w1, w2 = f0 / c, f1 / c, f2 / c
        v_b[0], v_b[1], v_b[2] = w0, w1, w2
        x_b[0], x_b[1], x_b[2] = x0 + w0 * dt, x1 + w1 * dt, x2 + w2 * dt  # (C4)
        out[0], out[1], out[2] = -f0, -f1, -f2
