"""Simulated participants: a human operator model holding the stylus.

The operator sees the scene (target and end effector, mapped to the device frame by the
trial tick) through a reaction delay, plans minimum-jerk submovements that intercept the
target at its velocity, and moves the stylus through an arm endpoint impedance, so that
guidance forces on the stylus move the hand. Sources (see docs/haptics.md):

* minimum-jerk point-to-point movements: Flash & Hogan 1985 (J. Neurosci. 5:1688);
  quintic with boundary positions, velocities and accelerations;
* reaction / visuomotor correction delay 150-250 ms: Welford 1980, Day & Lyon 2000;
* movement time grows with log2 of distance/width: Fitts 1954;
* discrete, overlapping corrective submovements: Meyer et al. 1988 (Psychol. Rev. 95:340),
  Novak et al. 2000; primary submovements planned short where an overshoot costs more
  (the undershoot bias): Elliott et al. 2004 (J. Mot. Behav. 36:339), 2010 (Psychol.
  Bull. 136:1023); intermittent re-planning at 2-5 Hz: Craik 1947, Gawthrop et al. 2011;
* endpoint impedance of the arm: mass 1-2 kg, stiffness 200-800 N/m, damping 5-30 N s/m
  (Mussa-Ivaldi et al. 1985, Dolan et al. 1993, Burdet et al. 2001); co-contraction raises
  stiffness, relaxing lowers it (Burdet 2001, Franklin 2008); co-contraction (stiffness
  and damping together: Gomi & Osu 1998) rises with the magnitude of the hand's error
  and decays at a constant rate without it, the V-shaped rule of Franklin et al. 2008
  (J. Neurosci. 28:11165), applied here within the trial;
* signal-dependent motor noise, SD proportional to the motor command: Harris & Wolpert
  1998 (Nature 394:780), van Beers et al. 2004; speed discrimination Weber fraction
  ~5-10 %: McKee 1981;
* interception of moving targets with velocity prediction; people hit rather than stop
  at them: Brenner & Smeets 1996/2018;
* forward models that predict the hand's effect despite feedback delays (Smith
  predictor): Miall et al. 1993, Wolpert et al. 1995; internal models of limb dynamics
  (feedforward): Shadmehr & Mussa-Ivaldi 1994;
* humans yield to (or fight) haptic shared control by changing grip impedance: Abbink
  et al. 2012 (Cogn. Tech. Work 14:19);
* grasping aims at contact points on the object's surface, not at its centre: Smeets &
  Brenner 1999 (Motor Control 3:237);
* a felt force is a second cue, combined with vision by maximum-likelihood integration:
  Ernst & Banks 2002 (Nature 415:429);
* indexing (clutching) lets a small device span a large workspace: Conti & Khatib 2005
  (WHC); the hand presses and releases the engage button through the device;
* interceptions are timed to when the target comes within reach: Tresilian 2005
  (Percept. Psychophys. 67:129), Brenner & Smeets 1996; so the hand does not let go of
  the arm (re-index) when the target is about to come within reach;
* skill that changes with practice: ``haptics.learning`` (the model's assumption).

Sign convention (``haptics.device``): the device force is the force on the stylus. The
hand force on the stylus is

    f_e = M_ff a_plan + K (x_eq − x) + B (v_eq − v) + n − M ẍ     (device frame, N)

where ``x_eq, v_eq`` is the hand's equilibrium trajectory (the plan, shifted by how much
the operator has yielded to the guidance), ``M_ff a_plan`` the feedforward of the plan's
acceleration (internal model of hand + stylus mass), ``n`` motor noise and ``M ẍ`` the
hand's own inertia. While the operator goes along with felt guidance the active terms
are scaled down by its grip (see ``ParticipantParams.relaxed_grip``).
``SimulatedDevice`` integrates the stylus and the hand's mass together; the operator
supplies the drive force (everything but ``−K x − B v``, which the device integrates
exactly) and its impedance ``(M, B, K)`` for the trial.
"""

from __future__ import annotations

import math
from dataclasses import replace
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from haptics import _kernels as _k
from haptics.device import BUTTON_ENGAGE
from haptics.participants import PARTICIPANT_PRESETS, ParticipantParams

#: Gaussian draws kept in the operator's preallocated noise buffer (refilled in place).
_NOISE_DRAWS = 3 * 4096
#: A Touch's usable workspace [m], device frame (3D Systems datasheet: 160 x 120 x 70 mm),
#: the operator's default idea of where the stylus can go (``set_workspace`` changes it).
TOUCH_WORKSPACE_M = ((-0.08, -0.06, -0.035), (0.08, 0.06, 0.035))


