"""The client side of the arm link: :class:`RemoteArm`, the ``remote`` arm backend.

``RemoteArm`` implements :class:`robot.arm.ArmBackend` over the link, so the slave
controller, the tick and the trial do not know the arm is elsewhere. Two modes:

* ``lockstep``: ``send()`` keeps the command; ``advance()`` sends it and waits for the
  state after exactly one plant step. Deterministic: a trial gives the same numbers as
  with the in-process plant (the floats cross the link unchanged).
* ``realtime``: the server steps on its own clock; ``send()`` sends the command at once;
  ``state()`` and ``advance()`` take the newest state the server pushed and never wait
  (the caller's clock keeps its period: a paced clock or a haptic device's scheduler,
  never the headless clock; a call between two server periods keeps the state it had).

A silent server (no reply or no new state within ``timeout_s``), a halted session, a
rejected command or a malformed server message raises :class:`ArmError` from
``advance()`` / ``measure()`` and latches: every later call raises the same fault, and
a new session needs a new backend (reconnecting is explicit).
"""

from __future__ import annotations

import logging
import math
import select
import socket
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from capture_trainer.errors import ArmError
from robot import _kernels as kern
from robot.arm import ArmMeasurement, ArmState, BaseState, JointCommand
from robot.link.keys import ClientKeys, check_address, ephemeral_keys, is_loopback, load_client_keys
from robot.link.protocol import (
    MODES,
    SERVER_TYPES,
    STREAM_CLIENT_TYPES,
    STREAM_KEY_HEX,
    STREAM_SERVER_TYPES,
    MessageError,
    decode,
    encode,
    model_fingerprint,
)
from robot.link.server import POSITION_SLACK_RAD, RATE_SLACK, LinkServer, PlantFactory
from robot.link.stream import RECV_BYTES, datagram_socket, seal, unseal
from robot.models import ManipulatorModel

log = logging.getLogger(__name__)

#: Default client watchdogs [s]: a real-time server that pushes no new state for 10 ms
#: is silent; a lock-step server gets 1 s to answer (its plant does not move meanwhile).
TIMEOUT_S = {"lockstep": 1.0, "realtime": 0.010}
CONNECT_TIMEOUT_S = 5.0
BYE_TIMEOUT_S = 0.2
_IDENTITY = np.array([0.0, 0.0, 0.0, 1.0])
_BASE_KEYS = ("base_position_m", "base_orientation_xyzw", "base_velocity_m_s", "base_angular_velocity_rad_s")


