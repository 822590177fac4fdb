"""Building and running one trial: scenario + condition + participant -> a trial file.

:func:`build_trial` assembles the parts named in docs/architecture.md (arm, device, commander,
slave-control path, target, guidance law, recorder) into a :class:`trials.tick.ServoTick`,
each from its own package's factory, and picks the clock that drives it; :func:`run_trial`
builds, runs and finishes. Studies call it through ``trials.study.run_trial_spec`` in
worker processes; the interactive trainer builds a trial in its servo process and
attaches a shared-memory snapshot.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from numpy.typing import NDArray

from capture_trainer import __version__, trial_log
from capture_trainer.errors import TrialError
from capture_trainer.paths import MAX_STEM_BYTES, safe_component, trial_file
from guidance.law import GuidanceLaw
from guidance.rendering import ForceRenderer
from haptics.device import Device, DeviceSpec, ServoClock, SimulatedHand
from haptics.mapping import WorkspaceMapping
from robot.arm import ArmBackend
from robot.backends import ARM_BACKENDS
from robot.debris import CaptureScene, ContactModel, DebrisSpec, SimulatesDebris
from robot.models import ManipulatorModel, get_model
from robot.slave import SlaveController
from scenarios.motion import CurvedMotion, TargetMotion
from scenarios.schema import Scenario
from scenarios.seeding import trial_seed
from trials.capture_event import CaptureRules, payload_metadata
from trials.conditions import CONDITIONS
from trials.commanders import Commander, ControllerCommander, HapticCommander
from trials.compensators import Compensator, CompensatorConfig, make_compensator
from trials.delay import DelayConfig, DelayedLink
from trials.proximity import ProximityScene
from trials.recorder import HEADLESS_FLUSH, LIVE_FLUSH, TrialRecorder
from trials.tick import ServoTick, TickLimits, TrialParts

if TYPE_CHECKING:
    from trials.behaviours.machine import TaskSpec
    from trials.behaviours.phase import PostCapturePhase
    from haptics.operators import Operator
    from haptics.safety import SafetyConfig

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
        seed: the run's seed; with the scenario's seed, the participant and the repetition it
            makes the trial's seed (``scenarios.seeding.trial_seed``).
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
        arm: address (``HOST:PORT``) of an arm server (``capture-trainer arm serve`` or a
            real arm's) to drive over the link instead of the in-process plant.
        arm_keys: the CURVE key folder of ``capture-trainer arm keys`` (required off
            loopback).
        delay_s, jitter_s, loss: override the scenario's ``[delay]`` (one-way delay and
            jitter [s], loss probability) of the link between the operator's side and the
            arm's side (``trials.delay``).
        compensator: overrides the scenario's ``[delay] compensator`` (``none`` |
            ``predictive`` | ``passivity``, ``trials.compensators``).
        contact_feedback: overrides the scenario's ``[rendering] contact_feedback``
            (the tool's contact force rendered to the hand on top of guidance).
        contact_mode: overrides the scenario's ``[rendering] contact_mode``: what the
            hand feels after the capture (``trials.contact_modes``: ``contact``,
            ``free-body``, ``viscous``, ``damper``).
        contact: ``physics`` or ``auto`` (the debris as a body with contact physics: in
            the arm's own world when it can hold one, as the in-process plant's can, else
            in a world of its own on this side with a kinematic probe,
            ``robot.debris_world``) or ``proximity`` (the paper's distance test, no
            physics).
        guidance_authority: the factor on the condition's guidance force
            (``guidance.law.Scaled``; the fixtures are not scaled), from a guidance
            schedule (``guidance.schedule``); 1 is the law as designed, negative values
            augment the error. Recorded as metadata ``guidance_authority`` (null for a
            condition without guidance).
        task: the task run after the capture (``trials.behaviours``: a built-in task's
            name or a task file); None: the scenario's built-in task if a task names it,
            else none; ``"none"``: none. The task's time limit is added to the trial's.
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
    arm: str | None = None
    arm_keys: str | None = None
    contact: str = "auto"
    guidance_authority: float = 1.0
    delay_s: float | None = None
    jitter_s: float | None = None
    loss: float | None = None
    compensator: str | None = None
    contact_feedback: bool | None = None
    task: str | None = None
    contact_mode: str | None = None

    def resolved_trial_id(self, scenario_name: str, automatic: bool = False) -> str:
        """The trial file's stem: ``trial_id``, or ``<participant>_<scenario>_<condition>_s<seed>``
        (``controller`` in the participant's place when the controller captures),
        made a safe file-name component (``capture_trainer.paths.safe_component``: readable
        names unchanged, anything that could leave the folder replaced)."""
        if self.trial_id:
            return safe_component(self.trial_id, MAX_STEM_BYTES)
        who = _participant_metadata(self, automatic)["id"] if automatic else self.participant
        parts = "_".join(safe_component(str(part)) for part in (who, scenario_name, self.condition))
        return safe_component(f"{parts}_s{self.seed}", MAX_STEM_BYTES)


@dataclass
class Trial:
    """A built trial: call ``clock.run(tick, max_ticks)`` then :meth:`finish`."""

    request: TrialRequest
    scenario: Scenario
    tick: ServoTick
    clock: ServoClock
    recorder: TrialRecorder
    arm: ArmBackend
    device: Device | None
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
            "outcome": tick.monitor.outcome or None,
            "outcome_at_s": tick.monitor.outcome_at_s if tick.monitor.outcome else None,
            "outcome_reason": tick.monitor.outcome_reason or None,
            "task": None if tick.post is None else tick.post.task.name,
            "task_outcome": None if tick.post is None else tick.post.machine.outcome or None,
            "task_reason": None if tick.post is None else tick.post.machine.reason or None,
        }
        if reached:
            summary["impact_velocity_m_s"] = _impact_velocity(self.recorder, tick.reached_at_s)
        return summary

    def finish(self) -> dict[str, Any]:
        """Close everything and write the final, complete trial file; return a summary."""
        if self._closed:
            return self._summary()
        self._closed = True
        self.tick.finish_outcome()
        self._close_hardware()
        self.recorder.close(end_reason=self.tick.end_reason, servo_timing=self._timing(), **self._outcome_metadata())
        return self._summary()

    def _outcome_metadata(self) -> dict[str, Any]:
        payload = self.tick.payload
        link = self.tick.link
        return {**self.tick.monitor.metadata(), "payload": None if payload is None else payload_metadata(payload),
                "tick_path": self.tick.path.as_dict(),
                "link_delay": None if link is None else link.metadata(),
                "compensator": None if self.tick.compensator is None else self.tick.compensator.metadata(),
                "post_capture": None if self.tick.post is None else self.tick.post.metadata(),
                "base_rate_bound": self.tick.parts.slave.rate_bound_metadata()}

    def abort(self, reason: str) -> None:
        """Stop after a failure or a user abort; the recorded data is kept, incomplete."""
        if self._closed:
            return
        self._closed = True
        self.tick.finish_outcome(aborted_reason=reason)
        with contextlib.suppress(Exception):  # the failure being handled is the one to report
            self.recorder.update_metadata(**self._outcome_metadata())
        self._close_hardware()
        self.recorder.abort(reason)

    def _close_hardware(self) -> None:
        if self.device is not None:
            self.device.__exit__(None, None, None)
        self.tick.scene.close()
        self.arm.close()


def _impact_velocity(recorder: TrialRecorder, reached_at_s: float) -> float:
    """Relative speed at the first reach, read back from the row buffers (for progress)."""
    values = recorder.recorded_row(round(reached_at_s / DT_S) - 1)
    ee_v = [values[recorder.column_index(c)] for c in trial_log.EE_VELOCITY]
    tg_v = [values[recorder.column_index(c)] for c in trial_log.TARGET_VELOCITY]
    return float(np.linalg.norm(np.subtract(ee_v, tg_v)))


def device_start_position(scenario: Scenario, ee0_m: np.ndarray, spec: DeviceSpec) -> np.ndarray:
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
    clipped: np.ndarray = np.clip(start, low + 0.1 * (high - low), high - 0.1 * (high - low))
    return clipped


def build_trial(request: TrialRequest, out_dir: str | Path, staged: bool = False) -> Trial:
    """Assemble a trial from its plan; nothing runs until its clock runs the tick.

    Each part comes from its own package's factory; on any error what was opened is
    closed again. The tick is fused when its parts allow (:mod:`trials.fused`) unless
    ``staged`` (the reference path, stage by stage).

    Raises:
        ScenarioError: the scenario cannot be loaded.
        DeviceError: the device backend is not available here.
        TrialError: an invalid combination of options.
    """
    from trials.vocabulary import load_scenario

    scenario = load_scenario(request.scenario)
    plan = TrialPlan.of(request, scenario)
    task = _task(request, scenario)
    if task is not None:
        plan = replace(plan, max_ticks=plan.max_ticks + int(round(task.time_limit_s / DT_S)))
    with contextlib.ExitStack() as opened:
        arm = _make_arm(request, scenario, plan.model)
        opened.callback(arm.close)
        ee0 = arm.measure().ee_position_m.copy()
        scene = _make_scene(request, scenario, plan.model, arm, scenario.target_motion(ee0))
        opened.callback(scene.close)
        device = None if plan.automatic else _open_device(request, scenario, plan.seed, ee0, opened)
        slave = SlaveController(plan.model, arm, solver=request.solver, k_p=plan.gains[0], k_d=plan.gains[1],
                                dt_s=DT_S)
        shoulder_m, reach_m = _shoulder_and_reach(arm)
        law = _make_law(plan, scenario, device, reach_m, _authority(request))
        commander = (ControllerCommander(scene, scene.contact_radius_m if scene.physical else 0.0, scene.reading)
                     if device is None else _haptic_commander(scenario, device))
        recorder = _make_recorder(request, scenario, plan, law, commander, device, scene, out_dir)
        limits = TickLimits(DT_S, plan.max_ticks, scene.contact_radius_m, plan.end_after_reach_s,
                            _capture_rules(scenario, plan, shoulder_m, reach_m))
        link = _make_link(request, scenario, plan.seed)
        compensator = _make_compensator(request, scenario, plan, link, ee0,
                                        None if device is None else device.spec)
        post = None if task is None else _make_post(
            task, arm, scene, shoulder_m, reach_m, 0.0 if link is None else link.config.delay_s,
            "none" if compensator is None else compensator.name,
            isinstance(commander, HapticCommander) and commander.hand is not None)
        tick = ServoTick(TrialParts(commander, slave, arm, scene, law, recorder, scene, link, compensator, post),
                         limits, staged=staged)
        tick.guidance_state.arm_base_position_m[:] = shoulder_m
        clock = _make_clock(request, device)
        opened.pop_all()
    return Trial(request=request, scenario=scenario, tick=tick, clock=clock, recorder=recorder, arm=arm,
                 device=device, max_ticks=plan.max_ticks, n_joints=plan.model.n_joints)


@dataclass(frozen=True)
class TrialPlan:
    """What a request and its scenario decide before any part is built.

    Attributes:
        model: the manipulator (with the scenario's base overrides).
        automatic: the controller captures (``as``); no device, no guidance.
        law_name: the guidance law of the condition (``ng`` for the controller).
        gains: eq. 10 (k_p [1/s^2], k_d [1/s]) of the slave.
        max_ticks: the time limit in ticks.
        end_after_reach_s: how long the trial goes on after the first reach [s].
        seed: the trial's seed.
    """

    model: ManipulatorModel
    automatic: bool
    law_name: str
    gains: tuple[float, float]
    max_ticks: int
    end_after_reach_s: float
    seed: int

    @classmethod
    def of(cls, request: TrialRequest, scenario: Scenario) -> TrialPlan:
        condition = CONDITIONS.get(request.condition)
        automatic = condition.automatic
        time_limit_s = request.time_limit_s or scenario.capture.time_limit_s
        if not (time_limit_s > 0.0 and math.isfinite(time_limit_s)):
            raise TrialError(f"the time limit must be a positive number of seconds, got {time_limit_s}")
        window_s = scenario.capture.post_capture_window_s + HOLD_AFTER_WINDOW_S
        return cls(
            model=_scenario_model(scenario),
            automatic=automatic,
            law_name=condition.law,
            gains=CAPTURE_GAINS if automatic else TELEOP_GAINS,
            max_ticks=int(round(time_limit_s / DT_S)),
            end_after_reach_s=window_s if request.end_on_capture else math.inf,
            seed=trial_seed(scenario.seed, _participant_metadata(request, automatic)["id"], request.repetition,
                            int(request.seed)),
        )


def _scenario_model(scenario: Scenario) -> ManipulatorModel:
    """The registered model with the scenario's base mass and inertia overrides."""
    robot_config = scenario.robot
    model = get_model(robot_config.model)
    if robot_config.base_mass_kg is None and robot_config.base_inertia_kg_m2 is None:
        return model
    return model.with_base(
        model.base_mass_kg if robot_config.base_mass_kg is None else robot_config.base_mass_kg,
        model.base_inertia_kg_m2 if robot_config.base_inertia_kg_m2 is None else robot_config.base_inertia_kg_m2,
    )


def debris_spec(scenario: Scenario, motion: TargetMotion, fixture0_m: NDArray[np.float64]) -> DebrisSpec:
    """The scenario's debris as a body: its fixture (the target sphere) at ``fixture0_m``
    [m] at ``t = 0``, moving as ``motion`` until something touches it."""
    target, debris = scenario.target, scenario.debris
    tumbling = target.motion == "tumbling"
    return DebrisSpec(
        mass_kg=debris.mass_kg,
        inertia_kg_m2=tuple(tuple(v if r == c else 0.0 for c, v in enumerate(debris.principal_inertia_kg_m2()))
                            for r in range(3)),  # type: ignore[arg-type]
        fixture_radius_m=target.radius_m,
        fixture0_m=tuple(float(v) for v in fixture0_m),  # type: ignore[arg-type]
        lever_arm_m=target.lever_arm_m if tumbling else (0.0, 0.0, 0.0),
        velocity_m_s=target.velocity_m_s,
        angular_velocity_rad_s=target.angular_velocity_rad_s if tumbling else (0.0, 0.0, 0.0),
        size_m=debris.size_m,
        thrust=motion if isinstance(motion, CurvedMotion) else None,
        contact=ContactModel(debris.contact_frequency_rad_s, debris.contact_damping_ratio, debris.friction),
    )


def _task(request: TrialRequest, scenario: Scenario) -> TaskSpec | None:
    """The task after the capture: the request's, else the built-in one naming the
    scenario (``scenarios`` in the task file); ``none``: no task."""
    from trials.behaviours.machine import load_task, task_for_scenario

    if request.task == "none":
        return None
    name = request.task if request.task is not None else task_for_scenario(scenario.name)
    return None if name is None else load_task(name)


def _make_post(task: TaskSpec, arm: ArmBackend, scene: CaptureScene, shoulder_m: NDArray[np.float64],
               reach_m: float, command_delay_s: float = 0.0, compensator: str = "none",
               hand_present: bool = False) -> PostCapturePhase:
    """The post-capture phase of ``task``: its fixtures go into the arm's PyBullet world,
    which must hold the debris (the in-process plant); the link's delay, the
    compensator's name and whether a hand's force is measured go to behaviours that
    model the master side (``mixed``)."""
    from trials.behaviours.phase import PostCapturePhase, make_world

    world = None
    if task.fixtures is not None:
        client = getattr(arm, "client_id", None)
        if not (scene.physical and scene.contact_model == "physics" and isinstance(client, int)):
            raise TrialError(f"task {task.name!r} has fixtures (posts): it needs the debris in the arm's own "
                             "PyBullet world (the in-process plant, --contact physics or auto)")
        import pybullet

        world = make_world(task, pybullet, client)
    return PostCapturePhase(task, DT_S, world, shoulder_m, reach_m, command_delay_s, compensator, hand_present)


def _make_link(request: TrialRequest, scenario: Scenario, seed: int) -> DelayedLink | None:
    """The delayed link of the scenario's ``[delay]`` (the request's values first), or
    None when there is no delay."""
    table = scenario.delay
    try:
        config = DelayConfig(
            delay_s=table.delay_s if request.delay_s is None else float(request.delay_s),
            jitter_s=table.jitter_s if request.jitter_s is None else float(request.jitter_s),
            loss=table.loss if request.loss is None else float(request.loss),
        )
    except ValueError as error:
        raise TrialError(f"delay: {error}") from None
    return DelayedLink(config, DT_S, seed) if config.active else None


def _make_compensator(request: TrialRequest, scenario: Scenario, plan: TrialPlan, link: DelayedLink | None,
                      ee0_m: NDArray[np.float64], device_spec: DeviceSpec | None = None) -> Compensator | None:
    """The compensator of the scenario's ``[delay] compensator`` and ``[rendering]
    contact_feedback`` and ``contact_mode`` (the request's values first); None when there
    is neither a delay, nor a compensator, nor contact feedback (the tick is then
    today's). A Campbell contact mode gets its virtual coupling from the payload (the
    debris' mass), the mapping and the device's passive-stiffness bound."""
    rendering = scenario.rendering
    config = CompensatorConfig(
        name=scenario.delay.compensator if request.compensator is None else request.compensator,
        contact_feedback=rendering.contact_feedback if request.contact_feedback is None else request.contact_feedback,
        contact_force_scale=rendering.contact_force_scale,
        contact_mode=rendering.contact_mode if request.contact_mode is None else request.contact_mode,
        contact_time_constant_s=rendering.contact_time_constant_s,
        coupling_share=rendering.coupling_share,
    )
    if link is None and config.name == "none" and not config.contact_feedback:
        return None
    delay = link.config if link is not None else DelayConfig()
    coupling = None
    if config.contact_feedback and config.contact_mode != "contact" and device_spec is not None:
        from trials.contact_modes import coupling_gains

        coupling = coupling_gains(
            config.contact_mode, payload_mass_kg=scenario.debris.mass_kg,
            contact_force_scale=config.contact_force_scale, time_constant_s=config.contact_time_constant_s,
            device_stiffness_n_m=device_spec.max_stiffness_n_m, coupling_share=config.coupling_share,
            position_scale=scenario.mapping.position_scale, force_scale=scenario.mapping.force_scale,
            max_force_dev_n=min(rendering.max_force_n, device_spec.max_force_n), dt_s=DT_S)
    return make_compensator(config, DT_S, motion=scenario.target_motion(ee0_m), ee0_m=ee0_m, gains=plan.gains,
                            command_delay_s=delay.delay_s,
                            history_s=2.0 * delay.delay_s + 6.0 * delay.jitter_s + 0.1, coupling=coupling,
                            state_line=None if link is None else link.state)


CONTACT_MODES: tuple[str, ...] = ("auto", "physics", "proximity")


def _make_scene(request: TrialRequest, scenario: Scenario, model: ManipulatorModel, arm: ArmBackend,
                motion: TargetMotion) -> CaptureScene:
    """The debris as a body in the arm's world when the backend simulates one (and the
    request does not ask for proximity), else a proximity stand-in on the closed-form
    path (an arm over the link)."""
    if request.contact not in CONTACT_MODES:
        raise TrialError(f"contact must be one of {', '.join(CONTACT_MODES)}, got {request.contact!r}")
    physics = isinstance(arm, SimulatesDebris)
    fixture0 = np.zeros(3)
    motion.state(0.0, fixture0, np.zeros(3), np.zeros(3))
    if request.contact == "proximity":
        return ProximityScene(motion, scenario.target.radius_m + model.capture_tool.tip_radius_m)
    spec = debris_spec(scenario, motion, fixture0)
    if physics:
        return cast(SimulatesDebris, arm).add_debris(spec, motion)
    from robot.debris import tool_effective_mass_kg
    from robot.debris_world import LocalDebrisWorld

    q0 = scenario.robot.initial_joints_rad
    tool_mass = tool_effective_mass_kg(model, model.q0_rad if q0 is None else q0)
    return LocalDebrisWorld(spec, motion, model.capture_tool.tip_radius_m, tool_mass, DT_S)


def _capture_rules(scenario: Scenario, plan: TrialPlan, shoulder_m: NDArray[np.float64], reach_m: float) -> CaptureRules:
    capture = scenario.capture
    return CaptureRules(envelope_radius_m=plan.model.capture_tool.envelope_radius_m,
                        capture_speed_m_s=capture.capture_speed_m_s, hold_s=capture.hold_s,
                        hold_gap_m=capture.hold_gap_m, window_s=plan.end_after_reach_s,
                        reach_m=reach_m + scenario.target.radius_m,
                        shoulder_m=tuple(float(v) for v in shoulder_m))  # type: ignore[arg-type]


def _make_arm(request: TrialRequest, scenario: Scenario, model: ManipulatorModel) -> ArmBackend:
    """The arm at the scenario's start pose: the in-process plant, or an arm server over
    the link (lock-step when the trial runs headless, so it is deterministic; real time
    when a clock paces it)."""
    q0 = scenario.robot.initial_joints_rad
    q0_rad = None if q0 is None else np.array(q0)
    if request.arm is None:
        return ARM_BACKENDS.get("pybullet")(model, q0_rad=q0_rad, dt_s=DT_S, **({"gui": True} if request.gui else {}))
    headless = _headless(request)
    return ARM_BACKENDS.get("remote")(model, q0_rad=q0_rad, dt_s=DT_S, address=request.arm,
                                      keys_dir=request.arm_keys, mode="lockstep" if headless else "realtime")


def _open_device(request: TrialRequest, scenario: Scenario, seed: int, ee0_m: NDArray[np.float64],
                 opened: contextlib.ExitStack) -> Device:
    """The participant's device, opened (a real device starts its scheduler here): a
    simulated device held by a simulated participant, or a device a person holds."""
    from haptics.backends import open_device

    options = dict(request.device_options)
    options.setdefault("safety_config", _safety_config(scenario))
    if request.device == "simulated":
        from haptics.simulated import TOUCH_LIKE_SPEC

        options.setdefault("operator", _simulated_participant(request, seed))
        options.setdefault("initial_position_m", device_start_position(scenario, ee0_m, TOUCH_LIKE_SPEC))
        options.setdefault("dt_s", DT_S)
        options.setdefault("seed", seed)
    device = open_device(request.device, **options)
    opened.callback(device.__exit__, None, None, None)
    device.__enter__()
    return device


def _safety_config(scenario: Scenario) -> SafetyConfig:
    """The device's safety layer, tuned by the scenario's rendering limits."""
    from haptics.safety import SafetyConfig

    rendering = scenario.rendering
    return SafetyConfig.for_rendering(max_force_n=rendering.max_force_n, saturation=rendering.saturation,
                                      ramp_time_s=rendering.ramp_time_s, max_rate_n_s=rendering.max_rate_n_s)


def _simulated_participant(request: TrialRequest, seed: int) -> Operator:
    """The simulated participant holding a simulated device (a kind's preset or a sampled one)."""
    from haptics.operators import HumanOperator, make_operator
    from haptics.participants import PARTICIPANT_PRESETS, ParticipantParams

    if request.participant_params:
        # A learning participant's practice before this trial (``trials.study``) is
        # applied to its parameters (``haptics.learning``: the model's assumption).
        fields = dict(request.participant_params)
        practice = fields.pop("practice", None) or {}
        params = ParticipantParams(**fields)
        if params.learning:
            from haptics.learning import practised

            params = practised(params, practice.get("unguided", 0), practice.get("guided", 0))
        return HumanOperator(params, seed=seed, dt_s=DT_S)
    if request.participant not in PARTICIPANT_PRESETS:
        raise TrialError(
            f"--participant {request.participant!r}: with the simulated device the "
            f"participant is a simulated kind: {', '.join(PARTICIPANT_PRESETS.names())}"
        )
    return make_operator(request.participant, seed=seed, dt_s=DT_S)


def _haptic_commander(scenario: Scenario, device: Device) -> HapticCommander:
    """Stylus -> task command and guidance -> device force, with the scenario's mapping.

    The mapping's offset is set on the first tick, from the stylus' first reading.
    """
    config = scenario.mapping
    rotation = np.array(config.rotation_task_from_device)
    mapping = WorkspaceMapping(scale=config.position_scale, rotation_task_from_device=rotation,
                               force_scale=config.force_scale)
    renderer = ForceRenderer(rotation_device_from_task=rotation.T, force_scale=config.force_scale)
    hand = device if isinstance(device, SimulatedHand) else None
    return HapticCommander(device, mapping, renderer, hand)


def _make_law(plan: TrialPlan, scenario: Scenario, device: Device | None, reach_m: float,
              authority: float = 1.0) -> GuidanceLaw:
    """The condition's guidance law, times the guidance ``authority`` (only the law: the
    fixtures keep their full force), plus the scenario's forbidden-region fixtures
    (device walls, arm reach, joint-limit proximity)."""
    from guidance.fixtures import JointLimitProximity, ReachLimit, WorkspaceWalls
    from guidance.law import Scaled, Sum
    from guidance.registry import make_law

    law = make_law(plan.law_name, **scenario.guidance.params(plan.law_name))
    if plan.law_name == "ng":
        return law
    if authority != 1.0:
        law = Scaled(law, authority)
    fixtures = scenario.fixtures
    rotation = np.array(scenario.mapping.rotation_task_from_device)
    parts: list[GuidanceLaw] = [law]
    if fixtures.workspace_walls and device is not None:
        parts.append(WorkspaceWalls(device.spec.workspace_min_m, device.spec.workspace_max_m,
                                    rotation_device_from_task=rotation.T,
                                    force_scale=scenario.mapping.force_scale))
    if fixtures.reach_limit:
        parts.append(ReachLimit(reach_m))
    if fixtures.joint_limits:
        parts.append(JointLimitProximity(plan.model.q_min_rad, plan.model.q_max_rad))
    if fixtures.reaction_boundary:
        parts.append(make_law("reaction_boundary", **scenario.guidance.params("reaction_boundary")))
    return parts[0] if len(parts) == 1 else Sum(*parts)


def _authority(request: TrialRequest) -> float:
    """The request's guidance authority, checked (finite, at most
    ``guidance.schedule.MAX_AUTHORITY`` in magnitude)."""
    from guidance.schedule import MAX_AUTHORITY

    value = request.guidance_authority
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or abs(value) > MAX_AUTHORITY:
        raise TrialError(f"the guidance authority must be a number in [-{MAX_AUTHORITY:g}, {MAX_AUTHORITY:g}], "
                         f"got {value!r}")
    return float(value)


def _shoulder_and_reach(arm: ArmBackend) -> tuple[NDArray[np.float64], float]:
    """The first joint's position [m] (task frame, at the start; the base barely moves
    under reactionless control) and an upper bound of the arm's reach from it [m]: the
    sum of the rigid segments between consecutive joint origins and the end effector."""
    points = arm.link_positions_m()
    segments = np.linalg.norm(np.diff(points[1:], axis=0), axis=1)
    return points[1].copy(), float(segments.sum())


def _make_recorder(request: TrialRequest, scenario: Scenario, plan: TrialPlan, law: GuidanceLaw,
                   commander: Commander, device: Device | None, scene: CaptureScene,
                   out_dir: str | Path) -> TrialRecorder:
    """The trial log: its file, columns and the plan as metadata."""
    trial_id = request.resolved_trial_id(scenario.name, plan.automatic)
    k_p, k_d = plan.gains
    mapping = commander.mapping.as_dict() if isinstance(commander, HapticCommander) else None
    metadata = {
        "format_version": trial_log.FORMAT_VERSION,
        "package_version": __version__,
        "trial_id": trial_id,
        "scenario": scenario.name,
        "scenario_config": scenario.as_dict(),
        "condition": request.condition,
        "participant": _participant_metadata(request, plan.automatic),
        "seed": plan.seed,
        "run_seed": int(request.seed),
        "repetition": request.repetition,
        "gains": {"slave": {"k_p": k_p, "k_d": k_d, "solver": request.solver}, "law": law.params(),
                  "mapping": mapping},
        "guidance_authority": None if plan.law_name == "ng" else _authority(request),
        "model": plan.model.name,
        "n_joints": plan.model.n_joints,
        "dt_s": DT_S,
        "target_radius_m": scene.contact_radius_m,
        "fixture_radius_m": scenario.target.radius_m,
        "tool_tip_radius_m": plan.model.capture_tool.tip_radius_m,
        "contact_model": scene.contact_model,
        "capture_tolerance_m": scenario.capture.tolerance_m,
        "post_capture_window_s": scenario.capture.post_capture_window_s,
        "device": device.spec.as_dict() if device is not None else None,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    return TrialRecorder(trial_file(out_dir, trial_id), trial_log.float_columns(plan.model.n_joints),
                         trial_log.FLAGS, metadata, expected_rows=plan.max_ticks,
                         flush_cadence=HEADLESS_FLUSH if _headless(request) else LIVE_FLUSH)


def _participant_metadata(request: TrialRequest, automatic: bool) -> dict[str, Any]:
    if automatic:
        return {"id": "controller", "kind": "controller", "params": {}}
    if request.device != "simulated":
        return {"id": request.participant, "kind": "human", "params": {}}
    params = request.participant_params or {}
    kind = params.get("kind", request.participant)
    return {"id": params.get("participant_id") or request.participant, "kind": kind, "params": params}


def _headless(request: TrialRequest) -> bool:
    """Whether the trial runs as fast as the machine goes (:func:`_make_clock`'s headless
    clock): a simulated participant on a simulated device, not paced."""
    return request.device == "simulated" and not request.paced


def _make_clock(request: TrialRequest, device: Device | None) -> ServoClock:
    """The device's own clock (OpenHaptics' scheduler), real time when a person watches,
    or as fast as possible."""
    from trials.clocks import CLOCKS

    device_clock = None if device is None else device.clock()
    if device_clock is not None:
        return device_clock
    return CLOCKS.get("headless" if _headless(request) else "paced")(DT_S)


def run_trial(request: TrialRequest, out_dir: str | Path) -> dict[str, Any]:
    """Build, run and finish one trial; returns its summary (path, reach time, ...)."""
    return build_trial(request, out_dir).run()
