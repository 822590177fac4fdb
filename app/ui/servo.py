"""The servo process: runs trials at 1 kHz on its own clock while the window draws.

Why a process: in one Python process the GIL makes a busy drawing thread delay a 1 kHz
callback loop (down to about 150 Hz, measured; see docs/haptics.md). Here the window (main process) and the
servo loop (a ``spawn``-ed child) share no interpreter:

- **control** (window -> servo): a :class:`multiprocessing.Pipe` carries ``start``
  (an :class:`AttemptSpec`) and ``quit``; a shared float array carries the *abort*
  flag, which the servo checks every tick without a system call, and the operator's
  *request* of a task state after the capture (:meth:`ServoProcess.request`: a state
  index and a counter; the guard around the tick hands a new one to
  ``PostCapturePhase.request`` in the servo thread, between two ticks);
- **state** (servo -> window): the trial's :class:`trials.snapshot.SharedSnapshot`
  (created by the servo per attempt, attached by name by the window) and, in the same
  shared float array, the live loop statistics (rate over the last 250 ticks, overruns,
  worst period) written by a thin guard around the tick, which can also copy the joint
  angles into a second shared array for the PyBullet view;
- **results** (servo -> window): the Pipe carries ``started`` (snapshot name, joints,
  target radius, capture tool, model), ``finished`` (summary with the outcome, metrics,
  servo timing) and ``error``.

The child builds each trial with the runner's ``build_trial`` (or another factory named
in :class:`ServoOptions`), so the trial file, its metadata and its tick are those of a
headless trial. Before a scenario's first attempt it runs a few ticks of a throw-away
trial (:func:`warm_up`), and it raises its own scheduling priority
(:func:`raise_priority`) and shortens its GIL switch interval, so that the loop holds
1 kHz on a loaded machine while the window draws. The priority it got is written to the
shared array (the window says when it has no real-time priority, :func:`priority_notice`)
and into every attempt's trial file (metadata ``servo.priority``).

How healthy the loop is, as the window's servo corner shows it, is decided by
:func:`servo_health` over the last :data:`RECENT_S` seconds (:class:`ServoMonitor`):
green only when the rate is at least 99 % of nominal and no period exceeded
:data:`WARN_PERIOD_MS`; amber on such an overrun or a rate below 99 %; red on a stall (a
period over :data:`STALL_PERIOD_MS`, or no statistics for :data:`SILENT_S` while an
attempt runs) or a rate below 95 %.
"""

from __future__ import annotations

import importlib
import logging
import math
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from capture_trainer.errors import CaptureTrainerError, TrialError
from haptics.device import BUTTON_TRAINER

log = logging.getLogger(__name__)

#: Indices of the shared control/statistics array (RECENT_WORST_MS: the worst period of
#: the last STATS_EVERY ticks; PRIORITY: a code of PRIORITY_CODES, 0 until known).
ABORT, TICKS, OVERRUNS, WORST_MS, RATE_HZ, RUNNING, PRIORITY, RECENT_WORST_MS = range(8)
#: The operator's request of a task state: the state's index, and a counter the window
#: raises after writing it (a new count is a new request; the servo only reads both).
REQUEST_STATE, REQUEST_COUNT = 8, 9
_CONTROL_SIZE = 10
#: What :func:`raise_priority` got, as written to the shared array.
PRIORITY_CODES = {"normal": 1.0, "high": 2.0, "realtime": 3.0}
#: Live statistics are refreshed every this many ticks.
STATS_EVERY = 250
#: A period longer than this [s] counts as an overrun (1.5 x 1 ms, as haptics.timing).
OVERRUN_S = 1.5e-3
RUNNER_FACTORY = "trials.runner:build_trial"
#: The servo process's GIL switch interval [s] (Python's default is 5 ms).
SWITCH_INTERVAL_S = 1e-4
#: Most joints the joint-angle channel carries.
MAX_JOINTS = 16
#: Ticks of the throw-away warm-up trial run before a scenario's first attempt.
WARM_UP_TICKS = 20
#: SCHED_FIFO priority of the servo process (1..99; low, above every normal process).
REALTIME_PRIORITY = 10
#: The nice increment tried when real-time scheduling is not permitted.
HIGH_NICE = -10
#: The servo loop's nominal rate [Hz].
NOMINAL_RATE_HZ = 1000.0
#: The servo corner's window [s]: overruns and stalls older than this no longer colour it.
RECENT_S = 3.0
#: A period longer than this [ms] turns the corner amber (an overrun a hand can feel
#: starts around twice the 1 ms period).
WARN_PERIOD_MS = 2.0
#: A period longer than this [ms] is a stall: the corner turns red (the force watchdog's
#: default deadline is 10 ms too).
STALL_PERIOD_MS = 10.0
#: Below these fractions of the nominal rate the corner turns amber, then red.
WARN_RATE_FRACTION, BAD_RATE_FRACTION = 0.99, 0.95
#: No new statistics for this long [s] while an attempt runs is a stall (they come every
#: STATS_EVERY ticks, 0.25 s at 1 kHz).
SILENT_S = 1.0


