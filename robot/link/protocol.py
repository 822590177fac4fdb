"""The messages of the arm link, version 1: schema, encoder and the one validator.

Every message is one ZeroMQ frame holding one msgpack map whose keys are exactly those of
its type (no missing, no extra key). Five header keys are in every message:

* ``v``: the protocol version, the integer :data:`PROTOCOL_VERSION`;
* ``type``: the message type (a string, see :data:`CLIENT_TYPES`, :data:`SERVER_TYPES`);
* ``session``: the session id, an unsigned 64-bit integer the server draws at random when
  it accepts a ``hello`` (0 before a session exists);
* ``seq``: the sender's sequence number, unsigned 64-bit, strictly increasing over the
  messages one side sends in one session (gaps allowed: a gap is a lost message);
* ``t_ns``: the sender's monotonic clock when it sent the message [ns] (never
  decreasing within a session; the two sides' clocks are not compared).

Values have exact msgpack types: integers are integers (a boolean is not), floats are
msgpack floats (an integer is not accepted where a float is expected) and must be
finite, vectors are arrays of floats of a fixed length (``n`` = the arm's joints),
strings are UTF-8 of bounded length, enumerations take only their listed values. A
message longer than :data:`MAX_MESSAGE_BYTES` is refused before it is parsed. The full
description, with units and the state machine, is ``docs/arm-link.md``.
"""

from __future__ import annotations

import hashlib
import math
import threading
from typing import Any

import numpy as np

from robot.models import ManipulatorModel

PROTOCOL_VERSION = 1
#: The largest message either side accepts [bytes] (a 7-joint command is about 300).
MAX_MESSAGE_BYTES = 4096
MAX_TEXT_CHARS = 200
MAX_JOINTS = 64
U64_MAX = 2**64 - 1

MODES = ("lockstep", "realtime")
#: A session's status as the server reports it in every ``state``.
STATUSES = ("ready", "running", "halting", "halted")
#: What the server's ``report`` says it is doing (``idle``: no session).
SERVER_STATUSES = ("idle", *STATUSES)
#: Why the server refused a message; each is counted (``report.rejected``).
REJECT_KINDS = ("unauthenticated", "malformed", "replayed", "stale", "wrong_session", "halted")

CLIENT_TYPES = frozenset({"hello", "command", "ping", "status", "bye", "stream"})
SERVER_TYPES = frozenset({"welcome", "refused", "state", "reject", "pong", "report", "stream_open"})
#: What a client may send over the datagram stream (the per-tick messages), and what the
#: server sends there; everything else goes over ZeroMQ (``robot.link.stream``).
STREAM_CLIENT_TYPES = frozenset({"command", "ping"})
STREAM_SERVER_TYPES = frozenset({"state", "reject", "pong"})
#: Length of a stream key in hex characters (32 bytes, the keyed-BLAKE2b key of the
#: datagrams; a server without CURVE keys sends an empty key: no tag).
STREAM_KEY_HEX = 64

#: The length of a vector field that has one value per joint.
N = -1


class MessageError(Exception):
    """A message that does not follow the schema (the server counts it as ``malformed``).

    Internal to the link: the client turns it into an ArmError, the server into a
    counted rejection; it never reaches a caller of the ArmBackend protocol.
    """


class _Field:
    def check(self, value: Any, n_joints: int, name: str) -> None:
        raise NotImplementedError


class _U64(_Field):
    def check(self, value: Any, n_joints: int, name: str) -> None:
        if type(value) is not int or not 0 <= value <= U64_MAX:
            raise MessageError(f"{name} must be an unsigned 64-bit integer, got {_show(value)}")


class _Bool(_Field):
    def check(self, value: Any, n_joints: int, name: str) -> None:
        if type(value) is not bool:
            raise MessageError(f"{name} must be a boolean, got {_show(value)}")


