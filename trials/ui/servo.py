"""The servo process: runs trials at 1 kHz on its own clock while the window draws.

Why a process: in one Python process the GIL makes a busy drawing thread delay a 1 kHz
callback loop (down to about 150 Hz, issue 4). Here the window (main process) and the
servo loop (a ``spawn``-ed child) share no interpreter:

- **control** (window -> servo): a :class:`multiprocessing.Pipe` carries ``start``
  (an :class:`AttemptSpec`) and ``quit``; a shared float array carries the *abort*
  flag, which the servo checks every tick without a system call;
- **state** (servo -> window): the trial's :class:`trials.snapshot.SharedSnapshot`
  (created by the servo per attempt, attached by name by the window) and, in the same
  shared float array, the live loop statistics (rate over the last 250 ticks, overruns,
  worst period) written by a thin guard around the tick, which can also copy the joint
  angles into a second shared array for the PyBullet view;
- **results** (servo -> window): the Pipe carries ``started`` (snapshot name, joints,
  target radius, model), ``finished`` (summary, metrics, servo timing) and ``error``.

The child builds each trial with the runner's ``build_trial`` (or another factory named
in :class:`ServoOptions`), so the trial file, its metadata and its tick are those of a
headless trial. Before a scenario's first attempt it runs a few ticks of a throw-away
trial (:func:`warm_up`), and it raises its own scheduling priority
(:func:`raise_priority`) and shortens its GIL switch interval, so that the loop holds
1 kHz on a loaded machine while the window draws.
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
from dataclasses import asdict, dataclass, field, fields
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from capture_trainer.errors import CaptureTrainerError, TrialError

log = logging.getLogger(__name__)

#: Indices of the shared control/statistics array.
ABORT, TICKS, OVERRUNS, WORST_MS, RATE_HZ, RUNNING = range(6)
_CONTROL_SIZE = 8
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


@dataclass(frozen=True)
class ServoOptions:
    """How the servo process builds trials (fixed for the process's life).

    Attributes:
        factory: ``module:function`` building a trial from ``(request, out_dir)``;
            the module must also define ``TrialRequest``.
        input_name: the window's :class:`trials.ui.shared_input.SharedInput` block; when
            set, ``--device mouse`` requests carry ``device_options={"input_name": ...}``
            (the runner then builds a :class:`~trials.ui.shared_input.SharedInputDevice`).
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


@dataclass(frozen=True)
class ServoStats:
    """Live servo-loop statistics as the window shows them."""

    ticks: int
    rate_hz: float
    overruns: int
    worst_period_ms: float
    running: bool


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

    def poll(self, timeout_s: float = 0.0) -> tuple[str, dict[str, Any]] | None:
        """The next message from the servo, or None when none arrived within ``timeout_s``.

        Raises:
            TrialError: the servo process died.
        """
        try:
            if self._conn.poll(timeout_s):
                return self._conn.recv()
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
        )

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
    Nothing is raised when neither is permitted.
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
    if spec.metadata:
        trial.recorder.update_metadata(**spec.metadata)
    path = str(trial.recorder.path)
    snapshot = SharedSnapshot(SnapshotLayout(trial.n_joints))
    try:
        trial.attach_snapshot(snapshot, every_n_ticks=options.snapshot_every)
        conn.send(("started", {**_describe(trial, snapshot, spec), "priority": priority}))
        columns = None
        if options.publish_joints and trial.n_joints <= MAX_JOINTS:
            recorder = trial.recorder
            columns = [recorder.column_index(joint_position_column(j)) for j in range(trial.n_joints)]
        tick = _guarded(trial.tick, control, joints, trial.recorder.row, columns,
                        options.snapshot_every)
        control[RUNNING] = 1.0
        error: BaseException | None = None
        try:
            trial.clock.run(tick, trial.max_ticks)
        except Exception as caught:  # noqa: BLE001 - reported to the window, file kept
            error = caught
            log.exception("attempt %s failed", spec.trial_id)
        finally:
            control[RUNNING] = 0.0
        clock_timing = getattr(trial.clock, "timing", None)
        timing = clock_timing.summary() if clock_timing is not None else {}
        if error is not None:
            trial.abort(f"fault: {error!r}")
            summary = {"path": path, "end_reason": "fault"}
        elif control[ABORT] != 0.0:
            trial.abort("aborted")
            summary = {"path": path, "end_reason": "aborted"}
        else:
            summary = trial.finish()
    finally:
        snapshot.close()
    summary = {"trial_id": Path(path).stem, **summary}
    metrics = _metrics(summary.get("path")) if options.metrics and error is None else {}
    status = "error" if error is not None else ("aborted" if control[ABORT] != 0.0 else "finished")
    return "finished", {
        "status": status,
        "summary": summary,
        "metrics": metrics,
        "timing": timing,
        "message": "" if error is None else repr(error),
        "priority": priority,
    }


def _describe(trial: Any, snapshot: Any, spec: AttemptSpec) -> dict[str, Any]:
    scenario = trial.scenario
    return {
        "snapshot": snapshot.name,
        "n_joints": int(trial.n_joints),
        "trial_id": spec.trial_id,
        "condition": spec.condition,
        "scenario": scenario.name,
        "model": scenario.robot.model,
        "target_radius_m": float(scenario.target.radius_m),
        "duration_s": trial.max_ticks * 1e-3,
    }


def _metrics(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    from analysis.metrics import trial_metrics

    try:
        return trial_metrics(path).as_dict()
    except CaptureTrainerError as error:
        log.warning("metrics of %s: %s", path, error)
        return {}


def _guarded(tick: Any, control: Any, joints: Any, row: Any, columns: list[int] | None,
             every: int) -> Any:
    """Wrap the tick: stop on the abort flag; keep the live statistics; every ``every``
    ticks copy the joint angles from the recorder's row (``columns``; None: do not).
    Allocation-free apart from Python floats."""
    now = time.perf_counter
    last = [math.nan, now(), 0.0, 0.0]  # previous tick, window start, overruns, worst period
    count = [0]
    pairs = list(enumerate(columns or ()))

    def guarded() -> bool:
        if control[ABORT] != 0.0:
            return False
        t = now()
        period = t - last[0]
        last[0] = t
        if period > OVERRUN_S:
            last[2] += 1.0
        if period > last[3]:
            last[3] = period
        n = count[0] + 1
        count[0] = n
        if n % STATS_EVERY == 0:
            control[RATE_HZ] = STATS_EVERY / (t - last[1])
            last[1] = t
            control[TICKS] = n
            control[OVERRUNS] = last[2]
            control[WORST_MS] = last[3] * 1e3
        going = tick()
        if pairs and n % every == 0:
            for j, column in pairs:
                joints[j] = row[column]
        return going

    control[TICKS] = control[OVERRUNS] = control[WORST_MS] = control[RATE_HZ] = 0.0
    return guarded
