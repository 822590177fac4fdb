"""The ``mixed`` behaviour: Yang & Konno's mixed force/motion command in a trial.

After the capture the arm holds a massive payload (the ``[debris]`` table accepts
500-4500 kg) and presses it on the task's fixtures (a post as a wall). The operator on
the ground commands a force ``f_m``; the slave turns it into a velocity along the press
axis ``a`` (task frame) with the contact force it measures, their eq. 3
(:mod:`robot.mixed_command`, one axis, ``B`` the identity):

    v_s,c(t) = K_s (G f_m(t−T) − f_s(t)) + K_c (x_vir(t−T) − x_s(t))
               − D (v_s(t−Δt) − v_s(t−2Δt))                                       (3)

* ``f_s`` [N] is the force the arm exerts on the payload along ``a``: minus the posts'
  force on the payload (the fixtures' contact physics of the last plant step, the
  phase's wrench), so ``−K_s f_s`` slows an arm that presses hard;
* ``x_s`` [m] is the measured port's displacement along ``a`` from where the behaviour
  started; ``v_s`` is the commanded velocity (``v_s ≈ v_s,c``: their appendix A), through
  the velocity servo's first-order lag ``τ`` of
  :class:`robot.mixed_command.MixedCommandGains`; its integral along ``a`` is the
  ``(x, v, a)`` command the one slave-control path tracks;
* the ground side runs in this behaviour, behind a ring of ``T`` (the trial's command
  delay unless ``delay_s`` says otherwise): the **virtual arm** (their eqs. 4-7 with the
  payload's contact on the wall as the modelled force: a Kelvin-Voigt wall at the
  fixtures' gap, stiffness off by ``model_error``) and a scripted **operator** who pushes
  with ``approach_force_n`` until they see a contact force of ``contact_seen_n``, then
  holds ``target_force_n / G``.

The master force comes from one of two places (``master``):

* ``hand``: the hand's force on the stylus (task frame, the commander's
  ``hand_force_n``), sent with the slave's command over the trial's delayed command path
  (:class:`trials.delay.DelayedLink`, a channel of the preallocated ring): ``f_m(t − T)``
  is its component along ``a`` as it arrived, ``T`` the link's delay (jitter and loss
  included; no link: no delay). The ground's virtual arm is a deterministic function of
  the ``f_m`` stream (eqs. 4-7 from the start of the press), so the arm's side computes
  ``x_vir(t − T)`` from the ``f_m`` it received rather than receiving it: the same numbers
  as the ground's virtual arm one delay late;
* ``scripted``: the operator above, with the virtual arm, behind the behaviour's own
  ring of ``T``; ``auto`` takes ``hand`` when the trial measures a hand's force (a
  simulated participant), ``scripted`` otherwise (the controller, a device without a
  force sensor: a Touch measures no force, so a person's ``f_m`` needs a force sensor or
  a joystick-mode estimate, not built).

Schemes: ``virtual`` (eq. 3 in full; the operator sees the virtual arm's force, at once)
and ``direct`` (direct delayed commands: no ``K_c`` term; the operator sees the real
``f_s`` one delay late, so they keep pushing for ``T`` after the contact). ``auto`` takes
``virtual`` under the trial's ``predictive`` compensator, ``direct`` otherwise.

Steady state (``v = 0``) with an exact model and no delay: ``f_s = G f_m`` (eq. 3 with
``x_vir = x_s``; with ``direct``, exactly). Per tick: float arithmetic on preallocated
rings (made when the behaviour starts, once per run).
"""

from __future__ import annotations

import math

import numpy as np

from trials.behaviours.execute import BehaviourRun, PhaseView
from trials.behaviours.spec import Mixed


def resolve_scheme(behaviour: Mixed, compensator: str) -> str:
    """``virtual`` or ``direct``: the behaviour's, or for ``auto`` the compensator's."""
    if behaviour.scheme != "auto":
        return behaviour.scheme
    return "virtual" if compensator == "predictive" else "direct"


def resolve_master(behaviour: Mixed, hand_present: bool) -> str:
    """``hand`` or ``scripted``: the behaviour's, or for ``auto`` whether a hand is measured."""
    if behaviour.master != "auto":
        return behaviour.master
    return "hand" if hand_present else "scripted"


