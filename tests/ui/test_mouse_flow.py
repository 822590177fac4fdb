"""`--device mouse`: the window's pointer drives the real servo tick through shared memory.

The runner builds a :class:`~trials.ui.shared_input.SharedInputDevice` for ``device="mouse"``
requests that carry ``device_options={"input_name": ...}``. The factory below makes that
choice explicitly (and delegates everything else to ``trials.runner.build_trial``), so
the test exercises the shared input inside the real tick whatever the runner's version.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from trials.ui.shared_input import POINTER_SPEC
from trials.ui.window import WindowConfig, run_trainer

FACTORY = textwrap.dedent(
    """
    import trials.runner as runner
    from trials.runner import TrialRequest

    _make_device = runner._make_device


    def _pointer_or_backend(request, *args, **kwargs):
        if request.device == "mouse" and "input_name" in request.device_options:
            from trials.ui.shared_input import SharedInputDevice

            return SharedInputDevice(**request.device_options)
        return _make_device(request, *args, **kwargs)


    runner._make_device = _pointer_or_backend
    build_trial = runner.build_trial
    """
)


def test_pointer_moves_the_stylus_and_forces_stay_within_the_device(
    tmp_path: Path, monkeypatch
) -> None:
    (tmp_path / "pointer_factory.py").write_text(FACTORY)
    monkeypatch.syspath_prepend(str(tmp_path))  # the spawned servo inherits sys.path
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    results = run_trainer(WindowConfig(
        device="mouse", factory="pointer_factory:build_trial", out_dir=tmp_path,
        trainee="m", auto=("dg",), stop_after_s=1.5, quit_when_done=True,
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
