"""The arm server: an arm controller behind the link, with its watchdog.

:class:`LinkServer` owns one arm (a *plant*, any :class:`robot.arm.ArmBackend`: the
PyBullet arm for hardware-in-the-loop) and serves one session at a time over a ZeroMQ
ROUTER socket. A real arm controller implements the same protocol
(``docs/arm-link.md``); this class is its reference and the peer the tests fuzz.

One loop in one thread does everything, so nothing is shared with another thread:

* **lock-step** sessions: every valid ``command`` is applied, the plant steps once and the
  new ``state`` is the reply. Deterministic; the plant does not move between commands.
* **real-time** sessions: the plant steps every ``dt_s`` on the server's clock and each
  step's ``state`` is pushed to the client; a valid ``command`` is accepted on arrival
  and handed to the plant at the next period boundary, before the step (the newest
  wins). Between steps the loop waits on the sockets' file descriptors, so a message is
  handled within tens of microseconds.

With a :class:`~robot.link.arrivals.SpinWindow` (``arm serve``, ``--spin-us``), the wait
before a lock-step client's next command sleeps until just before the command is due and
then polls without sleeping until it comes or the window closes
(:mod:`robot.link.arrivals`): the server is then awake, with its caches warm, when the
command arrives. This changes when the loop looks at its sockets, never what it does.
Real-time sessions never spin: their commands take effect at the server's next period
whenever they come within it.

Every message is checked before it can touch the arm (:meth:`LinkServer._on_frames`),
in this order: its connection must have passed CURVE (when keys are set), then the schema
(``malformed``), the session id and the connection that opened the session
(``wrong_session``), a sequence number newer than the last accepted (``replayed``), a
``t_ns`` not going backwards (``malformed``), the session's status (``halted``), the
joint position, rate and acceleration limits (``malformed``) and the age of the state the
command was computed from (``stale``; a real-time session's first command is exempt, the
arm having held still until then). A rejected
message is counted by kind, answered with a ``reject`` to its sender only, and changes
nothing else.

On loopback the server also holds a UDP socket on the same address (the datagram stream,
:mod:`robot.link.stream`). A session's client may ask for it (``stream``, naming its own
UDP port); the server then answers ``stream_open`` with its port and a fresh key, and
takes that client's ``command`` and ``ping`` as datagrams too, answering them (and
pushing real-time states) the same way. A datagram from any other address or port than
the session's stream peer is ``wrong_session``; with CURVE keys, one without the session
key's tag is ``unauthenticated`` (both counted, never answered); every other datagram
goes through the same checks as a ZeroMQ message.

The watchdog: a real-time session that has received its first command halts at the
first period boundary at which no valid command has arrived for :data:`WATCHDOG_PERIODS`
periods (20 ms at 1 kHz, as libfranka's 20 lost packets; so 20-21 ms of silence): the
joint rates ramp to zero at each joint's
acceleration limit (never holding the last command), the status goes ``halting`` then
``halted``, and the session never resumes (the client opens a new one). A lock-step
session halts after ``lockstep_timeout_s`` of silence (its plant does not move meanwhile,
so the rates are zeroed at once).
"""

from __future__ import annotations

import logging
import secrets
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from capture_trainer.errors import ArmError, CaptureTrainerError
from robot.arm import ArmBackend, JointCommand
from robot.link.arrivals import ArrivalForecast, SpinWindow
from robot.link.keys import ServerKeys, check_address, is_loopback
from robot.link.protocol import (
    CLIENT_TYPES,
    MODES,
    REJECT_KINDS,
    STREAM_CLIENT_TYPES,
    MessageError,
    decode,
    encode,
    model_fingerprint,
)
from robot.link.stream import RECV_BYTES, datagram_socket, seal, unseal
from robot.models import ManipulatorModel, Mat3

log = logging.getLogger(__name__)

#: Where ``capture-trainer arm serve`` listens by default.
DEFAULT_BIND = "tcp://127.0.0.1:5590"
#: Periods without a valid command that trip the real-time watchdog (checked every period).
WATCHDOG_PERIODS = 20
#: A real-time command computed from a state more than this many periods old is stale.
MAX_AGE_STEPS = 20
#: Silence after which a lock-step session halts [s].
LOCKSTEP_TIMEOUT_S = 2.0
#: A new ``hello`` may take over a session that has been silent this long [s].
TAKEOVER_S = 2.0
#: A halted real-time session keeps reporting ``halted`` this long, then the server idles [s].
HALTED_LINGER_S = 1.0
#: Slack on the joint position limits for a command [rad] (numerical, not a margin to use).
POSITION_SLACK_RAD = 0.01
#: Relative slack on the joint rate and acceleration limits for a command.
RATE_SLACK = 0.01
#: Servo periods the server accepts from a ``hello`` [s].
DT_RANGE_S = (1e-4, 0.1)
ZAP_DOMAIN = b"capture-trainer-arm"
#: Messages handled per wake-up before the loop looks at its clock again.
BATCH = 64
#: Frames above this size make libzmq drop the connection before we see them [bytes].
TRANSPORT_MAX_BYTES = 65536
#: ``arm serve``'s busy-poll window around each expected lock-step command [us]
#: (``--spin-us``): off, as on a 2-vCPU VM it gained 2-6 % at 5-10 % more CPU
#: (``docs/arm-link.md``); for a server with a core of its own.
SPIN_US = 0.0


