"""The datagram stream of the arm link (loopback UDP for the per-tick messages).

An independent client (a raw ZeroMQ DEALER, raw UDP sockets and hand-built msgpack and
BLAKE2b, not the project's client) opens a session and the stream, then sends forged,
replayed, stale, truncated, oversized, mistagged, wrong-source and dropped datagrams:
none may move the arm, the server's counters must equal the corpus' counts by kind, and
the plant must be bit-identical to an in-process plant driven by the legitimate commands
alone. Then: the project's client falls back to ZeroMQ against a server without the
stream (one that refuses it, and one that does not know the message), and a lock-step
arm over the stream is bit-identical to the in-process plant."""

from __future__ import annotations

import hashlib
import hmac
import select
import socket
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
import zmq

from robot.arm import JointCommand
from robot.backends import ARM_BACKENDS
from robot.link.client import RemoteArm
from robot.link.keys import create_keys, load_client_keys, load_server_keys
from robot.link.protocol import CLIENT_TYPES, model_fingerprint
from robot.link.server import LinkServer
from robot.models import MODELS
from robot.pybullet_arm import PyBulletArm

MODEL = MODELS["planar-3r"]
N = MODEL.n_joints
DEADLINE_S = 5.0


def pack(kind: str, session: int, seq: int, body: dict[str, Any], t_ns: int | None = None) -> bytes:
    """A message built by hand (not with the project's encoder)."""
    message = {"v": 1, "type": kind, "session": session, "seq": seq,
               "t_ns": time.monotonic_ns() if t_ns is None else t_ns, **body}
    return msgpack.packb(message, use_bin_type=True)


def tag(key: bytes, message: bytes) -> bytes:
    """The datagram of ``message``: its keyed BLAKE2b-128 tag first (none without a key)."""
    return (hashlib.blake2b(message, key=key, digest_size=16).digest() if key else b"") + message


class Control:
    """The session's ZeroMQ side: one raw DEALER socket."""

    def __init__(self, endpoint: str, keys: Path | None) -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.linger = 0
        if keys is not None:
            client = load_client_keys(keys)
            self.sock.curve_serverkey = client.server_public
            self.sock.curve_publickey = client.public
            self.sock.curve_secretkey = client.secret
        self.sock.connect(endpoint)

    def ask(self, data: bytes, want: tuple[str, ...]) -> dict[str, Any]:
        self.sock.send(data)
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            if self.sock.poll(50):
                msg = msgpack.unpackb(self.sock.recv())
                if msg["type"] in want:
                    return msg
        raise AssertionError(f"no {want} from the server")

    def close(self) -> None:
        self.ctx.destroy(linger=0)


def hello_body(mode: str = "lockstep") -> dict[str, Any]:
    return {"mode": mode, "model": MODEL.name, "fingerprint": model_fingerprint(MODEL), "q0_rad": list(MODEL.q0_rad),
            "dt_s": 1e-3, "base_mass_kg": MODEL.base_mass_kg,
            "base_inertia_kg_m2": MODEL.arrays.base_inertia.ravel().tolist()}


def udp_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    return sock


def recv_datagram(sock: socket.socket, timeout_s: float = DEADLINE_S) -> bytes | None:
    if not select.select([sock], [], [], timeout_s)[0]:
        return None
    return sock.recv(65536)