@runtime_checkable
class Operator(Protocol):
    """What ``SimulatedDevice`` needs from whoever holds the stylus (device frame, SI)."""

    params: ParticipantParams
    #: The device buttons the hand holds (``haptics.device.BUTTON_*`` bits): the engage
    #: button held means coupled; released, the stylus is clutched (indexing).
    buttons: int

    def reset(self, t_s: float, position_dev_m: NDArray[np.float64], trial_seed: int | None = None) -> None:
        """Start a trial: hand at rest at ``position_dev_m``; draw the trial's choices."""
        ...

    def set_workspace(self, low_m: Sequence[float], high_m: Sequence[float]) -> None:
        """The device's usable workspace [m], device frame (where clutching starts)."""
        ...

    def impedance(self) -> tuple[float, float, float]:
        """(mass kg, damping N s/m, stiffness N/m) of the hand for the current trial."""
        ...

    def perceive(
        self,
        t_s: float,
        target_position_dev_m: NDArray[np.float64],
        target_velocity_dev_m_s: NDArray[np.float64],
        ee_position_dev_m: NDArray[np.float64],
        ee_velocity_dev_m_s: NDArray[np.float64],
    ) -> None:
        """What the operator sees at ``t_s``, mapped to the device frame."""
        ...

    def drive(
        self,
        t_s: float,
        position_dev_m: NDArray[np.float64],
        velocity_dev_m_s: NDArray[np.float64],
        felt_force_n: NDArray[np.float64],
        out: NDArray[np.float64],
    ) -> None:
        """Write the drive force (all of the hand force but ``−K x − B v``) [N] into ``out``."""
        ...


def quintic_coefficients(
    x0: float, v0: float, a0: float, x1: float, v1: float, a1: float, duration_s: float,
    out: NDArray[np.float64],
) -> None:
    """Minimum-jerk (quintic) x(τ) = Σ c_k τ^k, τ ∈ [0, T], with given boundary states.

    Flash & Hogan 1985: the jerk-minimising trajectory between two states is the quintic
    matching positions, velocities and accelerations at both ends. Writes c_0..c_5.
    """
    t = duration_s
    t2 = t * t
    t3 = t2 * t
    t4 = t3 * t
    t5 = t4 * t
    d = x1 - x0 - v0 * t - 0.5 * a0 * t2
    dv = v1 - v0 - a0 * t
    da = a1 - a0
    out[0] = x0
    out[1] = v0
    out[2] = 0.5 * a0
    out[3] = (10.0 * d - 4.0 * dv * t + 0.5 * da * t2) / t3
    out[4] = (-15.0 * d + 7.0 * dv * t - da * t2) / t4
    out[5] = (6.0 * d - 3.0 * dv * t + 0.5 * da * t2) / t5