@dataclass(frozen=True)
class ServoOptions:
    """How the servo process builds trials (fixed for the process's life).

    Attributes:
        factory: ``module:function`` building a trial from ``(request, out_dir)``;
            the module must also define ``TrialRequest``.
        input_name: the window's :class:`haptics.shared_input.SharedInput` block; when
            set, ``--device mouse`` requests carry ``device_options={"input_name": ...}``
            (the device registry then builds a
            :class:`~haptics.shared_input.SharedInputDevice`).
        publish_joints: also publish the joint angles (every ``snapshot_every`` ticks) in
            :attr:`ServoProcess.joints`, for the PyBullet view (``--view pybullet``).
        snapshot_every: publish a snapshot every this many ticks.
        metrics: compute the trial's metrics (``analysis.metrics``) after each attempt.
        priority: ``realtime`` (try SCHED_FIFO, else ``high``), ``high`` (try nice -10)
            or ``normal``; see :func:`raise_priority`.
    """

    factory: str = RUNNER_FACTORY
    input_name: str | None = None
    publish_joints: bool = False
    snapshot_every: int = 10
    metrics: bool = True
    priority: str = "realtime"


@dataclass(frozen=True)
class AttemptSpec:
    """One attempt to run: the runner's ``TrialRequest`` fields plus where to write.

    Attributes:
        out_dir: directory of the trial file (``<out_dir>/<trial_id>.parquet``).
        metadata: entries added to the trial file's metadata after the build (e.g. the
            study's ``participant`` and ``study`` entries, as ``run_trial_spec`` does).
        countdown_s: after the build, hold this long [s] before the first tick (the
            window's countdown); a preview snapshot (phase ``idle``) is published first so
            the window can draw the scene, and Esc during the hold aborts the attempt.
        task: the task after the capture (``TrialRequest.task``: a built-in task, a file,
            ``"none"``; None: the scenario's own, if a task names it).
        Other fields: as ``trials.runner.TrialRequest``; ``paced`` is always True here
        (a person watches).
    """

    scenario: str
    condition: str
    participant: str
    seed: int
    out_dir: str
    device: str = "simulated"
    trial_id: str | None = None
    participant_params: dict[str, Any] | None = None
    repetition: int = 0
    solver: str = "lse"
    metadata: dict[str, Any] | None = None
    time_limit_s: float | None = None
    end_on_capture: bool = True
    arm: str | None = None
    arm_keys: str | None = None
    delay_s: float | None = None
    jitter_s: float | None = None
    loss: float | None = None
    compensator: str | None = None
    contact_feedback: bool | None = None
    contact_mode: str | None = None
    countdown_s: float = 0.0
    guidance_authority: float = 1.0
    task: str | None = None


@dataclass(frozen=True)
class ServoStats:
    """Live servo-loop statistics as the window shows them."""

    ticks: int
    rate_hz: float
    overruns: int
    worst_period_ms: float
    running: bool
    recent_worst_ms: float = 0.0
    priority: str = ""