def spin_window(spin_us: float) -> SpinWindow | None:
    """The busy-poll window of ``spin_us`` microseconds, a quarter before the expected
    command and three quarters after; None for 0 (never spin).

    Raises:
        ArmError: negative or not finite.
    """
    if not 0.0 <= spin_us < float("inf"):
        raise ArmError(f"the busy-poll window must be >= 0 us, got {spin_us}")
    if spin_us == 0.0:
        return None
    return SpinWindow(lead_s=spin_us * 1e-6 / 4.0, lag_s=spin_us * 1e-6 * 3.0 / 4.0)


def set_realtime_priority(priority: int) -> None:
    """Run this thread, and the threads it starts afterwards (ZeroMQ's I/O thread),
    under SCHED_FIFO at ``priority`` (1-99), as ros2_control's loop does.

    Call it before opening sockets. It keeps a 1 kHz loop on time on a busy machine; it
    must never be combined with busy-polling (a spinning FIFO thread starves the others).

    Raises:
        ArmError: out of range, or not permitted (needs root or an rtprio limit).
    """
    import os

    if not 1 <= priority <= 99:
        raise ArmError(f"real-time priority must be 1-99, got {priority}")
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (PermissionError, AttributeError, OSError) as error:
        raise ArmError(f"cannot set real-time priority {priority} (SCHED_FIFO): {error}") from None


PlantFactory = Callable[..., ArmBackend]
"""``factory(model, q0_rad=..., dt_s=...) -> ArmBackend``: the plant of a new session."""


@dataclass
class LinkCounters:
    """What the server has done since it started (the ``report`` message's fields)."""

    applied: int = 0
    sessions: int = 0
    halts: int = 0
    gaps: int = 0
    rejected: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REJECT_KINDS, 0))
    last_halt_reason: str = ""
    last_halt_silence_s: float = 0.0
    last_halt_ramp_s: float = 0.0


Origin = bytes | None
"""Where a message came from and its answer goes: a ZeroMQ routing id, or None for the
session's datagram stream."""


class _Session:
    """One client's session: its plant, the last accepted sequence and the watchdog."""

    def __init__(self, session_id: int, routing_id: bytes, mode: str, plant: ArmBackend, model: ManipulatorModel,
                 dt_s: float, hello: dict[str, Any], now: float, spin: SpinWindow | None) -> None:
        n = model.n_joints
        self.id = session_id
        self.routing_id = routing_id
        self.mode = mode
        self.plant = plant
        self.model = model
        self.dt_s = dt_s
        self.status = "ready"
        self.reason = ""
        self.step = 0
        self.client_seq: int = hello["seq"]
        self.client_t_ns: int = hello["t_ns"]
        self.cmd_seq = 0
        self.armed = False
        self.last_rx = now
        self.last_command = now
        self.command = JointCommand.zeros(n)
        #: Real time: the newest applied command, for the plant at the next period boundary.
        self.pending: dict[str, Any] | None = None
        self.ramp = np.zeros(n)
        self.halt_started = 0.0
        self.halted_at = 0.0
        self.overruns = 0
        self.last_q: list[float] = [0.0] * n  # the joint state of the last state sent
        self.last_qd: list[float] = [0.0] * n
        #: When the client's next command is due (the busy-poll window); None: never spin.
        self.arrivals = None if spin is None else ArrivalForecast(spin)
        #: The client's datagram address (host, port) and the stream key, once ``stream_open``.
        self.stream_peer: tuple[str, int] | None = None
        self.stream_key = b""

    @property
    def push_to(self) -> Origin:
        """Where pushed real-time states go: the stream once open, else the connection."""
        return None if self.stream_peer is not None else self.routing_id


