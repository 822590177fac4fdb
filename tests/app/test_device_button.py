"""The device's second button after the capture: the task's "next" (the running state's
``succeeded`` target), through the servo's control array as the window's keys.

A headless ``berthing-planar`` trial (AS) runs through the servo's guard
(``app.ui.servo._guarded``) exactly as in the servo process. The commander's ``buttons``
are what the tick last read from the device (``HapticCommander.command``; a Touch's
HD_DEVICE_BUTTON_2 is ``BUTTON_TRAINER``, tests/haptics' libHD double checks that
reading); here a driver sets them the way a hand would: pressed for 20 ticks once the
window would show the machine stabilising, and again while the tool opens (whose
``succeeded`` target is ``done``: nothing to go to). The log must show stabilise ended
by the operator on the press, approach from the next row, and the rest of the task as
its own transitions run it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from capture_trainer import trial_log
from haptics.device import BUTTON_TRAINER


def test_button_two_after_the_capture_starts_the_next_state(tmp_path: Path) -> None:
    from app.ui.servo import _CONTROL_SIZE, REQUEST_COUNT, REQUEST_STATE, _guarded
    from trials.runner import TrialRequest, build_trial

    trial = build_trial(TrialRequest(scenario="berthing-planar", condition="as", trial_id="b2"), tmp_path)
    tick, post = trial.tick, trial.tick.post
    commander = tick.parts.commander
    control = [0.0] * _CONTROL_SIZE
    guarded = _guarded(tick, control, None, None, None, 10, post, commander)
    presses: dict[str, list[float]] = {"stabilise": [], "open": []}

    def hand() -> bool:  # the device's buttons as the tick reads them, then the guarded tick
        state = post.machine.state if post.active else ""
        held = presses.get(state)
        if held is not None and (not held or tick.k * tick.dt_s - held[0] < 0.02):
            if not held:
                held.append(tick.k * tick.dt_s)
            commander.buttons = BUTTON_TRAINER
        else:
            commander.buttons = 0
        return guarded()

    before = control[REQUEST_COUNT]
    trial.clock.run(hand, trial.max_ticks)
    summary = trial.finish()
    assert presses["stabilise"] and presses["open"]  # both presses happened
    assert control[REQUEST_COUNT] == before + 1.0  # one press held 20 ticks is one request; open's is none
    assert control[REQUEST_STATE] == 1.0  # approach, the request written as the keys write theirs
    table, metadata = trial_log.read_trial_log(summary["path"])
    phase = metadata["post_capture"]
    runs = [(r["state"], r["result"]) for r in phase["results"]]
    assert runs[0] == ("stabilise", "aborted") and "the operator chose 'approach'" in phase["results"][0]["reason"]
    assert [state for state, _ in runs[1:]] == ["approach", "seat", "release", "open"]
    assert summary["task_outcome"] == "succeeded"
    # from the log: stabilise (0) until the row of the press's first tick, approach (1) from the next
    state = table[trial_log.STATE_INDEX].to_numpy()
    t = table[trial_log.TIME].to_numpy()
    first_approach = int(np.flatnonzero(state == 1)[0])
    assert state[first_approach - 1] == 0
    assert 0.0 < t[first_approach] - presses["stabilise"][0] <= 0.0025  # the press, the guard, the next tick
    assert abs(phase["results"][0]["ended_s"] - presses["stabilise"][0]) <= 0.0015  # ended by the press