@dataclass
class ServoProcess:
    """The window's handle on the servo child process.

    Use as a context manager; :meth:`close` asks the child to quit and waits for it.
    """

    options: ServoOptions = field(default_factory=ServoOptions)

    def __post_init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child_conn = ctx.Pipe()
        self.control = ctx.RawArray("d", _CONTROL_SIZE)
        #: The running attempt's joint angles [rad] (with ``publish_joints``; unsynchronised:
        #: a display may see angles of two neighbouring publishes, never a torn float).
        self.joints = ctx.RawArray("d", MAX_JOINTS)
        self.process = ctx.Process(
            target=servo_main,
            args=(child_conn, self.control, self.joints, self.options),
            name="capture-trainer-servo",
            daemon=True,
        )
        self.process.start()
        child_conn.close()

    def __enter__(self) -> ServoProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start_attempt(self, spec: AttemptSpec) -> None:
        """Ask the servo to build and run one attempt (answers come through :meth:`poll`)."""
        self.control[ABORT] = 0.0
        self._conn.send(("start", spec))

    def abort(self) -> None:
        """Stop the running attempt at the next tick (its file is kept, marked incomplete)."""
        self.control[ABORT] = 1.0

    def request(self, state_index: int) -> None:
        """Ask the running attempt's task machine for state ``state_index`` (an index into
        the ``started`` message's ``task["states"]``); it starts on the next tick after the
        capture (``PostCapturePhase.request``). Before the capture it is dropped."""
        self.control[REQUEST_STATE] = float(state_index)
        self.control[REQUEST_COUNT] = self.control[REQUEST_COUNT] + 1.0

    def poll(self, timeout_s: float = 0.0) -> tuple[str, dict[str, Any]] | None:
        """The next message from the servo, or None when none arrived within ``timeout_s``.

        Raises:
            TrialError: the servo process died.
        """
        try:
            if self._conn.poll(timeout_s):
                message: tuple[str, dict[str, Any]] = self._conn.recv()
                return message
        except (EOFError, OSError):
            pass
        else:
            if self.process.is_alive():
                return None
        raise TrialError(f"the servo process stopped (exit code {self.process.exitcode})")

    def stats(self) -> ServoStats:
        """The live loop statistics (written by the servo every 250 ticks)."""
        c = self.control
        return ServoStats(
            ticks=int(c[TICKS]),
            rate_hz=float(c[RATE_HZ]),
            overruns=int(c[OVERRUNS]),
            worst_period_ms=float(c[WORST_MS]),
            running=bool(c[RUNNING]),
            recent_worst_ms=float(c[RECENT_WORST_MS]),
            priority=_priority_name(c[PRIORITY]),
        )

    @property
    def priority(self) -> str:
        """What the servo process got (``realtime``, ``high``, ``normal``; "" until it says)."""
        return _priority_name(self.control[PRIORITY])

    def close(self, timeout_s: float = 5.0) -> None:
        """Abort any attempt, ask the child to quit, wait, and terminate it if it hangs."""
        self.abort()
        if self.process.is_alive():
            try:
                self._conn.send(("quit", None))
            except (BrokenPipeError, OSError):
                pass
            self.process.join(timeout_s)
        if self.process.is_alive():
            log.warning("servo process did not quit within %.1f s; terminating it", timeout_s)
            self.process.terminate()
            self.process.join(timeout_s)
        self._conn.close()


def servo_main(conn: Connection, control: Any, joints: Any, options: ServoOptions) -> None:
    """The child's loop: wait for a command, run the attempt, report; until ``quit``."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s servo: %(message)s")
    # The recorder's flusher thread shares this interpreter: a short switch interval
    # hands the GIL back to the servo thread within ~0.1 ms instead of the default 5 ms.
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    priority = raise_priority(options.priority)
    control[PRIORITY] = PRIORITY_CODES[priority]
    module_name, _, function_name = options.factory.partition(":")
    try:
        module = importlib.import_module(module_name)
        build = getattr(module, function_name)
        request_type = module.TrialRequest
    except (ImportError, AttributeError) as error:
        conn.send(("error", {"message": f"cannot load the trial factory {options.factory}: {error}"}))
        return
    warmed: set[str] = set()
    while True:
        try:
            command, payload = conn.recv()
        except (EOFError, OSError):
            return
        if command == "quit":
            return
        if command == "start":
            if payload.scenario not in warmed:
                warm_up(build, request_type, payload.scenario, payload.condition)
                warmed.add(payload.scenario)
            conn.send(_run_attempt(payload, build, request_type, (control, joints), options, conn,
                                   priority))


def warm_up(build: Any, request_type: Any, scenario: str, condition: str) -> None:
    """Run a throw-away headless trial of ``scenario`` for :data:`WARM_UP_TICKS` ticks.

    The first tick of a fresh process loads the JIT-compiled kernels (tens of
    milliseconds); doing that here, before the person's attempt starts, keeps it out of
    the attempt's servo timing. Failures are left for the real build to report.
    """
    from trials.snapshot import SharedSnapshot, SnapshotLayout

    values = {"scenario": scenario, "condition": condition, "participant": "novice",
              "seed": 0, "device": "simulated", "time_limit_s": 1.0, "trial_id": "warm-up"}
    known = {f.name for f in fields(request_type)}
    try:
        with tempfile.TemporaryDirectory(prefix="capture-trainer-warm-up-") as tmp:
            trial = build(request_type(**{k: v for k, v in values.items() if k in known}), Path(tmp))
            snapshot = SharedSnapshot(SnapshotLayout(trial.n_joints))
            try:
                trial.attach_snapshot(snapshot, every_n_ticks=1)  # the display path too
                for _ in range(WARM_UP_TICKS):
                    if not trial.tick():
                        break
            finally:
                trial.abort("warm-up")
                snapshot.close()
    except Exception as error:  # noqa: BLE001 - the attempt's own build reports it
        log.debug("warm-up of %s failed: %s", scenario, error)


def raise_priority(wanted: str) -> str:
    """Raise this process's scheduling priority as far as allowed; returns what it got.

    On a loaded machine a normal-priority servo process wakes late from its sleeps and
    loses the CPU while holding the GIL. ``SCHED_FIFO`` (priority 10, Linux; needs
    CAP_SYS_NICE or root) is set before the trial is built, so every thread of this
    process (the recorder's flusher too, which must not be preempted while it holds the
    GIL) inherits it; the paced clock sleeps most of each period, so the process stays
    far from the kernel's real-time throttling limit. Otherwise ``nice -10`` is tried.
    Nothing is raised when neither is permitted (:func:`priority_notice` says how to
    grant it).
    """
    if wanted == "realtime" and hasattr(os, "sched_setscheduler"):
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(REALTIME_PRIORITY))
            return "realtime"
        except (OSError, PermissionError):
            log.debug("SCHED_FIFO not permitted; trying nice")
    if wanted in ("realtime", "high"):
        try:
            os.nice(HIGH_NICE)
            return "high"
        except (OSError, PermissionError):
            log.debug("negative nice not permitted; servo runs at normal priority")
    return "normal"


def _priority_name(code: float) -> str:
    return next((name for name, value in PRIORITY_CODES.items() if value == code), "")


def priority_notice(got: str, wanted: str = "realtime", executable: str | None = None) -> str | None:
    """What to tell the user when the servo did not get the priority it asked for.

    Returns None when it got ``wanted`` (or nothing is known yet). The message names the
    two usual ways to permit ``SCHED_FIFO`` for an unprivileged user on Linux: the
    CAP_SYS_NICE capability on the interpreter (every program run by that interpreter
    gets it), or an ``rtprio`` limit for the user's group in ``limits.conf`` (RLIMIT_RTPRIO,
    the way rtkit-based desktops permit audio threads).
    """
    if not got or got == wanted or wanted != "realtime":
        return None
    python = os.path.realpath(executable or sys.executable)
    niced = "nice -10" if got == "high" else "normal priority"
    return (
        f"the servo process has no real-time priority (it runs at {niced}); under load expect "
        "overruns and stalls of tens of ms. To grant it: "
        f"sudo setcap cap_sys_nice+ep {python}  (or add '@{_group()} - rtprio {REALTIME_PRIORITY}' "
        "to /etc/security/limits.conf and log in again)"
    )


def _group() -> str:
    try:
        import grp

        return grp.getgrgid(os.getgid()).gr_name
    except (ImportError, KeyError, OSError):
        return "audio"


def _request(spec: AttemptSpec, request_type: Any, options: ServoOptions) -> Any:
    """The runner's ``TrialRequest``: paced; pointer input from the options."""
    known = {f.name for f in fields(request_type)}
    values = {k: v for k, v in asdict(spec).items() if k in known}
    values["paced"] = True
    if options.input_name is not None and spec.device == "mouse":
        values["device_options"] = {"input_name": options.input_name}
    return request_type(**values)