class StreamSession:
    """The legitimate client of one lock-step session over the stream, built by hand."""

    def __init__(self, server: LinkServer, keys: Path | None) -> None:
        self.control = Control(server.endpoint, keys)
        welcome = self.control.ask(pack("hello", 0, 1, hello_body()), ("welcome", "refused"))
        assert welcome["type"] == "welcome", welcome
        self.id = welcome["session"]
        self.step = welcome["step"]
        self.q = welcome["q_rad"]
        self.udp = udp_socket()
        opened = self.control.ask(pack("stream", self.id, 2, {"port": self.udp.getsockname()[1]}),
                                  ("stream_open", "refused", "reject"))
        assert opened["type"] == "stream_open", opened
        assert len(opened["key"]) == (64 if keys is not None else 0)
        self.key = bytes.fromhex(opened["key"])
        self.server = ("127.0.0.1", opened["port"])
        self.seq = 2
        self.t_ns = time.monotonic_ns()
        self.rng = np.random.default_rng(3)
        self.applied: list[JointCommand] = []
        self.sent: list[bytes] = []
        self.last_state: dict[str, Any] = welcome

    def command(self, skip: int = 0, **overrides: Any) -> tuple[int, bytes, JointCommand]:
        """A well-formed command message (not tagged, not sent)."""
        seq = self.seq + 1 + skip
        self.t_ns = max(self.t_ns + 1, time.monotonic_ns())
        qd = (self.rng.uniform(-0.5, 0.5, N) * MODEL.arrays.qd_max).tolist()
        body = {"state_seq": self.step, "t_s": self.step * 1e-3, "q_rad": list(self.q), "qd_rad_s": qd,
                "qdd_rad_s2": [0.0] * N}
        body.update({k: v for k, v in overrides.items() if k in body})
        session = overrides.get("session", self.id)
        data = pack("command", session, seq, body, self.t_ns)
        return seq, data, JointCommand(body["t_s"], np.array(body["q_rad"]), np.array(qd), np.zeros(N))

    def send(self, data: bytes, tagged: bool = True) -> None:
        self.udp.sendto(tag(self.key, data) if tagged else data, self.server)

    def reply(self) -> dict[str, Any]:
        datagram = recv_datagram(self.udp)
        assert datagram is not None, "no datagram from the server"
        if self.key:
            assert hmac.compare_digest(datagram[:16], hashlib.blake2b(datagram[16:], key=self.key, digest_size=16).digest())
            datagram = datagram[16:]
        return msgpack.unpackb(datagram)

    def legit(self, skip: int = 0) -> None:
        seq, data, cmd = self.command(skip)
        self.send(data)
        reply = self.reply()
        assert reply["type"] == "state" and reply["cmd_seq"] == seq, reply
        self.seq = seq
        self.sent.append(tag(self.key, data))
        self.step = reply["step"]
        self.q = reply["q_rad"]
        self.applied.append(cmd)
        self.last_state = reply

    def close(self) -> None:
        self.udp.close()
        self.control.close()


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("stream") / "keys"
    create_keys(folder)
    return folder


@pytest.fixture(params=["curve", "plaintext"])
def served(request: pytest.FixtureRequest, keys: Path) -> Iterator[tuple[LinkServer, Path | None]]:
    use = keys if request.param == "curve" else None
    server = LinkServer(MODEL, ARM_BACKENDS.get("pybullet"), "tcp://127.0.0.1:*",
                        None if use is None else load_server_keys(use), lockstep_timeout_s=60.0).start()
    yield server, use
    server.close()


