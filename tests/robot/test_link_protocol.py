"""The arm link's messages, keys and address policy, without a network."""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import stat

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from capture_trainer.errors import ArmError
from robot.link.keys import (
    KEY_FILES,
    check_address,
    create_keys,
    is_loopback,
    load_client_keys,
    load_server_keys,
)
from robot.link.protocol import (
    _FAST_CHECKS,
    BODIES,
    HEADER,
    CLIENT_TYPES,
    MAX_MESSAGE_BYTES,
    SERVER_TYPES,
    STREAM_CLIENT_TYPES,
    STREAM_SERVER_TYPES,
    MessageError,
    decode,
    encode,
    model_fingerprint,
)
from robot.link.stream import TAG_BYTES, seal, unseal
from robot.models import MODELS

N = 3


def command_body(n: int = N) -> dict:
    return {"state_seq": 4, "t_s": 0.25, "q_rad": [0.1] * n, "qd_rad_s": [0.0] * n, "qdd_rad_s2": [0.0] * n}


def state_body(n: int = N) -> dict:
    return {"step": 5, "cmd_seq": 4, "status": "running", "reason": "", "t_s": 0.005, "q_rad": [0.1] * n,
            "qd_rad_s": [0.2] * n, "base_position_m": [0.0] * 3, "base_orientation_xyzw": [0.0, 0.0, 0.0, 1.0],
            "base_velocity_m_s": [0.0] * 3, "base_angular_velocity_rad_s": None, "ee_position_m": [1.0, 0.5, 0.0],
            "ee_velocity_m_s": [0.0] * 3, "base_torque_n_m": [0.0] * 3, "base_attitude_rad": [0.0] * 3}


def raw(**fields) -> bytes:
    message = {"v": 1, "type": "command", "session": 7, "seq": 9, "t_ns": 123, **command_body()}
    message.update(fields)
    return msgpack.packb({k: v for k, v in message.items() if v is not _DROP}, use_bin_type=True)


_DROP = object()


def test_a_command_round_trips_exactly():
    body = command_body()
    body["q_rad"] = [math.pi, -1e-300, 2.0 / 3.0]
    msg = decode(encode("command", 7, 9, 123, body), N, CLIENT_TYPES)
    assert msg["q_rad"] == body["q_rad"]  # float64 crosses unchanged
    assert (msg["type"], msg["session"], msg["seq"], msg["t_ns"]) == ("command", 7, 9, 123)


def test_a_state_with_an_unknown_base_field_round_trips():
    msg = decode(encode("state", 7, 2, 5, state_body()), N, SERVER_TYPES)
    assert msg["base_angular_velocity_rad_s"] is None and msg["status"] == "running"


@pytest.mark.parametrize(("fields", "says"), [
    ({"v": 2}, "version"),
    ({"v": True}, "version"),
    ({"type": "teleport"}, "type"),
    ({"type": "state"}, "type"),  # a server message sent to the server
    ({"qd_rad_s": _DROP}, "missing"),
    ({"force_n": [0.0]}, "unexpected"),
    ({"seq": "9"}, "seq"),
    ({"seq": -1}, "seq"),
    ({"seq": True}, "seq"),
    ({"session": 1.0}, "session"),
    ({"state_seq": None}, "state_seq"),
    ({"t_s": 1}, "t_s"),  # an integer where a float belongs
    ({"t_s": float("nan")}, "t_s"),
    ({"q_rad": [0.1] * (N + 1)}, "q_rad"),
    ({"q_rad": [0.1] * (N - 1)}, "q_rad"),
    ({"q_rad": "0.1 0.1 0.1"}, "q_rad"),
    ({"qd_rad_s": [0, 0, 0]}, "qd_rad_s"),
    ({"qd_rad_s": [0.0, float("inf"), 0.0]}, "qd_rad_s"),
    ({"qdd_rad_s2": [0.0, float("nan"), 0.0]}, "qdd_rad_s2"),
    ({"qdd_rad_s2": {"0": 0.0}}, "qdd_rad_s2"),
])
def test_every_schema_violation_is_refused(fields, says):
    with pytest.raises(MessageError, match=says):
        decode(raw(**fields), N, CLIENT_TYPES)