def _run_attempt(
    spec: AttemptSpec, build: Any, request_type: Any, shared: tuple[Any, Any],
    options: ServoOptions, conn: Connection, priority: str,
) -> tuple[str, dict[str, Any]]:
    from capture_trainer.trial_log import joint_position_column
    from trials.snapshot import SharedSnapshot, SnapshotLayout

    control, joints = shared
    try:
        request = _request(spec, request_type, options)
        trial = build(request, Path(spec.out_dir))
    except CaptureTrainerError as error:
        return "error", {"message": str(error)}
    except Exception as error:  # noqa: BLE001 - a bug, but the window must say so and go on
        log.exception("building attempt %s failed", spec.trial_id)
        return "error", {"message": f"building the attempt failed: {error!r}"}
    try:
        trial.recorder.update_metadata(**{**(spec.metadata or {}), "servo": {"priority": priority}})
    except CaptureTrainerError as error:
        trial.abort(f"metadata refused: {error}")
        return "error", {"message": str(error)}
    path = str(trial.recorder.path)
    snapshot = SharedSnapshot(SnapshotLayout(trial.n_joints))
    try:
        trial.attach_snapshot(snapshot, every_n_ticks=options.snapshot_every)
        described = _describe(trial, snapshot, spec)
        _preview(trial, snapshot)
        if options.input_name is not None and spec.device == "mouse":
            _park_pointer(options.input_name, described.get("device_start_m"))
        conn.send(("started", {**described, "priority": priority}))
        _hold(control, spec.countdown_s)
        columns = None
        if options.publish_joints and trial.n_joints <= MAX_JOINTS:
            recorder = trial.recorder
            columns = [recorder.column_index(joint_position_column(j)) for j in range(trial.n_joints)]
        servo_tick = getattr(trial, "tick", None)
        tick = _guarded(trial.tick, control, joints, trial.recorder.row, columns, options.snapshot_every,
                        getattr(servo_tick, "post", None), getattr(getattr(servo_tick, "parts", None), "commander", None))
        control[RUNNING] = 1.0
        fault: BaseException | None = None
        try:
            trial.clock.run(tick, trial.max_ticks)
        except Exception as caught:  # noqa: BLE001 - reported to the window, file kept
            fault = caught
            log.exception("attempt %s failed", spec.trial_id)
        finally:
            control[RUNNING] = 0.0
        clock_timing = getattr(trial.clock, "timing", None)
        timing = clock_timing.summary() if clock_timing is not None else {}
        if fault is not None:
            trial.abort(f"fault: {fault!r}")
            summary = {"path": path, "end_reason": "fault", **_outcome(trial, f"fault: {fault!r}")}
        elif control[ABORT] != 0.0:
            trial.abort("aborted")
            summary = {"path": path, "end_reason": "aborted",
                       **_outcome(trial, "stopped before the end (Esc, or the window closed)")}
        else:
            summary = trial.finish()
    finally:
        snapshot.close()
    summary = {"trial_id": Path(path).stem, **summary}
    metrics = _metrics(summary.get("path")) if options.metrics and fault is None else {}
    status = "error" if fault is not None else ("aborted" if control[ABORT] != 0.0 else "finished")
    return "finished", {
        "status": status,
        "summary": summary,
        "metrics": metrics,
        "timing": timing,
        "message": "" if fault is None else repr(fault),
        "priority": priority,
    }


