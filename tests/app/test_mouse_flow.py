"""`--device mouse`: the window's pointer drives the real servo tick through shared memory.

The servo's requests for ``device="mouse"`` carry ``device_options={"input_name": ...}``;
the runner opens the device through the registry, which builds a
:class:`~haptics.shared_input.SharedInputDevice` for them
(``open_device("mouse", input_name=...)``): the real runner, the real tick.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from app.ui.window import WindowConfig, run_trainer
from haptics.shared_input import POINTER_SPEC
from trials.runner import device_start_position
from trials.vocabulary import load_scenario


def test_pointer_moves_the_stylus_and_forces_stay_within_the_device(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    moved: dict[str, float] = {}

    def driver(app) -> None:  # one pointer motion of 40 px to the right at t >= 0.5 s
        import pygame

        screen = app.screen_obj
        frame = getattr(screen, "frame", None)
        if moved or frame is None or frame.phase == "idle" or frame.t_s < 0.5 or screen.renderer is None:
            return
        moved["t_s"] = frame.t_s
        moved["px_per_m"] = screen.renderer.views[0][1].px_per_m
        pygame.event.post(pygame.event.Event(pygame.MOUSEMOTION, pos=(0, 0), rel=(40, 0), buttons=(0, 0, 0)))

    results = run_trainer(WindowConfig(
        device="mouse", out_dir=tmp_path, trainee="m", auto=("dg",), stop_after_s=1.5,
        quit_when_done=True,
    ), driver=driver)
    assert [r.status for r in results] == ["aborted"], results[0].message
    frame = pq.read_table(results[0].summary["path"]).to_pandas()
    # Until the pointer moves, the stylus rests where the servo parked it: the start that
    # centres the capture task in the device's box (trials.runner.device_start_position,
    # from the end effector's start), whatever the (dummy driver's) pointer does.
    scenario = load_scenario("paper-2019")
    ee0 = frame[["ee_x_m", "ee_y_m", "ee_z_m"]].to_numpy()[0]
    start = device_start_position(scenario, ee0, POINTER_SPEC)
    before = frame[frame["t_s"] < moved["t_s"] - 0.05]
    np.testing.assert_allclose(before[["dev_x_m", "dev_y_m", "dev_z_m"]].to_numpy(),
                               np.tile(start, (len(before), 1)), atol=2e-4)
    # 40 px right in the top view: 40 / px_per_m task metres, / 1.75 (the scenario's scale)
    # device metres along x; y and depth unchanged.
    after = frame[frame["t_s"] > moved["t_s"] + 0.2]
    expected_x = start[0] + 40.0 / moved["px_per_m"] / scenario.mapping.position_scale
    np.testing.assert_allclose(after["dev_x_m"], expected_x, atol=2e-4)
    np.testing.assert_allclose(after["dev_y_m"], start[1], atol=2e-4)
    actuated = np.linalg.norm(frame[["dev_force_act_x_n", "dev_force_act_y_n",
                                     "dev_force_act_z_n"]].to_numpy(), axis=1)
    calculated = np.linalg.norm(frame[["dev_force_calc_x_n", "dev_force_calc_y_n",
                                       "dev_force_calc_z_n"]].to_numpy(), axis=1)
    assert np.all(actuated <= POINTER_SPEC.max_force_n + 1e-9)
    assert calculated.max() > POINTER_SPEC.max_force_n  # DG asks for more than a Touch gives
    assert actuated.max() > 0.5  # and the safety layer let a real force through