class HumanOperator:
    """The operator model (module docstring). Deterministic for (seed, trial seed).

    Args:
        params: the participant.
        seed: the participant's seed (motor noise and choices derive from it and from
            the trial seed given to ``reset``).
        dt_s: the servo period [s] (sizes the percept ring buffer).
    """

    def __init__(self, params: ParticipantParams, seed: int = 0, dt_s: float = 1e-3) -> None:
        PARTICIPANT_PRESETS.get(params.kind)  # an unknown kind raises, naming the known ones
        if not dt_s > 0.0:
            raise ValueError(f"dt_s must be positive, got {dt_s}")
        self.params = params
        self.seed = int(seed)
        self.dt_s = float(dt_s)
        cap = int(math.ceil(params.reaction_time_s / dt_s)) + 8
        self._cap = cap
        # Percept ring: t, target pos (3), target vel (3), ee pos (3), ee vel (3), and
        # the hand's position when it was seen (proprioception, 3).
        self._ring = np.zeros((cap, 16))
        # Per-tick state in arrays the compiled kernel updates (haptics._kernels).
        self._s = np.zeros(_k.N_STATE)
        self._p = np.zeros(_k.N_PARAMS)
        self._p[_k.P_YIELD_FORCE] = params.yield_force_n
        self._p[_k.P_DISAGREE] = params.disagree_weight
        self._p[_k.P_YIELD_TAU] = params.yield_tau_s
        self._p[_k.P_RELAXED_GRIP] = params.relaxed_grip
        self._p[_k.P_RESIST_GAIN] = params.resist_stiffness_gain
        self._p[_k.P_NOISE_TAU] = params.noise_tau_s
        self._p[_k.P_NOISE_CONST] = params.noise_const_n
        self._p[_k.P_NOISE_GAIN] = params.noise_gain
        self._p[_k.P_TOOL_MASS] = params.tool_mass_kg
        self._p[_k.P_HAS_INTENT] = 1.0 if params.has_intent else 0.0
        self._p[_k.P_CC_RATE] = params.cocontraction_rate
        self._p[_k.P_CC_DECAY] = params.cocontraction_decay
        self._p[_k.P_CC_DELTA] = params.cocontraction_delta_s
        self._p[_k.P_CC_MAX] = params.cocontraction_max
        self._p[_k.P_EVENT_DEV] = params.replan_deviation_m
        self._p[_k.P_EVENT_LATENCY] = params.correction_latency_s
        self._p[_k.P_EVENT_REFRACTORY] = params.replan_interval_s
        self._vec = np.zeros((_k.N_VECTORS, 3))
        self._x_hand = self._vec[_k.V_X_HAND]
        self._x_eq = self._vec[_k.V_X_EQ]
        self._want = self._vec[_k.V_WANT]
        self._noise = self._vec[_k.V_NOISE]
        self._yield_x = self._vec[_k.V_YIELD_X]
        self._yield_v = self._vec[_k.V_YIELD_V]
        self._goal_x = self._vec[_k.V_GOAL_X]
        self._goal_v = self._vec[_k.V_GOAL_V]
        self._offset = [0.0, 0.0, 0.0]
        # where the hand must go for the end effector to touch the target [m], and how that moves [m/s]
        self._reach_x = np.zeros(3)
        self._reach_v = np.zeros(3)
        self._coef = np.zeros((3, 6))
        self.buttons = BUTTON_ENGAGE
        self.set_workspace(*TOUCH_WORKSPACE_M)
        # The Gaussian draws, consumed in order (a refill continues the generator's stream).
        self._noise_buf = np.zeros(_NOISE_DRAWS)
        # Load the compiled kernels now (scratch state), not in the first servo tick.
        z = np.zeros(3)
        _k.operator_drive(self._s.copy(), self._p, self._vec.copy(), self._coef.copy(), self._noise_buf,
                          0.0, z, z, z, np.zeros(3))
        _k.store_percept(self._ring.copy(), 0, 0.0, z, z, z, z, self._vec)
        _k.plan_state(self._s, self._vec, self._coef, 0.0, 0)
        self.reset(0.0, np.zeros(3))

    # -- trial set-up ------------------------------------------------------------

    def reset(self, t_s: float, position_dev_m: NDArray[np.float64], trial_seed: int | None = None) -> None:
        """Start a trial with the hand at rest at ``position_dev_m`` [m] at ``t_s`` [s]."""
        p = self.params
        s = self._s
        entropy = [self.seed] if trial_seed is None else [self.seed, int(trial_seed)]
        self._rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))
        self.resisting = bool(self._rng.random() < p.resist_probability)
        gain = p.resist_stiffness_gain if self.resisting else 1.0
        s[_k.S_M] = p.hand_mass_kg
        s[_k.S_B] = p.hand_damping_n_s_m * gain
        s[_k.S_K] = p.hand_stiffness_n_m * gain
        s[_k.S_COMPLIANCE] = 0.1 * p.compliance if self.resisting else p.compliance
        self._rng.standard_normal(out=self._noise_buf)
        s[_k.S_NOISE_I] = 0.0
        s[_k.S_ACTIVE_N] = 0.0
        s[_k.S_GRIP] = 1.0
        s[_k.S_COCON] = 0.0
        s[_k.S_EVENT_T] = math.inf
        s[_k.S_GUIDED] = 0.0
        self._vec[:] = 0.0
        self._n_percepts = 0
        self._read = -1
        self._first_percept_t = math.nan
        self._next_plan_t = math.inf
        self.submovements = 0
        self.buttons = BUTTON_ENGAGE
        self.clutches = 0
        # Clutching (indexing): when the hand, released, re-engages; where it was when
        # it pressed; and per completed clutch (press time, release time, shift [m]):
        # what was seen before the release is in the frame before the re-anchoring.
        self._release_t = math.inf
        self._last_gap_m = math.inf
        self._reach_x[:] = 0.0
        self._reach_v[:] = 0.0
        self._reach_t = math.nan
        self._holding = False
        self._press_t = math.nan
        self._press_x = [0.0, 0.0, 0.0]
        self._clutch_log: list[tuple[float, float, list[float]]] = []
        x = [float(v) for v in position_dev_m]
        self._x_eq[:] = x
        self._x_hand[:] = x
        self._offset[:] = [0.0, 0.0, 0.0]
        self._offset_t = math.nan
        s[_k.S_PLAN_T0] = t_s
        s[_k.S_PLAN_T] = self.dt_s
        for k in range(3):
            quintic_coefficients(x[k], 0.0, 0.0, x[k], 0.0, 0.0, self.dt_s, self._coef[k])
            self._goal_x[k] = x[k]
            self._goal_v[k] = 0.0
        s[_k.S_LAST_T] = t_s

    @property
    def guided(self) -> bool:
        """Whether the operator has felt guidance (at least ``yield_force_n``) this trial."""
        return bool(self._s[_k.S_GUIDED] != 0.0)

    def impedance(self) -> tuple[float, float, float]:
        """(mass kg, damping N s/m, stiffness N/m) for this trial."""
        s = self._s
        return float(s[_k.S_M]), float(s[_k.S_B]), float(s[_k.S_K])

    def set_workspace(self, low_m: Sequence[float], high_m: Sequence[float]) -> None:
        """The usable workspace [m], device frame: the operator clutches within
        ``clutch_margin_m`` of its faces when its plan would leave it."""
        low = [float(v) for v in low_m]
        high = [float(v) for v in high_m]
        if len(low) != 3 or len(high) != 3 or not all(lo < hi for lo, hi in zip(low, high, strict=True)):
            raise ValueError(f"the workspace must be 3 increasing intervals, got {low_m!r} .. {high_m!r}")
        self._ws_low = low
        self._ws_high = high
        self._ws_box = np.array([low, high])

    @property
    def clutched(self) -> bool:
        """Whether the hand has released the engage button (the stylus is clutched)."""
        return not self.buttons & BUTTON_ENGAGE

    # -- per tick ------------------------------------------------------------------

    def perceive(
        self,
        t_s: float,
        target_position_dev_m: NDArray[np.float64],
        target_velocity_dev_m_s: NDArray[np.float64],
        ee_position_dev_m: NDArray[np.float64],
        ee_velocity_dev_m_s: NDArray[np.float64],
    ) -> None:
        """Store what is seen at ``t_s`` (device frame); it is used ``reaction_time_s`` later."""
        n = self._n_percepts
        _k.store_percept(
            self._ring, n % self._cap, t_s, target_position_dev_m, target_velocity_dev_m_s,
            ee_position_dev_m, ee_velocity_dev_m_s, self._vec,
        )
        if n == 0:
            self._first_percept_t = t_s
            if self.params.has_intent:
                self._next_plan_t = t_s + self.params.reaction_time_s
        self._n_percepts = n + 1

    def _delayed_row(self, t_s: float) -> NDArray[np.float64] | None:
        """The newest percept at least ``reaction_time_s`` old (advances a read pointer)."""
        cutoff = t_s - self.params.reaction_time_s + 1e-9
        n = self._n_percepts
        read = self._read
        oldest = n - self._cap
        if read < oldest:
            read = oldest
        while read + 1 < n and self._ring[(read + 1) % self._cap, 0] <= cutoff:
            read += 1
        self._read = read
        if read < 0 or self._ring[read % self._cap, 0] > cutoff:
            return None
        row: NDArray[np.float64] = self._ring[read % self._cap]
        return row

    def _plan_state(self, t_s: float, k: int) -> tuple[float, float, float]:
        """Planned position, velocity, acceleration of axis ``k`` at ``t_s``."""
        return _k.plan_state(self._s, self._vec, self._coef, t_s, k)  # type: ignore[no-any-return]

    def _refill(self) -> None:
        """Keep the unread draws at the front, refill the rest from the generator.

        The draws are consumed in the generator's stream order whatever the refill
        points (a fill of n values continues the stream of the previous fill).
        """
        buf = self._noise_buf
        i = int(self._s[_k.S_NOISE_I])
        left = _NOISE_DRAWS - i
        buf[:left] = buf[i:]
        self._rng.standard_normal(out=buf[left:])
        self._s[_k.S_NOISE_I] = 0.0

    def _gauss(self) -> float:
        if self._s[_k.S_NOISE_I] >= _NOISE_DRAWS:
            self._refill()
        i = int(self._s[_k.S_NOISE_I])
        self._s[_k.S_NOISE_I] = i + 1
        return float(self._noise_buf[i])

    def _plan(self, t_s: float, row: NDArray[np.float64]) -> None:
        """Start a new submovement that intercepts the (predicted) target."""
        p = self.params
        lag = t_s - row[0]
        ex = p.extrapolation * lag
        r = row.tolist()
        # A percept from before a clutch's release is in the frame before the mapping
        # was re-anchored: everything seen has moved by the hand's travel while clutched.
        mid_clutch = False
        for pressed_t, released_t, shift in self._clutch_log:
            if r[0] < released_t:
                for k in range(3):
                    r[1 + k] += shift[k]
                    r[7 + k] += shift[k]
                mid_clutch = mid_clutch or r[0] >= pressed_t
        # Holding: the end effector was seen at the target (closer than two surface
        # offsets, centre to end effector); it lets go of that belief only once it sees
        # the target get away (farther than four).
        seen_gap_m = math.sqrt(sum((r[1 + k] - r[7 + k]) ** 2 for k in range(3)))
        if seen_gap_m < 2.0 * p.surface_offset_m:
            self._holding = True
        elif seen_gap_m > 4.0 * p.surface_offset_m:
            self._holding = False
        tgt = [r[1 + k] + r[4 + k] * ex for k in range(3)]
        speed_factor = 1.0 + p.speed_weber * self._gauss()
        vt = [r[4 + k] * speed_factor for k in range(3)]
        start = [self._plan_state(t_s, k) for k in range(3)]
        # Fold what the operator yielded so far into the new plan's start.
        x0 = [start[k][0] + self._yield_x[k] for k in range(3)]
        v0 = [start[k][1] + self._yield_v[k] for k in range(3)]
        a0 = [start[k][2] for k in range(3)]
        # Where the end effector is now: what was seen, moved on by the hand's own
        # commanded motion since (forward model / Smith predictor, Miall et al. 1993).
        # The operator predicts the end effector from its own hand: it has learned
        # the mapping's offset between the two (a slow average of what it saw), so the
        # slave's transient lag and the visual delay are not mistaken for errors
        # (forward model / Smith predictor: Miall et al. 1993; Wolpert et al. 1995).
        seen_offset = [r[7 + k] - r[13 + k] for k in range(3)]
        if mid_clutch:
            pass  # seen while the stylus was decoupled: no evidence of the coupled offset
        elif self._offset_t != self._offset_t:
            self._offset[:] = seen_offset
        else:
            learn = 1.0 - math.exp(-(row[0] - self._offset_t) / p.offset_learn_s)
            for k in range(3):
                self._offset[k] += learn * (seen_offset[k] - self._offset[k])
        if not mid_clutch:
            self._offset_t = r[0]
        fm = p.forward_model_gain
        ee = [r[7 + k] + fm * (x0[k] + self._offset[k] - r[7 + k]) for k in range(3)]
        # Duration: Fitts' law on the relative displacement (the gap to close; moving
        # along with the target is pursuit, not aiming).
        gap = [tgt[k] - ee[k] for k in range(3)]
        gap_m = math.sqrt(sum(g * g for g in gap))
        self._last_gap_m = gap_m
        # Where the hand must go for the end effector to touch the target, and how that
        # moves (the target in the hand's frame; used to decide when to re-index).
        for k in range(3):
            self._reach_x[k] = x0[k] + gap[k]
            self._reach_v[k] = vt[k]
        self._reach_t = t_s
        duration = max(p.min_duration_s, p.fitts_a_s + p.fitts_b_s * math.log2(1.0 + gap_m / p.fitts_width_m))
        move = [gap[k] + vt[k] * duration for k in range(3)]
        dist = math.sqrt(sum(m * m for m in move))
        # Endpoint error proportional to the mean speed D/T (Meyer et al. 1988), along
        # the movement and across it.
        mean_speed = dist / duration
        along = p.endpoint_k_s * mean_speed * self._gauss()
        if dist > 1e-9:
            u = [m / dist for m in move]
            w = [self._gauss(), self._gauss(), self._gauss()]
            wu = sum(w[k] * u[k] for k in range(3))
            cue = math.sqrt(1.0 - p.haptic_cue_weight) if self.guided else 1.0
            # Aim short by undershoot_z SDs of the endpoint error along the movement
            # (an overshoot is an impact: Meyer et al. 1988; Elliott et al. 2004), at
            # most the gap beyond the near surface.
            short_sd = min(p.undershoot_z * p.endpoint_k_s * mean_speed * cue,
                           max(0.0, gap_m - p.surface_offset_m))
            err = [((w[k] - wu * u[k]) * p.lateral_k_s * mean_speed + along * u[k]) * cue - short_sd * u[k]
                   for k in range(3)]
        else:
            err = [0.0, 0.0, 0.0]
        duration *= max(0.5, 1.0 + p.duration_sd * self._gauss())
        # Final velocity: the target's as perceived, scaled by a speed-matching error
        # (over- or undershoot of the target's speed), plus a smaller error in any
        # direction; both proportional to the target's speed.
        vt_speed = math.sqrt(sum(v * v for v in vt))
        # With guidance felt, the force is a second, haptic cue of where the target is
        # and how to arrive; combined with vision (maximum-likelihood cue integration:
        # Ernst & Banks 2002) the final approach's errors shrink by sqrt(1 - w_h), w_h
        # the weight of the haptic cue. A complying operator also leaves the final
        # approach to the force: its own errors shrink by its compliance. The smaller
        # of the two factors applies.
        own = min(1.0 - float(self._s[_k.S_COMPLIANCE]), math.sqrt(1.0 - p.haptic_cue_weight)) if self.guided else 1.0
        speed_gain = 1.0 + own * p.velocity_match_sd * self._gauss()
        vm = 0.3 * own * p.velocity_match_sd * vt_speed
        # Interceptive habit: aim through the target (hit rather than match), by a
        # fraction of the gap, so that contact comes before the plan has slowed down.
        through = own * min(0.5, max(-0.5, p.aim_through + p.aim_through_sd * self._gauss()))
        # Aim at the target's near surface, not its centre (grasping aims at contact
        # points: Smeets & Brenner 1999), so the plan's deceleration ends at contact;
        # a correction closer than two offsets aims further in, the last at the centre.
        short_m = min(p.surface_offset_m, max(0.0, gap_m - p.surface_offset_m))
        short = short_m / gap_m if gap_m > 1e-9 else 0.0
        for k in range(3):
            x1 = x0[k] + move[k] + err[k] + (through - short) * gap[k]
            v1 = vt[k] * speed_gain + vm * self._gauss()
            quintic_coefficients(x0[k], v0[k], a0[k], x1, v1, 0.0, duration, self._coef[k])
            self._goal_x[k] = x1
            self._goal_v[k] = v1
            self._yield_x[k] = 0.0
            self._yield_v[k] = 0.0
        self._s[_k.S_PLAN_T0] = t_s
        self._s[_k.S_PLAN_T] = duration
        self.submovements += 1
        jitter = 1.0 + 0.2 * self._gauss()
        self._next_plan_t = t_s + max(p.replan_interval_s, p.overlap * duration) * max(0.5, jitter)

    def _maybe_clutch(self, t_s: float, x: NDArray[np.float64], v: NDArray[np.float64]) -> None:
        """Clutch (indexing: Conti & Khatib 2005) when the current plan cannot be finished
        inside the usable workspace and the target is not about to come within reach.

        * Trigger: the hand, looking ``clutch_lookahead_s`` ahead at its velocity, is
          within ``clutch_margin_m`` of a face and the plan goes on *through* that face
          (its end point, or where its pursuit has taken it a look-ahead from now, lies
          beyond the face). A plan that ends inside the workspace is finished first.
        * Holding: no clutch while the hand holds the target (its last planned gap under
          two surface offsets, or it has seen the end effector at the target, closer
          than two surface offsets centre to end effector, and not yet seen it get
          farther than four): letting go of the arm then would drop the debris.
        * Within reach: re-indexing takes the return movement plus ``clutch_dwell_s``,
          during which the arm holds still; if the target (seen in the hand's frame: where
          the hand must go for the end effector to touch it, moving at its perceived
          velocity) is inside the usable workspace now or enters it within that time, the
          hand keeps going instead (interception is timed to when the target comes
          within reach: Tresilian 2005; Brenner & Smeets 1996). A receding target is
          tracked while it is reachable; once it has left the workspace the hand
          re-indexes.
        * Re-indexing: release the engage button and move the stylus (a minimum-jerk
          return, Fitts duration) so that the plan's end point lands in the middle of the
          workspace along each axis it is out on (clipped inside the workspace): the next
          movement then fits, and a receding target gets a full stroke rather than half;
          hold ``clutch_dwell_s`` and press again (:meth:`_release`).
        """
        p = self.params
        if self._holding or self._last_gap_m < 2.0 * p.surface_offset_m:
            return  # holding on to the target: letting go of the arm would drop it
        margin = p.clutch_margin_m
        ahead = p.clutch_lookahead_s
        low, high, goal, goal_v = self._ws_low, self._ws_high, self._goal_x, self._goal_v
        s = self._s
        plan_end_t = s[_k.S_PLAN_T0] + s[_k.S_PLAN_T]
        run_on = t_s + ahead - plan_end_t
        if run_on < 0.0:
            run_on = 0.0
        for k in range(3):  # per tick: no allocation unless it is about to clutch
            near = x[k] + v[k] * ahead
            end = goal[k] + goal_v[k] * run_on
            if (near > high[k] - margin and end > high[k]) or (near < low[k] + margin and end < low[k]):
                break
        else:
            return
        ends = [float(goal[k] + goal_v[k] * run_on) for k in range(3)]
        start = [self._plan_state(t_s, k) for k in range(3)]
        x0 = [start[k][0] + self._yield_x[k] for k in range(3)]
        v0 = [start[k][1] + self._yield_v[k] for k in range(3)]
        x1 = list(x0)
        for k in range(3):
            if ends[k] > high[k] or ends[k] < low[k]:
                # Re-anchoring moves the plan's end by the hand's travel: put it mid-way.
                lo, hi = low[k] + 2.0 * margin, high[k] - 2.0 * margin
                x1[k] = min(hi, max(lo, x0[k] + 0.5 * (low[k] + high[k]) - ends[k]))
        dist = math.sqrt(sum((x1[k] - x0[k]) ** 2 for k in range(3)))
        duration = max(p.min_duration_s, p.fitts_a_s + p.fitts_b_s * math.log2(1.0 + dist / p.fitts_width_m))
        if self._reachable_within(t_s, duration + p.clutch_dwell_s):
            return
        self.buttons &= ~BUTTON_ENGAGE
        self.clutches += 1
        for k in range(3):
            quintic_coefficients(x0[k], v0[k], start[k][2], x1[k], 0.0, 0.0, duration, self._coef[k])
            self._goal_x[k] = x1[k]
            self._goal_v[k] = 0.0
            self._yield_x[k] = 0.0
            self._yield_v[k] = 0.0
            self._press_x[k] = float(x[k])
        s[_k.S_PLAN_T0] = t_s
        s[_k.S_PLAN_T] = duration
        self._press_t = t_s
        self._release_t = t_s + duration + p.clutch_dwell_s
        self._next_plan_t = math.inf

    def _reachable_within(self, t_s: float, horizon_s: float) -> bool:
        """Whether the target, in the hand's frame as last planned (where the hand must go
        for the end effector to touch it, moving at its perceived velocity), is inside the
        usable workspace at some time in ``[t_s, t_s + horizon_s]`` (slab test)."""
        return bool(_k.reachable_within(self._reach_x, self._reach_v, t_s - self._reach_t, self._ws_box[0],
                                         self._ws_box[1], horizon_s))

    def _release(self, t_s: float, x: NDArray[np.float64]) -> None:
        """Press the engage button again: the mapping re-anchors the stylus where it is
        now, so everything seen moves by the hand's travel while clutched; re-plan."""
        self.buttons |= BUTTON_ENGAGE
        shift = [float(x[k]) - self._press_x[k] for k in range(3)]
        self._clutch_log.append((self._press_t, t_s, shift))
        self._release_t = math.inf
        self._next_plan_t = t_s

    def prepare_drive(self, t_s: float, position_dev_m: NDArray[np.float64],
                      velocity_dev_m_s: NDArray[np.float64]) -> None:
        """:meth:`drive`'s Python part for the period from ``t_s``: clutch or re-engage when
        due, re-plan when due, refill the noise draws when low; the compiled drive follows
        (in :meth:`drive`, or in the fused tick's kernel, which calls this alone on a
        period that only re-plans or refills)."""
        if self.buttons & BUTTON_ENGAGE:
            if self.params.has_intent and self._next_plan_t < math.inf:
                self._maybe_clutch(t_s, position_dev_m, velocity_dev_m_s)
        elif t_s >= self._release_t:
            self._release(t_s, position_dev_m)
        if t_s >= self._next_plan_t or t_s >= self._s[_k.S_EVENT_T]:
            row = self._delayed_row(t_s)
            if row is not None:
                self._plan(t_s, row)
            self._s[_k.S_EVENT_T] = math.inf
        if self._s[_k.S_NOISE_I] > _NOISE_DRAWS - 3:
            self._refill()

    def drive(
        self,
        t_s: float,
        position_dev_m: NDArray[np.float64],
        velocity_dev_m_s: NDArray[np.float64],
        felt_force_n: NDArray[np.float64],
        out: NDArray[np.float64],
    ) -> None:
        """Write the drive force [N] (device frame, module docstring) for the period from ``t_s``.

        Per period: clutch or re-engage when due (:meth:`_maybe_clutch`,
        :meth:`_release`), re-plan when due (:meth:`_plan`), then the compiled
        ``haptics._kernels.operator_drive``:

        * yielding: the equilibrium drifts toward where the guidance has put the hand,
          more for guidance that pulls where the operator wants to go anyway (shared
          control: Abbink et al. 2012), weighted by the agreement ``cos θ`` between the
          felt force and the operator's own desired force on the previous tick; once a
          force of ``yield_force_n`` was felt the operator knows guidance is on and, as
          far as it complies, goes along with it for the rest of the trial; what
          agreement no longer justifies is taken back (the equilibrium returns to the
          plan);
        * grip: relaxes toward ``relaxed_grip`` while following felt guidance, back to 1
          without it, and stiffens up to ``resist_stiffness_gain`` when pushed against
          its will (co-contraction: Burdet et al. 2001; Franklin et al. 2008);
        * co-contraction ``c`` (Franklin et al. 2008's V-shaped rule, in time):
          ``dc/dt = r |ε| − γ``, ``0 <= c <= c_max``, ``ε = (x − x_eq) + δ (v − v_eq)``
          the hand's error against its intended trajectory; the active spring-damper is
          scaled by ``grip + c`` (the device integrates the unscaled impedance), so
          stiffness and damping rise together;
        * motor noise: first-order (coloured) Gaussian, SD = const + gain * |active
          force| (Harris & Wolpert 1998);
        * the passive follower rests around wherever it is, with no intent.

        Args:
            t_s: time [s].
            position_dev_m, velocity_dev_m_s: (3,) stylus (= hand) state, device frame.
            felt_force_n: (3,) force the device applies to the stylus [N].
            out: (3,) written with the drive force [N].
        """
        self.prepare_drive(t_s, position_dev_m, velocity_dev_m_s)
        _k.operator_drive(
            self._s, self._p, self._vec, self._coef, self._noise_buf,
            t_s, position_dev_m, velocity_dev_m_s, felt_force_n, out,
        )


