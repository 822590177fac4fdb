"""A trial run in a reused PyBullet client (robot/pybullet_clients.py) records the same
log, bit for bit, as in a fresh one, after another trial with a capture ran in it."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pybullet as pb
import pytest

from robot.pybullet_clients import client_pool
from trials.runner import TrialRequest, build_trial

#: The debris starts closer than in the built-in scenarios: the automatic capture closes
#: the tool within 2 s (the arm then carries the payload: its body is rebuilt).
CLOSE_START = {"paper-2019": "[0.05, -0.02, 0.0]", "tumbling-7dof": "[0.05, 0.01, 0.02]"}


def _scenario(tmp_path: Path, name: str) -> str:
    text = resources.files("scenarios.builtin").joinpath(f"{name}.toml").read_text()
    text, count = re.subn(r"start_offset_m = \[.*\]", f"start_offset_m = {CLOSE_START[name]}", text)
    assert count == 1
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return str(path)


def _run(scenario: str, trial_id: str, out: Path) -> tuple[int, pa.Table]:
    trial = build_trial(TrialRequest(scenario=scenario, condition="as", seed=1, time_limit_s=2.0,
                                     end_on_capture=False, trial_id=trial_id), out)
    client = trial.arm.client_id
    summary = trial.run()
    assert summary["outcome"] == "captured"
    return client, pq.read_table(summary["path"])


@pytest.mark.parametrize(("name", "other"), [("paper-2019", "tumbling-7dof"), ("tumbling-7dof", "paper-2019")])
def test_a_reused_client_records_the_same_trial_bit_for_bit(tmp_path: Path, name: str, other: str) -> None:
    pool = client_pool(pb)
    pool.clear()  # the first run connects a fresh client
    scenario, between = _scenario(tmp_path, name), _scenario(tmp_path, other)
    connected = pool.connected
    fresh_client, fresh = _run(scenario, "fresh", tmp_path)
    assert pool.connected == connected + 1
    between_client, _ = _run(between, "between", tmp_path)
    reused_client, reused = _run(scenario, "reused", tmp_path)
    assert fresh_client == between_client == reused_client
    assert pool.connected == connected + 1  # both later trials reused that client
    assert fresh.num_rows == reused.num_rows == 2000
    floats = [field.name for field in fresh.schema if field.type == pa.float64()]
    assert len(floats) > 50
    differing = [c for c in floats
                 if not np.array_equal(fresh[c].to_numpy(), reused[c].to_numpy(), equal_nan=True)]
    assert differing == []
    flags = [field.name for field in fresh.schema if field.type == pa.bool_()]
    assert all(fresh[c].equals(reused[c]) for c in flags)