class _Float(_Field):
    def check(self, value: Any, n_joints: int, name: str) -> None:
        if type(value) is not float or not math.isfinite(value):
            raise MessageError(f"{name} must be a finite float, got {_show(value)}")


class _Text(_Field):
    def __init__(self, choices: tuple[str, ...] = ()) -> None:
        self.choices = choices

    def check(self, value: Any, n_joints: int, name: str) -> None:
        if type(value) is not str or len(value) > MAX_TEXT_CHARS:
            raise MessageError(f"{name} must be a string of at most {MAX_TEXT_CHARS} characters, got {_show(value)}")
        if self.choices and value not in self.choices:
            raise MessageError(f"{name} must be one of {', '.join(self.choices)}, got {_show(value)}")


class _Vector(_Field):
    def __init__(self, length: int, nullable: bool = False) -> None:
        self.length = length
        self.nullable = nullable

    def check(self, value: Any, n_joints: int, name: str) -> None:
        if value is None and self.nullable:
            return
        length = n_joints if self.length == N else self.length
        if type(value) is not list or len(value) != length:
            raise MessageError(f"{name} must be an array of {length} floats, got {_show(value)}")
        for item in value:
            if type(item) is not float or not math.isfinite(item):
                raise MessageError(f"{name} must hold {length} finite floats, got {_show(value)}")


class _Counts(_Field):
    def __init__(self, keys: tuple[str, ...]) -> None:
        self.keys = keys

    def check(self, value: Any, n_joints: int, name: str) -> None:
        if type(value) is not dict or set(value) != set(self.keys):
            raise MessageError(f"{name} must map exactly {', '.join(self.keys)} to counts, got {_show(value)}")
        for key in self.keys:
            _U64().check(value[key], n_joints, f"{name}.{key}")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


U64, BOOL, FLOAT, TEXT = _U64(), _Bool(), _Float(), _Text()

HEADER: dict[str, _Field] = {"v": U64, "type": TEXT, "session": U64, "seq": U64, "t_ns": U64}

#: What the server reports after every plant step: the arm's state and read-outs. Units
#: and frames as in :class:`robot.arm.ArmState` / :class:`robot.arm.ArmMeasurement`;
#: the four ``base_*`` state fields are nil when the arm does not know its base.
STATE_FIELDS: dict[str, _Field] = {
    "step": U64, "cmd_seq": U64, "status": _Text(STATUSES), "reason": TEXT, "t_s": FLOAT,
    "q_rad": _Vector(N), "qd_rad_s": _Vector(N),
    "base_position_m": _Vector(3, True), "base_orientation_xyzw": _Vector(4, True),
    "base_velocity_m_s": _Vector(3, True), "base_angular_velocity_rad_s": _Vector(3, True),
    "ee_position_m": _Vector(3), "ee_velocity_m_s": _Vector(3), "base_torque_n_m": _Vector(3),
    "base_attitude_rad": _Vector(3),
}

#: The body (keys besides the header) of each message type.
BODIES: dict[str, dict[str, _Field]] = {
    # client -> server
    "hello": {"mode": _Text(MODES), "model": TEXT, "fingerprint": TEXT, "q0_rad": _Vector(N), "dt_s": FLOAT,
              "base_mass_kg": FLOAT, "base_inertia_kg_m2": _Vector(9)},
    "command": {"state_seq": U64, "t_s": FLOAT, "q_rad": _Vector(N), "qd_rad_s": _Vector(N),
                "qdd_rad_s2": _Vector(N)},
    "ping": {},
    "status": {},
    "bye": {},
    "stream": {"port": U64},
    # server -> client
    "welcome": {"mode": _Text(MODES), "model": TEXT, "fingerprint": TEXT, "dt_s": FLOAT, "n_joints": U64,
                "q_min_rad": _Vector(N), "q_max_rad": _Vector(N), "qd_max_rad_s": _Vector(N),
                "qdd_max_rad_s2": _Vector(N), "watchdog_s": FLOAT, "max_age_steps": U64, **STATE_FIELDS},
    "refused": {"reason": TEXT, "busy": BOOL},
    "state": STATE_FIELDS,
    "reject": {"ref_seq": U64, "kind": _Text(REJECT_KINDS), "reason": TEXT},
    "pong": {"echo_seq": U64, "echo_t_ns": U64},
    "report": {"status": _Text(SERVER_STATUSES), "mode": TEXT, "model": TEXT, "n_joints": U64, "step": U64,
               "q_rad": _Vector(N), "qd_rad_s": _Vector(N),
               "applied": U64, "sessions": U64, "halts": U64, "gaps": U64, "rejected": _Counts(REJECT_KINDS),
               "last_halt_reason": TEXT, "last_halt_silence_s": FLOAT, "last_halt_ramp_s": FLOAT,
               "watchdog_s": FLOAT, "uptime_s": FLOAT},
    "stream_open": {"port": U64, "key": TEXT},
}

