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