class LinkClient:
    """One DEALER socket speaking the link protocol's client side, and on loopback the
    datagram stream for the per-tick messages (:mod:`robot.link.stream`).

    Args:
        endpoint: ``tcp://HOST:PORT`` (already checked by :func:`check_address`).
        keys: CURVE client keys, or None for plaintext (loopback only).
        n_joints: the length of per-joint vectors in server messages (0 before it is known).
        stream: ask for the datagram stream once a session is open (only ever on a
            loopback address; a server without it leaves the session on ZeroMQ).
    """

    def __init__(self, endpoint: str, keys: ClientKeys | None, n_joints: int = 0, stream: bool = True) -> None:
        import zmq

        self._zmq = zmq
        self._noblock = int(zmq.NOBLOCK)  # a plain int: pyzmq's enum flags cost a Python call each
        self.n_joints = n_joints
        self.session = 0
        self.seq = 0
        self._t_ns = 0
        self._server_seq = 0
        self._rcvtimeo_ms = -1
        host = endpoint.removeprefix("tcp://").rpartition(":")[0].strip("[]")
        self._host = host
        self._want_stream = stream and is_loopback(host)
        #: The datagram stream once the server opened it (None: every message on ZeroMQ).
        self._udp: socket.socket | None = None
        self._udp_key = b""
        self._udp_seq = 0  # the last server seq seen on the stream (each channel is in order)
        self._udp_poll: Any = None
        self._hint = "" if keys is not None else " (a server with keys answers only clients with keys: --keys DIR)"
        self._ctx = zmq.Context()
        try:
            sock = self._ctx.socket(zmq.DEALER)
            sock.linger = 0
            sock.setsockopt(zmq.SNDHWM, 1000)
            sock.setsockopt(zmq.RCVHWM, 10000)
            if "[" in endpoint:
                sock.setsockopt(zmq.IPV6, 1)
            if keys is not None:
                sock.curve_serverkey = keys.server_public
                sock.curve_publickey = keys.public
                sock.curve_secretkey = keys.secret
            sock.connect(endpoint)
        except BaseException:
            self._ctx.destroy(linger=0)
            raise
        self.socket = sock
        self.endpoint = endpoint

    @property
    def transport(self) -> str:
        """``udp`` when the per-tick messages go over the datagram stream, else ``zmq``."""
        return "zmq" if self._udp is None else "udp"

    def send(self, kind: str, body: dict[str, Any]) -> int:
        """Send one message of this session (a per-tick one over the stream when it is
        open); returns its sequence number.

        Raises:
            ArmError: the send queue is full (the server has not read for a long while),
                or the server's datagram port is closed (the server is gone).
        """
        zmq = self._zmq
        self.seq += 1
        self._t_ns = max(self._t_ns, time.monotonic_ns())
        data = encode(kind, self.session, self.seq, self._t_ns, body)
        if self._udp is not None and kind in STREAM_CLIENT_TYPES:
            try:
                self._udp.send(seal(self._udp_key, data))
            except BlockingIOError:
                raise ArmError(f"arm server at {self.endpoint} is not reading (datagram buffer full)") from None
            except OSError as error:
                raise ArmError(f"arm server silent: its datagram port is closed ({error.strerror or error})") from None
            return self.seq
        try:
            self.socket.send(data, self._noblock)
        except zmq.Again:
            raise ArmError(f"arm server at {self.endpoint} is not reading (send queue full)") from None
        return self.seq

    def recv(self, deadline: float) -> dict[str, Any] | None:
        """The next per-tick server message (``state``, ``pong``, ``reject``): from the
        stream when it is open, else from ZeroMQ; waiting until ``deadline``
        (``time.perf_counter``); None when none came.

        Raises:
            ArmError: the message breaks the schema, belongs to another session, or its
                sequence number is not newer than the previous one on its channel.
        """
        if self._udp is not None:
            return self._recv_datagram(deadline)
        return self.recv_control(deadline)

    def _recv_datagram(self, deadline: float) -> dict[str, Any] | None:
        udp = self._udp
        assert udp is not None
        while True:
            try:
                datagram = udp.recv(RECV_BYTES)
                break
            except (BlockingIOError, InterruptedError):
                wait_s = deadline - time.perf_counter()
                if wait_s <= 0.0:
                    return None
                self._udp_poll.poll(math.ceil(wait_s * 1e3))
            except OSError as error:  # ICMP port unreachable for an earlier send
                raise ArmError(f"arm server silent: its datagram port is closed ({error.strerror or error})") from None
        data = unseal(self._udp_key, datagram)
        if data is None:
            raise ArmError("arm server sent a datagram without the session key's tag")
        msg = self._checked(data, STREAM_SERVER_TYPES, self._udp_seq, "datagram")
        self._udp_seq = msg["seq"]
        return msg

    def _checked(self, data: bytes, types: frozenset[str], last_seq: int, channel: str) -> dict[str, Any]:
        """A server message of one of ``types``, of this session (or session-less), newer
        than ``last_seq`` on its ``channel`` (each channel is in order).

        Raises:
            ArmError: it breaks the schema, belongs to another session, or is not newer.
        """
        try:
            msg = decode(data, self.n_joints, types)
        except MessageError as error:
            raise ArmError(f"arm server sent a malformed message: {error}") from None
        if msg["session"] not in (0, self.session) and not (msg["type"] == "welcome" and self.session == 0):
            raise ArmError(f"arm server sent a message of session {msg['session']:x}, ours is {self.session:x}")
        if msg["seq"] <= last_seq:
            raise ArmError(f"arm server {channel} seq {msg['seq']} is not newer than {last_seq}")
        return msg

    def recv_control(self, deadline: float) -> dict[str, Any] | None:
        """The next message on the ZeroMQ connection (the session's own messages, and
        every message without the stream); as :meth:`recv`."""
        zmq = self._zmq
        sock = self.socket
        data = None
        while data is None:
            # A blocking recv bounded by RCVTIMEO (whole ms): one call, the GIL released
            # while it waits. Not waiting is a NOBLOCK recv, so that a drain (deadline 0)
            # and the wait for a reply do not reset the socket option on every message.
            wait_ms = max(0, math.ceil((deadline - time.perf_counter()) * 1e3))
            try:
                if wait_ms == 0:
                    data = sock.recv(self._noblock)
                else:
                    if wait_ms != self._rcvtimeo_ms:
                        sock.setsockopt(zmq.RCVTIMEO, wait_ms)
                        self._rcvtimeo_ms = wait_ms
                    data = sock.recv()
            except zmq.Again:
                if time.perf_counter() >= deadline:
                    return None
        msg = self._checked(data, SERVER_TYPES, self._server_seq, "message")
        self._server_seq = msg["seq"]
        return msg

    def hello(self, mode: str, model: ManipulatorModel, q0_rad: NDArray[np.float64], dt_s: float,
              connect_timeout_s: float) -> dict[str, Any]:
        """Open a session; a busy server is asked again until ``connect_timeout_s``.

        Raises:
            ArmError: refused (the reason in one line), or no answer in time.
        """
        self.n_joints = model.n_joints
        body = {"mode": mode, "model": model.name, "fingerprint": model_fingerprint(model),
                "q0_rad": [float(v) for v in q0_rad], "dt_s": float(dt_s), "base_mass_kg": float(model.base_mass_kg),
                "base_inertia_kg_m2": model.arrays.base_inertia.ravel().tolist()}
        deadline = time.perf_counter() + connect_timeout_s
        while True:
            self.send("hello", body)
            while True:
                msg = self.recv_control(deadline)
                if msg is None:
                    raise ArmError(f"arm server at {self.endpoint} did not answer within {connect_timeout_s:g} s"
                                   f"{self._hint}")
                if msg["type"] in ("welcome", "refused"):
                    break
            if msg["type"] == "welcome":
                self.session = msg["session"]
                if self._want_stream:
                    self._open_stream(deadline)
                return msg
            if not msg["busy"]:
                raise ArmError(f"arm server at {self.endpoint} refused the session: {msg['reason']}")
            if time.perf_counter() + 0.05 > deadline:
                raise ArmError(f"arm server at {self.endpoint} stayed busy for {connect_timeout_s:g} s: "
                               f"{msg['reason']}")
            time.sleep(0.05)  # a busy server: its session ends or times out; ask again

    def _open_stream(self, deadline: float) -> None:
        """Ask for the datagram stream; a server that refuses it, or does not know the
        ``stream`` message (it rejects it as malformed), leaves the session on ZeroMQ, and
        so does a UDP socket this side cannot bind (nothing is asked then)."""
        try:
            udp = datagram_socket(self._host)
        except OSError as error:
            log.info("arm link: no datagram socket on %s (%s); the session stays on ZeroMQ", self._host, error)
            return
        try:
            seq = self.send("stream", {"port": udp.getsockname()[1]})
            while True:
                msg = self.recv_control(deadline)
                if msg is None:
                    raise ArmError(f"arm server at {self.endpoint} did not answer the stream request")
                if msg["type"] in ("refused", "reject"):
                    log.info("arm link: no datagram stream (%s); the session stays on ZeroMQ", msg["reason"])
                    udp.close()
                    return
                if msg["type"] == "stream_open":
                    break
                # a real-time server's states pushed meanwhile: the stream will bring newer ones
            key = msg["key"]  # empty: datagrams without a tag (a server without keys)
            if len(key) not in (0, STREAM_KEY_HEX) or not 0 < msg["port"] < 65536:
                raise ArmError(f"arm server sent a bad stream_open (port {msg['port']}, key of {len(key)} chars)")
            try:
                self._udp_key = bytes.fromhex(key)
            except ValueError:
                raise ArmError("arm server sent a stream key that is not hex") from None
            try:
                udp.connect((self._host, msg["port"]))  # from now on only the server's port reaches it
            except OSError as error:  # the server now streams to us: no way back to ZeroMQ alone
                raise ArmError(f"cannot connect to the arm server's datagram port {msg['port']}: {error}") from None
            while True:  # drop what others sent before the connect
                try:
                    udp.recv(RECV_BYTES)
                except OSError:
                    break
        except BaseException:
            udp.close()
            raise
        log.debug("arm link: session %x streams datagrams (request %d)", self.session, seq)
        self._udp_poll = select.poll()
        self._udp_poll.register(udp.fileno(), select.POLLIN)
        self._udp = udp

    def query(self, timeout_s: float = 1.0) -> dict[str, Any]:
        """The server's ``report`` (works with or without a session)."""
        self.send("status", {})
        deadline = time.perf_counter() + timeout_s
        while True:
            msg = self.recv_control(deadline)
            if msg is None:
                raise ArmError(f"arm server at {self.endpoint} did not answer a status request within {timeout_s:g} s"
                               f"{self._hint}")
            if msg["type"] == "report":
                return msg

    def bye(self, timeout_s: float = BYE_TIMEOUT_S) -> dict[str, Any] | None:
        """End the session; returns the server's final report (None if none came)."""
        if not self.session:
            return None
        try:
            self.send("bye", {})
            deadline = time.perf_counter() + timeout_s
            while (msg := self.recv_control(deadline)) is not None:
                if msg["type"] == "report":
                    return msg
        except ArmError as error:
            log.debug("no clean bye: %s", error)
        finally:
            self.session = 0
            self._close_stream()
        return None

    def _close_stream(self) -> None:
        if self._udp is not None:
            self._udp.close()
            self._udp = None
            self._udp_seq = 0

    def close(self) -> None:
        """Close the sockets (idempotent; no bye: call :meth:`bye` first for a clean end)."""
        if not self._ctx.closed:
            self._ctx.destroy(linger=0)
        self._close_stream()


