"""What a guidance law sees on each servo tick.

All vectors are (3,) float arrays, SI units, **task frame** (the robot's inertial frame)
unless the name says ``device``. Planar models use z = 0. The servo tick owns one
``GuidanceState`` and refills its arrays in place (``state.ee_position_m[:] = ...``);
laws only read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray


def _zeros3() -> NDArray[np.float64]:
    return np.zeros(3)


@dataclass
class GuidanceState:
    """Inputs of :meth:`guidance.law.GuidanceLaw.force` for one tick.

    Attributes:
        t_s: trial time [s].
        ee_position_m: end-effector (capture tool) position [m], task frame.
        ee_velocity_m_s: end-effector velocity [m/s], task frame.
        target_position_m: capture point on the debris [m], task frame.
        target_velocity_m_s: capture-point velocity [m/s], task frame.
        target_acceleration_m_s2: capture-point acceleration [m/s²], task frame.
        hand_force_n: the person's force on the stylus mapped to the task frame [N]
            (zeros when unknown). The dynamic guidance uses it to detect a take-over.
        device_position_m: stylus position [m], **device frame** (workspace walls).
        device_velocity_m_s: stylus velocity [m/s], **device frame**.
        arm_base_position_m: centre of the arm's reach sphere (shoulder) [m], task frame.
        command_position_m: the end-effector position commanded to the slave [m], task frame.
        sigma_ratio: (1,) the IK's reaction-singularity gauge σ_min(M (I − J⁺J)) / ‖M‖ (1
            when not provided).
        joint_position_rad: (n,) joint angles [rad] (empty when not provided).
        jacobian_pinv: (n, 3) ``∂q/∂x``, the pseudoinverse of the (generalized) Jacobian's
            translational rows [rad/m] (row i is the task direction that raises joint i).
    """

    t_s: float = 0.0
    ee_position_m: NDArray[np.float64] = field(default_factory=_zeros3)
    ee_velocity_m_s: NDArray[np.float64] = field(default_factory=_zeros3)
    target_position_m: NDArray[np.float64] = field(default_factory=_zeros3)
    target_velocity_m_s: NDArray[np.float64] = field(default_factory=_zeros3)
    target_acceleration_m_s2: NDArray[np.float64] = field(default_factory=_zeros3)
    hand_force_n: NDArray[np.float64] = field(default_factory=_zeros3)
    device_position_m: NDArray[np.float64] = field(default_factory=_zeros3)
    device_velocity_m_s: NDArray[np.float64] = field(default_factory=_zeros3)
    arm_base_position_m: NDArray[np.float64] = field(default_factory=_zeros3)
    command_position_m: NDArray[np.float64] = field(default_factory=_zeros3)
    sigma_ratio: NDArray[np.float64] = field(default_factory=lambda: np.ones(1))
    joint_position_rad: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    jacobian_pinv: NDArray[np.float64] = field(default_factory=lambda: np.zeros((0, 3)))

    @classmethod
    def for_joints(cls, n_joints: int) -> GuidanceState:
        """A zeroed state with joint arrays sized for an ``n_joints`` arm."""
        return cls(joint_position_rad=np.zeros(n_joints), jacobian_pinv=np.zeros((n_joints, 3)))