_KEYS: dict[str, frozenset[str]] = {kind: frozenset(HEADER) | frozenset(body) for kind, body in BODIES.items()}


def _fast_check_source(kind: str, body: dict[str, _Field]) -> str:
    """Python source of a straight-line validator for one message type (see :data:`_FAST_CHECKS`)."""
    lines = ["def check(m, n):"]
    for name, spec in {**HEADER, **body}.items():
        lines.append(f"    x = m[{name!r}]")
        if isinstance(spec, _U64):
            lines.append("    if type(x) is not int or not 0 <= x <= U64_MAX: return False")
        elif isinstance(spec, _Bool):
            lines.append("    if type(x) is not bool: return False")
        elif isinstance(spec, _Float):
            lines.append("    if type(x) is not float or not isfinite(x): return False")
        elif isinstance(spec, _Text):
            lines.append(f"    if type(x) is not str or len(x) > {MAX_TEXT_CHARS}: return False")
            if spec.choices:
                lines.append(f"    if x not in {spec.choices!r}: return False")
        elif isinstance(spec, _Vector):
            length = "n" if spec.length == N else str(spec.length)
            guard = "if x is not None:" if spec.nullable else "if True:"
            lines.append(f"    {guard}")
            lines.append(f"        if type(x) is not list or len(x) != {length}: return False")
            lines.append("        for y in x:")
            lines.append("            if type(y) is not float: return False")
            # a finite sum means every item is finite (an inf or nan makes the sum inf or
            # nan; a sum that overflows only sends the message to the slow path)
            lines.append("        if not isfinite(sum(x)): return False")
        elif isinstance(spec, _Counts):
            lines.append(f"    if type(x) is not dict or x.keys() != {set(spec.keys)!r}: return False")
            lines.append("    for y in x.values():")
            lines.append("        if type(y) is not int or not 0 <= y <= U64_MAX: return False")
        else:  # a field kind without a fast check: the field checks decide
            lines.append("    return False")
    lines.append("    return True")
    return "\n".join(lines)


def _compile_fast_checks() -> dict[str, Any]:
    checks: dict[str, Any] = {}
    for kind, body in BODIES.items():
        namespace: dict[str, Any] = {"isfinite": math.isfinite, "U64_MAX": U64_MAX}
        exec(compile(_fast_check_source(kind, body), f"<link check {kind}>", "exec"), namespace)  # noqa: S102
        checks[kind] = namespace["check"]
    return checks


#: Per type, a validator compiled from the schema: True only when every field passes
#: (never accepts what the field checks refuse). On False the field checks run and say
#: which field is wrong; so the fast path changes the speed, never the verdict.
_FAST_CHECKS: dict[str, Any] = _compile_fast_checks()

_msgpack: Any = None
_packers = threading.local()


def _codec() -> Any:
    global _msgpack
    if _msgpack is None:
        import msgpack

        _msgpack = msgpack
    return _msgpack


