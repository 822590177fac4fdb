"""The post-capture phase in the servo tick: admittance control, fixtures, the task machine.

After the tool closes, :class:`PostCapturePhase` takes over the slave's command: each tick
(``trials.tick``'s command stage, after the commander and the delayed link, so the
behaviours run on the arm's side like the seed's remote computer)

1. the pin-post contacts of the last plant step give the contact wrench on the payload
   (:class:`robot.fixtures_world.BerthingWorld`; none without fixtures),
2. the task machine steps its behaviour, which moves the attractor and checks its exits
   (:class:`trials.behaviours.machine.TaskMachine`),
3. the admittance controller integrates (A1) with that wrench
   (:class:`robot.admittance.AdmittanceController`) and its ``(x, v, a)`` becomes the
   command of the one slave-control path (eq. 10, eq. 6).

When the machine has ended the attractor holds still and the trial goes on for
:data:`HOLD_AFTER_TASK_S`. The phase fills :attr:`PostCapturePhase.row`, the trial log's
post-capture columns (``capture_trainer.trial_log.POST_CAPTURE_COLUMNS``), every tick.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from capture_trainer import trial_log
from robot.admittance import AdmittanceController, AdmittanceGains
from robot.arm import ArmMeasurement
from robot.debris import ContactModel, DebrisReading, PayloadRelease
from robot.fixtures_world import BerthingWorld, PayloadForceSink, PinSpec, PostSpec
from robot.slave import SlaveStatus
from trials.behaviours.machine import TaskMachine, TaskSpec
from trials.behaviours.spec import BEHAVIOURS, BehaviourError

Vec = NDArray[np.float64]
#: How long a trial goes on after its task machine ended [s].
HOLD_AFTER_TASK_S = 0.25


class DebrisBody(PayloadForceSink, Protocol):
    """What the phase needs of the scene after the capture (``PyBulletDebris``):
    its body, kept where the tool holds it (``proxy_follows``) for the fixtures to read."""

    proxy_follows: bool

    @property
    def body_id(self) -> int: ...


def make_world(task: TaskSpec, pb: Any, client: int) -> BerthingWorld | None:
    """The task's fixtures in the arm's PyBullet world (None: the task has none)."""
    fixtures = task.fixtures
    if fixtures is None:
        return None
    posts = tuple(PostSpec(p.name, p.position_m, p.radius_m) for p in fixtures.posts)
    return BerthingWorld(pb, client, posts, PinSpec(fixtures.pin_offset_m, fixtures.pin_radius_m),
                         ContactModel(fixtures.frequency_rad_s, fixtures.damping_ratio, fixtures.friction),
                         frame=fixtures.frame)


class PostCapturePhase:
    """The behaviours after the capture (a :class:`trials.behaviours.execute.PhaseView`).

    Args:
        task: the task to run after the capture.
        dt_s: servo period [s].
        world: the posts and the pin (None: no contact; the wrench is zero).
        shoulder_m, reach_m: the arm's first joint [m] and its reach [m] (a seat the arm
            cannot reach is refused with that reason).
        command_delay_s: the trial's one-way command delay [s] (the ``mixed`` behaviour's
            master side).
        compensator: the trial's compensator name (``mixed`` with ``scheme = "auto"``).
        hand_present: the trial's commander measures the hand's force on the stylus (a
            simulated participant's hand); ``mixed`` with ``master = "auto"`` then takes it
            as ``f_m``.

    Attributes:
        hand_force_n: (3,) the hand's force on the stylus [N], task frame, as it arrived
            on the arm's side (the servo tick binds its array: the command path's).
        master_force_n: (1,) the master force the running ``mixed`` behaviour used this
            tick [N] (0 otherwise): the log's ``master_force_n``.
    """

    def __init__(self, task: TaskSpec, dt_s: float, world: BerthingWorld | None = None,
                 shoulder_m: Vec | None = None, reach_m: float = math.inf, command_delay_s: float = 0.0,
                 compensator: str = "none", hand_present: bool = False) -> None:
        self.task = task
        self.command_delay_s = float(command_delay_s)
        self.compensator = compensator
        self.hand_present = bool(hand_present)
        self.hand_force_n = np.zeros(3)
        self.master_force_n = np.zeros(1)
        self._payload_mass_kg = math.nan
        self.world = world
        self.machine = TaskMachine(task)
        self.controller = AdmittanceController(AdmittanceGains(), dt_s)
        self.shoulder_m = np.zeros(3) if shoulder_m is None else np.asarray(shoulder_m, dtype=float).copy()
        self.reach_m = float(reach_m)
        self.row = np.array(trial_log.POST_CAPTURE_IDLE)
        self.active = False
        # the PhaseView
        self.t_s = 0.0
        self.port_m = np.zeros(3)
        self.port_velocity_m_s = np.zeros(3)
        zero = np.zeros(3)
        self.force_n = world.force_n if world is not None else zero
        self.torque_n_m = world.torque_n_m if world is not None else np.zeros(3)
        self.post_force_n = world.post_force_n if world is not None else np.zeros(0)
        self.base_attitude_rad = np.zeros(3)
        self.tracking_error_m = 0.0
        self.slave_fault = self.singular = self.limited = False
        self.sigma_ratio = 1.0
        self._kinds = BEHAVIOURS.names()
        self._hold_until_s = math.inf
        self._requested: str | None = None
        # the tool's opening (the ``open`` behaviour asks; the tick's capture stage opens it)
        self.tool_open = False
        self.away_m = np.zeros(3)
        self.tool_gap_m = math.nan
        self.release_requested = False
        self.released_at_s = math.nan
        self._can_release = False
        self._reading: DebrisReading | None = None
        self._release: dict[str, Any] | None = None
        self._no_force = np.zeros(3)

    # ------------------------------------------------------------------ PhaseView
    def seat_goal(self, out: Vec) -> str | None:
        """The port position at which the pin touches both posts (the pin's offset from
        the port as it is now), into ``out``; or why there is none."""
        world, fixtures = self.world, self.task.fixtures
        if world is None or fixtures is None or len(world.posts) != 2 or not world.attached:
            return "the task has no two posts to seat against"
        for index, post in enumerate(world.posts):
            distance = float(np.linalg.norm(world.post_positions_m[index] - self.shoulder_m))
            if distance > self.reach_m:
                where = ", ".join(f"{v:.3f}" for v in world.post_positions_m[index])
                return (f"post {post.name!r} at ({where}) m is {distance:.3f} m from the arm's shoulder, "
                        f"beyond its reach of {self.reach_m:.3f} m")
        a, b = world.post_positions_m
        spacing = float(np.linalg.norm(b - a))
        touch = world.posts[0].radius_m + world.pin.radius_m
        touch_b = world.posts[1].radius_m + world.pin.radius_m
        if 0.5 * spacing >= min(touch, touch_b):
            return (f"posts {world.posts[0].name!r} and {world.posts[1].name!r} are {spacing * 1e3:.1f} mm apart: "
                    f"the pin (radius {world.pin.radius_m * 1e3:.1f} mm) passes between them instead of seating")
        approach = np.asarray(fixtures.approach)
        depth = math.sqrt(max(touch * touch - 0.25 * spacing * spacing, 0.0))
        seat = 0.5 * (a + b) - depth * approach
        out[:] = seat - (world.pin_m - self.port_m)
        distance = float(np.linalg.norm(out - self.shoulder_m))
        if distance > self.reach_m:
            return (f"the seat pose is {distance:.3f} m from the arm's shoulder, beyond its reach of "
                    f"{self.reach_m:.3f} m")
        return None

    def contact_gap(self, axis: Vec) -> tuple[float, float, float] | None:
        """The nearest post the pin meets moving along the unit ``axis``: the free travel
        [m] and the contact's stiffness [N/m] and damping [N s/m] (the fixtures' law with
        the payload mass); None without one."""
        world = self.world
        if world is None or not world.attached or not math.isfinite(self._payload_mass_kg):
            return None
        gaps, slopes = [], []
        for index, post in enumerate(world.posts):
            d = world.post_positions_m[index] - world.pin_m
            along = float(d @ axis)
            lateral = float(np.linalg.norm(d - along * axis))
            touch = post.radius_m + world.pin.radius_m
            if along > 0.0 and lateral < touch:
                cosine = math.sqrt(touch * touch - lateral * lateral) / touch
                gaps.append(along - cosine * touch)
                slopes.append(cosine * cosine)  # a post met at an angle: k cos² along the axis
        if not gaps:
            return None
        best = min(gaps)
        share = sum(c for g, c in zip(gaps, slopes) if g - best < 1e-3)  # the posts met together
        contact = world.contact
        return (best, share * contact.stiffness_n_m(self._payload_mass_kg),
                share * contact.damping_n_s_m(self._payload_mass_kg))

    # ------------------------------------------------------------------ tick side
    def _read(self, t_s: float, m: ArmMeasurement, status: SlaveStatus) -> None:
        self.t_s = t_s
        self.port_m[:] = m.ee_position_m
        self.port_velocity_m_s[:] = m.ee_velocity_m_s
        self.base_attitude_rad[:] = m.base_attitude_rad
        self.slave_fault, self.singular, self.limited = status.fault, status.singular, status.limited
        self.sigma_ratio = status.sigma_ratio
        if self._reading is not None:
            self.tool_gap_m = self._reading.gap_m
        c = self.controller.position_m
        p = self.port_m
        self.tracking_error_m = math.sqrt((p[0] - c[0]) ** 2 + (p[1] - c[1]) ** 2 + (p[2] - c[2]) ** 2)

    def captured(self, t_s: float, m: ArmMeasurement, status: SlaveStatus, scene: DebrisBody | None,
                 payload_mass_kg: float, reading: DebrisReading | None = None, can_release: bool = False) -> None:
        """The tool has closed: the pin rides on the payload, the controller starts on
        the port (bumpless), the machine enters its start state. ``reading`` is the
        scene's (the tool's gap to the fixture); ``can_release``: the scene can open the
        tool again (``robot.debris.ReleasesPayload``)."""
        self._payload_mass_kg = float(payload_mass_kg)
        self._reading, self._can_release = reading, can_release
        self.tool_open = self.release_requested = False
        if self.world is not None and scene is not None:
            scene.proxy_follows = True
            self.world.attach(scene.body_id, payload_mass_kg, scene)
        self.controller.reset(m.ee_position_m, m.ee_velocity_m_s)
        self._read(t_s, m, status)
        self.active = True
        self.machine.start(self)

    def command(self, t_s: float, m: ArmMeasurement, status: SlaveStatus, pos_out: Vec, vel_out: Vec,
                acc_out: Vec) -> None:
        """The slave's command at ``t_s`` (task frame) from the admittance controller."""
        if self.world is not None:
            self.world.update(m.ee_position_m)
        self._read(t_s, m, status)
        machine = self.machine
        self._fill_state()  # the behaviour that judges this tick's wrench, before it may end
        requested, self._requested = self._requested, None
        if requested is not None:
            machine.interrupt(self, requested, f"the operator chose {requested!r} at {t_s:.3f} s")
            self._hold_until_s = math.inf
        self.master_force_n[0] = 0.0
        machine.step(self)
        if not machine.running and self._hold_until_s == math.inf:
            self._hold_until_s = t_s + HOLD_AFTER_TASK_S
        if not machine.drives_port:  # once the tool is open the posts push the debris, not the port
            self.controller.step(self._no_force if self.tool_open else self.force_n)
        pos_out[:] = self.controller.position_m
        vel_out[:] = self.controller.velocity_m_s
        acc_out[:] = self.controller.acceleration_m_s2
        row = self.row
        row[2:5] = self.controller.attractor_m
        row[5:8] = self.force_n
        row[8:11] = self.torque_n_m

    def _fill_state(self) -> None:
        """State, behaviour and limit of the row: those that judged this tick's wrench (a
        behaviour that ends on it shows on its last row; the next state from the next row)."""
        row, machine = self.row, self.machine
        behaviour = machine.behaviour
        row[0] = machine.state_index if machine.running else -1.0
        row[1] = self._kinds.index(behaviour.kind) if behaviour is not None else -1.0
        row[11] = behaviour.limit_n() if behaviour is not None else math.inf

    def open_tool(self) -> str | None:
        """The ``open`` behaviour asks for the tool to open: the tick's capture stage
        opens it after this tick's plant step (:meth:`released`)."""
        if self.tool_open:
            return "the tool is open already"
        if not self._can_release:
            return "this capture scene cannot let the payload go (the debris is not in the arm's own world)"
        self.release_requested = True
        return None

    def released(self, t_s: float, release: PayloadRelease, m: ArmMeasurement) -> None:
        """The tool has opened at ``t_s`` (the tick's capture stage, after the plant step):
        the admittance controller no longer feels the posts, the retreat direction is
        from the fixture to the end effector, the release goes into the log."""
        self.release_requested = False
        self.tool_open = True
        self.released_at_s = t_s
        away = m.ee_position_m - release.fixture_m
        norm = float(np.linalg.norm(away))
        self.away_m[:] = away / norm if norm > 0.0 else 0.0
        if self._reading is not None:
            self.tool_gap_m = self._reading.gap_m
        self._release = {**release.as_dict(), "state": self.machine.state or None,
                         "ee_position_m": m.ee_position_m.tolist(), "ee_velocity_m_s": m.ee_velocity_m_s.tolist(),
                         "base_attitude_rad": m.base_attitude_rad.tolist(),
                         "base_angular_velocity_rad_s": m.base_angular_velocity_rad_s.tolist()}

    def next_state(self) -> str | None:
        """The state the operator's "next" asks for: the running state's ``succeeded``
        target (None: no state runs, or it ends the machine)."""
        machine = self.machine
        return self.task.next_state(machine.state) if machine.running else None

    def request(self, state: str) -> None:
        """The operator asks for ``state`` (a key or a device button in a window): it
        starts on the next tick, ending the running behaviour ``aborted``. One attribute
        is set; the servo tick reads it, so another thread may call this.

        Raises:
            BehaviourError: ``state`` is not a state of the task.
        """
        if state not in self.task.states:
            names = ", ".join(self.task.state_names)
            raise BehaviourError(f"task {self.task.name}: no state {state!r} (states: {names})")
        self._requested = state

    def over(self, t_s: float) -> bool:
        """The machine ended and the hold after it elapsed."""
        return self.active and t_s >= self._hold_until_s

    def abort(self, reason: str) -> None:
        """End a running machine (the trial is over)."""
        self.machine.abort(self, reason)

    def metadata(self) -> dict[str, Any]:
        """The log's ``post_capture`` object."""
        world = self.world
        return {
            "task": self.task.as_dict(),
            "states": list(self.task.state_names),
            "behaviours": list(self._kinds),
            "started": self.active,
            "posts_m": None if world is None else world.post_positions_m.tolist(),
            "release": self._release,
            **self.machine.metadata(),
        }
