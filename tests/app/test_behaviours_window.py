"""The operator in the loop (issue 19, item 4): a key pressed in the trainer window after
the capture reaches the servo's task machine.

The real window (SDL's dummy driver) and servo process run ``berthing-planar`` with the
automatic capture (AS). Once the window shows the capture and the machine in its first
state (``stabilise``), the driver presses ``6``: the sixth state of the built-in
``berthing`` task, ``release`` (RWE), which the task's own transitions would reach only
after ``approach`` and ``seat``. The trial log must then show stabilise ended by the
operator and release next, with neither approach nor seat ever run.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

BERTHING_STATES = ("stabilise", "approach", "relax_approach", "seat", "relax_seat", "release", "open")


def test_a_key_after_the_capture_starts_the_requested_state(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    from app.ui.window import App, AttemptScreen, WindowConfig, run_trainer
    from capture_trainer.trial_log import read_trial_log

    pressed: list[float] = []
    shown: dict[str, int] = {}

    def driver(app: App) -> None:
        screen = app.screen_obj
        if not isinstance(screen, AttemptScreen) or screen.frame is None or screen.info is None:
            return
        frame, task = screen.frame, screen.info.task
        if task is not None and frame.post_state_index >= 0:
            name = task.states[frame.post_state_index]
            shown[name] = shown.get(name, 0) + 1
        if not pressed and frame.captured and frame.post_state_index == 0:
            pygame = app.pygame
            pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=pygame.K_6, mod=0, unicode="6",
                                                 scancode=0))
            pressed.append(frame.t_s)

    (result,) = run_trainer(WindowConfig(device="simulated", scenario="berthing-planar", out_dir=tmp_path,
                                         trainee="ada", auto=("as",), quit_when_done=True), driver=driver)
    assert result.status == "finished", result.message
    assert pressed, "the window never showed the machine in its first state after the capture"
    log = read_trial_log(result.summary["path"])
    post = log.metadata["post_capture"]
    assert tuple(post["states"]) == BERTHING_STATES
    runs = [(r["state"], r["result"]) for r in post["results"]]
    assert runs[0] == ("stabilise", "aborted")
    assert "the operator chose 'release'" in post["results"][0]["reason"]
    assert runs[1][0] == "release"
    assert not {"approach", "seat"} & {state for state, _ in runs}
    # the log's state column: stabilise (0), then release (5), nothing in between, then
    # the tool opens (6) as the task's transitions say
    states = np.asarray(log.table.column("state_index").to_numpy())
    t = np.asarray(log.table.column("t_s").to_numpy())
    running = states[states >= 0]
    first_release = int(np.argmax(running == 5))
    first_open = int(np.argmax(running == 6))
    assert running[0] == 0 and first_open > first_release > 0
    assert set(running[:first_release].tolist()) == {0} and set(running[first_release:first_open].tolist()) == {5}
    assert set(running[first_open:].tolist()) == {6} and post["release"]["state"] == "open"
    # the request came from the key: release starts after the frame on which it was pressed
    assert t[states == 5][0] >= pressed[0]
    # the window drew the state names it read from the snapshot
    assert shown.get("stabilise", 0) > 0 and shown.get("release", 0) > 0
    assert result.summary.get("task_outcome") == "succeeded"


def test_the_tick_publishes_the_task_to_the_snapshot(tmp_path: Path) -> None:
    """Headless berthing-planar (AS) with a snapshot every 10 ticks: before the capture the
    post-capture slots say "no task"; while seating, the posts sit where the task file
    puts them relative to each other (posts at the capture: the left post minus the right
    one is (-0.0569 + 0.0471, -0.0038 + 0.0322) m), and the wrench, limit and state are
    those of the recorder's row on the same tick."""
    from app.ui.scene import Frame
    from capture_trainer.trial_log import POST_CAPTURE_COLUMNS
    from trials.runner import TrialRequest, build_trial
    from trials.snapshot import SharedSnapshot, SnapshotLayout

    trial = build_trial(TrialRequest(scenario="berthing-planar", condition="as", participant="novice", seed=0,
                                     trial_id="snap"), tmp_path)
    snapshot = SharedSnapshot(SnapshotLayout(trial.n_joints))
    seat = BERTHING_STATES.index("seat")
    before: list[Frame] = []
    opened: list[Frame] = []
    seating: list[tuple[Frame, np.ndarray]] = []
    columns = [trial.recorder.column_index(c) for c in POST_CAPTURE_COLUMNS]
    try:
        trial.attach_snapshot(snapshot, every_n_ticks=10)
        while trial.tick():
            if trial.tick.k % 10:
                continue
            frame = Frame.read(snapshot)
            assert frame is not None
            if np.isnan(frame.captured_at_s):  # before the capture (not after the tool opened again)
                before.append(frame)
            elif frame.post_state_index == seat:
                seating.append((frame, trial.recorder.row[columns].copy()))
            if frame.released:
                opened.append(frame)
        summary = trial.finish()
    finally:
        snapshot.close()
    assert before and seating and opened
    # the window draws the open tool from the snapshot: the release's time as logged
    from capture_trainer.trial_log import read_trial_log

    released_at_s = read_trial_log(summary["path"]).metadata["post_capture"]["release"]["t_s"]
    assert all(f.tool_state == "open" and f.released_at_s == released_at_s and not f.captured for f in opened)
    assert all(f.post_state_index == -1 and f.post_outcome == 0 and f.wrench_limit_n == np.inf for f in before)
    assert all(f.posts_m is not None and np.isnan(f.posts_m).all() for f in before)
    frame, row = seating[-1]
    assert frame.posts_m is not None
    assert frame.posts_m[0] - frame.posts_m[1] == pytest.approx([-0.0098, 0.0284, 0.0], abs=1e-9)
    assert np.isnan(frame.posts_m[2:]).all()
    assert frame.wrench_limit_n == 15.0  # the seat's wrench_limit_n in berthing.toml
    for f, r in seating:
        assert f.wrench_force_n.tolist() == r[5:8].tolist() and f.attractor_m.tolist() == r[2:5].tolist()
    assert max(float(np.linalg.norm(f.wrench_force_n)) for f, _ in seating) > 3.0  # seat_force_n: both posts press