def test_truncated_trailing_oversized_and_non_map_messages_are_refused():
    data = encode("command", 7, 9, 123, command_body())
    for cut in range(len(data)):
        with pytest.raises(MessageError):
            decode(data[:cut], N, CLIENT_TYPES)
    for bad in (data + b"\x00", msgpack.packb([1, 2, 3]), b"\xc1", b"", msgpack.packb({1: 2}),
                encode("command", 7, 9, 123, {**command_body(), "pad": "x" * MAX_MESSAGE_BYTES})):
        with pytest.raises(MessageError):
            decode(bad, N, CLIENT_TYPES)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_arbitrary_bytes_raise_only_message_errors(data):
    try:
        decode(data, N, CLIENT_TYPES)
    except MessageError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_flipped_byte_never_gives_an_unchecked_message(data):
    """A mutated command is refused, or is again a command that passes every check."""
    packet = bytearray(encode("command", 7, 9, 123, command_body()))
    index = data.draw(st.integers(0, len(packet) - 1))
    packet[index] = data.draw(st.integers(0, 255))
    try:
        msg = decode(bytes(packet), N, CLIENT_TYPES)
    except MessageError:
        return
    assert set(msg) == {"v", "type", "session", "seq", "t_ns", *BODIES["command"]}
    assert all(math.isfinite(v) for key in ("q_rad", "qd_rad_s", "qdd_rad_s2") for v in msg[key])


_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 2**64 + 3), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3), st.sampled_from(["running", "halted", "lockstep", "x" * 201]),
    st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64), st.integers(0, 2), st.none()),
             max_size=10),
    st.just([1e308, 1e308, 1e308]), st.just([float("inf"), float("-inf"), 0.0]),
    st.dictionaries(st.sampled_from(["malformed", "stale", "other"]), st.integers(-1, 3), max_size=3))


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(sorted(BODIES)), st.data())
def test_the_compiled_checks_never_accept_what_the_field_checks_refuse(kind, data):
    """The fast path of decode() is an accelerator only: whenever it accepts a message,
    every field check passes too (so a refusal and its reason come from the field checks)."""
    message = {"v": 1, "type": kind, "session": 7, "seq": 9, "t_ns": 123}
    for name, spec in BODIES[kind].items():
        length = N if getattr(spec, "length", 0) == -1 else getattr(spec, "length", 0)
        message[name] = [0.5] * length if hasattr(spec, "length") else 0
    for name in data.draw(st.lists(st.sampled_from(sorted(set(message) - {"v", "type"})), min_size=1, max_size=3, unique=True)):
        message[name] = data.draw(_VALUES)
    fast = _FAST_CHECKS[kind](message, N)
    try:
        for name, spec in {**HEADER, **BODIES[kind]}.items():
            spec.check(message[name], N, name)
        slow = True
    except MessageError:
        slow = False
    assert slow or not fast
    if fast:
        assert decode(msgpack.packb(message, use_bin_type=True), N, frozenset({kind})) == message


def test_the_compiled_checks_accept_every_valid_message():
    assert _FAST_CHECKS["command"](msgpack.unpackb(encode("command", 7, 9, 123, command_body())), N)
    assert _FAST_CHECKS["state"](msgpack.unpackb(encode("state", 7, 9, 123, state_body())), N)


def test_the_stream_messages_round_trip_and_are_checked():
    assert decode(encode("stream", 7, 2, 5, {"port": 40000}), N, CLIENT_TYPES)["port"] == 40000
    opened = decode(encode("stream_open", 7, 3, 6, {"port": 41000, "key": "ab" * 32}), N, SERVER_TYPES)
    assert (opened["port"], opened["key"]) == (41000, "ab" * 32)
    for body in ({"port": -1}, {"port": 1.5}, {}, {"port": 1, "key": ""}):
        with pytest.raises(MessageError):
            decode(msgpack.packb({"v": 1, "type": "stream", "session": 7, "seq": 2, "t_ns": 5, **body}), N,
                   CLIENT_TYPES)
    # the stream carries only the per-tick messages
    assert STREAM_CLIENT_TYPES == {"command", "ping"} and STREAM_SERVER_TYPES == {"state", "reject", "pong"}
    with pytest.raises(MessageError, match="type"):
        decode(encode("bye", 7, 2, 5, {}), N, STREAM_CLIENT_TYPES)