class RemoteArm:
    """An :class:`robot.arm.ArmBackend` whose arm is behind the link.

    Args:
        model: the arm's model (the server must hold the same: the fingerprints are compared).
        q0_rad: start pose [rad] (the model's when None); the session starts there.
        dt_s: servo period [s].
        address: ``HOST:PORT`` of an arm server; None starts a private loopback server in a
            thread (in-memory CURVE keys) that this backend owns and closes.
        keys_dir: folder with ``client.key_secret`` and ``server.key`` (required for a
            non-loopback address).
        mode: ``lockstep`` or ``realtime``.
        timeout_s: the client watchdog [s] (see :data:`TIMEOUT_S` for the defaults).
        plant_factory: the plant of the private server (with ``address=None`` only).
        connect_timeout_s: how long to wait for a session [s].
        stream: on loopback, send the per-tick messages over the datagram stream when the
            server offers it (:mod:`robot.link.stream`); False keeps them on ZeroMQ.

    Raises:
        ArmError: a refused address, missing keys, no server, a refused session.
    """

    def __init__(self, model: ManipulatorModel, q0_rad: NDArray[np.float64] | None = None, dt_s: float = 1e-3, *,
                 address: str | None = None, keys_dir: str | Path | None = None, mode: str = "lockstep",
                 timeout_s: float | None = None, plant_factory: PlantFactory | None = None,
                 connect_timeout_s: float = CONNECT_TIMEOUT_S, stream: bool = True) -> None:
        if mode not in MODES:
            raise ArmError(f"unknown arm link mode {mode!r}; known: {', '.join(MODES)}")
        if not (dt_s > 0.0 and math.isfinite(dt_s)):
            raise ArmError(f"dt_s must be a positive number of seconds, got {dt_s}")
        n = model.n_joints
        q0 = np.array(model.q0_rad if q0_rad is None else q0_rad, dtype=float)
        if q0.shape != (n,) or not np.all(np.isfinite(q0)):
            raise ArmError(f"q0_rad must be {n} finite joint angles, got {q0.tolist()}")
        self.model = model
        self.mode = mode
        self.dt_s = float(dt_s)
        self.timeout_s = TIMEOUT_S[mode] if timeout_s is None else float(timeout_s)
        self._n = n
        self._arrays = model.arrays
        self._server: LinkServer | None = None
        self._client: LinkClient | None = None
        self._fault: str | None = None
        self._closed = False
        self._command = JointCommand.zeros(n)
        self._command.q_rad[:] = q0
        self._state = ArmState(0.0, np.zeros(n), np.zeros(n), None)
        self._base = BaseState()
        self._measurement = ArmMeasurement(n)
        self._measurement.q_rad = self._state.q_rad
        self._measurement.qd_rad_s = self._state.qd_rad_s
        self._points = np.zeros((n + 2, 3))
        self._step = 0
        self._last_state_rx = 0.0
        self.states_received = 0
        self.states_skipped = 0
        self._stream = stream
        try:
            self._client = self._connect(address, keys_dir, plant_factory)
            welcome = self._client.hello(mode, model, q0, self.dt_s, connect_timeout_s)
            self._check_welcome(welcome)
        except BaseException:
            self.close()
            raise

    def _connect(self, address: str | None, keys_dir: str | Path | None,
                 plant_factory: PlantFactory | None) -> LinkClient:
        if address is None:
            if plant_factory is None:
                raise ArmError("a remote arm without an address needs a plant for its private server")
            server_keys, client_keys = ephemeral_keys()
            self._server = LinkServer(self.model, plant_factory, "tcp://127.0.0.1:*", server_keys).start()
            return LinkClient(self._server.endpoint, client_keys, self._n, stream=self._stream)
        keys = None if keys_dir is None else load_client_keys(keys_dir)
        endpoint, _ = check_address(address, keys is not None, binding=False)
        return LinkClient(endpoint, keys, self._n, stream=self._stream)

    def _check_welcome(self, welcome: dict[str, Any]) -> None:
        if welcome["n_joints"] != self._n or welcome["mode"] != self.mode or welcome["dt_s"] != self.dt_s:
            raise ArmError(f"arm server opened a {welcome['mode']} session with {welcome['n_joints']} joints at "
                           f"dt {welcome['dt_s']} s; asked for {self.mode}, {self._n}, {self.dt_s}")
        self._apply_state(welcome)
        self._last_state_rx = time.perf_counter()

    # ------------------------------------------------------------ ArmBackend
    @property
    def n_joints(self) -> int:
        """Number of joints."""
        return self._n

    @property
    def fault(self) -> str | None:
        """Why the link faulted (latched), or None."""
        return self._fault

    @property
    def session(self) -> int:
        """The session id the server gave (0 once closed)."""
        return 0 if self._client is None else self._client.session

    @property
    def transport(self) -> str:
        """``udp`` when the per-tick messages use the datagram stream, else ``zmq``."""
        return "zmq" if self._client is None else self._client.transport

    def state(self) -> ArmState:
        """The latest state (one instance, refilled): lock-step, the one the last
        ``advance()`` delivered; real time, the newest the server has pushed (taken now,
        without waiting), so a command is computed from, and names, the freshest state.
        A fault found meanwhile is raised by the next ``send()`` / ``advance()``."""
        if self.mode == "realtime" and self._fault is None and self._client is not None:
            try:
                self._take_newest()
            except ArmError as error:
                self._fault = str(error)
        return self._state

    def send(self, command: JointCommand) -> None:
        """Hand over a joint command (lock-step: sent with the next ``advance()``;
        real-time: sent now).

        Raises:
            ArmError: wrong length, a non-finite value, beyond the model's limits (the
                server would refuse it), or the link has faulted.
        """
        command.check(self._n)
        self._check_limits(command)
        self._raise_if_faulted()
        held = self._command
        held.t_s = float(command.t_s)
        held.q_rad[:] = command.q_rad
        held.qd_rad_s[:] = command.qd_rad_s
        held.qdd_rad_s2[:] = command.qdd_rad_s2
        if self.mode == "realtime":
            self._send_command()

    def advance(self) -> None:
        """Let one servo period pass (see the module doc for the two modes).

        Raises:
            ArmError: the server is silent, halted, rejected the command, or faulted before.
        """
        self._raise_if_faulted()
        try:
            if self.mode == "lockstep":
                self._advance_lockstep()
            else:
                self._advance_realtime()
        except ArmError as error:
            self._fault = str(error)
            raise

    def measure(self) -> ArmMeasurement:
        """Read-outs of the state taken last (by ``advance()``, or in real time also by
        ``state()``); one instance, refilled.

        Raises:
            ArmError: the link has faulted.
        """
        self._raise_if_faulted()
        return self._measurement

    def link_positions_m(self) -> NDArray[np.float64]:
        """(n_joints + 2, 3) drawing points from the last state and the model (no round trip)."""
        state = self._state
        base = state.base
        position = np.zeros(3) if base is None else base.position_m
        orientation = _IDENTITY if base is None else base.orientation_xyzw
        a = self._arrays
        kern.link_points(state.q_rad, position, orientation, a.joint_xyz, a.joint_rot, a.joint_axis, a.ee_offset,
                         self._points)
        return self._points.copy()

    def close(self) -> None:
        """End the session (``bye``), close the socket and any private server (idempotent)."""
        if self._closed:
            return
        self._closed = True
        client, self._client = self._client, None
        if client is not None:
            client.bye()
            client.close()
        if self._server is not None:
            self._server.close()
            self._server = None

    def __enter__(self) -> RemoteArm:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------- internals
    def _raise_if_faulted(self) -> None:
        if self._fault is not None:
            raise ArmError(self._fault)
        if self._client is None:
            raise ArmError("the remote arm is closed")

    def _check_limits(self, command: JointCommand) -> None:
        a = self._arrays
        for name, value, low, high in (
            ("q_rad", command.q_rad, a.q_min - POSITION_SLACK_RAD, a.q_max + POSITION_SLACK_RAD),
            ("qd_rad_s", command.qd_rad_s, -a.qd_max * (1.0 + RATE_SLACK), a.qd_max * (1.0 + RATE_SLACK)),
            ("qdd_rad_s2", command.qdd_rad_s2, -a.qdd_max * (1.0 + RATE_SLACK), a.qdd_max * (1.0 + RATE_SLACK)),
        ):
            outside = np.flatnonzero((value < low) | (value > high))
            if outside.size:
                j = int(outside[0])
                raise ArmError(f"joint command {name}[{j}] = {value[j]:.6g} is beyond the limit "
                               f"[{low[j]:.6g}, {high[j]:.6g}] the arm server enforces")

    def _send_command(self) -> int:
        assert self._client is not None
        held = self._command
        return self._client.send("command", {
            "state_seq": self._step, "t_s": held.t_s, "q_rad": held.q_rad.tolist(), "qd_rad_s": held.qd_rad_s.tolist(),
            "qdd_rad_s2": held.qdd_rad_s2.tolist()})

    def _advance_lockstep(self) -> None:
        client = self._client
        assert client is not None
        seq = self._send_command()
        deadline = time.perf_counter() + self.timeout_s
        while True:
            msg = client.recv(deadline)
            if msg is None:
                raise ArmError(f"arm server silent: no state within {self.timeout_s * 1e3:.0f} ms of command {seq}")
            if msg["type"] == "reject" and msg["ref_seq"] == seq:
                raise ArmError(f"arm server rejected the command ({msg['kind']}): {msg['reason']}")
            if msg["type"] == "state" and msg["cmd_seq"] == seq:
                self._apply_state(msg)
                self.states_received += 1
                return
            self._other(msg)

    def _advance_realtime(self) -> None:
        """Take the newest state the server pushed, never waiting: the caller's clock (a
        paced clock, a haptic device's scheduler) keeps its period. Without a new state
        since the last call the state stays (the arm is less than a period further on);
        without one for ``timeout_s`` the server is silent."""
        self._take_newest()
        silence = time.perf_counter() - self._last_state_rx
        if silence > self.timeout_s:
            raise ArmError(f"arm server silent: no new state for {silence * 1e3:.0f} ms "
                           f"(watchdog {self.timeout_s * 1e3:.0f} ms)")

    def _take_newest(self) -> None:
        """Real time: read what has arrived and apply the newest state (no waiting)."""
        client = self._client
        assert client is not None
        newest: dict[str, Any] | None = None
        while (msg := client.recv(0.0)) is not None:
            if msg["type"] == "state":
                self._check_status(msg)
                if newest is not None:
                    self.states_skipped += 1
                newest = msg
                self.states_received += 1
            elif msg["type"] == "reject":
                raise ArmError(f"arm server rejected command {msg['ref_seq']} ({msg['kind']}): {msg['reason']}")
            else:
                self._other(msg)
        if newest is not None:
            self._last_state_rx = time.perf_counter()
            self._apply_state(newest)

    def _other(self, msg: dict[str, Any]) -> None:
        if msg["type"] == "state":
            self._check_status(msg)
        log.debug("arm link: ignored a %s from the server", msg["type"])

    def _check_status(self, msg: dict[str, Any]) -> None:
        if msg["status"] in ("halting", "halted"):
            raise ArmError(f"arm server halted the session: {msg['reason'] or msg['status']}")

    def _apply_state(self, msg: dict[str, Any]) -> None:
        """Copy a ``state`` (or ``welcome``) into the state and measurement buffers."""
        self._check_status(msg)
        nil = [msg[key] is None for key in _BASE_KEYS]
        if any(nil) and not all(nil):
            raise ArmError("arm server sent a partial base state (all four base_* fields or none)")
        st = self._state
        st.t_s = msg["t_s"]
        st.q_rad[:] = msg["q_rad"]
        st.qd_rad_s[:] = msg["qd_rad_s"]
        m = self._measurement
        if all(nil):
            st.base = None
            m.base_angular_velocity_rad_s[:] = 0.0
        else:
            b = self._base
            b.position_m[:] = msg["base_position_m"]
            b.orientation_xyzw[:] = msg["base_orientation_xyzw"]
            b.velocity_m_s[:] = msg["base_velocity_m_s"]
            b.angular_velocity_rad_s[:] = msg["base_angular_velocity_rad_s"]
            st.base = b
            m.base_angular_velocity_rad_s[:] = msg["base_angular_velocity_rad_s"]
        m.t_s = st.t_s
        m.ee_position_m[:] = msg["ee_position_m"]
        m.ee_velocity_m_s[:] = msg["ee_velocity_m_s"]
        m.base_torque_n_m[:] = msg["base_torque_n_m"]
        m.base_attitude_rad[:] = msg["base_attitude_rad"]
        self._step = msg["step"]
