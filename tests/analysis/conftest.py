"""Synthetic trial logs written per the contract of capture_trainer.trial_log.

The builder writes Parquet directly with pyarrow (not through the analysis package), so
that the tests check the reader against the contract, not against itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from capture_trainer import trial_log

DT_S = 0.001
RADIUS_M = 0.0044
N_JOINTS = 3


def base_metadata(trial_id: str = "t0", **overrides: Any) -> dict[str, Any]:
    """Every required metadata key with plausible values."""
    metadata: dict[str, Any] = {
        "format_version": trial_log.FORMAT_VERSION,
        "package_version": "0.1.0",
        "trial_id": trial_id,
        "scenario": "paper-planar",
        "scenario_config": {"target_speed_m_s": 0.1},
        "condition": "dg",
        "participant": {"id": "p1", "kind": "novice", "params": {}},
        "seed": 7,
        "repetition": 0,
        "gains": {"k_p": 7.7, "k_d": 5.0},
        "model": "planar-3r",
        "n_joints": N_JOINTS,
        "dt_s": DT_S,
        "target_radius_m": RADIUS_M,
        "capture_tolerance_m": 0.002,
        "post_capture_window_s": 1.0,
        "device": {"max_force_n": 3.0},
        "complete": True,
        "end_reason": "time_limit",
    }
    metadata.update(overrides)
    return metadata


def trial_columns(
    time_s: np.ndarray,
    ee_m: np.ndarray,
    target_m: np.ndarray,
    ee_v_m_s: np.ndarray,
    target_v_m_s: np.ndarray,
    n_joints: int = N_JOINTS,
    **extra: np.ndarray,
) -> dict[str, np.ndarray]:
    """All contract columns: the given signals, zeros elsewhere; ``extra`` overrides by name."""
    n = time_s.size
    columns: dict[str, np.ndarray] = {name: np.zeros(n) for name in trial_log.float_columns(n_joints)}
    columns.update({name: np.zeros(n, dtype=bool) for name in trial_log.FLAGS})
    columns[trial_log.TIME] = np.asarray(time_s, dtype=float)
    for names, values in (
        (trial_log.EE_POSITION, ee_m),
        (trial_log.TARGET_POSITION, target_m),
        (trial_log.EE_VELOCITY, ee_v_m_s),
        (trial_log.TARGET_VELOCITY, target_v_m_s),
    ):
        for axis, name in enumerate(names):
            columns[name] = np.asarray(values, dtype=float)[:, axis].copy()
    for name, values in extra.items():
        if name not in columns:
            raise KeyError(f"not a contract column: {name}")
        columns[name] = np.asarray(values)
    return columns


def write_trial(path: Path, columns: Mapping[str, np.ndarray], metadata: Mapping[str, Any]) -> Path:
    """Write one trial log file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table(dict(columns))
    table = table.replace_schema_metadata({trial_log.METADATA_KEY: json.dumps(dict(metadata)).encode()})
    pq.write_table(table, path)
    return path


def approach(
    relative_speed_m_s: float = 0.15,
    start_gap_m: float = 0.28,
    target_speed_m_s: float = 0.1,
    duration_s: float = 3.0,
    dt_s: float = DT_S,
    radius_m: float = RADIUS_M,
) -> dict[str, np.ndarray]:
    """Head-on constant-velocity approach along x (the paper's set-up).

    The debris starts ``start_gap_m`` (centre distance) ahead of the end effector on +x
    and moves along -x at ``target_speed_m_s``; the end effector moves at constant
    velocity so that the closing speed is ``relative_speed_m_s``. The end effector keeps
    going through the target (the log does not care), so d(t) = start_gap - r - c t.
    """
    time_s = np.arange(0.0, duration_s + dt_s / 2, dt_s)
    target_v = np.array([-target_speed_m_s, 0.0, 0.0])
    ee_v = np.array([relative_speed_m_s - target_speed_m_s, 0.0, 0.0])
    target = np.array([0.5, 0.1, 0.0]) + time_s[:, None] * target_v
    ee = np.array([0.5 - start_gap_m, 0.1, 0.0]) + time_s[:, None] * ee_v
    n = time_s.size
    return trial_columns(time_s, ee, target, np.tile(ee_v, (n, 1)), np.tile(target_v, (n, 1)))


