"""A fuzz corpus against the arm server: forged, replayed, stale, truncated, oversized,
malformed, unauthenticated and dropped packets, sent by an independent client (raw
ZeroMQ sockets and hand-built msgpack, not the project's client). None may move the
arm: the server's counters must equal the corpus' counts by kind, and the plant's state
must be bit-identical to an in-process plant driven by the legitimate commands only."""

from __future__ import annotations

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
from robot.link.keys import ClientKeys, create_keys, load_client_keys, load_server_keys
from robot.link.protocol import SERVER_TYPES, decode, encode, model_fingerprint
from robot.link.server import LinkServer
from robot.models import MODELS
from robot.pybullet_arm import PyBulletArm

MODEL = MODELS["planar-3r"]
N = MODEL.n_joints
DEADLINE_S = 5.0


class Peer:
    """An independent client: one raw DEALER socket, one connection attempt."""

    def __init__(self, endpoint: str, keys: ClientKeys | None, server_public: bytes | None = None) -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.linger = 0
        self.sock.setsockopt(zmq.RECONNECT_IVL, 60_000)  # a refused handshake is not retried
        if keys is not None:
            self.sock.curve_serverkey = server_public or keys.server_public
            self.sock.curve_publickey = keys.public
            self.sock.curve_secretkey = keys.secret
        self.sock.connect(endpoint)

    def send(self, data: bytes | list[bytes]) -> None:
        if isinstance(data, list):
            self.sock.send_multipart(data)
        else:
            self.sock.send(data)

    def recv(self, skip_states: bool = False) -> dict[str, Any]:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            if self.sock.poll(50):
                msg = decode(self.sock.recv(), N, SERVER_TYPES)
                if not (skip_states and msg["type"] == "state"):
                    return msg
        raise AssertionError("no answer from the server")

    def close(self) -> None:
        self.ctx.destroy(linger=0)


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.002)


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    create_keys(tmp_path / "keys")
    return tmp_path / "keys"


def serve(keys: Path, **options: Any) -> LinkServer:
    return LinkServer(MODEL, ARM_BACKENDS.get("pybullet"), "tcp://127.0.0.1:*", load_server_keys(keys),
                      **options).start()


@pytest.fixture
def server(keys: Path) -> Iterator[LinkServer]:
    srv = serve(keys, lockstep_timeout_s=60.0)  # the test's waits must not halt the session
    yield srv
    srv.close()


def hello(peer: Peer, mode: str = "lockstep") -> dict[str, Any]:
    peer.send(encode("hello", 0, 1, time.monotonic_ns(), {
        "mode": mode, "model": MODEL.name, "fingerprint": model_fingerprint(MODEL), "q0_rad": list(MODEL.q0_rad),
        "dt_s": 1e-3, "base_mass_kg": MODEL.base_mass_kg,
        "base_inertia_kg_m2": MODEL.arrays.base_inertia.ravel().tolist()}))
    welcome = peer.recv()
    assert welcome["type"] == "welcome", welcome
    return welcome


class Session:
    """The legitimate client's side of the session, built by hand."""

    def __init__(self, peer: Peer, welcome: dict[str, Any]) -> None:
        self.peer = peer
        self.id = welcome["session"]
        self.seq = 1
        self.step = welcome["step"]
        self.q = welcome["q_rad"]
        self.t_ns = time.monotonic_ns()
        self.rng = np.random.default_rng(11)
        self.applied: list[JointCommand] = []
        self.sent: list[bytes] = []  # the accepted packets
        self.accepted_t_ns = 0
        self.last_state: dict[str, Any] = welcome

    def command(self, skip: int = 0, **overrides: Any) -> tuple[int, bytes, JointCommand]:
        """A well-formed command (not sent): seq, bytes and what it commands."""
        seq = self.seq + 1 + skip
        self.t_ns = max(self.t_ns + 1, time.monotonic_ns())
        qd = (self.rng.uniform(-0.5, 0.5, N) * MODEL.arrays.qd_max).tolist()
        body = {"state_seq": self.step, "t_s": self.step * 1e-3, "q_rad": list(self.q), "qd_rad_s": qd,
                "qdd_rad_s2": [0.0] * N}
        body.update({k: v for k, v in overrides.items() if k in body})
        header = {"session": self.id, "seq": seq, "t_ns": self.t_ns}
        header.update({k: v for k, v in overrides.items() if k in header})
        data = encode("command", header["session"], header["seq"], header["t_ns"], body)
        cmd = JointCommand(body["t_s"], np.array(body["q_rad"]), np.array(qd), np.zeros(N))
        return seq, data, cmd

    def accepted(self, seq: int, data: bytes, cmd: JointCommand, reply: dict[str, Any]) -> None:
        assert reply["type"] == "state" and reply["cmd_seq"] == seq, reply
        self.seq = seq
        self.sent.append(data)
        self.accepted_t_ns = msgpack.unpackb(data)["t_ns"]
        self.step = reply["step"]
        self.q = reply["q_rad"]
        self.applied.append(cmd)
        self.last_state = reply

    def legit(self, skip: int = 0) -> None:
        seq, data, cmd = self.command(skip)
        self.peer.send(data)
        self.accepted(seq, data, cmd, self.peer.recv())


