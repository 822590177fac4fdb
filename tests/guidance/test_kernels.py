"""The compiled guidance kernels reproduce the plain-Python arithmetic to the last bit.

Expectations are independent of the kernels: the laws' formulas written out in plain
Python (``** 2`` as Python evaluates it, with C ``pow``).
"""

from __future__ import annotations

import math

import numpy as np

from guidance.fixtures import JointLimitProximity, ReachLimit
from guidance.state import GuidanceState


def test_reach_limit_matches_its_formula_exactly() -> None:
    rng = np.random.default_rng(1)
    law = ReachLimit(0.5, stiffness_n_m=80.0, damping_n_s_m=4.0, margin_m=0.05)
    state = GuidanceState()
    for _ in range(3000):
        state.ee_position_m[:] = rng.standard_normal(3) * 0.4
        state.arm_base_position_m[:] = rng.standard_normal(3) * 0.05
        state.ee_velocity_m_s[:] = rng.standard_normal(3)
        d = (state.ee_position_m - state.arm_base_position_m).tolist()
        r = math.sqrt(d[0] ** 2 + d[1] ** 2 + d[2] ** 2)
        depth = r - 0.45
        expected = [0.0, 0.0, 0.0]
        if depth > 0.0:
            v = state.ee_velocity_m_s.tolist()
            outward = (v[0] * d[0] + v[1] * d[1] + v[2] * d[2]) / r
            magnitude = 80.0 * depth + 4.0 * max(outward, 0.0)
            expected = [-magnitude * d[i] / r for i in range(3)]
        assert law.force(state).tolist() == expected


def test_joint_limit_proximity_matches_its_formula_exactly() -> None:
    rng = np.random.default_rng(2)
    lower, upper = [-1.0, -2.0, -0.5], [1.0, 1.5, 0.5]
    law = JointLimitProximity(lower, upper, stiffness_n_rad=20.0, margin_rad=0.15)
    state = GuidanceState.for_joints(3)
    for _ in range(3000):
        state.joint_position_rad[:] = rng.uniform(-2.1, 1.6, 3)
        state.jacobian_pinv[:] = rng.standard_normal((3, 3))
        fx = fy = fz = 0.0
        for i, qi in enumerate(state.joint_position_rad.tolist()):
            up, down = qi - (upper[i] - 0.15), (lower[i] + 0.15) - qi
            if up <= 0.0 and down <= 0.0:
                continue
            depth, sign = (up, -1.0) if up > 0.0 else (down, 1.0)
            row = state.jacobian_pinv[i].tolist()
            norm = math.sqrt(row[0] ** 2 + row[1] ** 2 + row[2] ** 2)
            gain = sign * 20.0 * depth / norm
            fx += gain * row[0]
            fy += gain * row[1]
            fz += gain * row[2]
        assert law.force(state).tolist() == [fx, fy, fz]
