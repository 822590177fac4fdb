"""A stand-in for ``trials.runner.build_trial`` while the real runner is being written.

Kinematics only (no dynamics, no reactionless IK): a planar 3R arm whose end effector
follows the capture law of eq. (10) toward a debris moving along -x at 0.1 m/s, a
guidance force from eq. (11), a real :class:`trials.recorder.TrialRecorder` trial file
and real snapshots. It exists so the window, the servo process and their tests can be
developed and run before the runner lands; select it with
``ServoOptions(factory="trials.ui._fake:build_trial")``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from capture_trainer import __version__, trial_log
from haptics.timing import ServoTiming
from trials.clocks import HeadlessClock, PacedClock
from trials.recorder import TrialRecorder
from trials.snapshot import SharedSnapshot

_LINKS_M = (0.45, 0.35, 0.15)
_SHOULDER_M = (0.25, 0.0)
_DT_S = 1e-3


@dataclass(frozen=True)
class FakeScenario:
    name: str
    model: str = "planar-3r"
    target_radius_m: float = 0.0044
    duration_s: float = 6.0


class FakeTrial:
    """The ``Trial`` interface of the runner, on a kinematic planar arm."""

    n_joints = 3

    def __init__(self, request: Any, out_dir: Path) -> None:
        self.scenario = FakeScenario(name=request.scenario)
        self.max_ticks = int(self.scenario.duration_s / _DT_S)
        self.clock: HeadlessClock | PacedClock = PacedClock() if request.paced else HeadlessClock()
        self.condition = request.condition
        trial_id = request.trial_id or f"{request.participant}_{request.condition}_{request.seed}"
        self._recorder = TrialRecorder(
            Path(out_dir) / f"{trial_id}.parquet",
            trial_log.float_columns(self.n_joints),
            trial_log.FLAGS,
            {
                "package_version": __version__,
                "trial_id": trial_id,
                "scenario": request.scenario,
                "scenario_config": {"fake": True},
                "condition": request.condition,
                "participant": {"id": request.participant, "kind": "fake", "params": {}},
                "seed": request.seed,
                "gains": {"k_p": 7.7, "k_d": 5.0, "m_kg": 0.5, "c_n_s_m": 1.0},
                "model": self.scenario.model,
                "n_joints": self.n_joints,
                "dt_s": _DT_S,
                "target_radius_m": self.scenario.target_radius_m,
                "capture_tolerance_m": 0.002,
                "post_capture_window_s": 1.0,
                "device": {"name": request.device},
            },
            expected_rows=self.max_ticks,
        )
        rng = np.random.default_rng(request.seed)
        self._k = 0
        self._ee = np.array([0.7, 0.25, 0.0])
        self._ee_v = np.zeros(3)
        self._target0 = self._ee + np.array([0.28, 0.02 * rng.standard_normal(), 0.0])
        self._target_v = np.array([-0.1, 0.0, 0.0])
        self._snapshot: SharedSnapshot | None = None
        self._every = 10
        self._columns = {name: i for i, name in enumerate(self._recorder.float_columns)}
        self._reached_at_s = math.nan
        self.timing: ServoTiming = self.clock.timing

    def attach_snapshot(self, snapshot: SharedSnapshot, every_n_ticks: int = 10) -> None:
        self._snapshot = snapshot
        self._every = every_n_ticks

    def _links(self, out: np.ndarray) -> None:
        l1, l2, l3 = _LINKS_M
        wx, wy = self._ee[0] - l3, self._ee[1]
        sx, sy = _SHOULDER_M
        dx, dy = wx - sx, wy - sy
        c2 = max(-1.0, min(1.0, (dx * dx + dy * dy - l1 * l1 - l2 * l2) / (2 * l1 * l2)))
        q2 = math.acos(c2)
        q1 = math.atan2(dy, dx) - math.atan2(l2 * math.sin(q2), l1 + l2 * c2)
        pts = ((0.0, 0.0), (sx, sy), (sx + l1 * math.cos(q1), sy + l1 * math.sin(q1)), (wx, wy),
               (self._ee[0], self._ee[1]))
        for i, (x, y) in enumerate(pts):
            out[3 * i] = x
            out[3 * i + 1] = y
            out[3 * i + 2] = 0.0

    def tick(self) -> bool:
        t = self._k * _DT_S
        target = self._target0 + self._target_v * t
        e = self._ee - target
        ed = self._ee_v - self._target_v
        guided = self.condition in ("dg", "as")
        kp, kd = (7.7, 5.0) if guided else (4.0, 2.0)
        acc = -kp * e - kd * ed
        self._ee_v += acc * _DT_S
        self._ee += self._ee_v * _DT_S
        force = 0.5 * 7.7 * -e + (0.5 * 5.0 + 1.0) * -ed if guided else np.zeros(3)
        actuated = np.clip(force, -3.0, 3.0)
        distance = float(np.linalg.norm(e)) - self.scenario.target_radius_m
        if distance <= 0.0 and self._reached_at_s != self._reached_at_s:
            self._reached_at_s = t
        rec = self._recorder
        row = rec.row
        col = self._columns
        row[col[trial_log.TIME]] = t
        for axis in range(3):
            row[col[trial_log.EE_POSITION[axis]]] = self._ee[axis]
            row[col[trial_log.EE_VELOCITY[axis]]] = self._ee_v[axis]
            row[col[trial_log.TARGET_POSITION[axis]]] = target[axis]
            row[col[trial_log.TARGET_VELOCITY[axis]]] = self._target_v[axis]
            row[col[trial_log.GUIDANCE_FORCE[axis]]] = force[axis]
            row[col[trial_log.DEVICE_FORCE_CALCULATED[axis]]] = force[axis]
            row[col[trial_log.DEVICE_FORCE_ACTUATED[axis]]] = actuated[axis]
        rec.flags[0] = True
        rec.append_row()
        if self._snapshot is not None and self._k % self._every == 0:
            snap = self._snapshot
            st = snap.staging
            off = snap.offsets
            st[off["t_s"]] = t
            st[off["ee_position_m"]] = self._ee
            st[off["ee_velocity_m_s"]] = self._ee_v
            st[off["target_position_m"]] = target
            st[off["target_velocity_m_s"]] = self._target_v
            st[off["command_position_m"]] = self._ee
            st[off["guidance_force_n"]] = force
            st[off["dev_force_calc_n"]] = force
            st[off["dev_force_act_n"]] = actuated
            st[off["base_torque_n_m"]] = (0.0, 0.0, 0.02 * math.sin(3 * t))
            st[off["base_attitude_rad"]] = (0.0, 0.0, 0.001 * t)
            st[off["distance_m"]] = distance
            st[off["flags"]] = 1.0
            st[off["phase"]] = 1.0
            st[off["reached_at_s"]] = self._reached_at_s
            self._links(st[off["links"]])
            snap.publish()
        self._k += 1
        return True

    def finish(self) -> dict[str, Any]:
        path = self._recorder.close(end_reason="time_limit", servo_timing=self.clock.timing.summary())
        return {"path": str(path), "end_reason": "time_limit"}

    def abort(self, reason: str) -> dict[str, Any]:
        path = self._recorder.abort(reason)
        return {"path": str(path), "end_reason": reason}


def build_trial(request: Any, out_dir: Path, **_: Any) -> FakeTrial:
    """Build a :class:`FakeTrial` (the runner's ``build_trial`` signature)."""
    return FakeTrial(request, Path(out_dir))


@dataclass(frozen=True)
class TrialRequest:
    """The fields of ``trials.runner.TrialRequest`` the fake uses."""

    scenario: str
    condition: str
    participant: str
    seed: int
    device: str = "simulated"
    paced: bool = False
    solver: str = "lse"
    trial_id: str | None = None
    participant_params: dict[str, Any] | None = None
    repetition: int = 0