def capture_oscillation(
    amplitude_m: float = 0.003,
    frequency_hz: float = 5.0,
    start_gap_m: float = 0.28,
    target_speed_m_s: float = 0.1,
    after_reach_s: float = 1.43,
    dt_s: float = DT_S,
    radius_m: float = RADIUS_M,
) -> tuple[dict[str, np.ndarray], float]:
    """Approach at constant closing speed c = A w, then oscillate about the surface.

    Before the reach, |p| = start_gap - c t; after it (tau = t - t_r),
    p_x = -r + A sin(w tau), so the surface distance is d = -A sin(w tau) (inside first)
    and the relative velocity A w cos(w tau) joins the approach's c continuously.
    Closed forms over whole periods: mean max(d, 0)^2 = A^2 / 4, mean |p|^2 = r^2 + A^2 / 2,
    mean |v|^2 = (A w)^2 / 2. Returns the columns and t_r = (start_gap - r) / c.
    """
    omega = 2.0 * np.pi * frequency_hz
    closing = amplitude_m * omega
    reach_s = (start_gap_m - radius_m) / closing
    time_s = np.arange(0.0, reach_s + after_reach_s, dt_s)
    tau = time_s - reach_s
    p_x = np.where(tau < 0.0, -start_gap_m + closing * time_s, -radius_m + amplitude_m * np.sin(omega * tau))
    v_x = np.where(tau < 0.0, closing, closing * np.cos(omega * tau))
    zeros = np.zeros_like(time_s)
    relative = np.column_stack([p_x, zeros, zeros])
    relative_v = np.column_stack([v_x, zeros, zeros])
    target_v = np.tile([-target_speed_m_s, 0.0, 0.0], (time_s.size, 1))
    target = np.array([0.5, 0.1, 0.0]) + time_s[:, None] * target_v[0]
    columns = trial_columns(time_s, target + relative, target, target_v + relative_v, target_v)
    return columns, reach_s


class TrialFactory:
    """Writes synthetic trials into a directory."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, name: str, columns: Mapping[str, np.ndarray], **metadata: Any) -> Path:
        """Write ``root/name.parquet`` with ``base_metadata(name, **metadata)``."""
        return write_trial(self.root / f"{name}.parquet", columns, base_metadata(name, **metadata))


@pytest.fixture
def factory(tmp_path: Path) -> TrialFactory:
    """Writes trials into the test's temporary directory."""
    return TrialFactory(tmp_path)


@pytest.fixture(scope="session")
def synth() -> SimpleNamespace:
    """The builders of this module (conftest modules cannot be imported by tests)."""
    return SimpleNamespace(
        DT_S=DT_S,
        RADIUS_M=RADIUS_M,
        N_JOINTS=N_JOINTS,
        base_metadata=base_metadata,
        trial_columns=trial_columns,
        write_trial=write_trial,
        approach=approach,
        capture_oscillation=capture_oscillation,
        study_closing_speed=study_closing_speed,
        STUDY_PARTICIPANTS=STUDY_PARTICIPANTS,
        write_scenario_study=write_scenario_study,
        ScenarioStudy=ScenarioStudy,
    )


#: Closing speed [m/s] = impact velocity of participant i's trial per condition (the study
#: fixture): each participant is ordered dg < apf < ng, with distinct differences.
STUDY_PARTICIPANTS = 6


def study_closing_speed(condition: str, index: int) -> float:
    """Impact velocity [m/s] of participant ``index`` in ``condition`` in :func:`study_dir`."""
    return {"dg": 0.10 + 0.010 * index, "apf": 0.15 + 0.012 * index, "ng": 0.20 + 0.020 * index, "as": 0.12}[condition]


