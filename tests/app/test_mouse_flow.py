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


def test_pointer_moves_the_stylus_and_forces_stay_within_the_device(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    results = run_trainer(WindowConfig(
        device="mouse", out_dir=tmp_path, trainee="m", auto=("dg",), stop_after_s=1.5,
        quit_when_done=True,
    ))
    assert [r.status for r in results] == ["aborted"], results[0].message
    frame = pq.read_table(results[0].summary["path"]).to_pandas()
    # SDL's dummy driver keeps the pointer at the window's top-left corner, which the
    # window maps to the workspace's (x min, y max) corner, at depth 0.
    lo, hi = POINTER_SPEC.workspace_min_m, POINTER_SPEC.workspace_max_m
    np.testing.assert_allclose(frame["dev_x_m"], lo[0])
    np.testing.assert_allclose(frame["dev_y_m"], hi[1])
    np.testing.assert_allclose(frame["dev_z_m"], 0.0)
    actuated = np.linalg.norm(frame[["dev_force_act_x_n", "dev_force_act_y_n",
                                     "dev_force_act_z_n"]].to_numpy(), axis=1)
    calculated = np.linalg.norm(frame[["dev_force_calc_x_n", "dev_force_calc_y_n",
                                       "dev_force_calc_z_n"]].to_numpy(), axis=1)
    assert np.all(actuated <= POINTER_SPEC.max_force_n + 1e-9)
    assert calculated.max() > POINTER_SPEC.max_force_n  # DG asks for more than a Touch gives
    assert actuated.max() > 0.5  # and the safety layer let a real force through