class LinkServer:
    """An arm behind the link (see the module doc).

    Args:
        model: the arm's model; a ``hello`` must name it and match its fingerprint (a
            ``hello`` may change the base mass and inertia: the plant is rebuilt with them).
        plant_factory: builds a session's plant, ``factory(model, q0_rad=, dt_s=)``
            (``ARM_BACKENDS.get("pybullet")`` for hardware-in-the-loop).
        bind: ``tcp://HOST:PORT`` (port ``*`` picks a free one, see :attr:`endpoint`).
        keys: CURVE keys; without them only a loopback address is accepted.
        watchdog_periods: consecutive silent periods that halt a real-time session.
        max_age_steps: oldest state a real-time command may be computed from [periods].
        lockstep_timeout_s: silence that halts a lock-step session [s].
        modes: the session modes this server offers.
        stream: offer the datagram stream (:mod:`robot.link.stream`); only ever on a
            loopback address (elsewhere the server has no UDP socket).
        spin: busy-poll around each expected command of a lock-step session (see
            :mod:`robot.link.arrivals`); None (the default) always sleeps. Only for a
            server alone in its process (``arm serve``): a spinning thread holds the
            GIL, and under SCHED_FIFO it starves the other threads.

    Raises:
        ArmError: a non-loopback address without keys, or the address cannot be bound.
    """

    def __init__(self, model: ManipulatorModel, plant_factory: PlantFactory, bind: str = DEFAULT_BIND,
                 keys: ServerKeys | None = None, *, watchdog_periods: int = WATCHDOG_PERIODS,
                 max_age_steps: int = MAX_AGE_STEPS, lockstep_timeout_s: float = LOCKSTEP_TIMEOUT_S,
                 modes: tuple[str, ...] = MODES, spin: SpinWindow | None = None, stream: bool = True) -> None:
        import zmq

        endpoint, host = check_address(bind, keys is not None, binding=True)
        if watchdog_periods < 1 or max_age_steps < 1 or not lockstep_timeout_s > 0.0:
            raise ArmError("watchdog_periods and max_age_steps must be >= 1, lockstep_timeout_s > 0")
        if not modes or set(modes) - set(MODES):
            raise ArmError(f"modes must be among {', '.join(MODES)}, got {modes}")
        self.model = model
        self.fingerprint = model_fingerprint(model)
        self.watchdog_periods = watchdog_periods
        self.max_age_steps = max_age_steps
        self.lockstep_timeout_s = lockstep_timeout_s
        self.modes = modes
        self.spin = spin
        self.counters = LinkCounters()
        self.error: BaseException | None = None
        self._factory = plant_factory
        #: The types a ZeroMQ message may have (the stream's are :data:`STREAM_CLIENT_TYPES`).
        self._client_types = CLIENT_TYPES
        self._authorised: frozenset[bytes] = frozenset()
        self._session: _Session | None = None
        self._seq = 0
        self._started = time.perf_counter()
        self._pending: list[int] = []  # accepted connections that have not finished a handshake
        self._woke_ns = 0  # when the last wait found a message (perf_counter_ns)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        n = model.n_joints
        arrays = model.arrays
        self._q_lo = (arrays.q_min - POSITION_SLACK_RAD).tolist()
        self._q_hi = (arrays.q_max + POSITION_SLACK_RAD).tolist()
        self._qd_max = (arrays.qd_max * (1.0 + RATE_SLACK)).tolist()
        self._qdd_max = (arrays.qdd_max * (1.0 + RATE_SLACK)).tolist()
        self._n = n
        self._zmq = zmq
        self._ctx = zmq.Context()
        try:
            self._open_sockets(endpoint, host, keys)
            self._udp: socket.socket | None = datagram_socket(host) if stream and is_loopback(host) else None
        except OSError as error:
            self._ctx.destroy(linger=0)
            raise ArmError(f"cannot open the arm server's datagram stream on {host}: {error}") from None
        except BaseException:
            self._ctx.destroy(linger=0)
            raise
        #: The datagram stream's (host, port); None without the stream.
        self.stream_address: tuple[str, int] | None = None
        if self._udp is not None:
            self._udp_fd = self._udp.fileno()
            self._fds.append(self._udp_fd)
            self.stream_address = cast(tuple[str, int], tuple(self._udp.getsockname()[:2]))

    def _open_sockets(self, endpoint: str, host: str, keys: ServerKeys | None) -> None:
        zmq = self._zmq
        self._zap = None
        self._monitor = None
        if keys is not None:
            import zmq.utils.z85

            self._authorised = frozenset(zmq.utils.z85.decode(key) for key in keys.authorised)
            # The ZAP handler lives in this loop: the handshake asks it about the client key.
            self._zap = self._ctx.socket(zmq.REP)
            self._zap.linger = 0
            self._zap.bind("inproc://zeromq.zap.01")
        router = self._ctx.socket(zmq.ROUTER)
        router.linger = 0
        router.setsockopt(zmq.MAXMSGSIZE, TRANSPORT_MAX_BYTES)
        router.setsockopt(zmq.SNDHWM, 1000)
        router.setsockopt(zmq.RCVHWM, 1000)
        if ":" in host:
            router.setsockopt(zmq.IPV6, 1)
        if keys is not None:
            router.curve_server = True
            router.curve_secretkey = keys.secret
            router.curve_publickey = keys.public
            router.zap_domain = ZAP_DOMAIN
            events = (zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED
                      | zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                      | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)
            self._monitor = router.get_monitor_socket(events)
        try:
            router.bind(endpoint)
        except zmq.ZMQError as error:
            router.close(linger=0)
            raise ArmError(f"cannot bind the arm server to {endpoint}: {error}") from None
        self._router = router
        self._EVENTS, self._POLLIN, self._NOBLOCK = int(zmq.EVENTS), int(zmq.POLLIN), int(zmq.NOBLOCK)
        self._RCVMORE, self._SNDMORE = int(zmq.RCVMORE), int(zmq.SNDMORE)
        self.endpoint: str = router.getsockopt_string(zmq.LAST_ENDPOINT)
        self._sockets: list[Any] = [s for s in (router, self._zap, self._monitor) if s is not None]
        self._fds = [s.getsockopt(zmq.FD) for s in self._sockets]

    # ------------------------------------------------------------------ running
    def start(self) -> LinkServer:
        """Serve in a daemon thread (the private loopback server of a backend, tests)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve_logged, name="arm-link-server", daemon=True)
            self._thread.start()
        return self

    def _serve_logged(self) -> None:
        try:
            self.serve()
        except BaseException as error:  # kept for the owner (who sees the link fall silent)
            self.error = error
            log.exception("arm server stopped on an error")

    def stop(self) -> None:
        """Ask :meth:`serve` to return (within about 10 ms) and wait for its thread."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)

    def serve(self) -> None:
        """Serve sessions until :meth:`stop` (or KeyboardInterrupt in the caller's thread)."""
        try:
            while not self._stop.is_set():
                session = self._session
                if session is not None and session.mode == "realtime":
                    self._serve_realtime(session)
                else:
                    self._serve_events()
        finally:
            self._end_session("server stopped")

    def close(self) -> None:
        """Stop serving, release the plant and the sockets (idempotent)."""
        self.stop()
        self._end_session("server closed")
        if not self._ctx.closed:
            self._ctx.destroy(linger=0)
        if self._udp is not None:
            self._udp.close()

    def __enter__(self) -> LinkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _serve_events(self) -> None:
        """Idle or lock-step: wait for messages; check the lock-step watchdog."""
        timeout = 0.01
        session = self._session
        if session is not None and session.armed and session.status == "running":
            timeout = min(timeout, max(0.0, session.last_command + self.lockstep_timeout_s - time.perf_counter()))
        self._handle(self._wait(timeout))
        session = self._session
        if (session is not None and session.mode == "lockstep" and session.armed and session.status == "running"
                and time.perf_counter() - session.last_command > self.lockstep_timeout_s):
            self._halt_now(session, f"watchdog: lock-step client silent for {self.lockstep_timeout_s:g} s")

    def _serve_realtime(self, session: _Session) -> None:
        """Step the plant every period on this clock; handle messages in between."""
        now = time.perf_counter
        dt = session.dt_s
        deadline = now() + dt
        while self._session is session and not self._stop.is_set():
            remaining = deadline - now()
            while remaining > 0.0:
                self._handle(self._wait(remaining))
                if self._session is not session:
                    return
                remaining = deadline - now()
            self._period(session)
            deadline += dt
            if now() - deadline > 5 * dt:  # fell behind (a stall): restart the schedule, do not burst
                session.overruns += 1
                deadline = now() + dt

    def _period(self, s: _Session) -> None:
        """One real-time period: the newest command to the plant, watchdog, ramp, plant
        step, state pushed."""
        if s.pending is not None:
            self._to_plant(s, s.pending)
            s.pending = None
        if s.status == "running":
            silence = time.perf_counter() - s.last_command
            if silence >= self.watchdog_periods * s.dt_s:
                self._trip(s, f"watchdog: no command for {silence * 1e3:.1f} ms "
                              f"(limit {self.watchdog_periods} periods)")
        if s.status == "halting":
            self._ramp(s)
        elif s.status == "halted" and time.perf_counter() - s.halted_at > HALTED_LINGER_S:
            self._end_session("halted session expired")
            return
        s.plant.advance()
        s.step += 1
        self._send(s.push_to, "state", s.id, self._state_body(s))

    # ----------------------------------------------------------------- watchdog
    def _trip(self, s: _Session, reason: str) -> None:
        now = time.perf_counter()
        s.status = "halting"
        s.reason = reason
        s.halt_started = now
        s.ramp[:] = s.command.qd_rad_s
        c = self.counters
        c.halts += 1
        c.last_halt_reason = reason
        c.last_halt_silence_s = now - s.last_command
        c.last_halt_ramp_s = 0.0
        log.warning("arm server: session %x halting (%s)", s.id, reason)

    def _ramp(self, s: _Session) -> None:
        """Joint rates toward zero at each joint's acceleration limit, one period's worth."""
        arrays = s.model.arrays
        step = arrays.qdd_max * s.dt_s
        magnitude = np.maximum(np.abs(s.ramp) - step, 0.0)
        sign = np.sign(s.ramp)
        s.ramp[:] = sign * magnitude
        command = s.command
        command.q_rad[:] = s.plant.state().q_rad
        command.qd_rad_s[:] = s.ramp
        command.qdd_rad_s2[:] = np.where(magnitude > 0.0, -sign * arrays.qdd_max, 0.0)
        s.plant.send(command)
        if not np.any(magnitude):
            s.status = "halted"
            s.halted_at = time.perf_counter()
            self.counters.last_halt_ramp_s = s.halted_at - s.halt_started
            log.warning("arm server: session %x halted after a %.3f s ramp", s.id, self.counters.last_halt_ramp_s)

    def _halt_now(self, s: _Session, reason: str) -> None:
        """Lock-step halt: no time passes between steps, so the rates go to zero at once."""
        self._trip(s, reason)
        s.ramp[:] = 0.0
        command = s.command
        command.q_rad[:] = s.plant.state().q_rad
        command.qd_rad_s[:] = 0.0
        command.qdd_rad_s2[:] = 0.0
        s.plant.send(command)
        s.status = "halted"
        s.halted_at = time.perf_counter()

    def _end_session(self, why: str) -> None:
        s = self._session
        if s is None:
            return
        self._session = None
        log.info("arm server: session %x ended (%s) after %d steps", s.id, why, s.step)
        s.plant.close()

    # -------------------------------------------------------------- the sockets
    def _ready(self, stream: bool = False) -> list[Any]:
        """The sockets with a message now (no waiting).

        The datagram socket is looked at (a select()) with ``stream``, and whenever a
        ZeroMQ socket has a message; it then comes first: a datagram is in the socket as
        soon as it is sent, a ZeroMQ message later, so a client's ``bye`` is never handled
        before the commands it sent ahead of it."""
        events, pollin = self._EVENTS, self._POLLIN  # plain ints: pyzmq's enums cost a Python call per "&"
        ready = [s for s in self._sockets if s.get(events) & pollin]
        if (stream or ready) and self._udp is not None and select.select([self._udp_fd], [], [], 0.0)[0]:
            ready.insert(0, self._udp)
        return ready

    def _sleep(self, timeout_s: float) -> list[Any]:
        """select() on every descriptor for up to ``timeout_s``, then the ready sockets.

        Called only after :meth:`_ready` found no ZeroMQ message: a ZeroMQ descriptor
        becomes readable when its socket's events change, so when select() wakes for the
        datagram socket alone, the ZeroMQ sockets need no look (it saves their EVENTS)."""
        readable = select.select(self._fds, [], [], timeout_s)[0]
        if self._udp is None or self._udp_fd not in readable:
            return self._ready()
        if len(readable) == 1:
            return [self._udp]
        return [self._udp, *[s for s in self._ready() if s is not self._udp]]

    def _wait(self, timeout_s: float) -> list[Any]:
        """The sockets with a message, waiting up to ``timeout_s`` (sub-millisecond).

        ZeroMQ's descriptors signal edges, so the sockets' EVENTS are read before and
        after sleeping in select(). With :attr:`spin`, a wait that covers the session's
        next expected command sleeps until its window opens and then polls without
        sleeping until the window closes (or a message comes), then sleeps again.
        """
        ready = self._ready()
        if ready or timeout_s <= 0.0:
            self._woke_ns = time.perf_counter_ns()
            return ready
        now = time.perf_counter()
        end = now + timeout_s
        s = self._session
        window = None if s is None or s.arrivals is None else s.arrivals.window()
        if window is not None and window[1] > now and window[0] < end:
            start, stop = window
            while not ready and (now := time.perf_counter()) < start:  # sleep until the window opens
                ready = self._sleep(start - now)
            stop = min(stop, end)
            while not ready and (now := time.perf_counter()) < stop:
                ready = self._ready(stream=True)
            if ready or now >= end:
                self._woke_ns = time.perf_counter_ns()
                return ready
            timeout_s = end - now
        ready = self._sleep(timeout_s)
        self._woke_ns = time.perf_counter_ns()
        return ready

    def _handle(self, ready: list[Any]) -> None:
        """Act on up to :data:`BATCH` messages of each ready socket."""
        events, pollin, noblock, more = self._EVENTS, self._POLLIN, self._NOBLOCK, self._RCVMORE
        for sock in ready:
            if sock is self._udp:
                self._on_datagrams()
                continue
            for _ in range(BATCH):
                try:
                    frames = [sock.recv(noblock)]  # ready: a whole message is there (all its frames)
                except self._zmq.Again:
                    break
                while sock.get(more):
                    frames.append(sock.recv(noblock))
                if sock is self._router:
                    self._on_frames(frames)
                elif sock is self._zap:
                    self._on_zap(frames)
                else:
                    self._on_monitor(frames)
                if not sock.get(events) & pollin:  # (cheaper than a recv that raises Again)
                    break

    def _on_zap(self, frames: list[bytes]) -> None:
        """ZAP (RFC 27): allow a CURVE client whose public key is authorised."""
        request_id = frames[1] if len(frames) > 1 else b""
        credentials = frames[6:]
        allowed = (len(frames) == 7 and frames[5] == b"CURVE" and credentials[0] in self._authorised)
        reply = [b"1.0", request_id, b"200" if allowed else b"400",
                 b"OK" if allowed else b"client key not authorised", b"arm-client" if allowed else b"", b""]
        assert self._zap is not None
        self._zap.send_multipart(reply)

    def _on_monitor(self, frames: list[bytes]) -> None:
        """Count connections that never authenticated: a failed CURVE handshake (unknown
        key, wrong server key, plaintext) or a peer that was not ZeroMQ at all."""
        from zmq.utils.monitor import parse_monitor_message

        zmq = self._zmq
        event = parse_monitor_message(frames)
        kind, value = event["event"], event["value"]
        if kind == zmq.EVENT_ACCEPTED:
            self._pending.append(value)
        elif kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            if self._pending:
                self._pending.pop(0)
        elif kind in (zmq.EVENT_HANDSHAKE_FAILED_AUTH, zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL,
                      zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL):
            if self._pending:
                self._pending.pop(0)
            self._count("unauthenticated", f"CURVE handshake failed (event {kind}, code {value})")
        elif kind == zmq.EVENT_DISCONNECTED and value in self._pending:
            self._pending.remove(value)
            self._count("unauthenticated", "connection closed before any handshake")

    def _on_datagrams(self) -> None:
        """Act on up to :data:`BATCH` datagrams waiting on the UDP socket."""
        udp = self._udp
        assert udp is not None
        for _ in range(BATCH):
            try:
                data, source = udp.recvfrom(RECV_BYTES)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as error:  # e.g. an ICMP error queued for an earlier send
                log.debug("arm server: datagram socket: %s", error)
                continue
            self._on_datagram(data, source)

    def _on_datagram(self, data: bytes, source: Any) -> None:
        """One datagram: from the session's stream peer, with its key's tag, then the
        same checks as a ZeroMQ message (:meth:`_on_message`)."""
        s = self._session
        if s is None or s.stream_peer is None or (source[0], source[1]) != s.stream_peer:
            self._count("wrong_session", f"a datagram from {source[0]}:{source[1]}, not this session's stream")
            return
        message = unseal(s.stream_key, data)
        if message is None:
            self._count("unauthenticated", "a datagram without the session key's tag")
            return
        self._on_message(None, message, STREAM_CLIENT_TYPES)

    def _send(self, origin: Origin, kind: str, session: int, body: dict[str, Any]) -> None:
        """Send one message to ``origin``: a connection (routing id) or the session's stream."""
        self._seq += 1
        data = encode(kind, session, self._seq, time.monotonic_ns(), body)
        if origin is None:
            s = self._session
            assert s is not None and s.stream_peer is not None and self._udp is not None
            try:
                self._udp.sendto(seal(s.stream_key, data), s.stream_peer)
            except OSError as error:  # a full buffer or a peer gone: its watchdog, or ours, will tell
                log.debug("arm server: dropped a %s datagram: %s", kind, error)
            return
        routing_id = origin
        router, noblock = self._router, self._NOBLOCK
        try:
            router.send(routing_id, noblock | self._SNDMORE)
            router.send(data, noblock)
        except self._zmq.Again:  # the peer's queue is full: it is not reading; its watchdog will tell
            log.debug("arm server: dropped a %s to a peer that does not read", kind)

    def _count(self, kind: str, reason: str) -> None:
        self.counters.rejected[kind] += 1
        log.debug("arm server: rejected (%s): %s", kind, reason)

    def _reject(self, origin: Origin, ref_seq: int, kind: str, reason: str) -> None:
        self._count(kind, reason)
        self._send(origin, "reject", 0, {"ref_seq": ref_seq, "kind": kind, "reason": reason[:200]})

    # ----------------------------------------------------------------- messages
    def _on_frames(self, frames: list[bytes]) -> None:
        """One ZeroMQ message from a client: one frame, then :meth:`_on_message`."""
        routing_id = frames[0]
        if len(frames) != 2:
            self._reject(routing_id, 0, "malformed", f"a message is one frame, got {len(frames) - 1}")
            return
        self._on_message(routing_id, frames[1], self._client_types)

    def _on_message(self, origin: Origin, data: bytes, accept: frozenset[str]) -> None:
        """Check one message from a client and act on it (see the module doc for the order).

        ``origin``: the connection's routing id, or None for a datagram of the session's
        stream (whose source and tag are already checked)."""
        try:
            msg = decode(data, self._n, accept)
        except MessageError as error:
            self._reject(origin, 0, "malformed", str(error))
            return
        kind, seq = msg["type"], msg["seq"]
        if kind == "hello":
            assert origin is not None  # not a stream type
            self._hello(origin, msg)
            return
        s = self._session
        if kind == "status" and msg["session"] == 0:
            self._send(origin, "report", 0, self.report())
            return
        if s is None or msg["session"] != s.id or (origin is not None and origin != s.routing_id):
            self._reject(origin, seq, "wrong_session", "no such session on this connection")
            return
        if seq <= s.client_seq:
            self._reject(origin, seq, "replayed", f"seq {seq} is not newer than {s.client_seq}")
            return
        if msg["t_ns"] < s.client_t_ns:
            self._reject(origin, seq, "malformed", "t_ns went backwards")
            return
        if kind == "command":
            problem = self._command_problem(s, msg)
            if problem is not None:
                self._reject(origin, seq, *problem)
                return
        self.counters.gaps += seq - s.client_seq - 1
        s.client_seq = seq
        s.client_t_ns = msg["t_ns"]
        s.last_rx = time.perf_counter()
        if kind == "command":
            if s.arrivals is not None:
                s.arrivals.note(msg["t_ns"], self._woke_ns)
            self._apply(s, msg, origin)
        elif kind == "ping":
            self._send(origin, "pong", s.id, {"echo_seq": seq, "echo_t_ns": msg["t_ns"]})
        elif kind == "status":
            self._send(origin, "report", s.id, self.report())
        elif kind == "stream":
            assert origin is not None  # not a stream type
            self._open_stream(origin, s, msg["port"])
        else:  # bye
            self._send(origin, "report", s.id, self.report())
            self._end_session("bye")

    def _open_stream(self, routing_id: bytes, s: _Session, port: int) -> None:
        """Open the session's datagram stream to the client's UDP ``port`` on the
        server's loopback address, or refuse in one line."""
        if self._udp is None or self.stream_address is None:
            self._refuse(routing_id, "this server has no datagram stream (it is offered on loopback only)", busy=False)
            return
        if s.stream_peer is not None:
            self._refuse(routing_id, "the session's datagram stream is already open", busy=False)
            return
        if not 0 < port < 65536:
            self._refuse(routing_id, f"a datagram port must be 1-65535, got {port}", busy=False)
            return
        s.stream_peer = (self.stream_address[0], port)
        s.stream_key = secrets.token_bytes(32) if self._zap is not None else b""  # a tag only with CURVE
        log.info("arm server: session %x streams datagrams with port %d", s.id, port)
        self._send(routing_id, "stream_open", s.id, {"port": self.stream_address[1], "key": s.stream_key.hex()})

    def _command_problem(self, s: _Session, msg: dict[str, Any]) -> tuple[str, str] | None:
        """``(kind, reason)`` why a command of the session must not be applied, or None."""
        if s.status in ("halting", "halted"):
            return "halted", f"session halted ({s.reason})"
        q, qd, qdd = msg["q_rad"], msg["qd_rad_s"], msg["qdd_rad_s2"]
        q_lo, q_hi, qd_max, qdd_max = self._q_lo, self._q_hi, self._qd_max, self._qdd_max
        for j in range(self._n):
            if not q_lo[j] <= q[j] <= q_hi[j]:
                return "malformed", f"q_rad[{j}] = {q[j]:.6g} outside the joint limits"
            if abs(qd[j]) > qd_max[j]:
                return "malformed", f"qd_rad_s[{j}] = {qd[j]:.6g} beyond the rate limit {qd_max[j]:.6g}"
            if abs(qdd[j]) > qdd_max[j]:
                return "malformed", f"qdd_rad_s2[{j}] = {qdd[j]:.6g} beyond the acceleration limit {qdd_max[j]:.6g}"
        age = s.step - msg["state_seq"]
        if age < 0:
            return "malformed", f"state_seq {msg['state_seq']} is ahead of the plant's step {s.step}"
        # Real time: before the first command the arm holds still, so the state a first
        # command was computed from is still the arm's state: no age limit for it.
        limit = 0 if s.mode == "lockstep" else (self.max_age_steps if s.status == "running" else s.step)
        if age > limit:
            return "stale", f"computed from the state of step {msg['state_seq']}, now {s.step} (limit {limit})"
        return None

    def _apply(self, s: _Session, msg: dict[str, Any], origin: Origin) -> None:
        """Apply a checked command. Lock-step: to the plant, one step, the state back.
        Real time: kept until the next period boundary, where the newest kept command
        goes to the plant before it steps (the plant only uses its motor targets when it
        steps, so this is the same motion, and the work is off the path of a ``ping``
        sent just after the command)."""
        self.counters.applied += 1
        s.cmd_seq = msg["seq"]
        s.armed = True
        s.status = "running"
        s.last_command = s.last_rx
        if s.mode == "realtime":
            s.pending = msg
            return
        self._to_plant(s, msg)
        s.plant.advance()
        s.step += 1
        self._send(origin, "state", s.id, self._state_body(s))

    @staticmethod
    def _to_plant(s: _Session, msg: dict[str, Any]) -> None:
        command = s.command
        command.t_s = msg["t_s"]
        command.q_rad[:] = msg["q_rad"]
        command.qd_rad_s[:] = msg["qd_rad_s"]
        command.qdd_rad_s2[:] = msg["qdd_rad_s2"]
        s.plant.send(command)

    def _hello(self, routing_id: bytes, msg: dict[str, Any]) -> None:
        """Open a session (a fresh plant at the hello's start pose), or refuse in one line."""
        s = self._session
        now = time.perf_counter()
        if s is not None:
            if s.status != "halted" and now - s.last_rx < TAKEOVER_S:
                self._refuse(routing_id, f"busy: a {s.mode} session is running", busy=True)
                return
            self._end_session("taken over by a new hello")
        try:
            model, q0 = self._hello_model(msg)
            plant = self._factory(model, q0_rad=q0, dt_s=msg["dt_s"])
        except (CaptureTrainerError, ValueError) as error:
            self._refuse(routing_id, str(error), busy=False)
            return
        session_id = secrets.randbits(63) + 1
        # Only a lock-step reply waits on the server's wake-up: a real-time command takes
        # effect at the next period of the server's clock whenever it comes within it.
        spin = self.spin if msg["mode"] == "lockstep" else None
        s = _Session(session_id, routing_id, msg["mode"], plant, model, msg["dt_s"], msg, now, spin)
        self._session = s
        self.counters.sessions += 1
        log.info("arm server: session %x opened (%s, %s, dt %g s)", session_id, msg["mode"], model.name, s.dt_s)
        body = {"mode": s.mode, "model": model.name, "fingerprint": model_fingerprint(model), "dt_s": s.dt_s,
                "n_joints": self._n, "q_min_rad": model.arrays.q_min.tolist(), "q_max_rad": model.arrays.q_max.tolist(),
                "qd_max_rad_s": model.arrays.qd_max.tolist(), "qdd_max_rad_s2": model.arrays.qdd_max.tolist(),
                "watchdog_s": self.watchdog_s(s.mode, s.dt_s), "max_age_steps": self.max_age_steps}
        body.update(self._state_body(s))
        self._send(routing_id, "welcome", session_id, body)

    def _hello_model(self, msg: dict[str, Any]) -> tuple[ManipulatorModel, NDArray[np.float64]]:
        if msg["mode"] not in self.modes:
            raise ArmError(f"this server offers {', '.join(self.modes)} sessions, not {msg['mode']}")
        if msg["model"] != self.model.name:
            raise ArmError(f"this server's arm is {self.model.name}, not {msg['model']}")
        dt = msg["dt_s"]
        if not DT_RANGE_S[0] <= dt <= DT_RANGE_S[1]:
            raise ArmError(f"dt_s must be within {DT_RANGE_S[0]:g}-{DT_RANGE_S[1]:g} s, got {dt:g}")
        q0 = np.array(msg["q0_rad"])
        if np.any(q0 < self._q_lo) or np.any(q0 > self._q_hi):
            raise ArmError(f"start pose {q0.tolist()} is outside the joint limits")
        model = self.model
        inertia = np.array(msg["base_inertia_kg_m2"]).reshape(3, 3)
        if msg["base_mass_kg"] != model.base_mass_kg or not np.array_equal(inertia, model.arrays.base_inertia):
            model = model.with_base(msg["base_mass_kg"], cast(Mat3, tuple(tuple(row) for row in inertia.tolist())))
        fingerprint = model_fingerprint(model)
        if fingerprint != msg["fingerprint"]:
            raise ArmError(f"model mismatch: the server's {model.name} has fingerprint {fingerprint}, "
                           f"the client's {msg['fingerprint']}")
        return model, q0

    def _refuse(self, routing_id: bytes, reason: str, busy: bool) -> None:
        log.info("arm server: hello refused: %s", reason)
        self._send(routing_id, "refused", 0, {"reason": reason[:200], "busy": busy})

    def _state_body(self, s: _Session) -> dict[str, Any]:
        m = s.plant.measure()
        state = s.plant.state()
        base = state.base
        s.last_q = state.q_rad.tolist()
        s.last_qd = state.qd_rad_s.tolist()
        return {
            "step": s.step, "cmd_seq": s.cmd_seq, "status": s.status, "reason": s.reason[:200], "t_s": float(state.t_s),
            "q_rad": s.last_q, "qd_rad_s": s.last_qd,
            "base_position_m": None if base is None else base.position_m.tolist(),
            "base_orientation_xyzw": None if base is None else base.orientation_xyzw.tolist(),
            "base_velocity_m_s": None if base is None else base.velocity_m_s.tolist(),
            "base_angular_velocity_rad_s": None if base is None else base.angular_velocity_rad_s.tolist(),
            "ee_position_m": m.ee_position_m.tolist(), "ee_velocity_m_s": m.ee_velocity_m_s.tolist(),
            "base_torque_n_m": m.base_torque_n_m.tolist(), "base_attitude_rad": m.base_attitude_rad.tolist(),
        }

    # ------------------------------------------------------------------ reports
    def watchdog_s(self, mode: str, dt_s: float) -> float:
        """The silence that halts a session of ``mode`` [s]."""
        return self.watchdog_periods * dt_s if mode == "realtime" else self.lockstep_timeout_s

    def report(self) -> dict[str, Any]:
        """The ``report`` message's body: status, mode, step, joint state (zeros when
        idle) and the counters. Touches no plant: safe to call from another thread."""
        s = self._session
        c = self.counters
        return {
            "status": "idle" if s is None else s.status, "mode": "" if s is None else s.mode,
            "model": self.model.name, "n_joints": self._n, "step": 0 if s is None else s.step,
            "q_rad": [0.0] * self._n if s is None else s.last_q,
            "qd_rad_s": [0.0] * self._n if s is None else s.last_qd,
            "applied": c.applied, "sessions": c.sessions, "halts": c.halts, "gaps": c.gaps,
            "rejected": dict(c.rejected), "last_halt_reason": c.last_halt_reason[:200],
            "last_halt_silence_s": float(c.last_halt_silence_s), "last_halt_ramp_s": float(c.last_halt_ramp_s),
            "watchdog_s": self.watchdog_s("realtime" if s is None else s.mode, 1e-3 if s is None else s.dt_s),
            "uptime_s": time.perf_counter() - self._started,
        }

    def __repr__(self) -> str:
        return f"LinkServer({self.model.name!r} on {self.endpoint})"