def _outcome(trial: Any, reason: str) -> dict[str, Any]:
    """The outcome entries of an aborted attempt's summary (as the runner's summary has
    them): ``aborted``, when, and ``reason`` (in the trainee's words)."""
    monitor = getattr(getattr(trial, "tick", None), "monitor", None)
    at_s = getattr(monitor, "outcome_at_s", math.nan)
    return {"outcome": "aborted", "outcome_at_s": at_s if isinstance(at_s, float) and at_s == at_s else None,
            "outcome_reason": reason}


def _tool(model_name: str) -> dict[str, float]:
    """The capture tool's radii of ``model_name`` (:class:`robot.models.CaptureTool`)."""
    from robot.models import CaptureTool, get_model

    try:
        tool = get_model(model_name).capture_tool
    except ValueError:  # not a registered model (a factory's own): draw the default tool
        tool = CaptureTool()
    return {"tool_tip_radius_m": float(tool.tip_radius_m), "envelope_radius_m": float(tool.envelope_radius_m)}


def _describe(trial: Any, snapshot: Any, spec: AttemptSpec) -> dict[str, Any]:
    scenario = trial.scenario
    return {
        **_tool(scenario.robot.model),
        "snapshot": snapshot.name,
        "n_joints": int(trial.n_joints),
        "trial_id": spec.trial_id,
        "condition": spec.condition,
        "scenario": scenario.name,
        "model": scenario.robot.model,
        "target_radius_m": float(scenario.target.radius_m),
        "duration_s": trial.max_ticks * 1e-3,
        **_task_figures(trial),
        "task": _post_task(trial),
    }


def _post_task(trial: Any) -> dict[str, Any] | None:
    """The task after the capture as the window draws it and maps keys to it
    (``app.ui.behaviours_view.TaskInfo``), or None without one."""
    post = getattr(getattr(trial, "tick", None), "post", None)
    if post is None:
        return None
    from trials.behaviours.spec import BEHAVIOURS

    task = post.task
    fixtures = task.fixtures
    return {
        "name": task.name,
        "states": list(task.state_names),
        "state_behaviours": [task.states[name].behaviour.kind for name in task.state_names],
        "wrench_limit_targets": {name: state.on.get("wrench_limit") for name, state in task.states.items()},
        "next_targets": {name: task.next_state(name) for name in task.state_names},
        "behaviours": list(BEHAVIOURS.names()),
        "post_names": [] if fixtures is None else [p.name for p in fixtures.posts],
        "post_radii_m": [] if fixtures is None else [float(p.radius_m) for p in fixtures.posts],
        "pin_radius_m": None if fixtures is None else float(fixtures.pin_radius_m),
    }


def _park_pointer(input_name: str, start_m: Any) -> None:
    """Put the window's pointer stylus at the centred start (engaged) before the first
    tick, which anchors the mapping there; the window writes the same position until the
    attempt runs (it writes nothing before it has heard ``started``)."""
    if start_m is None:
        return
    from haptics.device import BUTTON_ENGAGE
    from haptics.shared_input import SharedInput

    pointer = SharedInput(input_name)
    try:
        x, y, z = (float(v) for v in start_m)
        pointer.write((x, y, z), BUTTON_ENGAGE)
    finally:
        pointer.close()


def _hold(control: Any, seconds: float) -> None:
    """Wait ``seconds`` [s] before the first tick (the countdown), or until the abort flag."""
    deadline = time.monotonic() + max(0.0, seconds)
    while control[ABORT] == 0.0 and (left := deadline - time.monotonic()) > 0.0:
        time.sleep(min(left, 0.01))