def test_a_datagram_tag_is_keyed_blake2b_and_any_change_breaks_it():
    key = bytes(range(32))
    message = encode("command", 7, 9, 123, command_body())
    datagram = seal(key, message)
    # RFC 7693's keyed mode with a 16-byte digest (hashlib's BLAKE2b), then the message
    assert TAG_BYTES == 16 and datagram == hashlib.blake2b(message, key=key, digest_size=16).digest() + message
    # another MAC of the same key is not accepted (the old HMAC-SHA256 tag, for one)
    assert unseal(key, hmac.new(key, message, hashlib.sha256).digest()[:16] + message) is None
    assert unseal(key, datagram) == message
    for i in range(len(datagram)):
        forged = bytearray(datagram)
        forged[i] ^= 0x01
        assert unseal(key, bytes(forged)) is None
    assert unseal(key, datagram[:-1]) is None and unseal(key, datagram[:TAG_BYTES]) is None
    assert unseal(bytes(32), datagram) is None  # another session's key
    assert seal(b"", message) == message and unseal(b"", message) == message  # no keys: no tag


def test_fingerprints_tell_models_and_bases_apart():
    planar, spatial = MODELS["planar-3r"], MODELS["spatial-7dof"]
    assert model_fingerprint(planar) == model_fingerprint(MODELS["planar-3r"])
    assert model_fingerprint(planar) != model_fingerprint(spatial)
    assert model_fingerprint(planar) != model_fingerprint(planar.with_base(81.0, planar.base_inertia_kg_m2))


# ------------------------------------------------------------------------- keys
def test_keys_are_owner_only_and_not_overwritten(tmp_path):
    folder = tmp_path / "keys"
    paths = create_keys(folder)
    assert sorted(p.name for p in paths) == sorted(KEY_FILES)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in paths)
    with pytest.raises(ArmError, match="--force"):
        create_keys(folder)
    server, client = load_server_keys(folder), load_client_keys(folder)
    assert client.server_public == server.public and server.authorised == {client.public}
    old = server.secret
    create_keys(folder, force=True)
    assert load_server_keys(folder).secret != old


def test_a_secret_others_can_read_is_refused(tmp_path):
    create_keys(tmp_path)
    os.chmod(tmp_path / "client.key_secret", 0o644)
    with pytest.raises(ArmError, match="readable by others"):
        load_client_keys(tmp_path)
    (tmp_path / "server.key_secret").unlink()
    with pytest.raises(ArmError, match="missing"):
        load_server_keys(tmp_path)


# --------------------------------------------------------------------- addresses
@pytest.mark.parametrize("address", ["127.0.0.1:5590", "tcp://127.0.0.1:5590", "localhost:5590", "[::1]:5590",
                                     "tcp://127.3.2.1:1"])
def test_loopback_needs_no_keys(address):
    endpoint, host = check_address(address, have_keys=False, binding=False)
    assert endpoint.startswith("tcp://") and is_loopback(host)


@pytest.mark.parametrize("address", ["0.0.0.0:5590", "tcp://*:5590", "10.0.0.7:5590", "arm.lab:5590",
                                     "tcp://[::]:5590", "192.168.1.2:*"])
@pytest.mark.parametrize("binding", [True, False])
def test_off_loopback_without_keys_is_refused_in_one_line(address, binding):
    if address.endswith(":*") and not binding:
        return
    with pytest.raises(ArmError) as info:
        check_address(address, have_keys=False, binding=binding)
    assert "non-loopback" in str(info.value) and "\n" not in str(info.value)
    check_address(address, have_keys=True, binding=binding)  # with keys it is allowed


@pytest.mark.parametrize("address", ["ipc:///tmp/arm", "127.0.0.1", "127.0.0.1:99999", "127.0.0.1:x", ":5590"])
def test_malformed_addresses_are_refused(address):
    with pytest.raises(ArmError):
        check_address(address, have_keys=True, binding=True)


def test_the_backend_and_the_server_refuse_before_touching_the_network(tmp_path):
    from robot.backends import ARM_BACKENDS
    from robot.link.server import LinkServer

    model = MODELS["planar-3r"]
    with pytest.raises(ArmError, match="non-loopback"):
        ARM_BACKENDS.get("remote")(model, address="10.1.2.3:5590")
    with pytest.raises(ArmError, match="non-loopback"):
        LinkServer(model, ARM_BACKENDS.get("pybullet"), "tcp://0.0.0.0:*")
    with pytest.raises(ArmError, match="did you mean 'address'"):
        ARM_BACKENDS.get("remote")(model, adress="127.0.0.1:5590")
    with pytest.raises(ArmError, match="no option"):
        ARM_BACKENDS.get("pybullet")(model, address="127.0.0.1:5590")
    with pytest.raises(ArmError, match="mode"):
        ARM_BACKENDS.get("remote")(model, mode="fast")
