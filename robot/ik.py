"""Inverse kinematics at the acceleration level: reactionless LSE (eq. 6) and pseudoinverse.

Both solvers share one compiled implementation (:func:`robot._kernels.solve_ik`) and one
interface, :class:`IKSolver`; they differ only in whether the null space of ``J`` is used
to cancel the base reaction:

* ``lse``:  ``q̈ = J⁺(ẍ − J̇q̇) + P z − [M P]⁺ [M (J⁺(ẍ − J̇q̇) + P z) + n − T_des]``
  with ``P = I − J⁺J`` (eq. 6 plus a secondary null-space term ``z`` and a desired base
  torque ``T_des`` from base feedback; with ``z = 0`` and ``T_des = 0`` it is eq. 6).
* ``pinv``: ``q̈ = J⁺(ẍ − J̇q̇) + P z`` (eq. 3; the minimum-norm baseline).

Robustness:

* **Damping scaled to ‖M‖.** ``[M P]⁺`` is computed as ``(MP)ᵀ (MP (MP)ᵀ + λ² I)⁻¹``
  with ``λ = damping_max ‖M‖ sqrt(1 − (s/s0)²)`` (defaults s0 = 0.01, damping_max = 0.1) when ``s = σ_min(MP)/‖M‖`` (the
  ``sigma_ratio``) falls below ``s0 = sigma_threshold``; the state is then reported
  ``singular``. Scaling to ``‖M‖`` rather than to ``MP`` matters in the planar case, where
  ``MP`` is a single row whose own norm *is* the vanishing quantity. The damped
  correction stays in the range of ``P``, so eq. 1 still holds exactly: near a reaction
  singularity the solver gives up some reaction cancellation, never the task.
* **Kinematic singularities** of ``J`` are damped the same way (``jacobian_sigma_m``).
* **Limits.** Per-joint acceleration bounds are built each tick from the position limits
  (braking curve of the sampled motion), the rate limits and the acceleration limits.
  For ``lse`` the reaction stays a hard constraint when they bind and the task is scaled
  (saturation in the null space with task scaling: joints that saturate are fixed at the
  bound and the rest re-solved while they can carry task and reaction together); the
  task's loss is the reported residual, the base feels nothing. ``pinv`` keeps the task
  by re-solving with the joints left. The result is always clipped to the bounds and
  ``limited`` reported (see :func:`robot._kernels.solve_ik`).
* **Bounded null-space motion.** ``z = −k_null q̇ − k_limit u³`` (``u`` the joint
  position normalised to [−1, 1] over its range) damps self-motion and pushes away from
  limits; for LSE it acts only in what is left of the null space after the reaction
  constraint (one degree of freedom for the 7-joint arm, none for the planar 3R).
* **Base-rate bound** (the controller tick only, :func:`robot._kernels.controller_step`).
  The base angular velocity the momentum model predicts after each step is kept within
  ``IKSettings.base_rate_max_rad_s``: where the solution above would turn the base faster
  (no reactionless solution within the joint bounds, or ``task`` priority at a reaction
  singularity) the task is scaled instead and the base feedback's torque limited to what
  the bound allows; the tick reports it (``SlaveStatus.rate_bounded``, ``rate_scale``).
* **Base feedback.** The controller asks for ``T_des = −I_w (k_att θ + k_rate ω)`` from
  the measured base attitude ``θ`` (rotation vector) and rate ``ω``, its norm capped at
  ``feedback_torque_max_n_m``, so drift that servo errors put into the base is driven
  back to zero instead of accumulating (eq. 6 alone only keeps the base momentum at
  whatever value it has).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from robot import _kernels as kern
from robot.dynamics import DynamicsTerms
from robot.models import ManipulatorModel

SOLVER_NAMES: tuple[str, ...] = ("lse", "pinv")
SINGULARITY_PRIORITIES: tuple[str, ...] = ("reaction", "task")
SYSTEM_MOMENTA: tuple[str, ...] = ("zero", "measured")
_SOLVER_CODES = {"lse": kern.SOLVER_LSE, "pinv": kern.SOLVER_PINV}

REASON_OK = "ok"
REASON_LIMITED = "joint limit"
REASON_SINGULAR = "reaction singularity (damped)"
REASON_TASK = "task not met (limits or singularity)"

#: Default base angular-rate bound [rad/s]: 1° over 20 s (:attr:`IKSettings.base_rate_max_rad_s`).
BASE_RATE_MAX_RAD_S = math.radians(1.0) / 20.0


@dataclass(frozen=True)
class IKSettings:
    """Tuning of the IK and of the base feedback (SI units).

    Attributes:
        sigma_threshold: sigma_ratio (σ_min(M P)/‖M‖) below which the reaction
            projection is damped and the state reported singular.
        damping_max: damping at sigma_ratio = 0, as a fraction of ‖M‖.
        jacobian_sigma_m: σ_min(J) [m/rad] below which J⁺ is damped.
        jacobian_damping_m: damping of J⁺ at σ_min(J) = 0 [m/rad].
        null_gain_1_s: null-space joint-rate damping k_null [1/s].
        limit_gain_1_s2: joint-limit repulsion k_limit [rad/s^2].
        attitude_gain_1_s2: base attitude feedback k_att [1/s^2] (LSE only).
        rate_gain_1_s: base rate feedback k_rate [1/s] (LSE only).
        base_feedback: use the measured base state when the backend provides it.
        feedback_torque_max_n_m: cap on the feedback torque |T_des| [N m]. Undoing
            servo-error drift needs far less (1e-6 rad: ~5e-4 N m on these bases); the
            cap bounds what the feedback may ask after a damped singularity has let
            the attitude wander (measured: 0.01 N m there tracks worse than 1 N m).
        sigma_gain: gain of the sigma_ratio ascent along the spare direction
            [rad^2/s^2] (LSE only; no effect where no direction is spare).
        singularity_priority: what gives way at a reaction singularity (LSE only):
            ``reaction`` (default): the reaction stays cancelled and the damping acts on
            the task (the end effector lags, the residual is reported and the hand is
            told); ``task`` (eq. 6 as published): the task is kept exactly and the
            damping acts on the reaction (the base takes torque). Identical away from
            reaction singularities. Measured on 100 members of the documented 3-D
            scenario family (``bench reaction --family 100``, the approach up to the
            first contact): with ``task`` the base stayed within 1° and the LSE/pinv
            torque ratio under 1e-3 in 55 % (AS) and 52 % (DG) of them, with
            ``reaction`` in 100 % (AS) and 97 % (DG); the price is captures (AS 82 of
            100 with ``task``, 63 with ``reaction``; DG 35 and 32).
            Measured: an operator commanding the planar arm 1.5 m beyond its reach
            stretches it into a reaction singularity: 20-32 N m on the base with
            ``task``, below 3e-3 N m with ``reaction``; the spatial automatic capture
            from +y, which meets a singularity before the reach, captures with ``task``
            (2.2 N m RMS) and misses with ``reaction`` (1.5e-4 N m RMS).
        system_momentum: the momentum the dynamics terms assume (LSE and pinv alike):
            ``zero`` (the paper's free-floating model: the arm starts at rest and nothing
            acts from outside) or ``measured`` (the system's angular momentum about its
            centre of mass inferred every tick from the measured base rate, and the
            measured end-effector velocity in eq. 10; needs the base state). The slave
            switches to ``measured`` when it closes on a debris: the arm then carries the
            debris' momentum, and with ``zero`` the model's base rate and end-effector
            velocity are wrong by it (measured on the planar arm with a payload ten times
            its mass: docs/capture.md).
        base_rate_max_rad_s: the base angular-rate bound [rad/s] of the controller tick
            (LSE only; ``inf``: off). The base rate the momentum model predicts after
            each step (eq. 2's torque on the base's momentum) is kept within it by
            scaling the task: where the joint bounds leave no reactionless solution, or
            at a reaction singularity with ``singularity_priority = "task"``, the end
            effector lags instead of the base turning faster, and the tick reports it
            (``SlaveStatus.rate_bounded``); the base feedback's torque is limited to it
            too. Off on the tick the tool closes and while a contact pushes the tool
            (see :func:`robot._kernels.controller_step`).
            Default :data:`BASE_RATE_MAX_RAD_S`: 1° over 20 s, so a base held at the
            bound for the longest trial of the documented 3-D family (time limit
            19.5 s) still turns less than the family's 1° criterion. Inactive in
            reactionless tracking, where the rate stays at its start (measured: below
            1e-6 rad/s).
    """

    sigma_threshold: float = 0.01
    damping_max: float = 0.1
    jacobian_sigma_m: float = 0.02
    jacobian_damping_m: float = 0.05
    null_gain_1_s: float = 2.0
    limit_gain_1_s2: float = 1.0
    attitude_gain_1_s2: float = 25.0
    rate_gain_1_s: float = 10.0
    base_feedback: bool = True
    feedback_torque_max_n_m: float = 1.0
    sigma_gain: float = 50.0
    singularity_priority: str = "reaction"
    system_momentum: str = "zero"
    base_rate_max_rad_s: float = BASE_RATE_MAX_RAD_S

    def __post_init__(self) -> None:
        if not self.base_rate_max_rad_s > 0.0:
            raise ValueError(f"base_rate_max_rad_s must be > 0 (inf: no bound), got {self.base_rate_max_rad_s}")
        if self.system_momentum not in SYSTEM_MOMENTA:
            raise ValueError(f"system_momentum must be one of {', '.join(SYSTEM_MOMENTA)}, "
                             f"got {self.system_momentum!r}")
        if self.singularity_priority not in SINGULARITY_PRIORITIES:
            raise ValueError(f"singularity_priority must be one of {', '.join(SINGULARITY_PRIORITIES)}, "
                             f"got {self.singularity_priority!r}")


@dataclass(frozen=True)
class IKResult:
    """One IK solution.

    Attributes:
        qdd: (n,) joint accelerations [rad/s^2].
        residual: ‖J q̈ + J̇ q̇ − ẍ‖ [m/s^2] (eq. 1's residual over the task rows).
        limited: a joint position, rate or acceleration bound was active.
        singular: sigma_ratio below the threshold (reaction projection damped).
        sigma_ratio: σ_min(M (I − J⁺J)) / ‖M‖.
        reason: ``ok``, or what limited the solution.
        reaction_residual: ‖M q̈ + n − T_des‖ [N m] over the reaction rows.
    """

    qdd: NDArray[np.float64]
    residual: float
    limited: bool
    singular: bool
    sigma_ratio: float
    reason: str
    reaction_residual: float = 0.0


class IKSolver(Protocol):
    """An acceleration-level IK: task acceleration in, joint accelerations out."""

    name: str

    def solve(self, model: ManipulatorModel, terms: DynamicsTerms, xdd_m_s2: NDArray[np.float64],
              q_rad: NDArray[np.float64], qd_rad_s: NDArray[np.float64], dt_s: float,
              base_torque_n_m: NDArray[np.float64] | None = None) -> IKResult:
        """Solve for q̈ (see :class:`ReactionIK`)."""
        ...


def settings_vector(settings: IKSettings, solver: str, dt_s: float, k_p: float, k_d: float) -> NDArray[np.float64]:
    """The kernel's parameter vector (layout ``robot._kernels.P_*``)."""
    params = np.zeros(kern.N_PARAMS)
    params[kern.P_DT] = dt_s
    params[kern.P_KP] = k_p
    params[kern.P_KD] = k_d
    params[kern.P_SOLVER] = kernel_solver(solver, settings)
    params[kern.P_SIGMA_THRESHOLD] = settings.sigma_threshold
    params[kern.P_DAMP_MAX] = settings.damping_max
    params[kern.P_J_SIGMA_M] = settings.jacobian_sigma_m
    params[kern.P_J_DAMP_M] = settings.jacobian_damping_m
    params[kern.P_K_NULL] = settings.null_gain_1_s
    params[kern.P_K_LIMIT] = settings.limit_gain_1_s2
    params[kern.P_K_ATT] = settings.attitude_gain_1_s2
    params[kern.P_K_RATE] = settings.rate_gain_1_s
    params[kern.P_FEEDBACK] = 1.0 if settings.base_feedback else 0.0
    params[kern.P_K_SIGMA] = settings.sigma_gain
    params[kern.P_FEEDBACK_MAX] = settings.feedback_torque_max_n_m
    params[kern.P_MOMENTUM] = kern.MOMENTUM_MEASURED if settings.system_momentum == "measured" else kern.MOMENTUM_ZERO
    params[kern.P_BASE_RATE_MAX] = settings.base_rate_max_rad_s
    return params


def solver_code(name: str) -> float:
    """Kernel code of a solver name; ValueError listing the names otherwise."""
    try:
        return _SOLVER_CODES[name]
    except KeyError:
        raise ValueError(f"unknown IK solver {name!r}; known solvers: {', '.join(SOLVER_NAMES)}") from None


def kernel_solver(name: str, settings: IKSettings) -> float:
    """Kernel code of a solver under ``settings`` (which priority LSE keeps at a singularity)."""
    code = solver_code(name)
    if code == kern.SOLVER_LSE and settings.singularity_priority == "reaction":
        return kern.SOLVER_LSE_REACTION_FIRST
    return code


def reason_of(limited: bool, singular: bool, residual: float, scale: float) -> str:
    """Human-readable reason of a solution's flags."""
    if residual > 1e-6 * max(scale, 1e-9):
        return REASON_TASK
    if limited:
        return REASON_LIMITED
    if singular:
        return REASON_SINGULAR
    return REASON_OK


@dataclass(frozen=True)
class ReactionIK:
    """The eq. 6 (``lse``) or pseudoinverse (``pinv``) solver with limits and damping.

    Attributes:
        name: ``lse`` or ``pinv``.
        settings: damping, limits and null-space gains.
    """

    name: str
    settings: IKSettings = IKSettings()

    def __post_init__(self) -> None:
        solver_code(self.name)

    def solve(self, model: ManipulatorModel, terms: DynamicsTerms, xdd_m_s2: NDArray[np.float64],
              q_rad: NDArray[np.float64], qd_rad_s: NDArray[np.float64], dt_s: float,
              base_torque_n_m: NDArray[np.float64] | None = None) -> IKResult:
        """Joint accelerations for a desired EE acceleration (allocates: not the tick path).

        Args:
            model: the manipulator (limits, task and reaction rows).
            terms: J, J̇q̇, M, n at the current state (robot.dynamics.dynamics_terms).
            xdd_m_s2: (3,) desired EE acceleration, task frame (planar: z ignored).
            q_rad, qd_rad_s: (n,) current joint state.
            dt_s: servo period [s] (turns rate limits into acceleration bounds).
            base_torque_n_m: (3,) desired base torque T_des [N m] (None: zero, pure eq. 6).
        """
        a = model.arrays
        s = self.settings
        qdd = np.zeros(model.n_joints)
        diag = np.zeros(8)
        t_des = np.zeros(3) if base_torque_n_m is None else np.asarray(base_torque_n_m, dtype=float)
        q = np.ascontiguousarray(q_rad, dtype=float)
        z_extra = np.zeros(model.n_joints)
        if self.name == "lse":
            kern.sigma_ascent(q, terms.jacobian, terms.reaction_map, a.joint_xyz, a.joint_rot, a.joint_axis,
                              a.link_mass, a.link_com, a.link_inertia, a.ee_offset, a.base_mass, a.base_inertia,
                              a.task_rows, a.reaction_rows, s.jacobian_sigma_m, s.jacobian_damping_m, s.sigma_gain,
                              z_extra)
        kern.solve_ik(terms.jacobian, terms.jdot_qdot, terms.reaction_map, terms.reaction_bias,
                      np.asarray(xdd_m_s2, dtype=float), t_des, np.asarray(q_rad, dtype=float),
                      np.asarray(qd_rad_s, dtype=float), a.task_rows, a.reaction_rows, a.q_min, a.q_max, a.qd_max,
                      a.qdd_max, float(dt_s), kernel_solver(self.name, s), s.sigma_threshold, s.damping_max,
                      s.jacobian_sigma_m, s.jacobian_damping_m, s.null_gain_1_s, s.limit_gain_1_s2, z_extra, qdd, diag)
        limited = bool(diag[4])
        singular = bool(diag[0] < s.sigma_threshold)
        scale = float(np.linalg.norm(np.asarray(xdd_m_s2)[a.task_rows]) + np.linalg.norm(terms.jdot_qdot))
        return IKResult(qdd=qdd, residual=float(diag[5]), limited=limited, singular=singular,
                        sigma_ratio=float(diag[0]), reason=reason_of(limited, singular, float(diag[5]), scale),
                        reaction_residual=float(diag[7]))


def make_solver(name: str, settings: IKSettings | None = None) -> ReactionIK:
    """The solver called ``name`` (``lse`` or ``pinv``); ValueError lists the names."""
    return ReactionIK(name, settings or IKSettings())
