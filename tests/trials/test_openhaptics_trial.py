"""`capture-trainer run --device openhaptics` runs a whole trial headless, driven by the
HD scheduler of the libHD test double (the real pyOpenHaptics path, end to end)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from capture_trainer import trial_log
from haptics._hd_api import LIBHD_ENV
from haptics._hd_double import build_double
from capture_trainer.trial_log import read_trial_log as read_trial


def test_a_trial_on_the_openhaptics_backend(tmp_path: Path, short_scenario: Path) -> None:
    library = build_double(tmp_path / "libhd")
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    env[LIBHD_ENV] = str(library)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    command = [sys.executable, "-m", "app.cli", "run", "--device", "openhaptics", "--participant", "alice",
               "--condition", "dg", "--scenario", str(short_scenario), "--json"]
    result = subprocess.run([*command, "--out", str(tmp_path / "out")], env=env, capture_output=True, text=True,
                            timeout=120, check=False)
    if result.returncode != 0 and "force watchdog" in result.stderr:
        # The 4 ms force watchdog doing its job when the whole machine paused: on a shared
        # VM the double's own real-time scheduler thread was seen woken 1-3 ms late, the
        # missed ticks then running back to back (docs/haptics.md). Once, not twice: a
        # tick that really stalls trips it every run.
        print(f"first run ended by the force watchdog, run again: {result.stderr.strip().splitlines()[-1]}")
        result = subprocess.run([*command, "--out", str(tmp_path / "again")], env=env, capture_output=True,
                                text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    table, meta = read_trial(summary["path"])
    assert meta["complete"] is True and table.num_rows == 600
    assert meta["participant"] == {"id": "alice", "kind": "human", "params": {}}
    # the device's own limits were read from libHD and recorded with the trial
    assert meta["device"]["name"] == "openhaptics" and 0.5 < meta["device"]["max_force_n"] < 10
    assert meta["servo_timing"]["ticks"] >= 600
    position = np.stack([table[c].to_numpy() for c in trial_log.DEVICE_POSITION], axis=1)
    assert np.all(np.abs(position) < 0.3)  # metres, not the millimetres libHD reports
    actuated = np.stack([table[c].to_numpy() for c in trial_log.DEVICE_FORCE_ACTUATED], axis=1)
    assert np.all(np.isfinite(actuated))
    assert np.all(np.linalg.norm(actuated, axis=1) <= meta["device"]["max_force_n"] + 1e-9)
