"""Task state machines from TOML files: behaviours chained by their results.

A task file (built-ins in ``trials/tasks/``, or any ``.toml`` path)::

    description = "berth the captured payload against two posts"
    start = "stabilise"               # the first state
    time_limit_s = 20.0               # the whole machine's [s]
    scenarios = ["berthing-planar"]   # built-in scenarios that run this task after the capture

    [fixtures]                        # optional: the posts and the payload's pin
    frame = "capture"                 # post positions from the pin at the capture, or "task"
    approach = [0.0, -1.0, 0.0]       # the way the pin moves into the posts
    pin = { offset_m = [0.0, -0.1, 0.0], radius_m = 0.01 }
    contact = { frequency_rad_s = 30.0, damping_ratio = 0.5, friction = 0.3 }
    posts = [{ name = "left", position_m = [-0.015, -0.1, 0.0], radius_m = 0.01 }, ...]

    [states.stabilise]
    behaviour = "ptwl"                # a name in trials.behaviours.BEHAVIOURS
    params = { duration_s = 0.5 }     # that behaviour's parameters (validated)
    on = { succeeded = "approach" }   # result -> next state | "done" | "fail" | "fail: why"
    retries = 0                       # how often the state may run again (default 0)
    exhausted = "jiggle"              # where to go instead once the retries are used up

A result without a transition fails the machine with the behaviour's own reason; a
state entered more than ``1 + retries`` times goes to its ``exhausted`` target, or
without one fails the machine with the last result. The
machine's results (:data:`MACHINE_OUTCOMES`): ``succeeded`` (reached ``done``),
``failed`` (a ``fail`` target, an unmapped result, retries exhausted) or ``aborted`` (the
trial ended first, or the machine's time limit).
"""

from __future__ import annotations

import copy
import math
import threading
import tomllib
from dataclasses import dataclass, field
from importlib.abc import Traversable
from pathlib import Path
from typing import Any

from capture_trainer.registry import packaged_files, suggestion
from trials.behaviours.execute import BehaviourResult, BehaviourRun, PhaseView
from trials.behaviours.runs import start_behaviour
from trials.behaviours.spec import RESULTS, Behaviour, BehaviourError, make_behaviour, check_number, check_vector

#: What a machine ends with.
MACHINE_OUTCOMES: tuple[str, ...] = ("succeeded", "failed", "aborted")
#: Targets that end the machine.
DONE, FAIL = "done", "fail"
_TOP_KEYS = ("description", "start", "time_limit_s", "scenarios", "fixtures", "states")
_STATE_KEYS = ("behaviour", "params", "on", "retries", "exhausted")
_FIXTURE_KEYS = ("frame", "approach", "pin", "contact", "posts")

#: The built-in tasks (``trials/tasks/*.toml``) by name.
TASKS = packaged_files("task", "trials.tasks", ".toml", error=BehaviourError, hint="or give a .toml path")


@dataclass(frozen=True)
class PostTable:
    """A post of a task file (``robot.fixtures_world.PostSpec``'s fields)."""

    name: str
    position_m: tuple[float, float, float]
    radius_m: float


@dataclass(frozen=True)
class FixturesTable:
    """The ``[fixtures]`` table: posts, the payload's pin, the contact law."""

    frame: str = "capture"
    approach: tuple[float, float, float] = (0.0, -1.0, 0.0)
    pin_offset_m: tuple[float, float, float] = (0.0, 0.0, 0.0)
    pin_radius_m: float = 0.01
    frequency_rad_s: float = 30.0
    damping_ratio: float = 0.5
    friction: float = 0.3
    posts: tuple[PostTable, ...] = ()


@dataclass(frozen=True)
class StateSpec:
    """One state: its behaviour, its transitions by result, its retries."""

    name: str
    behaviour: Behaviour
    on: dict[str, str] = field(default_factory=dict)
    retries: int = 0
    exhausted: str | None = None


