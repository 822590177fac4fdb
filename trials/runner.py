"""Building and running one trial: scenario + condition + participant -> a trial file.

:func:`build_trial` wires the parts named by ARCHITECTURE (device, mapping, slave-control
path, plant, target, guidance law, renderer, recorder) into a :class:`trials.tick.ServoTick`
and picks the clock that drives it; :func:`run_trial` builds, runs and finishes. Studies
call :func:`run_trial_spec` in worker processes; the interactive trainer builds a trial
in its servo process and attaches a shared-memory snapshot.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from capture_trainer import __version__, trial_log
from capture_trainer.catalog import CONDITIONS, PARTICIPANT_KINDS
from capture_trainer.errors import TrialError
from trials.protocol import TrialSpec
from trials.recorder import TrialRecorder
from trials.tick import ServoTick

log = logging.getLogger(__name__)

DT_S = 1e-3
#: Eq. 10 gains (k_p [1/s^2], k_d [1/s]) of the automatic capture (the paper's values).
CAPTURE_GAINS = (7.7, 5.0)
#: Eq. 10 gains when the slave follows the stylus. With the paper's gains the end
#: effector lags the hand by about half a second (a 2.8 rad/s, 0.9-damped follower), so
#: what the person feels and sees at contact is half a second old; a critically damped
#: 10 rad/s follower keeps the lag near 0.1 s. The guidance law keeps the paper's gains.
TELEOP_GAINS = (100.0, 20.0)
#: How long a trial goes on after the first reach beyond the post-capture window [s].
HOLD_AFTER_WINDOW_S = 0.25


@dataclass(frozen=True)
class TrialRequest:
    """What to run.

    Attributes:
        scenario: built-in scenario name or path of a scenario file.
        condition: ``dg`` | ``ng`` | ``apf`` | ``as``.
        participant: a simulated kind (``novice``, ``expert``, ``passive``) with the
            simulated device, or the person's id with a real device.
        seed: the trial's seed (the simulated participant's noise and choices).
        device: ``simulated`` | ``openhaptics`` | ``mouse``.
        paced: run in real time (1 kHz wall clock) rather than as fast as possible;
            always true for devices a person holds.
        solver: ``lse`` (reactionless, eq. 6) or ``pinv`` (minimum norm).
        trial_id: file stem; default built from the other fields.
        participant_params: a sampled simulated participant (overrides the kind preset).
        repetition: repetition index recorded with the trial.
        gui: show the PyBullet GUI (needs a display).
        device_options: extra keyword arguments for the device backend.
        time_limit_s: overrides the scenario's time limit [s].
        end_on_capture: end the trial once the post-capture window after the first
            reach has been recorded (otherwise run to the time limit).
    """

    scenario: str = "paper-2019"
    condition: str = "dg"
    participant: str = "novice"
    seed: int = 0
    device: str = "simulated"
    paced: bool = False
    solver: str = "lse"
    trial_id: str | None = None
    participant_params: dict[str, Any] | None = None
    repetition: int = 0
    gui: bool = False
    device_options: dict[str, Any] = field(default_factory=dict)
    time_limit_s: float | None = None
    end_on_capture: bool = True

    def resolved_trial_id(self, scenario_name: str) -> str:
        if self.trial_id:
            return self.trial_id
        return f"{self.participant}_{scenario_name}_{self.condition}_s{self.seed}"


@dataclass
class Trial:
    """A built trial: call ``clock.run(tick, max_ticks)`` then :meth:`finish`."""

    request: TrialRequest
    scenario: Any
    tick: ServoTick
    clock: Any
    recorder: TrialRecorder
    arm: Any
    device: Any | None
    max_ticks: int
    n_joints: int
    started_wall_s: float = field(default_factory=time.perf_counter)
    _closed: bool = False

    def attach_snapshot(self, snapshot: Any, every_n_ticks: int = 10) -> None:
        """Publish a display snapshot (``trials.snapshot.SharedSnapshot``) every n ticks."""
        self.tick.snapshot = snapshot
        self.tick.snapshot_every = max(1, int(every_n_ticks))

    def run(self) -> dict[str, Any]:
        """Run to the end on the trial's clock, then finish; on any error the data so far
        is kept (marked incomplete) and the error re-raised."""
        try:
            self.clock.run(self.tick, self.max_ticks)
        except BaseException as error:
            self.abort(f"error: {error!r}")
            raise
        return self.finish()

    def _timing(self) -> dict[str, Any]:
        timing = getattr(self.clock, "timing", None)
        return timing.summary() if timing is not None else {}

    def _summary(self) -> dict[str, Any]:
        tick = self.tick
        reached = not math.isnan(tick.reached_at_s)
        summary: dict[str, Any] = {
            "path": str(self.recorder.path),
            "trial_id": self.recorder.metadata.get("trial_id"),
            "condition": self.request.condition,
            "end_reason": tick.end_reason,
            "ticks": tick.k,
            "sim_s": tick.k * tick.dt_s,
            "wall_s": time.perf_counter() - self.started_wall_s,
            "time_to_reach_s": tick.reached_at_s if reached else None,
        }
        if reached:
            summary["impact_velocity_m_s"] = _impact_velocity(self.recorder, tick.reached_at_s)
        return summary

    def finish(self) -> dict[str, Any]:
        """Close everything and write the final, complete trial file; return a summary."""
        if self._closed:
            return self._summary()
        self._closed = True
        self._close_hardware()
        self.recorder.close(end_reason=self.tick.end_reason, servo_timing=self._timing())
        return self._summary()

    def abort(self, reason: str) -> None:
        """Stop after a failure or a user abort; the recorded data is kept, incomplete."""
        if self._closed:
            return
        self._closed = True
        self._close_hardware()
        self.recorder.abort(reason)

    def _close_hardware(self) -> None:
        if self.device is not None:
            self.device.__exit__(None, None, None)
        self.arm.close()


def _impact_velocity(recorder: TrialRecorder, reached_at_s: float) -> float:
    """Relative speed at the first reach, read back from the row buffers (for progress)."""
    values = recorder.recorded_row(round(reached_at_s / DT_S) - 1)
    ee_v = [values[recorder.column_index(c)] for c in trial_log.EE_VELOCITY]
    tg_v = [values[recorder.column_index(c)] for c in trial_log.TARGET_VELOCITY]
    return float(np.linalg.norm(np.subtract(ee_v, tg_v)))


def device_start_position(scenario: Any, ee0_m: np.ndarray, spec: Any) -> np.ndarray:
    """Where the stylus should start [m], device frame, so that the capture happens in
    the middle of the device's workspace.

    The task region of a capture spans the end effector's start and the target's path
    up to its closest approach to that start; the stylus starts where the centre of that
    region maps to the centre of the usable workspace (clipped inside the workspace).
    """
    target = scenario.target_motion(ee0_m)
    horizon = min(scenario.capture.time_limit_s, 10.0)
    times = np.linspace(0.0, horizon, 201)
    path, _, _ = target.sample(times)
    closest = int(np.argmin(np.linalg.norm(path - ee0_m, axis=1)))
    region = np.vstack([ee0_m, path[: closest + 1]])
    centre_task = 0.5 * (region.min(axis=0) + region.max(axis=0))
    mapping = scenario.mapping
    rotation = np.array(mapping.rotation_task_from_device)
    low, high = np.array(spec.workspace_min_m), np.array(spec.workspace_max_m)
    start = 0.5 * (low + high) - rotation.T @ (centre_task - ee0_m) / mapping.position_scale
    return np.clip(start, low + 0.1 * (high - low), high - 0.1 * (high - low))


def _make_device(request: TrialRequest, scenario: Any, seed: int, ee0_m: np.ndarray) -> Any:
    """The device backend: a simulated device held by a simulated participant, or a real
    or stand-in device held by a person."""
    if request.device == "simulated":
        from haptics.operators import HumanOperator, ParticipantParams, make_operator
        from haptics.simulated import SimulatedDevice

        if request.participant_params:
            operator = HumanOperator(ParticipantParams(**request.participant_params), seed=seed, dt_s=DT_S)
        else:
            if request.participant not in PARTICIPANT_KINDS:
                raise TrialError(
                    f"--participant {request.participant!r}: with the simulated device the "
                    f"participant is a simulated kind: {', '.join(PARTICIPANT_KINDS)}"
                )
            operator = make_operator(request.participant, seed=seed, dt_s=DT_S)
        from haptics.simulated import TOUCH_LIKE_SPEC

        options = dict(request.device_options)
        options.setdefault("initial_position_m", device_start_position(scenario, ee0_m, TOUCH_LIKE_SPEC))
        return SimulatedDevice(operator=operator, dt_s=DT_S, seed=seed, **options)
    if request.device == "mouse" and "input_name" in request.device_options:
        # the trainer window owns pygame; the pointer reaches this process by shared memory
        from trials.ui.shared_input import SharedInputDevice

        return SharedInputDevice(**request.device_options)
    from haptics.backends import open_device

    return open_device(request.device, **request.device_options)


def build_trial(request: TrialRequest, out_dir: str | Path) -> Trial:
    """Wire a trial; nothing runs until its clock runs the tick.

    Raises:
        ScenarioError: the scenario cannot be loaded.
        DeviceError: the device backend is not available here.
        TrialError: an invalid combination of options.
    """
    from guidance.registry import make_law
    from guidance.rendering import ForceRenderer
    from haptics.mapping import WorkspaceMapping
    from robot.models import get_model
    from robot.pybullet_arm import PyBulletArm
    from robot.slave import SlaveController
    from scenarios.loader import load_scenario

    if request.condition not in CONDITIONS:
        raise TrialError(f"unknown condition {request.condition!r}: expected one of {CONDITIONS}")
    scenario = load_scenario(request.scenario)
    robot_config = scenario.robot
    model = get_model(robot_config.model)
    if robot_config.base_mass_kg is not None or robot_config.base_inertia_kg_m2 is not None:
        model = model.with_base(
            robot_config.base_mass_kg if robot_config.base_mass_kg is not None else model.base_mass_kg,
            robot_config.base_inertia_kg_m2
            if robot_config.base_inertia_kg_m2 is not None
            else model.base_inertia_kg_m2,
        )
    q0 = None if robot_config.initial_joints_rad is None else np.array(robot_config.initial_joints_rad)
    automatic = request.condition == "as"
    seed = int(request.seed)
    arm = PyBulletArm(model, q0_rad=q0, dt_s=DT_S, gui=request.gui)
    device = None
    try:
        ee0 = arm.measure().ee_position_m.copy()
        device = None if automatic else _make_device(request, scenario, seed, ee0)
        if device is not None:
            device.__enter__()  # a real device starts its scheduler here
        k_p, k_d = CAPTURE_GAINS if automatic else TELEOP_GAINS
        slave = SlaveController(model, arm, solver=request.solver, k_p=k_p, k_d=k_d, dt_s=DT_S)
        target = scenario.target_motion(ee0)
        mapping_config = scenario.mapping
        rotation = np.array(mapping_config.rotation_task_from_device)
        # The offset is set on the first tick, from the stylus' first reading.
        mapping = WorkspaceMapping(
            scale=mapping_config.position_scale,
            rotation_task_from_device=rotation,
            force_scale=mapping_config.force_scale,
        )
        law_name = "ng" if automatic else request.condition
        law = make_law(law_name, **scenario.guidance.params(law_name))
        shoulder_m, reach_m = _shoulder_and_reach(arm)
        if law_name != "ng":
            law = _with_fixtures(law, scenario, device, rotation, reach_m, model)
        rendering = scenario.rendering
        max_force = rendering.max_force_n
        if device is not None:
            max_force = min(max_force, device.spec.max_force_n)
        renderer = ForceRenderer(
            rotation_device_from_task=rotation.T,
            force_scale=mapping_config.force_scale,
            max_force_n=max_force,
            saturation=rendering.saturation,
            ramp_time_s=rendering.ramp_time_s,
            max_rate_n_s=rendering.max_rate_n_s,
        )
        time_limit_s = request.time_limit_s or scenario.capture.time_limit_s
        if not (time_limit_s > 0.0 and math.isfinite(time_limit_s)):
            raise TrialError(f"the time limit must be a positive number of seconds, got {time_limit_s}")
        max_ticks = int(round(time_limit_s / DT_S))
        trial_id = request.resolved_trial_id(scenario.name)
        out = Path(out_dir)
        participant = _participant_metadata(request, automatic)
        metadata = {
            "format_version": trial_log.FORMAT_VERSION,
            "package_version": __version__,
            "trial_id": trial_id,
            "scenario": scenario.name,
            "scenario_config": scenario.as_dict(),
            "condition": request.condition,
            "participant": participant,
            "seed": seed,
            "repetition": request.repetition,
            "gains": {
                "slave": {"k_p": k_p, "k_d": k_d, "solver": request.solver},
                "law": law.params(),
                "mapping": mapping.as_dict(),
            },
            "model": model.name,
            "n_joints": model.n_joints,
            "dt_s": DT_S,
            "target_radius_m": scenario.target.radius_m,
            "capture_tolerance_m": scenario.capture.tolerance_m,
            "post_capture_window_s": scenario.capture.post_capture_window_s,
            "device": device.spec.as_dict() if device is not None else None,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        recorder = TrialRecorder(
            out / f"{trial_id}.parquet",
            trial_log.float_columns(model.n_joints),
            trial_log.FLAGS,
            metadata,
            expected_rows=max_ticks,
        )
        tick = ServoTick(
            dt_s=DT_S,
            max_ticks=max_ticks,
            device=device,
            mapping=mapping,
            slave=slave,
            arm=arm,
            target=target,
            law=law,
            renderer=renderer,
            recorder=recorder,
            target_radius_m=scenario.target.radius_m,
            end_after_reach_s=(
                scenario.capture.post_capture_window_s + HOLD_AFTER_WINDOW_S
                if request.end_on_capture
                else math.inf
            ),
        )
        tick.guidance_state.arm_base_position_m[:] = shoulder_m
        clock = _make_clock(request, device)
    except BaseException:
        arm.close()
        if device is not None:
            device.__exit__(None, None, None)
        raise
    return Trial(
        request=request,
        scenario=scenario,
        tick=tick,
        clock=clock,
        recorder=recorder,
        arm=arm,
        device=device,
        max_ticks=max_ticks,
        n_joints=model.n_joints,
    )


def _shoulder_and_reach(arm: Any) -> tuple[np.ndarray, float]:
    """The first joint's position [m] (task frame, at the start; the base barely moves
    under reactionless control) and an upper bound of the arm's reach from it [m]: the
    sum of the rigid segments between consecutive joint origins and the end effector."""
    points = arm.link_positions_m()
    segments = np.linalg.norm(np.diff(points[1:], axis=0), axis=1)
    return points[1].copy(), float(segments.sum())


def _with_fixtures(
    law: Any, scenario: Any, device: Any | None, rotation: np.ndarray, reach_m: float, model: Any
) -> Any:
    """The law plus the scenario's forbidden-region fixtures (device walls, arm reach,
    joint-limit proximity)."""
    from guidance.fixtures import JointLimitProximity, ReachLimit, WorkspaceWalls
    from guidance.law import Sum

    fixtures = scenario.fixtures
    parts = [law]
    if fixtures.workspace_walls and device is not None:
        parts.append(
            WorkspaceWalls(
                device.spec.workspace_min_m,
                device.spec.workspace_max_m,
                rotation_device_from_task=rotation.T,
                force_scale=scenario.mapping.force_scale,
            )
        )
    if fixtures.reach_limit:
        parts.append(ReachLimit(reach_m))
    if fixtures.joint_limits:
        parts.append(JointLimitProximity(model.q_min_rad, model.q_max_rad))
    return parts[0] if len(parts) == 1 else Sum(*parts)


def _participant_metadata(request: TrialRequest, automatic: bool) -> dict[str, Any]:
    if automatic:
        return {"id": "controller", "kind": "controller", "params": {}}
    if request.device != "simulated":
        return {"id": request.participant, "kind": "human", "params": {}}
    params = request.participant_params or {}
    kind = params.get("kind", request.participant)
    return {"id": params.get("participant_id") or request.participant, "kind": kind, "params": params}


def _make_clock(request: TrialRequest, device: Any | None) -> Any:
    from trials.clocks import HeadlessClock, PacedClock

    device_clock = getattr(device, "clock", None)
    if device_clock is not None:
        return device_clock()
    if request.paced or request.device != "simulated":
        return PacedClock(DT_S)
    return HeadlessClock(DT_S)


def run_trial(request: TrialRequest, out_dir: str | Path) -> dict[str, Any]:
    """Build, run and finish one trial; returns its summary (path, reach time, ...)."""
    return build_trial(request, out_dir).run()


def run_trial_spec(spec: TrialSpec, study_dir: Path) -> dict[str, Any]:
    """Run one planned study trial (a worker process's entry point)."""
    from trials.study import TRIALS_DIR

    request = TrialRequest(
        scenario=spec.scenario,
        condition=spec.condition,
        participant=spec.participant_kind,
        seed=spec.seed,
        trial_id=spec.trial_id,
        participant_params=spec.participant_params or None,
        repetition=spec.repetition,
    )
    trial = build_trial(request, Path(study_dir) / TRIALS_DIR)
    trial.recorder.update_metadata(
        participant={"id": spec.participant_id, "kind": spec.participant_kind, "params": spec.participant_params},
        study={"order_index": spec.order_index, "participant_index": spec.participant_index},
    )
    return trial.run()