def malformed_corpus(s: Session) -> list[bytes | list[bytes]]:
    """Packets from the session's own connection that break the schema or the limits."""
    seq, good, _ = s.command()
    fields = msgpack.unpackb(good)

    def edit(**changes: Any) -> bytes:
        message = dict(fields)
        for key, value in changes.items():
            if value is None:
                message.pop(key)
            else:
                message[key] = value
        return msgpack.packb(message)

    q_max = MODEL.arrays.q_max
    return [
        b"\xc1", b"", bytes(range(256)), good[:10], good[: len(good) // 2], good[:-1], good + b"\x00",
        good + b"\x00" * 5000,  # oversized
        edit(pad="x" * 5000),  # oversized
        msgpack.packb([1, 2, 3]), edit(v=2), edit(type="teleport"), edit(type="state"), edit(qd_rad_s=None),
        edit(force_n=[1.0, 0.0, 0.0]), edit(seq=str(seq)), edit(seq=-5), edit(state_seq=True), edit(t_s=1),
        edit(q_rad=[0.1] * (N + 1)), edit(qd_rad_s=[0, 0, 0]), edit(qd_rad_s=[float("nan"), 0.0, 0.0]),
        edit(q_rad=[float("inf"), 0.0, 0.0]),
        edit(q_rad=[float(q_max[0]) + 0.1, *fields["q_rad"][1:]]),  # beyond a joint limit
        edit(qd_rad_s=[1.5 * float(MODEL.arrays.qd_max[0]), 0.0, 0.0]),  # beyond a rate limit
        edit(qdd_rad_s2=[0.0, 0.0, -2.0 * float(MODEL.arrays.qdd_max[2])]),  # beyond an acceleration limit
        edit(state_seq=s.step + 5),  # a state the plant has not reached
        edit(t_ns=s.accepted_t_ns - 1),  # time went backwards
        [good, good],  # two frames
    ]


def test_no_forged_replayed_stale_or_malformed_packet_moves_the_arm(server: LinkServer, keys: Path) -> None:
    client_keys = load_client_keys(keys)
    owner = Peer(server.endpoint, client_keys)
    intruder = Peer(server.endpoint, client_keys)  # holds the keys, not the session
    expected: Counter[str] = Counter()
    s = Session(owner, hello(owner))

    def refused(peer: Peer, data: bytes | list[bytes], kind: str) -> None:
        peer.send(data)
        reply = peer.recv()
        assert reply["type"] == "reject" and reply["kind"] == kind, (kind, reply)
        expected[kind] += 1

    for _ in range(3):
        s.legit()
    # replayed: the last command again, an older one, a new command under the last seq
    refused(owner, s.sent[-1], "replayed")
    refused(owner, s.sent[0], "replayed")
    refused(owner, s.command(skip=-1)[1], "replayed")
    # stale: a new seq, computed from the state before the current one
    refused(owner, s.command(state_seq=s.step - 1)[1], "stale")
    for packet in malformed_corpus(s):
        refused(owner, packet, "malformed")
    # dropped: three commands never arrive; the next one is still accepted
    s.legit(skip=3)
    # forged: a copy of the next legitimate packet from another connection, then the real one
    seq, data, cmd = s.command()
    refused(intruder, data, "wrong_session")
    owner.send(data)
    s.accepted(seq, data, cmd, owner.recv())
    refused(owner, s.command(session=s.id ^ 1)[1], "wrong_session")
    refused(owner, s.command(session=0)[1], "wrong_session")
    refused(intruder, encode("bye", s.id, s.seq + 1, time.monotonic_ns(), {}), "wrong_session")
    intruder.send(encode("hello", 0, 1, time.monotonic_ns(), {
        "mode": "lockstep", "model": MODEL.name, "fingerprint": model_fingerprint(MODEL),
        "q0_rad": list(MODEL.q0_rad), "dt_s": 1e-3, "base_mass_kg": MODEL.base_mass_kg,
        "base_inertia_kg_m2": MODEL.arrays.base_inertia.ravel().tolist()}))
    busy = intruder.recv()
    assert busy["type"] == "refused" and busy["busy"], busy  # no takeover of a live session
    # forged by mutation: 200 byte flips of the next legitimate packet, from the intruder
    rng = np.random.default_rng(5)
    _, template, _ = s.command()
    for _ in range(200):
        packet = bytearray(template)
        packet[rng.integers(len(packet))] ^= int(rng.integers(1, 256))
        intruder.send(bytes(packet))
        reply = intruder.recv()
        assert reply["type"] == "reject" and reply["kind"] in ("malformed", "wrong_session"), reply
        expected[reply["kind"]] += 1
    # unauthenticated: plaintext, an unknown client key, a wrong server key, not ZeroMQ at all
    strangers = [(None, None), (ClientKeys(*zmq.curve_keypair(), client_keys.server_public), None),
                 (client_keys, zmq.curve_keypair()[0])]
    for stranger_keys, server_public in strangers:
        before = server.counters.rejected["unauthenticated"]
        stranger = Peer(server.endpoint, stranger_keys, server_public)
        stranger.send(template)
        wait_for(lambda: server.counters.rejected["unauthenticated"] > before, "an unauthenticated count")
        stranger.close()
        expected["unauthenticated"] += 1
    before = server.counters.rejected["unauthenticated"]
    host, port = server.endpoint.removeprefix("tcp://").rsplit(":", 1)
    with socket.create_connection((host, int(port))) as raw_tcp:
        raw_tcp.sendall(b"GET / HTTP/1.0\r\n\r\n" + template)
        wait_for(lambda: server.counters.rejected["unauthenticated"] > before, "the raw TCP peer counted")
    expected["unauthenticated"] += 1
    for _ in range(2):
        s.legit()
    intruder.close()
    owner.close()

    counters = server.counters
    assert counters.rejected == {kind: expected.get(kind, 0) for kind in counters.rejected}
    assert counters.applied == len(s.applied)
    assert counters.gaps == 3
    # the plant moved exactly as the legitimate commands alone move an in-process plant
    with PyBulletArm(MODEL) as plant:
        for cmd in s.applied:
            plant.send(cmd)
            plant.advance()
        assert plant.state().q_rad.tolist() == s.last_state["q_rad"]
        assert plant.state().qd_rad_s.tolist() == s.last_state["qd_rad_s"]
        assert plant.measure().ee_position_m.tolist() == s.last_state["ee_position_m"]
        assert plant.measure().base_torque_n_m.tolist() == s.last_state["base_torque_n_m"]


def test_realtime_commands_are_checked_the_same_way(keys: Path) -> None:
    srv = serve(keys, watchdog_periods=100_000)  # the test's pauses must not halt the arm
    owner = Peer(srv.endpoint, load_client_keys(keys))
    try:
        s = Session(owner, hello(owner, mode="realtime"))
        seq, data, _ = s.command()
        owner.send(data)
        wait_for(lambda: srv.counters.applied == 1, "the first real-time command applied")
        s.seq = seq
        wait_for(lambda: srv.report()["step"] > 40, "40 real-time steps")
        owner.send(data)
        assert owner.recv(skip_states=True)["kind"] == "replayed"
        owner.send(s.command(state_seq=0)[1])  # computed from a state > 20 periods old
        assert owner.recv(skip_states=True)["kind"] == "stale"
        owner.send(s.command(qd_rad_s=[0.0, float("nan"), 0.0])[1])
        assert owner.recv(skip_states=True)["kind"] == "malformed"
        state = owner.recv()
        assert state["type"] == "state" and state["status"] == "running"
        s.step = state["step"]
        owner.send(s.command()[1])  # fresh: applied
        wait_for(lambda: srv.counters.applied == 2, "a fresh real-time command applied")
        assert srv.counters.rejected == {"unauthenticated": 0, "malformed": 1, "replayed": 1, "stale": 1,
                                         "wrong_session": 0, "halted": 0}
    finally:
        owner.close()
        srv.close()