@dataclass(frozen=True)
class TaskSpec:
    """A task: its states, where it starts, its fixtures."""

    name: str
    description: str
    start: str
    states: dict[str, StateSpec]
    time_limit_s: float = 30.0
    scenarios: tuple[str, ...] = ()
    fixtures: FixturesTable | None = None

    @property
    def state_names(self) -> tuple[str, ...]:
        """The states in file order (their index is the log's ``state_index``)."""
        return tuple(self.states)

    def next_state(self, state: str) -> str | None:
        """The state that follows ``state`` when it succeeds (its ``on.succeeded`` target
        when that is a state; None: it ends the machine, or it has none): what the
        operator's "next" (the device's second button, the window's N key) asks for."""
        spec = self.states.get(state)
        target = None if spec is None else spec.on.get("succeeded")
        return target if target in self.states else None

    def as_dict(self) -> dict[str, Any]:
        """For the trial log's metadata."""
        return {"name": self.name, "description": self.description, "start": self.start,
                "time_limit_s": self.time_limit_s,
                "states": {name: {"behaviour": s.behaviour.kind, "params": s.behaviour.as_dict(), "on": s.on,
                                  "retries": s.retries, "exhausted": s.exhausted}
                           for name, s in self.states.items()},
                "fixtures": None if self.fixtures is None else {
                    "frame": self.fixtures.frame, "approach": self.fixtures.approach,
                    "pin_offset_m": self.fixtures.pin_offset_m, "pin_radius_m": self.fixtures.pin_radius_m,
                    "posts": [{"name": p.name, "position_m": p.position_m, "radius_m": p.radius_m}
                              for p in self.fixtures.posts]}}