def test_no_forged_replayed_stale_truncated_or_wrong_source_datagram_moves_the_arm(served) -> None:
    server, keys = served
    s = StreamSession(server, keys)
    stranger = udp_socket()  # another local socket: not the session's stream peer
    expected: Counter[str] = Counter()

    def refused(data: bytes, kind: str, tagged: bool = True) -> None:
        s.send(data, tagged)
        reply = s.reply()
        assert reply["type"] == "reject" and reply["kind"] == kind, (kind, reply)
        expected[kind] += 1

    def ignored(kind: str, send) -> None:
        """Sent, counted as ``kind``, never answered (nothing comes back to anyone)."""
        before = server.counters.rejected[kind]
        send()
        deadline = time.monotonic() + DEADLINE_S
        while server.counters.rejected[kind] == before:
            assert time.monotonic() < deadline, f"no {kind} counted"
            time.sleep(0.002)
        assert recv_datagram(s.udp, 0.05) is None and recv_datagram(stranger, 0.0) is None
        expected[kind] += 1

    try:
        for _ in range(3):
            s.legit()
        # replayed: the last datagram again, the first one again, a new command under the last seq
        refused(s.sent[-1], "replayed", tagged=False)
        refused(s.sent[0], "replayed", tagged=False)
        refused(s.command(skip=-1)[1], "replayed")
        # stale: computed from the state before the current one
        refused(s.command(state_seq=s.step - 1)[1], "stale")
        # malformed, but from the peer with a good tag: truncated, oversized, out of limits,
        # a session-level type the stream does not carry, not msgpack at all
        seq, good, _ = s.command()
        fields = msgpack.unpackb(good)
        for packet in (good[:-1], good[: len(good) // 2], good + b"\x00", good + b"\x00" * 5000,
                       msgpack.packb({**fields, "pad": "x" * 5000}), b"\xc1",
                       msgpack.packb({**fields, "qd_rad_s": [float("nan"), 0.0, 0.0]}),
                       msgpack.packb({**fields, "q_rad": [float(MODEL.arrays.q_max[0]) + 0.1, 0.0, 0.0]}),
                       pack("bye", s.id, seq, {}), pack("hello", 0, seq, hello_body()),
                       pack("status", s.id, seq, {}), pack("stream", s.id, seq, {"port": 9})):
            refused(packet, "malformed")
        # dropped: three commands never arrive; the next one is still accepted
        s.legit(skip=3)
        # forged from another socket: a copy of the next legitimate datagram (tag and all)
        seq, data, _ = s.command()
        ignored("wrong_session", lambda: stranger.sendto(tag(s.key, data), s.server))
        # ... and a byte-flipped copy of it
        flipped = bytearray(tag(s.key, data))
        flipped[-3] ^= 0x40
        ignored("wrong_session", lambda: stranger.sendto(bytes(flipped), s.server))
        # from the peer, another session id (the tag is right: the validator decides)
        refused(s.command(session=s.id ^ 1)[1], "wrong_session")
        if keys is not None:
            # from the peer's own port, but without the session key's tag: unauthenticated
            ignored("unauthenticated", lambda: s.send(s.command()[1], tagged=False))
            ignored("unauthenticated", lambda: s.udp.sendto(bytes(flipped), s.server))
            ignored("unauthenticated", lambda: s.udp.sendto(tag(b"k" * 32, s.command()[1]), s.server))
            ignored("unauthenticated", lambda: s.udp.sendto(b"\x00" * 10, s.server))
        else:
            # no key, no tag: a forged type from the peer's port is the schema's to refuse
            refused(data.replace(b"command", b"commanD"), "malformed")
        for _ in range(2):
            s.legit()
        s.control.ask(pack("bye", s.id, s.seq + 1, {}), ("report",))
        # after the session: even the former peer's datagrams are nobody's
        ignored("wrong_session", lambda: s.send(s.command(skip=1)[1]))
    finally:
        stranger.close()
        s.close()

    counters = server.counters
    assert counters.rejected == {kind: expected.get(kind, 0) for kind in counters.rejected}
    assert counters.applied == len(s.applied) == 6
    assert counters.gaps == 3
    with PyBulletArm(MODEL) as plant:
        for cmd in s.applied:
            plant.send(cmd)
            plant.advance()
        assert plant.state().q_rad.tolist() == s.last_state["q_rad"]
        assert plant.state().qd_rad_s.tolist() == s.last_state["qd_rad_s"]
        assert plant.measure().ee_position_m.tolist() == s.last_state["ee_position_m"]


def test_a_stream_is_opened_once_per_session_and_needs_a_valid_port(served) -> None:
    server, keys = served
    s = StreamSession(server, keys)
    try:
        again = s.control.ask(pack("stream", s.id, 3, {"port": 9}), ("stream_open", "refused", "reject"))
        assert again["type"] == "refused" and "already open" in again["reason"] and not again["busy"]
        s.seq = 3
        s.legit()  # the first stream still carries the session
        s.control.ask(pack("bye", s.id, s.seq + 1, {}), ("report",))
    finally:
        s.close()
    other = Control(server.endpoint, keys)
    try:
        welcome = other.ask(pack("hello", 0, 1, hello_body()), ("welcome",))
        bad = other.ask(pack("stream", welcome["session"], 2, {"port": 70000}), ("stream_open", "refused"))
        assert bad["type"] == "refused" and "1-65535" in bad["reason"]
    finally:
        other.close()


def drive(arm: Any, steps: int, seed: int) -> list[list[float]]:
    """Random in-limit rate commands, one per step; the joint angles after each step."""
    rng = np.random.default_rng(seed)
    trace = []
    for k in range(steps):
        qd = rng.uniform(-0.8, 0.8, N) * MODEL.arrays.qd_max
        arm.send(JointCommand(k * 1e-3, arm.state().q_rad.copy(), qd, np.zeros(N)))
        arm.advance()
        trace.append([*arm.state().q_rad.tolist(), *arm.measure().ee_position_m.tolist(),
                      *arm.measure().base_torque_n_m.tolist()])
    return trace


@pytest.mark.parametrize("stream", [True, False])
def test_a_lockstep_arm_over_the_stream_is_bit_identical_to_the_in_process_one(stream: bool) -> None:
    with PyBulletArm(MODEL) as plant:
        local = drive(plant, 200, seed=8)
    with RemoteArm(MODEL, plant_factory=ARM_BACKENDS.get("pybullet"), stream=stream) as arm:
        assert arm.transport == ("udp" if stream else "zmq")
        linked = drive(arm, 200, seed=8)
    assert linked == local


class ServerWithoutTheStreamMessage(LinkServer):
    """A server of the protocol before the stream: ``stream`` is an unknown type to it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, stream=False, **kwargs)
        self._client_types = CLIENT_TYPES - {"stream"}


@pytest.mark.parametrize("server_kind", [ServerWithoutTheStreamMessage, LinkServer])
@pytest.mark.parametrize("mode", ["lockstep", "realtime"])
def test_a_client_falls_back_to_zeromq_against_a_server_without_the_stream(server_kind, mode: str) -> None:
    options = {} if server_kind is ServerWithoutTheStreamMessage else {"stream": False}
    with server_kind(MODEL, ARM_BACKENDS.get("pybullet"), "tcp://127.0.0.1:*", **options) as server:
        server.start()
        assert server.stream_address is None
        arm = RemoteArm(MODEL, address=server.endpoint, mode=mode, timeout_s=1.0)
        try:
            assert arm.transport == "zmq"
            with PyBulletArm(MODEL) as plant:
                local = drive(plant, 30, seed=4) if mode == "lockstep" else None
            if mode == "lockstep":
                assert drive(arm, 30, seed=4) == local
            else:
                deadline = time.monotonic() + DEADLINE_S
                while server.counters.applied < 30:  # commands reach the arm over ZeroMQ
                    assert time.monotonic() < deadline
                    arm.send(JointCommand(0.0, arm.state().q_rad.copy(), np.zeros(N), np.zeros(N)))
                    time.sleep(1e-3)
                    arm.advance()
                assert arm.state().t_s > 0.0  # and states come back
        finally:
            arm.close()
        # the old server saw one message it does not know (counted as such); the new one refused politely
        old = server_kind is ServerWithoutTheStreamMessage
        rejected = dict(server.counters.rejected)
        if mode == "realtime":  # a VM stall may age a command past the step limit: the safety rule, not the fallback
            rejected["stale"] = 0
        assert rejected == {**dict.fromkeys(rejected, 0), "malformed": int(old)}


def test_a_server_off_loopback_has_no_stream(keys: Path) -> None:
    """Bound to every interface (with keys, as the policy requires): no UDP socket at all,
    and a client on loopback asking for the stream is refused and stays on ZeroMQ+CURVE."""
    with LinkServer(MODEL, ARM_BACKENDS.get("pybullet"), "tcp://0.0.0.0:*", load_server_keys(keys)) as server:
        server.start()
        assert server.stream_address is None
        port = server.endpoint.rsplit(":", 1)[1]
        with RemoteArm(MODEL, address=f"127.0.0.1:{port}", keys_dir=keys) as arm:
            assert arm.transport == "zmq"
            arm.advance()
        assert server.counters.rejected["malformed"] == 0


def test_a_realtime_session_streams_its_states(keys: Path) -> None:
    with LinkServer(MODEL, ARM_BACKENDS.get("pybullet"), "tcp://127.0.0.1:*", load_server_keys(keys),
                    watchdog_periods=100_000) as server:
        server.start()
        with RemoteArm(MODEL, address=server.endpoint, keys_dir=keys, mode="realtime", timeout_s=1.0) as arm:
            assert arm.transport == "udp"
            rate = np.array([0.3, 0.0, 0.0])
            deadline = time.monotonic() + DEADLINE_S
            while server.counters.applied < 50 or arm.state().qd_rad_s[0] < 0.29:
                assert time.monotonic() < deadline
                arm.send(JointCommand(0.0, arm.state().q_rad.copy(), rate, np.zeros(N)))
                time.sleep(1e-3)
                arm.advance()
            assert arm.states_received > 0 and arm.fault is None
        assert sum(server.counters.rejected.values()) == 0


def test_a_client_that_cannot_bind_a_datagram_socket_stays_on_zeromq(monkeypatch) -> None:
    import robot.link.client

    def no_socket(host: str) -> socket.socket:
        raise OSError(98, "Address already in use")

    monkeypatch.setattr(robot.link.client, "datagram_socket", no_socket)
    with LinkServer(MODEL, ARM_BACKENDS.get("pybullet"), "tcp://127.0.0.1:*") as server:
        server.start()
        with RemoteArm(MODEL, address=server.endpoint) as arm:
            assert arm.transport == "zmq"
            with PyBulletArm(MODEL) as plant:
                assert drive(arm, 20, seed=6) == drive(plant, 20, seed=6)
        assert sum(server.counters.rejected.values()) == 0  # nothing was asked