def make_operator(kind: str, seed: int = 0, dt_s: float = 1e-3) -> HumanOperator:
    """The built-in participant ``kind`` (a name in :data:`PARTICIPANT_PRESETS`)."""
    preset = PARTICIPANT_PRESETS.get(kind)
    return HumanOperator(replace(preset, participant_id=f"{kind}-{seed}"), seed=seed, dt_s=dt_s)


#: Individual differences: the log-normal spread (SD of the log) of each parameter a
#: population sampler varies around the kind's preset. Fractions are clipped to [0, 1].
POPULATION_SPREAD: dict[str, float] = {
    "reaction_time_s": 0.12,
    "extrapolation": 0.1,
    "forward_model_gain": 0.08,
    "hand_mass_kg": 0.2,
    "hand_stiffness_n_m": 0.25,
    "hand_damping_n_s_m": 0.25,
    "fitts_a_s": 0.15,
    "fitts_b_s": 0.15,
    "endpoint_k_s": 0.25,
    "lateral_k_s": 0.25,
    "velocity_match_sd": 0.25,
    "aim_through": 0.3,
    "noise_gain": 0.25,
    "compliance": 0.15,
    "relaxed_grip": 0.2,
    "resist_probability": 0.4,
}
_FRACTIONS = frozenset(
    {"extrapolation", "forward_model_gain", "compliance", "relaxed_grip", "resist_probability"}
)