STUDY_GAP_M = 0.1
STUDY_DURATION_S = 2.2


@pytest.fixture(scope="session")
def study_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A synthetic study with known answers.

    - p0..p5 (novices) did dg, apf and ng once (closing speed from study_closing_speed);
    - p1 did a second ng trial that never reaches (static, 0.5 m away);
    - p2 did a second dg trial that crashed 0.3 s after the reach (complete false);
    - "controller" did one "as" trial (in a sub-directory);
    - study.json describes the design.
    21 trials, 1 unreached, 1 incomplete.
    """
    root = tmp_path_factory.mktemp("study")
    for index in range(STUDY_PARTICIPANTS):
        participant = {"id": f"p{index}", "kind": "novice", "params": {}}
        for condition in ("dg", "apf", "ng"):
            columns = approach(study_closing_speed(condition, index), STUDY_GAP_M, duration_s=STUDY_DURATION_S)
            name = f"{condition}-p{index}-r0"
            write_trial(root / f"{name}.parquet", columns, base_metadata(name, condition=condition, participant=participant))
    time_s = np.arange(0.0, STUDY_DURATION_S, DT_S)
    n = time_s.size
    miss = trial_columns(time_s, np.zeros((n, 3)), np.tile([0.3, 0.4, 0.0], (n, 1)), np.zeros((n, 3)), np.zeros((n, 3)))
    write_trial(
        root / "ng-p1-r1.parquet",
        miss,
        base_metadata("ng-p1-r1", condition="ng", participant={"id": "p1", "kind": "novice"}, repetition=1),
    )
    closing = study_closing_speed("dg", 2)
    full = approach(closing, STUDY_GAP_M, duration_s=STUDY_DURATION_S)
    cut = int(((STUDY_GAP_M - RADIUS_M) / closing + 0.3) / DT_S)
    write_trial(
        root / "dg-p2-r1.parquet",
        {name: values[:cut] for name, values in full.items()},
        base_metadata("dg-p2-r1", condition="dg", participant={"id": "p2", "kind": "novice"}, repetition=1,
                      complete=False, end_reason="fault"),
    )
    write_trial(
        root / "auto" / "as-controller.parquet",
        approach(study_closing_speed("as", 0), STUDY_GAP_M, duration_s=STUDY_DURATION_S),
        base_metadata("as-controller", condition="as", participant={"id": "controller", "kind": "controller"}),
    )
    design = {
        "protocol": "synthetic-paper",
        "participants": [f"p{i}" for i in range(STUDY_PARTICIPANTS)],
        "conditions": ["dg", "apf", "ng", "as"],
        "repetitions": 1,
        "scenarios": ["paper-planar"],
        "order": "latin-square",
    }
    (root / "study.json").write_text(json.dumps(design))
    return root


class ScenarioStudy:
    """The known values of :func:`write_scenario_study` (closing speed = impact velocity).

    Scenario ``alpha`` (logs without ``outcome``: provisional outcomes), participants
    a0..a5, dg and ng once each, closing speed and start gap per participant below, plus
    a0's second ng trial that never reaches (``time_limit``: timeout) and a1's second dg
    trial that crashed 0.3 s after its reach (same speed and gap: aborted).

    Scenario ``beta`` (logs with ``outcome``), participants b0..b3, dg and apf twice each
    (closing speed ``BETA_SPEED``, start gap 0.1 m), outcomes ``BETA_OUTCOMES``; plus one
    ``as`` trial of the controller (captured).
    """

    ALPHA_PARTICIPANTS = 6
    DURATION_S = 2.6
    GAP_M = 0.1

    @staticmethod
    def alpha_speed(condition: str, index: int) -> float:
        return {"dg": 0.10 + 0.010 * index, "ng": 0.20 + 0.020 * index}[condition]

    @staticmethod
    def alpha_gap(condition: str, index: int) -> float:
        # ng trials of a0 and a3 start further away, so that time to reach is not
        # ordered like impact velocity (the tests then have distinct p-values)
        if condition == "ng" and index in (0, 3):
            return 0.30
        return ScenarioStudy.GAP_M

    BETA_PARTICIPANTS = 4

    @staticmethod
    def beta_speed(condition: str, index: int, repetition: int) -> float:
        return {"dg": 0.12 + 0.010 * index + 0.005 * repetition, "apf": 0.18 + 0.020 * index}[condition]

    #: (participant index, condition) -> outcomes of repetitions 0 and 1.
    BETA_OUTCOMES = {
        (0, "dg"): ("captured", "captured"),
        (1, "dg"): ("captured", "captured"),
        (2, "dg"): ("captured", "contact_lost"),
        (3, "dg"): ("captured", "captured"),
        (0, "apf"): ("contact_lost", "pushed_away"),
        (1, "apf"): ("captured", "contact_lost"),
        (2, "apf"): ("pushed_away", "pushed_away"),
        (3, "apf"): ("captured", "contact_lost"),
    }


def write_scenario_study(root: Path) -> Path:
    """Write the two-scenario study of :class:`ScenarioStudy` under ``root``."""
    known = ScenarioStudy
    duration = known.DURATION_S

    def write(name: str, columns: Mapping[str, np.ndarray], **metadata: Any) -> None:
        write_trial(root / metadata["scenario"] / f"{name}.parquet", columns, base_metadata(name, **metadata))

    for index in range(known.ALPHA_PARTICIPANTS):
        participant = {"id": f"a{index}", "kind": "novice", "params": {}}
        for condition in ("dg", "ng"):
            speed, gap = known.alpha_speed(condition, index), known.alpha_gap(condition, index)
            columns = approach(speed, gap, duration_s=duration)
            write(f"alpha-{condition}-a{index}-r0", columns, scenario="alpha", condition=condition,
                  participant=participant, end_reason="capture_window_done")
    time_s = np.arange(0.0, duration, DT_S)
    n = time_s.size
    miss = trial_columns(time_s, np.zeros((n, 3)), np.tile([0.3, 0.4, 0.0], (n, 1)), np.zeros((n, 3)), np.zeros((n, 3)))
    write("alpha-ng-a0-r1", miss, scenario="alpha", condition="ng", repetition=1,
          participant={"id": "a0", "kind": "novice"}, end_reason="time_limit")
    closing = known.alpha_speed("dg", 1)
    full = approach(closing, known.GAP_M, duration_s=duration)
    cut = int(((known.GAP_M - RADIUS_M) / closing + 0.3) / DT_S)
    write("alpha-dg-a1-r1", {name: values[:cut] for name, values in full.items()}, scenario="alpha", condition="dg",
          repetition=1, participant={"id": "a1", "kind": "novice"}, complete=False, end_reason="fault")
    for index in range(known.BETA_PARTICIPANTS):
        participant = {"id": f"b{index}", "kind": "expert", "params": {}}
        for condition in ("dg", "apf"):
            for repetition in (0, 1):
                columns = approach(known.beta_speed(condition, index, repetition), known.GAP_M, duration_s=duration)
                write(f"beta-{condition}-b{index}-r{repetition}", columns, scenario="beta", condition=condition,
                      participant=participant, repetition=repetition, end_reason="capture_window_done",
                      outcome=known.BETA_OUTCOMES[(index, condition)][repetition])
    write("beta-as-controller", approach(0.15, known.GAP_M, duration_s=duration), scenario="beta", condition="as",
          participant={"id": "controller", "kind": "controller"}, end_reason="capture_window_done", outcome="captured")
    return root


@pytest.fixture(scope="session")
def scenario_study_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two-scenario study of :class:`ScenarioStudy` (29 trials)."""
    return write_scenario_study(tmp_path_factory.mktemp("scenario_study"))
