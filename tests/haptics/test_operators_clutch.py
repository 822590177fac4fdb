"""The simulated participant clutches (indexes) at the edge of the device's workspace.

The operator presses and releases the clutch through the device's engage button; the
commander's mapping freezes the arm command while clutched and re-anchors it on release,
so the command never jumps and the capture goes on beyond what the small workspace spans.
"""

from __future__ import annotations

import numpy as np

from guidance.rendering import ForceRenderer
from haptics.device import BUTTON_ENGAGE
from haptics.mapping import WorkspaceMapping
from haptics.operators import make_operator
from haptics.safety import SafetyConfig
from haptics.simulated import TOUCH_LIKE_SPEC, SimulatedDevice
from trials.commanders import HapticCommander

DT_S = 1e-3


def run_to_far_target(seconds: float = 4.5, seed: int = 2) -> dict[str, np.ndarray]:
    """An expert reaches for a still target 0.2 m away along +x (task = device frame,
    scale 1): farther than the stylus can go from the middle of a Touch (0.08 m)."""
    op = make_operator("expert", seed=seed)
    device = SimulatedDevice(operator=op, seed=seed, safety_config=SafetyConfig(ramp_in_s=1e-9))
    commander = HapticCommander(device, WorkspaceMapping(), ForceRenderer(np.eye(3), 1.0), hand=device)
    target = np.array([0.2, 0.0, 0.0])
    still = np.zeros(3)
    commander.start(np.zeros(3))
    pos, vel, acc = np.zeros(3), np.zeros(3), np.zeros(3)
    rows: dict[str, list[object]] = {"cmd": [], "stylus": [], "engaged": [], "clutched": []}
    for k in range(int(seconds / DT_S)):
        t = k * DT_S
        commander.command(t, pos, vel, acc)
        commander.render(still)
        # The slave follows the command exactly (what the operator sees is the command).
        commander.actuate(t, target, still, pos, vel)
        rows["cmd"].append(pos.copy())
        rows["stylus"].append(device.state.position_m.copy())
        rows["engaged"].append(bool(device.state.buttons & BUTTON_ENGAGE))
        rows["clutched"].append(commander.clutched)
    return {key: np.array(value) for key, value in rows.items()}


def test_operator_clutches_at_the_workspace_edge_without_a_jump_of_the_arm_command() -> None:
    run = run_to_far_target()
    engaged, clutched = run["engaged"], run["clutched"]
    # The hand released the engage button (pressed the clutch) and pressed it again.
    presses = np.flatnonzero(engaged[:-1] & ~engaged[1:]) + 1
    releases = np.flatnonzero(~engaged[:-1] & engaged[1:]) + 1
    assert len(presses) >= 1 and len(releases) >= 1 and releases[0] > presses[0]
    # The mapping followed the device button (the button is the clutch).
    assert np.array_equal(clutched, ~engaged)
    first = presses[0]
    high = TOUCH_LIKE_SPEC.workspace_max_m[0]
    stylus_x = run["stylus"][:, 0]
    # It clutched near the +x face (within its margin plus its look-ahead travel), and the
    # stylus never reached the mechanical end stop (1.5x the usable half-width).
    assert stylus_x[first] > high - 0.035
    assert stylus_x.max() < 1.25 * high
    # While clutched the arm command holds still; on release it continues from there.
    cmd = run["cmd"]
    held = cmd[presses[0]:releases[0]]
    assert np.ptp(held, axis=0).max() == 0.0
    # No jump: the command never moves more than a hand could in one tick (1 m/s).
    assert np.abs(np.diff(cmd, axis=0)).max() < 1.0 * DT_S
    # The stylus went back toward the middle while clutched...
    assert stylus_x[releases[0]] < stylus_x[first] - 0.03
    # ...and after the release the command went on toward the target, beyond the
    # 0.08 m a stylus can span from the middle without clutching.
    assert cmd[-1, 0] > 0.13


def run_to_moving_target(start_m: tuple[float, float, float], velocity_m_s: tuple[float, float, float],
                         seconds: float, kind: str = "expert", seed: int = 3) -> dict[str, np.ndarray]:
    """An operator reaches for a target moving at constant velocity (task = device frame,
    scale 1; the slave follows the command exactly, so the target never gets caught)."""
    op = make_operator(kind, seed=seed)
    device = SimulatedDevice(operator=op, seed=seed, safety_config=SafetyConfig(ramp_in_s=1e-9))
    commander = HapticCommander(device, WorkspaceMapping(), ForceRenderer(np.eye(3), 1.0), hand=device)
    start = np.array(start_m)
    vel = np.array(velocity_m_s)
    still = np.zeros(3)
    commander.start(np.zeros(3))
    pos, v, acc = np.zeros(3), np.zeros(3), np.zeros(3)
    rows: dict[str, list[object]] = {"cmd": [], "stylus": [], "engaged": [], "target": []}
    for k in range(int(seconds / DT_S)):
        t = k * DT_S
        target = start + vel * t
        commander.command(t, pos, v, acc)
        commander.render(still)
        commander.actuate(t, target, vel, pos, v)
        rows["cmd"].append(pos.copy())
        rows["stylus"].append(device.state.position_m.copy())
        rows["engaged"].append(bool(device.state.buttons & BUTTON_ENGAGE))
        rows["target"].append(target)
    return {key: np.array(value) for key, value in rows.items()}