def _preview(trial: Any, snapshot: Any) -> None:
    """Publish the scene before the first tick (phase ``idle``: the countdown), so that the
    window draws the arm and the debris where they start. Outside the tick; the first tick
    overwrites every field."""
    import numpy as np

    try:
        ee = np.asarray(trial.arm.measure().ee_position_m, dtype=float)
        motion = trial.scenario.target_motion(ee)
        position, velocity, _ = motion.sample(np.zeros(1))
        values, field_ = snapshot.staging, snapshot.offsets
        values[:] = 0.0
        values[field_["ee_position_m"]] = ee
        values[field_["command_position_m"]] = ee
        values[field_["target_position_m"]] = position[0]
        values[field_["target_velocity_m_s"]] = velocity[0]
        values[field_["distance_m"]] = float(np.linalg.norm(position[0] - ee)) - trial.scenario.target.radius_m
        # NaN: "none yet" (and the delayed link's ghost and virtual arm: "no link"; no pin, no posts)
        for name in ("reached_at_s", "first_contact_s", "captured_at_s", "sigma_ratio", "ghost_ee_position_m",
                     "virtual_ee_position_m", "pin_m", "posts_m", "wrench_limit_n"):
            if name in field_:
                values[field_[name]] = math.nan
        for name in ("post_state_index", "post_behaviour_index"):  # no task state yet
            if name in field_:
                values[field_[name]] = -1.0
        values[field_["phase"]] = 0.0
        values[field_["links"]] = np.asarray(trial.arm.link_positions_m(), dtype=float).ravel()
        snapshot.publish()
    except Exception as error:  # noqa: BLE001 - a preview only: the first tick draws the scene
        log.debug("preview snapshot failed: %s", error)


def _task_figures(trial: Any) -> dict[str, Any]:
    """What the window needs to scale its gauges and, with a pointer, to map it onto the
    capture task: the soft band, the debris' speed, the start gap, the post-contact window,
    and the workspace mapping (scale, rotation, the end effector's start ``ee0_m`` and the
    centred stylus start ``device_start_m``, :func:`trials.runner.device_start_position`)."""
    import numpy as np

    scenario = trial.scenario
    target = scenario.target
    figures: dict[str, Any] = {
        "capture_speed_m_s": float(scenario.capture.capture_speed_m_s),
        "post_capture_window_s": float(scenario.capture.post_capture_window_s),
        "target_speed_m_s": float(np.linalg.norm(target.velocity_m_s)
                                  + np.linalg.norm(target.angular_velocity_rad_s) * np.linalg.norm(target.lever_arm_m)),
        "start_gap_m": float(np.linalg.norm(target.start_offset_m) - target.radius_m),
    }
    try:
        from trials.runner import device_start_position

        ee0 = np.asarray(trial.arm.measure().ee_position_m, dtype=float)
        spec = trial.device.spec if trial.device is not None else None
        mapping = scenario.mapping
        figures.update({
            "ee0_m": [float(v) for v in ee0],
            "position_scale": float(mapping.position_scale),
            "rotation_task_from_device": [[float(v) for v in row] for row in mapping.rotation_task_from_device],
        })
        if spec is not None:
            figures.update({
                "workspace_min_m": [float(v) for v in spec.workspace_min_m],
                "workspace_max_m": [float(v) for v in spec.workspace_max_m],
                "device_start_m": [float(v) for v in device_start_position(scenario, ee0, spec)],
            })
    except Exception as error:  # noqa: BLE001 - the window then draws no workspace
        log.debug("task figures: %s", error)
    return figures


