"""Delay compensators: what the operator's side makes of a delayed arm (docs/delay.md).

With a delayed link (:mod:`trials.delay`) the operator's side sees the arm's side one
state-path delay late and the arm follows the hand one command-path delay late. A
compensator, chosen per trial (scenario ``[delay] compensator``, CLI ``--compensator``,
registered in :data:`COMPENSATORS`), acts at two places of the tick:

* **the view** (:meth:`Compensator.view`, after the state path): what the guidance law,
  the simulated hand and the window see of end effector and debris;
* **the force path** (:meth:`Compensator.shape`): the contact force rendered to the hand
  (the tool's reaction to the physics' ``force_on_debris_n``, as it arrived over the state
  path), before it is added to guidance, framed for the device and sent through the
  device's one safety layer.

Every compensator observes the energy at the contact-feedback port (Hannaford & Ryu
2002, the *passivity observer*): with ``f`` the contact force applied to the hand and
``x`` the hand's position (both task frame, ``x`` the commanded end-effector position the
stylus maps to),

    W(k) = W(k−1) − f(k−1)·(x(k) − x(k−1))                         (PO)

is the energy the operator has put into the channel: the work of the force held over
the last tick on the displacement it saw (the exact work of a zero-order-hold force; the
textbook ``f(k)·v(k) Δt`` misses ``|f|² Δt² / 2m`` per tick on a mass ``m``, which in a
stiff contact is a few per cent of the energy per bounce). A passive channel keeps
``W ≥ 0``; delay in a stiff contact makes it negative (Campbell: the object "bounces
higher").

Compensators:

* ``none``: the delayed state as it arrives; the contact force as it arrives.
* ``predictive`` (a Smith predictor over a virtual arm and a virtual debris, as ROTEX's
  predictive simulation and Yang & Konno's virtual arm): the virtual arm follows the
  operator's *undelayed* command with the slave's own capture law (eq. 10 with the
  slave's gains, ``ẍ = ẍ_c + k_p (x_c − x) + k_d (ẋ_c − ẋ)``), so it is where the real
  arm will be one command delay later; the virtual debris is the scenario's closed-form
  motion at that same time. Each delayed sample corrects them by the model error at the
  sample's time (``x̂(t) = x_v(t) + (x_real(s) − x_v(s − T_c))`` for a sample sent at
  plant time ``s``; for the debris ``p̂ = p(s) + M(t + T_c) − M(s) + (v(s) − Ṁ(s)) (t + T_c − s)``
  with ``M`` the motion: its velocity error carried forward, zero until a contact pushes
  the debris, after which a free debris' straight drift is predicted exactly).
  Guidance works on the virtual state; the window also gets the delayed real end
  effector as a ghost.
After the capture, with a ``contact_mode`` other than ``contact``, the hand feels one of
Campbell's bodies through a clamped virtual coupling instead of the contact force
(:mod:`trials.contact_modes`): from the first tick whose state sample was sent at or
after the capture (the operator's side cannot know of it earlier), the coupling's force
replaces the contact force before the compensator's observer and controller see it.

* ``passivity`` (time-domain passivity observer and controller, Hannaford & Ryu 2002;
  Ryu, Kwon & Hannaford 2004): when the coming tick's flow would make ``W`` negative,
  ``W' = W − f·v Δt < 0`` with ``v = (x(k) − x(k−1))/Δt``, the controller adds a variable
  damper ``α`` on the hand, ``f ← f − α v`` with ``α = −W' / (|v|² Δt)`` (capped at
  ``max_damping_n_s_m``), which dissipates the energy the channel was about to create.

Everything the tick calls is allocation-free (preallocated arrays, Python floats).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from capture_trainer.errors import TrialError
from capture_trainer.registry import Registry
from scenarios.motion import TargetMotion
from trials.contact_modes import CONTACT_MODES, CouplingGains, VirtualCoupling
from trials.delay import DelayLine

Vec3 = NDArray[np.float64]

#: Below this squared hand speed [m²/s²] the passivity controller cannot dissipate (α v ≈ 0).
_MIN_SPEED_SQ = 1e-12


@dataclass(frozen=True)
class CompensatorConfig:
    """A trial's compensator and contact feedback.

    Attributes:
        name: a :data:`COMPENSATORS` name (``none`` | ``predictive`` | ``passivity``).
        contact_feedback: render the contact force to the hand (on top of guidance).
        contact_force_scale: hand newtons per newton of contact force on the tool (task
            frame; the mapping's force scale and the device's safety layer come after).
            The felt stiffness is ``k_c · scale · k_f · s`` at the device (``k_c`` the
            contact's, ``s`` the position scale): 0.02 keeps the paper scenario's contact
            (22.6 kN/m) at 790 N/m, under a Touch's nominal 1.02 N/mm (its softest axis).
        max_damping_n_s_m: cap of the passivity controller's damper [N s/m] (task frame).
        contact_mode: what the hand feels after the capture (a
            :data:`trials.contact_modes.CONTACT_MODES` name; ``contact``: the contact force
            as it arrives, zero once the tool holds).
        contact_time_constant_s: ``τ`` of the ``viscous`` body (and the damper's
            ``c = m / τ``) [s].
        coupling_share: the share of the device's passive-stiffness bound the virtual
            coupling renders, in (0, 1].
    """

    name: str = "none"
    contact_feedback: bool = False
    contact_force_scale: float = 0.02
    max_damping_n_s_m: float = 2000.0
    contact_mode: str = "contact"
    contact_time_constant_s: float = 0.5
    coupling_share: float = 0.5

    def __post_init__(self) -> None:
        if self.name not in COMPENSATORS:
            raise TrialError(COMPENSATORS.unknown_message(self.name))
        if self.contact_mode not in CONTACT_MODES:
            raise TrialError(CONTACT_MODES.unknown_message(self.contact_mode))
        if not (self.contact_time_constant_s > 0.0 and math.isfinite(self.contact_time_constant_s)):
            raise TrialError(f"contact_time_constant_s must be finite and > 0, got {self.contact_time_constant_s}")
        if not 0.0 < self.coupling_share <= 1.0:
            raise TrialError(f"coupling_share must be within (0, 1], got {self.coupling_share}")
        if not (self.contact_force_scale >= 0.0 and math.isfinite(self.contact_force_scale)):
            raise TrialError(f"contact_force_scale must be finite and >= 0, got {self.contact_force_scale}")
        if not (self.max_damping_n_s_m > 0.0 and math.isfinite(self.max_damping_n_s_m)):
            raise TrialError(f"max_damping_n_s_m must be finite and > 0, got {self.max_damping_n_s_m}")


class Compensator(Protocol):
    """What the tick calls. Arrays are (3,) float64, task frame, owned by the tick.

    Attributes:
        name: the registered name.
        predicts: :meth:`view` writes a prediction (the tick then keeps the delayed state
            apart, for the ghost).
        contact_force_scale: hand newtons per contact newton; 0: no contact feedback.
    """

    name: str
    predicts: bool
    contact_force_scale: float

    def view(self, t_s: float, command: tuple[Vec3, Vec3, Vec3], delayed: tuple[Vec3, ...], sent_s: float,
             out: tuple[Vec3, ...]) -> None:
        """The operator's view at plant time ``t_s`` [s].

        Args:
            command: the operator's command this tick (position, velocity, acceleration).
            delayed: end effector position, velocity; debris position, velocity,
                acceleration; contact force on the debris, as the state path delivered them.
            sent_s: when the held sample was sent (plant time, −inf before the first).
            out: the same six, as the operator's side is to see them.
        """
        ...

    def shape(self, t_s: float, force_n: Vec3, hand_position_m: Vec3) -> None:
        """Observe (and, for ``passivity``, correct) the contact force on the hand [N]
        in place, given the hand's position [m] (task frame); after a seen capture with
        a contact mode, the coupling's force replaces it first."""
        ...

    def captured(self, t_s: float) -> None:
        """The tool closed at plant time ``t_s`` [s] (the arm's side; the operator's side
        learns of it with the state path's samples)."""
        ...

    def metadata(self) -> dict[str, Any]:
        """Settings and energy figures for the trial log."""
        ...


COMPENSATORS: Registry[type] = Registry("compensator", error=TrialError)


class EnergyObserver:
    """The passivity observer (PO) of the contact-feedback port, eq. (PO) above.

    Attributes:
        energy_j: ``W`` [J] (task-frame work; the device sees it scaled by positive factors).
        min_energy_j: the smallest ``W`` observed [J].
        dissipated_j: energy taken out by a passivity controller [J].
        active_ticks: ticks the controller acted.
        velocity_m_s: (3,) the hand's velocity over the last tick, ``Δx / Δt`` [m/s].
    """

    def __init__(self, dt_s: float) -> None:
        self.dt_s = dt_s
        self.energy_j = 0.0
        self.min_energy_j = 0.0
        self.dissipated_j = 0.0
        self.active_ticks = 0
        self.velocity_m_s = np.zeros(3)
        self._held_force = np.zeros(3)
        self._last_position = np.zeros(3)
        self._started = False

    def observe(self, position_m: Vec3) -> float:
        """Add the held force's work over the displacement to ``position_m``; return ``W`` [J]."""
        last, held, velocity = self._last_position, self._held_force, self.velocity_m_s
        if not self._started:
            last[:] = position_m
            self._started = True
        x, y, z = float(position_m[0]), float(position_m[1]), float(position_m[2])
        if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
            velocity[:] = 0.0  # a non-finite position is not a displacement: keep the last one
            return self.energy_j
        dx, dy, dz = x - float(last[0]), y - float(last[1]), z - float(last[2])
        last[0], last[1], last[2] = x, y, z
        dt = self.dt_s
        velocity[0], velocity[1], velocity[2] = dx / dt, dy / dt, dz / dt
        work = float(held[0]) * dx + float(held[1]) * dy + float(held[2]) * dz
        if not math.isfinite(work):  # a non-finite force was held (the safety layer sent zero instead)
            return self.energy_j
        self.energy_j -= work
        if self.energy_j < self.min_energy_j:
            self.min_energy_j = self.energy_j
        return self.energy_j

    def hold(self, force_n: Vec3) -> None:
        """The force sent this tick (held until the next observation)."""
        self._held_force[:] = force_n

    def figures(self) -> dict[str, float | int]:
        return {"energy_j": self.energy_j, "min_energy_j": self.min_energy_j, "dissipated_j": self.dissipated_j,
                "passivity_active_ticks": self.active_ticks}


class _Base:
    """Settings, the observer and the pass-through view shared by every compensator."""

    name = "none"
    predicts = False

    def __init__(self, config: CompensatorConfig, dt_s: float, coupling: CouplingGains | None = None,
                 state_line: DelayLine | None = None) -> None:
        self.config = config
        self.contact_force_scale = config.contact_force_scale if config.contact_feedback else 0.0
        self.observer = EnergyObserver(dt_s)
        #: the post-capture body (None: the contact force as it arrives)
        self.coupling = VirtualCoupling(coupling, dt_s) if coupling is not None and config.contact_feedback else None
        self._state_line = state_line
        self.captured_at_s = math.inf

    def captured(self, t_s: float) -> None:
        self.captured_at_s = t_s

    def _feel(self, t_s: float, force_n: Vec3, hand_position_m: Vec3) -> None:
        """After the capture as the operator's side has seen it: the coupling's force on
        the hand replaces the contact force (``force_n``, in place)."""
        coupling = self.coupling
        if coupling is None:
            return
        if not coupling.active:
            seen_s = t_s if self._state_line is None else self._state_line.age_s
            if seen_s < self.captured_at_s:
                coupling.track(hand_position_m)
                return
            coupling.start()
        coupling.force(hand_position_m, force_n)

    def view(self, t_s: float, command: tuple[Vec3, Vec3, Vec3], delayed: tuple[Vec3, ...], sent_s: float,
             out: tuple[Vec3, ...]) -> None:
        for source, target in zip(delayed, out):
            if source is not target:
                target[:] = source

    def shape(self, t_s: float, force_n: Vec3, hand_position_m: Vec3) -> None:
        self._feel(t_s, force_n, hand_position_m)
        self.observer.observe(hand_position_m)
        self.observer.hold(force_n)

    def metadata(self) -> dict[str, Any]:
        config = self.config
        figures: dict[str, Any] = {"name": self.name, "contact_feedback": config.contact_feedback,
                                   "contact_force_scale": self.contact_force_scale, **self.observer.figures()}
        if config.contact_mode != "contact":  # the key appears only with a Campbell body (logs stay as they were)
            coupling = self.coupling
            figures["contact_mode"] = {
                "mode": config.contact_mode, "coupling": None if coupling is None else coupling.gains.as_dict(),
                "started": coupling is not None and coupling.active,
                "clamped_ticks": 0 if coupling is None else coupling.clamped_ticks}
        return figures


@COMPENSATORS.register("none")
class NoCompensation(_Base):
    """The delayed state and the contact force as they arrive (the observer only watches).

    Args:
        config: the settings; dt_s: the tick [s]. (``make_compensator`` passes more
            keyword arguments, which this one ignores.)
    """

    name = "none"

    def __init__(self, config: CompensatorConfig, dt_s: float, *, coupling: CouplingGains | None = None,
                 state_line: DelayLine | None = None, **_: Any) -> None:
        super().__init__(config, dt_s, coupling, state_line)


@COMPENSATORS.register("passivity")
class PassivityCompensation(_Base):
    """The time-domain passivity controller on the contact force (module docstring)."""

    name = "passivity"

    def __init__(self, config: CompensatorConfig, dt_s: float, *, coupling: CouplingGains | None = None,
                 state_line: DelayLine | None = None, **_: Any) -> None:
        super().__init__(config, dt_s, coupling, state_line)
        self.max_damping_n_s_m = config.max_damping_n_s_m

    def shape(self, t_s: float, force_n: Vec3, hand_position_m: Vec3) -> None:
        self._feel(t_s, force_n, hand_position_m)
        observer = self.observer
        energy = observer.observe(hand_position_m)
        v, dt = observer.velocity_m_s, observer.dt_s
        coming = energy - float(force_n[0] * v[0] + force_n[1] * v[1] + force_n[2] * v[2]) * dt
        if coming < 0.0:
            speed_sq = float(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
            if speed_sq > _MIN_SPEED_SQ:
                alpha = min(-coming / (speed_sq * dt), self.max_damping_n_s_m)
                for i in range(3):
                    force_n[i] -= alpha * v[i]
                observer.dissipated_j += alpha * speed_sq * dt
                observer.active_ticks += 1
        observer.hold(force_n)


@COMPENSATORS.register("predictive")
class PredictiveCompensation(_Base):
    """A virtual arm and a virtual debris on the operator's side (module docstring).

    Args:
        config: the settings; dt_s: the tick [s].
        motion: the debris' closed-form motion (the scenario's ``target_motion``).
        ee0_m: the end effector at ``t = 0`` [m] (the virtual arm starts there, at rest).
        gains: the slave's eq. 10 gains ``(k_p [1/s²], k_d [1/s])``.
        command_delay_s: the command path's constant delay ``T_c`` [s].
        history_s: how far back the virtual arm's states are kept [s] (the round trip
            plus the jitter; older samples are corrected against the oldest kept).
    """

    name = "predictive"
    predicts = True

    def __init__(self, config: CompensatorConfig, dt_s: float, *, motion: TargetMotion, ee0_m: Vec3,
                 gains: tuple[float, float], command_delay_s: float, history_s: float,
                 coupling: CouplingGains | None = None, state_line: DelayLine | None = None, **_: Any) -> None:
        super().__init__(config, dt_s, coupling, state_line)
        self.dt_s = dt_s
        self.motion = motion
        self.k_p, self.k_d = float(gains[0]), float(gains[1])
        self.command_delay_s = float(command_delay_s)
        self.capacity = int(math.ceil(history_s / dt_s)) + 4
        self._x = np.asarray(ee0_m, dtype=float).reshape(3).copy()
        self._v = np.zeros(3)
        self._ee0 = self._x.copy()
        self._history = np.zeros((self.capacity, 6))  # row k: virtual x, v at time (k + 1) dt
        self._ticks = 0
        self._now = (np.zeros(3), np.zeros(3), np.zeros(3))
        self._then = (np.zeros(3), np.zeros(3), np.zeros(3))
        #: the largest correction applied to the virtual arm [m] (how far the model was off)
        self.max_arm_correction_m = 0.0

    def _virtual_at(self, time_s: float) -> tuple[int, bool]:
        """The history row of the virtual arm at ``time_s`` (False: before the start)."""
        k = int(round(time_s / self.dt_s)) - 1
        if k < 0:
            return 0, False
        oldest = max(self._ticks - self.capacity, 0)
        return max(min(k, self._ticks - 1), oldest) % self.capacity, True

    def view(self, t_s: float, command: tuple[Vec3, Vec3, Vec3], delayed: tuple[Vec3, ...], sent_s: float,
             out: tuple[Vec3, ...]) -> None:
        x, v = self._x, self._v
        x_c, v_c, a_c = command
        dt, k_p, k_d = self.dt_s, self.k_p, self.k_d
        for i in range(3):  # the slave's law, semi-implicit Euler
            v[i] += (a_c[i] + k_p * (x_c[i] - x[i]) + k_d * (v_c[i] - v[i])) * dt
            x[i] += v[i] * dt
        history = self._history
        slot = self._ticks % self.capacity
        for i in range(3):
            history[slot, i], history[slot, 3 + i] = x[i], v[i]
        self._ticks += 1
        ee, ee_v, debris, debris_v, debris_a, force = out
        d_ee, d_ee_v, d_debris, d_debris_v, _, d_force = delayed
        sent = sent_s if sent_s > -math.inf else 0.0
        index, started = self._virtual_at(sent - self.command_delay_s)
        ee0 = self._ee0
        correction = 0.0
        for i in range(3):  # before the start the slave held the end effector still at ee0
            then_x = history[index, i] if started else ee0[i]
            then_v = history[index, 3 + i] if started else 0.0
            dx = d_ee[i] - then_x
            correction += dx * dx
            ee[i] = x[i] + dx
            ee_v[i] = v[i] + d_ee_v[i] - then_v
        correction = math.sqrt(correction)
        if correction > self.max_arm_correction_m:
            self.max_arm_correction_m = correction
        now_p, now_v, now_a = self._now
        then_p, then_v3, then_a = self._then
        self.motion.state(t_s + self.command_delay_s, now_p, now_v, now_a)
        self.motion.state(sent, then_p, then_v3, then_a)
        ahead = t_s + self.command_delay_s - sent
        for i in range(3):
            velocity_error = d_debris_v[i] - then_v3[i]  # zero until something pushes the debris
            debris[i] = d_debris[i] + now_p[i] - then_p[i] + velocity_error * ahead
            debris_v[i] = now_v[i] + velocity_error
            debris_a[i] = now_a[i]
        if force is not d_force:
            force[:] = d_force

    @property
    def virtual_position_m(self) -> Vec3:
        """The virtual arm's end effector now [m] (read-only view)."""
        return self._x

    def metadata(self) -> dict[str, Any]:
        return {**super().metadata(), "command_delay_s": self.command_delay_s,
                "max_arm_correction_m": self.max_arm_correction_m}


def make_compensator(config: CompensatorConfig, dt_s: float, **context: Any) -> Compensator:
    """The registered compensator of ``config`` (``context``: what ``predictive`` needs:
    ``motion``, ``ee0_m``, ``gains``, ``command_delay_s``, ``history_s``; for every one,
    the post-capture ``coupling`` (:class:`trials.contact_modes.CouplingGains`) and the
    link's ``state_line``, whose samples tell when the operator's side sees the capture)."""
    factory = COMPENSATORS.get(config.name)
    compensator: Compensator = factory(config, dt_s, **context)
    return compensator