def _allocate(n: int, mix: dict[str, float]) -> list[str]:
    """Exactly ``n`` kinds in the proportions of ``mix`` (largest remainders)."""
    total = sum(mix.values())
    if not mix or total <= 0.0 or any(w < 0.0 for w in mix.values()):
        raise ValueError(f"mix must have non-negative weights with a positive sum, got {mix!r}")
    for kind in mix:
        PARTICIPANT_PRESETS.get(kind)  # an unknown kind raises, naming the known ones
    quotas = {kind: n * w / total for kind, w in mix.items()}
    counts = {kind: int(math.floor(q)) for kind, q in quotas.items()}
    rest = sorted(mix, key=lambda kind: (counts[kind] - quotas[kind], list(mix).index(kind)))
    for kind in rest[: n - sum(counts.values())]:
        counts[kind] += 1
    return [kind for kind in mix for _ in range(counts[kind])]


def sample_population(
    n: int, seed: int = 0, mix: dict[str, float] | None = None
) -> list[ParticipantParams]:
    """``n`` simulated participants around the presets, reproducible for ``seed``.

    Args:
        n: number of participants.
        seed: population seed.
        mix: kind -> weight (default ``{"novice": 0.6, "expert": 0.4}``); the counts
            follow the weights exactly (largest remainders), in the order given.

    Returns:
        Frozen ``ParticipantParams`` with ids ``P01``, ``P02`` ...; each numeric
        parameter in ``POPULATION_SPREAD`` is the preset times a log-normal factor.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    kinds = _allocate(n, mix if mix is not None else {"novice": 0.6, "expert": 0.4})
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), 0x5EED])))
    population = []
    for i, kind in enumerate(kinds):
        base = PARTICIPANT_PRESETS[kind]
        changes: dict[str, Any] = {"participant_id": f"P{i + 1:02d}"}
        for name, sigma in POPULATION_SPREAD.items():
            factor = math.exp(sigma * float(rng.standard_normal()))
            value = getattr(base, name) * factor
            if name in _FRACTIONS:
                value = min(1.0, max(0.0, value))
            changes[name] = value
        population.append(replace(base, **changes))
    return population