def _metrics(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    from analysis.metrics import trial_metrics

    try:
        return trial_metrics(path).as_dict()
    except CaptureTrainerError as error:
        log.warning("metrics of %s: %s", path, error)
        return {}


def _guarded(tick: Callable[[], bool], control: Any, joints: Any, row: Any, columns: list[int] | None,
             every: int, post: Any = None, commander: Any = None) -> Callable[[], bool]:
    """Wrap the tick: stop on the abort flag; hand the operator's new requests to the
    post-capture phase (``post``, a ``PostCapturePhase``; None: no task), in this thread
    between two ticks, once the phase is active (a request before the capture is dropped);
    keep the live statistics; every ``every`` ticks copy the joint angles from the
    recorder's row (``columns``; None: do not). Allocation-free apart from Python floats.

    The device's second button (``BUTTON_TRAINER`` in ``commander.buttons``, as the tick
    last read it; a Touch's HD_DEVICE_BUTTON_2, the window pointer's right button) is the
    operator's "next" once the phase is active: a press writes the running state's
    ``succeeded`` target (``post.next_state()``) into the control array as the window's
    keys do (state index, then the counter), and the request goes the keys' way."""
    now = time.perf_counter
    states = () if post is None else post.task.state_names
    seen = [0.0 if post is None else control[REQUEST_COUNT]]
    held = [False]  # the second button as last seen (a press is a rising edge)
    # previous tick, window start, overruns, worst period, worst period of this window
    last = [math.nan, now(), 0.0, 0.0, 0.0]
    count = [0]
    pairs = list(enumerate(columns or ()))

    def guarded() -> bool:
        if control[ABORT] != 0.0:
            return False
        if commander is not None and post is not None:
            pressed = bool(commander.buttons & BUTTON_TRAINER)
            if pressed and not held[0] and post.active:
                following = post.next_state()
                if following is not None:  # as ServoProcess.request writes a key's request
                    control[REQUEST_STATE] = float(states.index(following))
                    control[REQUEST_COUNT] = control[REQUEST_COUNT] + 1.0
            held[0] = pressed
        if post is not None and control[REQUEST_COUNT] != seen[0]:
            seen[0] = control[REQUEST_COUNT]
            index = int(control[REQUEST_STATE])
            if post.active and 0 <= index < len(states):
                post.request(states[index])
        t = now()
        period = t - last[0]
        last[0] = t
        if period > OVERRUN_S:
            last[2] += 1.0
        if period > last[3]:
            last[3] = period
        if period > last[4]:
            last[4] = period
        n = count[0] + 1
        count[0] = n
        if n % STATS_EVERY == 0:
            control[RATE_HZ] = STATS_EVERY / (t - last[1])
            last[1] = t
            control[TICKS] = n
            control[OVERRUNS] = last[2]
            control[WORST_MS] = last[3] * 1e3
            control[RECENT_WORST_MS] = last[4] * 1e3
            last[4] = 0.0
        going = tick()
        if pairs and n % every == 0:
            for j, column in pairs:
                joints[j] = row[column]
        return going

    control[TICKS] = control[OVERRUNS] = control[WORST_MS] = control[RATE_HZ] = 0.0
    control[RECENT_WORST_MS] = 0.0
    return guarded


# -- how healthy the loop is (the window's servo corner) ------------------------------


@dataclass(frozen=True)
class ServoHealth:
    """A verdict on the servo loop's timing.

    Attributes:
        level: ``idle`` (no figures yet), ``good`` (green), ``warn`` (amber) or ``bad`` (red).
        reason: why, in a few words ("" when good or idle).
    """

    level: str
    reason: str = ""


def servo_health(rate_hz: float, worst_period_ms: float, silent_s: float = 0.0,
                 nominal_hz: float = NOMINAL_RATE_HZ) -> ServoHealth:
    """Judge loop timing figures (thresholds in the module docstring).

    Args:
        rate_hz: mean loop rate over the window judged [Hz] (0 or NaN: not known yet).
        worst_period_ms: the longest period between two ticks in that window [ms].
        silent_s: how long no statistics arrived while an attempt runs [s].
        nominal_hz: the loop's nominal rate [Hz].
    """
    if silent_s > SILENT_S:
        return ServoHealth("bad", f"stalled: no tick statistics for {silent_s:.1f} s")
    if not rate_hz > 0.0 or not math.isfinite(rate_hz):
        return ServoHealth("idle")
    if worst_period_ms > STALL_PERIOD_MS:
        return ServoHealth("bad", f"stall: one period took {worst_period_ms:.0f} ms")
    if rate_hz < BAD_RATE_FRACTION * nominal_hz:
        return ServoHealth("bad", f"rate {rate_hz / nominal_hz:.0%} of {nominal_hz:.0f} Hz")
    if worst_period_ms > WARN_PERIOD_MS:
        return ServoHealth("warn", f"overrun: one period took {worst_period_ms:.1f} ms")
    if rate_hz < WARN_RATE_FRACTION * nominal_hz:
        return ServoHealth("warn", f"rate {rate_hz / nominal_hz:.1%} of {nominal_hz:.0f} Hz")
    return ServoHealth("good")


@dataclass(frozen=True)
class RecentServo:
    """The servo loop over the last :data:`RECENT_S` seconds, as the corner shows it.

    Attributes:
        rate_hz: mean rate over the statistics windows in that time [Hz] (0: none yet).
        worst_period_ms: the longest period in that time [ms].
        overruns: periods over :data:`OVERRUN_S` in that time.
        silent_s: time since the statistics last changed while an attempt runs [s].
        health: :func:`servo_health` of those figures.
        attempt: :func:`servo_health` of the whole attempt's worst period (a stall long
            ago stays visible here after the recent figures are green again).
    """

    rate_hz: float
    worst_period_ms: float
    overruns: int
    silent_s: float
    health: ServoHealth
    attempt: ServoHealth


class ServoMonitor:
    """Turns the live statistics (:meth:`ServoProcess.stats`, read at display rate) into
    the recent figures the servo corner shows.

    Each new statistics window (every :data:`STATS_EVERY` ticks: its rate, its worst
    period, the cumulative overruns) is kept for ``recent_s`` seconds of window-process
    time; a new attempt (the tick count going back) starts afresh.

    Args:
        recent_s: how far back the figures reach [s].
        nominal_hz: the loop's nominal rate [Hz].
    """

    def __init__(self, recent_s: float = RECENT_S, nominal_hz: float = NOMINAL_RATE_HZ) -> None:
        self.recent_s = recent_s
        self.nominal_hz = nominal_hz
        # (arrival time [s], ticks, rate [Hz], window's worst period [ms], cumulative overruns)
        self._windows: list[tuple[float, int, float, float, int]] = []
        self._overruns_before = 0
        self._ticks = -1
        self._changed_s = math.nan

    def update(self, stats: ServoStats, now_s: float) -> RecentServo:
        """Take the latest statistics (read at ``now_s``, a monotonic time [s])."""
        if stats.ticks < self._ticks:
            self._windows.clear()
            self._overruns_before = 0
        if stats.ticks != self._ticks or math.isnan(self._changed_s):
            self._changed_s = now_s
            if stats.ticks > self._ticks and stats.ticks > 0:
                self._windows.append((now_s, stats.ticks, stats.rate_hz, stats.recent_worst_ms,
                                      stats.overruns))
            self._ticks = stats.ticks
        while len(self._windows) > 1 and now_s - self._windows[0][0] > self.recent_s:
            self._overruns_before = self._windows.pop(0)[4]
        silent_s = now_s - self._changed_s if stats.running else 0.0
        if self._windows:
            # Each window spans STATS_EVERY ticks: the mean rate is the harmonic mean.
            rate = len(self._windows) / sum(1.0 / max(w[2], 1e-9) for w in self._windows)
            worst = max(w[3] for w in self._windows)
            overruns = self._windows[-1][4] - self._overruns_before
        else:
            rate, worst, overruns = 0.0, 0.0, 0
        return RecentServo(
            rate_hz=rate, worst_period_ms=worst, overruns=overruns, silent_s=silent_s,
            health=servo_health(rate, worst, silent_s, self.nominal_hz),
            attempt=servo_health(self.nominal_hz, stats.worst_period_ms, nominal_hz=self.nominal_hz)
            if self._windows else ServoHealth("idle"),
        )


# -- data quality per trial (the experimenter's view) ---------------------------------


@dataclass(frozen=True)
class QualityFlag:
    """One data-quality remark on a trial: ``level`` ``warn`` or ``bad``, and the text."""

    level: str
    text: str


def data_quality(timing: dict[str, Any], priority: str, operator: str, status: str = "finished",
                 nominal_hz: float = NOMINAL_RATE_HZ) -> list[QualityFlag]:
    """What may make one trial's data less trustworthy, from the servo's own figures.

    Args:
        timing: the trial clock's summary (``haptics.timing``: ``rate_hz``,
            ``overruns``, ``max_period_ms``, ``periods``).
        priority: what the servo process got (``realtime``, ``high``, ``normal``; "").
        operator: ``person``, or the simulated participant's kind.
        status: ``finished``, ``aborted`` or ``error``.

    Flags (empty list: nothing to remark): a stall (a period over
    :data:`STALL_PERIOD_MS`, the force watchdog's deadline), overruns (periods over
    1.5 ms), a mean rate under :data:`WARN_RATE_FRACTION` of nominal, no real-time
    priority, a simulated participant (not a person), an incomplete trial file.
    """
    flags: list[QualityFlag] = []
    worst = _number(timing.get("max_period_ms"))
    count = _number(timing.get("overruns"))
    overruns = int(count) if math.isfinite(count) else 0
    rate = _number(timing.get("rate_hz"))
    if worst > STALL_PERIOD_MS:
        flags.append(QualityFlag("bad", f"stall: the longest servo period was {worst:.0f} ms"))
    if overruns:
        flags.append(QualityFlag("warn", f"{overruns} servo overrun{'s' if overruns != 1 else ''} "
                                 f"(periods over {OVERRUN_S * 1e3:.1f} ms)"))
    if rate > 0.0 and rate < WARN_RATE_FRACTION * nominal_hz:
        flags.append(QualityFlag("warn", f"mean servo rate {rate:.0f} Hz (nominal {nominal_hz:.0f} Hz)"))
    if priority and priority != "realtime":
        flags.append(QualityFlag("warn", f"no real-time priority (the servo ran at {priority} priority)"))
    if operator != "person":
        flags.append(QualityFlag("warn", f"simulated participant ({operator}), not a person"))
    if status != "finished":
        flags.append(QualityFlag("bad", f"trial {status}: its file is incomplete"))
    return flags


def _number(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) else math.nan