def encode(kind: str, session: int, seq: int, t_ns: int, body: dict[str, Any]) -> bytes:
    """One message as bytes (no validation: the sender builds it from checked values).

    Args:
        kind: the message type; session, seq, t_ns: the header (see the module doc).
        body: the type's fields, vectors as lists of floats (``ndarray.tolist()``).
    """
    packer = getattr(_packers, "packer", None)
    if packer is None:  # one reusable packer per thread (a server thread and a client may share a process)
        packer = _packers.packer = _codec().Packer(use_bin_type=True)
    message = {"v": PROTOCOL_VERSION, "type": kind, "session": session, "seq": seq, "t_ns": t_ns}
    message.update(body)
    packed: bytes = packer.pack(message)
    return packed


def decode(data: bytes, n_joints: int, accept: frozenset[str]) -> dict[str, Any]:
    """Parse and validate one message against the schema.

    Args:
        data: the frame's bytes.
        n_joints: the length of per-joint vectors.
        accept: the types this side accepts (:data:`CLIENT_TYPES` on the server).

    Returns:
        The message as a dict whose keys are exactly its type's.

    Raises:
        MessageError: oversized, not msgpack, trailing bytes, not a map, wrong version,
            a type not in ``accept``, a missing or extra key, or a value of the wrong type,
            length or range (non-finite floats included). The message says which.
    """
    if len(data) > MAX_MESSAGE_BYTES:
        raise MessageError(f"oversized: {len(data)} bytes > {MAX_MESSAGE_BYTES}")
    try:
        # unpackb bounds every string, array and map by len(data) (<= MAX_MESSAGE_BYTES)
        message = _codec().unpackb(data, raw=False, strict_map_key=True, use_list=True)
    except Exception as error:  # any parse failure of untrusted bytes is a malformed message
        raise MessageError(f"not one msgpack value: {type(error).__name__}") from None
    if type(message) is not dict:
        raise MessageError(f"a message must be a msgpack map, got {type(message).__name__}")
    version = message.get("v")
    if type(version) is not int or version != PROTOCOL_VERSION:
        raise MessageError(f"protocol version must be {PROTOCOL_VERSION}, got {_show(version)}")
    kind = message.get("type")
    if type(kind) is not str or kind not in accept:
        raise MessageError(f"type must be one of {', '.join(sorted(accept))}, got {_show(kind)}")
    keys = _KEYS[kind]
    if kind == "report":  # self-describing: read by clients that do not know the arm yet
        U64.check(message.get("n_joints"), 0, "n_joints")
        n_joints = message["n_joints"]
        if n_joints > MAX_JOINTS:
            raise MessageError(f"n_joints must be at most {MAX_JOINTS}, got {n_joints}")
    if message.keys() != keys:
        missing = sorted(keys - message.keys())
        extra = sorted(map(str, message.keys() - keys))
        raise MessageError(f"{kind}: missing keys {missing}, unexpected keys {extra}")
    if _FAST_CHECKS[kind](message, n_joints):
        return message
    for name, spec in HEADER.items():
        spec.check(message[name], n_joints, name)
    for name, spec in BODIES[kind].items():
        spec.check(message[name], n_joints, name)
    return message


def model_fingerprint(model: ManipulatorModel) -> str:
    """A short hash of everything the plant and the controller take from the model
    (kinematics, masses, inertias, base, limits): both sides must hold the same model."""
    arrays = model.arrays
    digest = hashlib.sha256(f"{model.name}/{model.task_dim}/{model.n_joints}".encode())
    for value in (arrays.joint_xyz, arrays.joint_rot, arrays.joint_axis, arrays.link_mass, arrays.link_com,
                  arrays.link_inertia, arrays.ee_offset, np.array([arrays.base_mass]), arrays.base_inertia,
                  arrays.q_min, arrays.q_max, arrays.qd_max, arrays.qdd_max, np.array(model.mount_rpy_rad)):
        digest.update(np.ascontiguousarray(value, dtype="<f8").tobytes())
    return digest.hexdigest()[:32]