class MixedRun(BehaviourRun):
    """Eq. 3 drives the port along the press axis (the admittance controller is bypassed:
    :attr:`drives_port`)."""

    behaviour: Mixed
    drives_port = True

    def __init__(self, state: str, behaviour: Mixed, view: PhaseView) -> None:
        super().__init__(state, behaviour, view)
        b = behaviour
        self.dt_s = view.controller.dt_s
        self.scheme = resolve_scheme(b, view.compensator)
        self.master = resolve_master(b, view.hand_present)
        if self.master == "hand":  # the link delays f_m; the rings below are not used
            self.delay_s = view.command_delay_s
            lag = 0
        else:
            self.delay_s = view.command_delay_s if b.delay_s is None else b.delay_s
            lag = int(round(self.delay_s / self.dt_s))
        self._axis = np.asarray(b.axis, dtype=float)
        self._x0 = view.controller.position_m.copy()
        self._v = self._v_prev = float(view.controller.velocity_m_s @ self._axis)
        self._s = 0.0
        wall = view.contact_gap(self._axis)
        # the ground's model of the wall (none: a free payload)
        self._gap_m, k, c = (math.inf, 0.0, 0.0) if wall is None else wall
        self._model_k = k * (1.0 - b.model_error)
        self._model_c = c * (1.0 - b.model_error)
        # virtual arm (eqs. 4-7)
        self.x_vir = self._v_vir = self._v_vir_prev = 0.0
        self.f_vir = 0.0
        # rings of the delay line: (f_m, x_vir) up, f_s down
        self._up_force = np.zeros(lag + 1)
        self._up_x = np.zeros(lag + 1)
        self._down_force = np.zeros(lag + 1)
        self._k = 0
        self._saw_contact = False
        self.master_force_n = self.slave_force_n = 0.0
        self._sum_f2 = 0.0
        self._ticks = 0
        self.record.details.update(scheme=self.scheme, master=self.master, delay_s=self.delay_s, wall_gap_m=(
            None if wall is None else self._gap_m), target_force_n=b.target_force_n)

    def _operator(self, seen_n: float) -> float:
        """The scripted operator's master force [N] from the force they see."""
        b = self.behaviour
        if seen_n >= b.contact_seen_n:
            self._saw_contact = True
        return b.target_force_n / b.force_scale if self._saw_contact else b.approach_force_n

    def _step_virtual(self, f_m: float) -> float:
        """The ground's virtual arm one tick under the master force ``f_m`` [N] (eqs. 4-7,
        the velocity servo, the model of the posts); its position ``x_vir`` [m]."""
        b, dt = self.behaviour, self.dt_s
        command = b.force_gain_m_s_n * (b.force_scale * f_m - self.f_vir) - b.damping * (self._v_vir - self._v_vir_prev)
        self._v_vir_prev = self._v_vir
        self._v_vir += (command - self._v_vir) * min(dt / b.servo_lag_s, 1.0)
        self.x_vir += self._v_vir * dt
        depth = self.x_vir - self._gap_m
        self.f_vir = max(self._model_k * depth + self._model_c * self._v_vir, 0.0) if depth > 0.0 else 0.0
        return self.x_vir

    def _own_exit(self, view: PhaseView) -> tuple[str, str]:
        b = self.behaviour
        dt = self.dt_s
        ring = self._up_force.size
        slot = self._k % ring
        # the slave's measured force (the posts' force on the payload, opposite sign)
        f = view.force_n
        measured = -float(f[0] * self._axis[0] + f[1] * self._axis[1] + f[2] * self._axis[2])
        f_s = measured if math.isfinite(measured) else 0.0
        self.slave_force_n = f_s
        ks, g = b.force_gain_m_s_n, b.force_scale
        if self.master == "hand":
            # f_m(t − T): the hand's force along the axis as the command path delivered it;
            # the virtual arm on the same stream is x_vir(t − T)
            h, a = view.hand_force_n, self._axis
            along = float(h[0] * a[0] + h[1] * a[1] + h[2] * a[2])
            f_m_late = along if math.isfinite(along) else 0.0
            self.master_force_n = f_m_late
            x_vir_late = self._step_virtual(f_m_late)
        else:
            # the ground: what the operator sees, their force, the virtual arm (eqs. 4-7)
            seen = self.f_vir if self.scheme == "virtual" else self._down_force[slot]
            f_m = self._operator(seen)
            self.master_force_n = f_m
            self._step_virtual(f_m)
            # the delay line: what leaves the ground now arrives T later (the ring's oldest slot)
            self._up_force[slot], self._up_x[slot] = f_m, self.x_vir
            self._down_force[slot] = f_s
            nxt = (self._k + 1) % ring
            f_m_late, x_vir_late = self._up_force[nxt], self._up_x[nxt]  # with T = 0 the slot just written
        view.master_force_n[0] = f_m_late
        # the slave: eq. 3, the velocity servo, the port command
        v_c = ks * (g * f_m_late - f_s) - b.damping * (self._v - self._v_prev)
        if self.scheme == "virtual":
            p, x0, a = view.port_m, self._x0, self._axis
            x_s = (p[0] - x0[0]) * a[0] + (p[1] - x0[1]) * a[1] + (p[2] - x0[2]) * a[2]
            if math.isfinite(x_s):  # a non-finite measurement never reaches the command
                v_c += b.restraint_gain_1_s * (x_vir_late - x_s)
        self._v_prev = self._v
        self._v += (v_c - self._v) * min(dt / b.servo_lag_s, 1.0)
        self._s += self._v * dt
        controller = view.controller
        acc = (self._v - self._v_prev) / dt
        for i in range(3):
            controller.position_m[i] = self._x0[i] + self._s * self._axis[i]
            controller.velocity_m_s[i] = self._v * self._axis[i]
            controller.acceleration_m_s2[i] = acc * self._axis[i]
            controller.attractor_m[i] = controller.position_m[i]
        self._k += 1
        self._sum_f2 += f_s * f_s
        self._ticks += 1
        if view.t_s - self.record.started_s >= b.duration_s:
            self.record.details["force_mse_n2"] = self._sum_f2 / self._ticks
            error = abs(f_s - b.target_force_n)
            if error <= b.tolerance_n:
                return "succeeded", (f"pressing with {f_s:.2f} N (target {b.target_force_n:.2f} N) after "
                                     f"{b.duration_s:.2f} s, {self.scheme}, delay {self.delay_s:.3f} s")
            return "timeout", (f"pressing with {f_s:.2f} N, {error:.2f} N off the target {b.target_force_n:.2f} N "
                               f"after {b.duration_s:.2f} s")
        return "", ""

    def finish(self, view: PhaseView, result: str, reason: str) -> None:
        if self._ticks and "force_mse_n2" not in self.record.details:
            self.record.details["force_mse_n2"] = self._sum_f2 / self._ticks
        super().finish(view, result, reason)