def _keys(where: str, table: Any, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise BehaviourError(f"{where} must be a table, got {table!r}")
    for key in table:
        if key not in allowed:
            close = suggestion(key, allowed)
            hint = f"; did you mean {close!r}?" if close else ""
            raise BehaviourError(f"{where}: unknown key {key!r}{hint} (known: {', '.join(allowed)})")
    return table


def _fixtures(where: str, table: Any) -> FixturesTable:
    table = _keys(where, table, _FIXTURE_KEYS)
    frame = table.get("frame", "capture")
    if frame not in ("capture", "task"):
        raise BehaviourError(f"{where}: frame must be 'capture' or 'task', got {frame!r}")
    pin = _keys(f"{where}.pin", table.get("pin", {}), ("offset_m", "radius_m"))
    contact = _keys(f"{where}.contact", table.get("contact", {}), ("frequency_rad_s", "damping_ratio", "friction"))
    posts_in = table.get("posts", [])
    if not isinstance(posts_in, list) or len(posts_in) < 1:
        raise BehaviourError(f"{where}: posts must be a list of at least one post table")
    posts = []
    for i, post in enumerate(posts_in):
        p = _keys(f"{where}.posts[{i}]", post, ("name", "position_m", "radius_m"))
        name = p.get("name")
        if not isinstance(name, str) or not name:
            raise BehaviourError(f"{where}.posts[{i}]: name must be a non-empty string")
        if "position_m" not in p:
            raise BehaviourError(f"{where}.posts[{i}]: position_m is required")
        posts.append(PostTable(name, check_vector(f"{where}.posts[{i}]", "position_m", p["position_m"]),
                               check_number(f"{where}.posts[{i}]", "radius_m", p.get("radius_m", 0.01), 0.0,
                                       strict_low=True)))
    if len({p.name for p in posts}) != len(posts):
        raise BehaviourError(f"{where}: post names must be distinct")
    approach = check_vector(where, "approach", table.get("approach", [0.0, -1.0, 0.0]))
    norm = math.sqrt(sum(v * v for v in approach))
    if norm == 0.0:
        raise BehaviourError(f"{where}: approach must not be zero")
    damping = check_number(f"{where}.contact", "damping_ratio", contact.get("damping_ratio", 0.5), 0.0, 1.0,
                      strict_low=True)
    if damping >= 1.0:
        raise BehaviourError(f"{where}.contact: damping_ratio must be < 1, got {damping:g}")
    return FixturesTable(
        frame=frame, approach=tuple(v / norm for v in approach),  # type: ignore[arg-type]
        pin_offset_m=check_vector(f"{where}.pin", "offset_m", pin.get("offset_m", [0.0, 0.0, 0.0])),
        pin_radius_m=check_number(f"{where}.pin", "radius_m", pin.get("radius_m", 0.01), 0.0, strict_low=True),
        frequency_rad_s=check_number(f"{where}.contact", "frequency_rad_s", contact.get("frequency_rad_s", 30.0), 0.0,
                                strict_low=True),
        damping_ratio=damping,
        friction=check_number(f"{where}.contact", "friction", contact.get("friction", 0.3), 0.0, 2.0),
        posts=tuple(posts),
    )


def parse_task(data: dict[str, Any], name: str, where: str) -> TaskSpec:
    """A validated task from a TOML document.

    Raises:
        BehaviourError: anything wrong, with ``where`` and the field in the message.
    """
    data = _keys(where, data, _TOP_KEYS)
    states_in = data.get("states")
    if not isinstance(states_in, dict) or not states_in:
        raise BehaviourError(f"{where}: [states] must hold at least one state table")
    states: dict[str, StateSpec] = {}
    for state_name, table in states_in.items():
        at = f"{where}: states.{state_name}"
        if state_name in (DONE, FAIL):
            raise BehaviourError(f"{at}: {state_name!r} is a reserved target, not a state name")
        table = _keys(at, table, _STATE_KEYS)
        if "behaviour" not in table:
            raise BehaviourError(f"{at}: behaviour is required")
        params = table.get("params", {})
        if not isinstance(params, dict):
            raise BehaviourError(f"{at}: params must be a table")
        behaviour = make_behaviour(table["behaviour"], params, at)
        on = table.get("on", {})
        if not isinstance(on, dict):
            raise BehaviourError(f"{at}: on must be a table of result = target")
        for result, target in on.items():
            if result not in RESULTS:
                close = suggestion(result, RESULTS)
                hint = f"; did you mean {close!r}?" if close else ""
                raise BehaviourError(f"{at}: on: unknown result {result!r}{hint} (known: {', '.join(RESULTS)})")
            if not isinstance(target, str):
                raise BehaviourError(f"{at}: on.{result} must be a state name, 'done' or 'fail[: why]'")
        retries = table.get("retries", 0)
        if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 100:
            raise BehaviourError(f"{at}: retries must be an integer from 0 to 100, got {retries!r}")
        exhausted = table.get("exhausted")
        if exhausted is not None and not isinstance(exhausted, str):
            raise BehaviourError(f"{at}: exhausted must be a state name, 'done' or 'fail[: why]'")
        states[state_name] = StateSpec(state_name, behaviour, dict(on), retries, exhausted)
    for state in states.values():
        targets = list(state.on.items()) + ([("exhausted", state.exhausted)] if state.exhausted else [])
        for result, target in targets:
            if target not in states and target != DONE and not (target == FAIL or target.startswith(FAIL + ":")):
                close = suggestion(target, list(states) + [DONE, FAIL])
                hint = f"; did you mean {close!r}?" if close else ""
                key = "exhausted" if result == "exhausted" else f"on.{result}"
                raise BehaviourError(f"{where}: states.{state.name}: {key}: unknown target {target!r}{hint}")
    start = data.get("start", next(iter(states)))
    if start not in states:
        raise BehaviourError(f"{where}: start {start!r} is not a state (states: {', '.join(states)})")
    scenarios = data.get("scenarios", [])
    if not isinstance(scenarios, list) or not all(isinstance(s, str) for s in scenarios):
        raise BehaviourError(f"{where}: scenarios must be a list of scenario names")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise BehaviourError(f"{where}: description must be a string")
    fixtures = _fixtures(f"{where}: fixtures", data["fixtures"]) if "fixtures" in data else None
    for state in states.values():
        if getattr(state.behaviour, "to", "") == "seat" and (fixtures is None or len(fixtures.posts) != 2):
            raise BehaviourError(f"{where}: states.{state.name}: to = 'seat' needs [fixtures] with two posts")
    return TaskSpec(name=name, description=description, start=start, states=states,
                    time_limit_s=check_number(where, "time_limit_s", data.get("time_limit_s", 30.0), 0.0, strict_low=True),
                    scenarios=tuple(scenarios), fixtures=fixtures)


def load_task(name_or_path: str) -> TaskSpec:
    """A built-in task by name, or a task file by path: a copy of its own (the file is
    read and validated once per process and version of the file, :func:`_parsed_task`).

    Raises:
        BehaviourError: unknown name (with "did you mean"), unreadable or invalid file.
    """
    return copy.deepcopy(_parsed_task(name_or_path))


def task_for_scenario(scenario_name: str) -> str | None:
    """The built-in task whose ``scenarios`` list names ``scenario_name`` (or None)."""
    for name in TASKS.names():
        if scenario_name in _parsed_task(name).scenarios:
            return name
    return None


#: Validated task files by (resolved path, task name): (st_mtime_ns, st_size, the task).
_PARSED: dict[tuple[str, str], tuple[int, int, TaskSpec]] = {}
_PARSED_LOCK = threading.Lock()


def _parsed_task(name_or_path: str) -> TaskSpec:
    """The task, parsed once per process while its file keeps its modification time and
    size (every trial asks: parsing the built-in files cost 6-9 ms a trial). The instance
    is shared: callers outside this module get a copy (:func:`load_task`)."""
    if name_or_path.endswith(".toml") or "/" in name_or_path:
        source: Traversable = Path(name_or_path)
        name, where = Path(name_or_path).stem, name_or_path
    else:
        source, name, where = TASKS.get(name_or_path), name_or_path, f"task {name_or_path}"
    try:
        if not isinstance(source, Path):  # a resource without a file (a zipped package): no cache
            return _parse_task_text(source.read_text(encoding="utf-8"), name, where)
        key = (str(source.resolve()), name)
        stat = source.stat()
        with _PARSED_LOCK:
            cached = _PARSED.get(key)
        if cached is not None and cached[:2] == (stat.st_mtime_ns, stat.st_size):
            return cached[2]
        task = _parse_task_text(source.read_text(encoding="utf-8"), name, where)
        after = source.stat()
    except OSError as error:
        raise BehaviourError(f"{where}: cannot read the task file ({error.strerror or error})") from None
    if (after.st_mtime_ns, after.st_size) == (stat.st_mtime_ns, stat.st_size):  # not rewritten meanwhile
        with _PARSED_LOCK:
            _PARSED[key] = (stat.st_mtime_ns, stat.st_size, task)
    return task


def _parse_task_text(text: str, name: str, where: str) -> TaskSpec:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise BehaviourError(f"{where}: not valid TOML ({error})") from None
    return parse_task(data, name, where)


class TaskMachine:
    """Runs a task's states one behaviour at a time (see the module docstring).

    Attributes:
        outcome: "" while running, then one of :data:`MACHINE_OUTCOMES`; reason: one line.
        results: every behaviour run's :class:`BehaviourResult`, in order.
        state: the current state's name ("" before the start and after the end).
        state_index: its index in ``task.state_names`` (-1: none).
    """

    def __init__(self, task: TaskSpec) -> None:
        self.task = task
        self.outcome = ""
        self.reason = ""
        self.results: list[BehaviourResult] = []
        self.state = ""
        self.state_index = -1
        self.started_s = math.nan
        self.ended_s = math.nan
        self._entries = dict.fromkeys(task.states, 0)
        self._run: BehaviourRun | None = None
        self._names = task.state_names

    @property
    def running(self) -> bool:
        """Started and not ended."""
        return self._run is not None

    @property
    def drives_port(self) -> bool:
        """The running behaviour writes the port command itself (see ``BehaviourRun``)."""
        return self._run is not None and self._run.drives_port

    @property
    def behaviour(self) -> Behaviour | None:
        """The behaviour that runs now."""
        return None if self._run is None else self._run.behaviour

    def start(self, view: PhaseView) -> None:
        """Enter the start state now."""
        self.started_s = view.t_s
        self._enter(self.task.start, view, None)

    def _enter(self, name: str, view: PhaseView, last: BehaviourResult | None) -> None:
        state = self.task.states[name]
        self._entries[name] += 1
        if self._entries[name] > 1 + state.retries:
            why = (f"state {name!r} would run {self._entries[name]} times (retries: {state.retries})"
                   + (f"; last: {last.state} {last.result} ({last.reason})" if last is not None else ""))
            if state.exhausted is None:
                self._end(view, "failed", why)
            else:
                self._go(state.exhausted, view, last, why)
            return
        self.state, self.state_index = name, self._names.index(name)
        self._run = start_behaviour(name, state.behaviour, view)

    def _go(self, target: str, view: PhaseView, last: BehaviourResult | None, why: str) -> None:
        """Follow a transition: a state, ``done`` or ``fail[: reason]``."""
        if target == DONE:
            self._end(view, "succeeded", why)
        elif target == FAIL or target.startswith(FAIL + ":"):
            reason = target[len(FAIL) + 1:].strip() if ":" in target else "the task says so"
            self._end(view, "failed", f"{why}: {reason}")
        else:
            self._enter(target, view, last)

    def _end(self, view: PhaseView, outcome: str, reason: str) -> None:
        self.outcome, self.reason, self.ended_s = outcome, reason, view.t_s
        self._run, self.state, self.state_index = None, "", -1

    def step(self, view: PhaseView) -> None:
        """One tick of the running behaviour; on its result, the transition."""
        run = self._run
        if run is None:
            return
        if view.t_s - self.started_s > self.task.time_limit_s:
            run.finish(view, "aborted", f"the task's time limit ({self.task.time_limit_s:g} s)")
            self.results.append(run.record)
            self._end(view, "aborted", f"time limit {self.task.time_limit_s:g} s reached in state {self.state!r}")
            return
        result = run.step(view)
        if not result:
            return
        record = run.record
        self.results.append(record)
        target = self.task.states[self.state].on.get(result)
        if target is None:
            self._end(view, "failed", f"state {self.state!r} ({record.behaviour}) ended {result}: {record.reason}")
        else:
            self._go(target, view, record, f"state {self.state!r} ended {result} ({record.reason})")

    def interrupt(self, view: PhaseView, state: str, reason: str) -> None:
        """The operator takes over: the running behaviour ends ``aborted`` (its attractor
        frozen) and ``state`` starts now, whatever the transitions say (its retries
        still count). A machine that has not started or has ended starts again there.

        Raises:
            BehaviourError: ``state`` is not a state of the task.
        """
        if state not in self.task.states:
            close = suggestion(state, self._names)
            hint = f"; did you mean {close!r}?" if close else ""
            raise BehaviourError(f"task {self.task.name}: no state {state!r}{hint} (states: {', '.join(self._names)})")
        last = None
        if self._run is not None:
            self._run.finish(view, "aborted", reason)
            last = self._run.record
            self.results.append(last)
            self._run = None
        if math.isnan(self.started_s):
            self.started_s = view.t_s
        self.outcome = self.reason = ""
        self.ended_s = math.nan
        self._enter(state, view, last)

    def abort(self, view: PhaseView, reason: str) -> None:
        """End now (the trial is over or stopped)."""
        if self._run is not None:
            self._run.finish(view, "aborted", reason)
            self.results.append(self._run.record)
            self._end(view, "aborted", reason)

    def metadata(self) -> dict[str, Any]:
        """The machine's outcome and every behaviour's result (for the log)."""
        return {"outcome": self.outcome or None, "reason": self.reason or None,
                "started_s": None if math.isnan(self.started_s) else self.started_s,
                "ended_s": None if math.isnan(self.ended_s) else self.ended_s,
                "results": [r.as_dict() for r in self.results]}