def test_operator_does_not_clutch_when_the_target_is_about_to_come_within_reach() -> None:
    # The target starts 0.08 m beyond the +x face (0.08 m) and comes toward the middle at
    # 0.06 m/s: it enters the workspace after 1.33 s. The hand heads for the interception
    # point and nears the +x face while the target is still outside; letting go of the arm
    # then (re-indexing takes about a second) would lose the interception.
    for seed in (3, 4, 5):
        run = run_to_moving_target((0.16, 0.01, 0.0), (-0.06, 0.0, 0.0), 3.0, seed=seed)
        assert run["engaged"].all(), f"seed {seed}: clutched at {np.flatnonzero(~run['engaged'])[0] * DT_S:.3f} s"
        # ... and it got there: the command came within 5 mm of the target's centre.
        gap = np.linalg.norm(run["cmd"] - run["target"], axis=1)
        assert gap.min() < 0.005, f"seed {seed}: closest {gap.min():.4f} m"
        # It did go near the face (the test is about the face, not about an easy reach).
        assert run["stylus"][:, 0].max() > TOUCH_LIKE_SPEC.workspace_max_m[0] - 0.02


def test_operator_re_indexes_for_a_receding_target_with_a_full_stroke() -> None:
    # The target recedes along +x from beyond the +x face at 0.03 m/s: it never comes
    # within reach, so the hand clutches at the face; re-indexing puts the planned
    # interception point in the middle of the workspace, which takes the stylus past the
    # middle to the -x side (a full stroke for the next approach), not just back to 0.
    run = run_to_moving_target((0.10, 0.0, 0.0), (0.03, 0.0, 0.0), 4.0)
    engaged = run["engaged"]
    presses = np.flatnonzero(engaged[:-1] & ~engaged[1:]) + 1
    releases = np.flatnonzero(~engaged[:-1] & engaged[1:]) + 1
    assert len(presses) >= 1 and len(releases) >= 1
    high = TOUCH_LIKE_SPEC.workspace_max_m[0]
    low = TOUCH_LIKE_SPEC.workspace_min_m[0]
    x = run["stylus"][:, 0]
    assert x[presses[0]] > high - 0.035
    # Past the middle, toward the -x face, and still inside the usable workspace.
    assert low < x[releases[0]] < -0.02
    # The target was outside the workspace in the hand's frame when it clutched.
    offset = run["target"][presses[0], 0] - run["cmd"][presses[0], 0] + x[presses[0]]
    assert offset > high


def first_goal_m(undershoot_z: float, distance_m: float, seed: int) -> float:
    """The end point (x, device frame) of the expert's first submovement toward a still
    target ``distance_m`` along +x, the hand and end effector at the origin."""
    from dataclasses import replace

    from haptics.operators import HumanOperator
    from haptics.participants import PARTICIPANT_PRESETS

    params = replace(PARTICIPANT_PRESETS["expert"], undershoot_z=undershoot_z)
    op = HumanOperator(params, seed=seed)
    op.reset(0.0, np.zeros(3), trial_seed=seed)
    target, zero, out = np.array([distance_m, 0.0, 0.0]), np.zeros(3), np.zeros(3)
    k = 0
    while op.submovements == 0:
        t = k * DT_S
        op.perceive(t, target, zero, zero, zero)
        op.drive(t, zero, zero, zero, out)
        k += 1
    return float(op._goal_x[0])


def test_the_expert_aims_short_by_its_own_endpoint_sd() -> None:
    # Same seed, same draws: the only difference is the undershoot, 1.5 SDs of the
    # endpoint error along the movement, SD = k D / T (Meyer et al. 1988) with Fitts'
    # T = a + b log2(1 + D/W) on the gap D (the target is still: the move is the gap).
    from haptics.participants import PARTICIPANT_PRESETS

    p = PARTICIPANT_PRESETS["expert"]
    for distance in (0.05, 0.1):
        duration = p.fitts_a_s + p.fitts_b_s * np.log2(1.0 + distance / p.fitts_width_m)
        expected = 1.5 * p.endpoint_k_s * distance / duration
        for seed in (1, 2):
            shift = first_goal_m(0.0, distance, seed) - first_goal_m(1.5, distance, seed)
            assert abs(shift - expected) < 1e-9, (distance, seed, shift, expected)
    assert PARTICIPANT_PRESETS["expert"].undershoot_z == 1.5
    assert PARTICIPANT_PRESETS["novice"].undershoot_z == 0.0
