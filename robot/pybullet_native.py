"""The fused tick's PyBullet plant step in one native call (``robot/native/pb_plant.c``).

The plant stage through the pybullet module is five to seven Python calls a tick: the
joint motor command, the step, and an actual-state round trip of the physics server for
each of ``getJointStates``, ``getBasePositionAndOrientation`` and ``getBaseVelocity`` (and
one or two for the debris), each building tuples of Python floats that a compiled kernel
then unboxes. :class:`NativePlant` sends the same commands through PyBullet's own C API
(the functions the pybullet module itself calls, exported by its shared object) in one
call from the fused tick's kernel, and reads each body's state with one request.

The C API needs the module's connection handle, which pybullet keeps in a private table
(``sPhysicsClients1`` in ``pybullet.c``) that it does not export. It is found through the
shared object's own symbol table (:func:`elf_symbols`) and trusted only when

* the module speaks the shared-memory API version whose status codes the step knows,
* every symbol is found and the module's exported functions sit where the table says,
* the handle's object is a ``PhysicsDirect`` (its vtable pointer; DIRECT clients only),
* one actual-state request through the C API reads, bit for bit, what the module's
  ``getJointStates``, ``getBasePositionAndOrientation`` and ``getBaseVelocity`` read.

Otherwise :func:`native_plant` gives the reason and the fused tick keeps the Python
calls; so does ``CAPTURE_TRAINER_NATIVE_PLANT=0`` in the environment (to compare the
two, or to rule the native step out). The commands are those of the pybullet module
(``pybullet.c`` at the 3.2.7 build): velocity control with the motor's target, ``kd`` 1.0
(the module's default) and force limit per joint, set at the joint's ``uIndex``; so a
trial steps the same world on either path (``tests/robot/test_pybullet_native.py``
compares them tick for tick).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
from numpy.typing import NDArray

from capture_trainer.errors import ArmError, PhysicsError
from capture_trainer.native import build_library

SOURCE = Path(__file__).with_name("native") / "pb_plant.c"
SWITCH = "CAPTURE_TRAINER_NATIVE_PLANT"  # "0": keep PyBullet's Python calls
MAX_JOINTS = 16  # CT_MAX_JOINTS
# EnumSharedMemoryServerStatus (SharedMemoryPublic.h) of the shared-memory API version
# below (pybullet.getAPIVersion(); Bullet changes it with the command protocol); the
# actual state's is also checked against the server's answer before a handle is trusted
API_VERSION = 202010061
STATUS_ACTUAL_STATE_COMPLETED = 21
STATUS_STEP_COMPLETED = 26
KD_DEFAULT = 1.0  # setJointMotorControlArray's velocityGains default
# ct_plant_step's return codes
OK, NONFINITE, STEP_FAILED, READ_FAILED = 0, 1, 2, 3
# the debris read of a step: none (no debris, or carried), its pose (coasting: its
# velocities are the initial ones, kept in the buffer), its pose and velocities
DEBRIS_NONE, DEBRIS_POSE, DEBRIS_FULL = 0, 1, 2
# the C API functions ct_pybullet_api holds, in its order
_API = ("b3JointControlCommandInit2", "b3JointControlSetDesiredVelocity", "b3JointControlSetKd",
        "b3JointControlSetMaximumForce", "b3SubmitClientCommandAndWaitStatus", "b3GetStatusType",
        "b3InitStepSimulationCommand", "b3RequestActualStateCommandInit", "b3GetStatusActualState")
_PRIVATE = ("sPhysicsClients1", "_ZTV13PhysicsDirect")
_CLIENT_TABLE_SIZE = 1024  # MAX_PHYSICS_CLIENTS


class _Api(ctypes.Structure):
    _fields_ = [(name, ctypes.c_void_p) for name in _API]


class _Plant(ctypes.Structure):
    _fields_ = [
        ("api", ctypes.c_void_p), ("client", ctypes.c_void_p), ("arm_body", ctypes.c_int64),
        ("n_joints", ctypes.c_int64), ("control_mode", ctypes.c_int64), ("status_step_completed", ctypes.c_int64),
        ("status_state_completed", ctypes.c_int64), ("q_index", ctypes.c_int64 * MAX_JOINTS),
        ("u_index", ctypes.c_int64 * MAX_JOINTS), ("targets", ctypes.c_void_p), ("forces", ctypes.c_void_p),
        ("kd", ctypes.c_double), ("arm_state", ctypes.c_void_p), ("arm_before", ctypes.c_void_p),
        ("debris_body", ctypes.c_int64), ("debris_state", ctypes.c_void_p),
    ]


def elf_symbols(path: str | Path, names: tuple[str, ...]) -> dict[str, int]:
    """The values (addresses relative to the load base) of ``names`` in a 64-bit
    little-endian ELF shared object's symbol tables (``.symtab`` and ``.dynsym``); names
    it does not hold are left out. Reads only the section headers and the symbol
    tables."""
    wanted = {name.encode() for name in names}
    found: dict[str, int] = {}
    section = np.dtype([("name", "<u4"), ("type", "<u4"), ("flags", "<u8"), ("addr", "<u8"), ("offset", "<u8"),
                        ("size", "<u8"), ("link", "<u4"), ("info", "<u4"), ("align", "<u8"), ("entsize", "<u8")])
    symbol = np.dtype([("name", "<u4"), ("info", "u1"), ("other", "u1"), ("shndx", "<u2"), ("value", "<u8"),
                       ("size", "<u8")])
    with open(path, "rb") as handle:

        def read(offset: int, size: int) -> bytes:
            handle.seek(offset)
            return handle.read(size)

        header = read(0, 64)
        if header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:  # ELFCLASS64, ELFDATA2LSB
            return found
        shoff = int.from_bytes(header[0x28:0x30], "little")
        shentsize = int.from_bytes(header[0x3A:0x3C], "little")
        shnum = int.from_bytes(header[0x3C:0x3E], "little")
        if shentsize != section.itemsize:
            return found
        headers = np.frombuffer(read(shoff, shnum * shentsize), dtype=section)
        for table in headers[(headers["type"] == 2) | (headers["type"] == 11)]:  # SHT_SYMTAB, SHT_DYNSYM
            strings = headers[table["link"]]
            text = read(int(strings["offset"]), int(strings["size"]))
            offsets: dict[int, str] = {}
            for encoded in wanted:
                at = text.find(b"\0" + encoded + b"\0")
                if at >= 0:
                    offsets[at + 1] = encoded.decode()
            if not offsets:
                continue
            symbols = np.frombuffer(read(int(table["offset"]), int(table["size"])), dtype=symbol)
            for at, name in offsets.items():
                hits = np.flatnonzero((symbols["name"] == at) & (symbols["shndx"] != 0))
                if hits.size:
                    found.setdefault(name, int(symbols["value"][hits[0]]))
    return found


class _Module:
    """The loaded pybullet module's C API and private client table (one per process)."""

    def __init__(self, pb: ModuleType) -> None:
        path = getattr(pb, "__file__", None)
        if sys.platform != "linux" or not path:
            raise PhysicsError("the native plant step needs pybullet's shared object on Linux")
        version = pb.getAPIVersion()
        if version != API_VERSION:
            raise PhysicsError(f"pybullet's API version is {version}; the native plant step knows {API_VERSION}")
        symbols = elf_symbols(path, _API + _PRIVATE)
        missing = [name for name in _API + _PRIVATE if name not in symbols]
        if missing:
            raise PhysicsError(f"pybullet's shared object lacks {', '.join(missing)}")
        library = ctypes.CDLL(path)  # the module already loaded: the same object
        addresses = [ctypes.cast(getattr(library, name), ctypes.c_void_p).value or 0 for name in _API]
        bases = {address - symbols[name] for name, address in zip(_API, addresses, strict=True)}
        if len(bases) != 1:
            raise PhysicsError("pybullet's exported functions do not sit where its symbol table says")
        base = bases.pop()
        self.api = _Api(*addresses)
        self.clients = base + symbols["sPhysicsClients1"]
        self.direct_vtable = base + symbols["_ZTV13PhysicsDirect"] + 16  # past offset-to-top and typeinfo
        step = build_library(SOURCE, error=PhysicsError)
        self.step_library = ctypes.CDLL(str(step))
        self.step_address = ctypes.cast(self.step_library.ct_plant_step, ctypes.c_void_p).value or 0
        self.read = self.step_library.ct_plant_read
        self.read.argtypes = [ctypes.c_void_p, ctypes.c_int64]
        self.read.restype = ctypes.c_int

    def handle(self, client: int) -> int:
        """The C API's handle of the module's DIRECT client ``client``."""
        if not 0 <= client < _CLIENT_TABLE_SIZE:
            raise PhysicsError(f"client id {client} is outside pybullet's table")
        handle = ctypes.c_void_p.from_address(self.clients + 8 * client).value
        if not handle:
            raise PhysicsError(f"pybullet's client {client} is not connected")
        if ctypes.c_void_p.from_address(handle).value != self.direct_vtable:
            raise PhysicsError(f"pybullet's client {client} is not a DIRECT connection")
        return handle


@functools.cache
def _module(pb: ModuleType) -> _Module | str:
    try:
        return _Module(pb)
    except (PhysicsError, OSError, ValueError) as error:
        return str(error)


class NativePlant:
    """One arm's (and its debris') plant step through the C API: see the module doc.

    Built by :func:`native_plant`. :attr:`step_address` and :attr:`address` are what the
    fused tick's kernel calls (``ct_plant_step(address, debris_mode)``); the arrays it
    fills are the arm's own read-out buffers and the debris' ``debris_state``.

    Args:
        module: the pybullet module's C API.
        pb: the pybullet module.
        client: the arm's DIRECT client id.
        arm_body: the arm's body id.
        n_joints: its joints (indices 0..n-1, each one degree of freedom).
        control_mode: ``pb.VELOCITY_CONTROL``.
        targets: the joint-rate command [rad/s] the step sends (read at each step).
        forces: the velocity motors' force limits [N m].
        arm_state, arm_before: the arm's read-out buffers (``plant_load``'s layout).
    """

    def __init__(self, module: _Module, pb: ModuleType, client: int, arm_body: int, n_joints: int,
                 control_mode: int, targets: NDArray[np.float64], forces: NDArray[np.float64],
                 arm_state: NDArray[np.float64], arm_before: NDArray[np.float64]) -> None:
        if not 0 < n_joints <= MAX_JOINTS:
            raise PhysicsError(f"the native plant step takes 1 to {MAX_JOINTS} joints, not {n_joints}")
        for name, array, size in (("targets", targets, n_joints), ("forces", forces, n_joints),
                                  ("arm_state", arm_state, 2 * n_joints + 13),
                                  ("arm_before", arm_before, 2 * n_joints + 13)):
            if array.dtype != np.float64 or array.shape != (size,) or not array.flags.c_contiguous:
                raise PhysicsError(f"{name} must be a contiguous float64 array of {size}")
        self._module = module
        self._pb = pb
        self._client = client
        self.n_joints = n_joints
        # what the struct points at is held here, for as long as the struct lives
        self._arrays = [targets, forces, arm_state, arm_before]
        self.debris_state = np.zeros(13)
        self.debris_state[6] = 1.0
        #: the debris' centre [m], a view of :attr:`debris_state` (made once, not per tick)
        self.debris_centre_m = self.debris_state[:3]
        plant = _Plant()
        plant.api = ctypes.addressof(module.api)
        plant.client = module.handle(client)
        plant.n_joints = n_joints
        plant.control_mode = control_mode
        plant.status_step_completed = STATUS_STEP_COMPLETED
        plant.status_state_completed = STATUS_ACTUAL_STATE_COMPLETED
        plant.targets = targets.ctypes.data
        plant.forces = forces.ctypes.data
        plant.kd = KD_DEFAULT
        plant.arm_state = arm_state.ctypes.data
        plant.arm_before = arm_before.ctypes.data
        plant.debris_body = -1
        plant.debris_state = self.debris_state.ctypes.data
        self._plant = plant
        self.address = ctypes.addressof(plant)
        self.step_address = module.step_address
        self.targets = targets
        self.bind_arm(arm_body)

    def bind_arm(self, body: int) -> None:
        """Step and read ``body`` (the arm's multibody, after a body swap too); checks that
        its state reads through the C API as through the module."""
        pb, client, n = self._pb, self._client, self.n_joints
        for j in range(n):
            info = pb.getJointInfo(body, j, physicsClientId=client)
            self._plant.q_index[j], self._plant.u_index[j] = int(info[3]), int(info[4])
            if info[3] < 0 or info[4] < 0:
                raise PhysicsError(f"joint {j} of body {body} has no degree of freedom")
        self._plant.arm_body = body
        self.arm_body = body
        self._check()

    def bind_debris(self, body: int | None, velocity_m_s: tuple[float, ...] = (0.0, 0.0, 0.0),
                    spin_rad_s: tuple[float, ...] = (0.0, 0.0, 0.0)) -> None:
        """Read ``body`` (a free debris; None: none) with the arm; ``velocity_m_s`` and
        ``spin_rad_s`` stand for its velocities while it coasts (``DEBRIS_POSE``). Binding
        the body already bound does nothing."""
        bound = -1 if body is None else body
        if bound == self._plant.debris_body:
            return
        self.debris_state[7:10] = velocity_m_s
        self.debris_state[10:13] = spin_rad_s
        self._plant.debris_body = bound
        if body is not None:
            self._check()

    def _check(self) -> None:
        """One read through the C API into scratch buffers must equal the module's reads."""
        pb, client, n = self._pb, self._client, self.n_joints
        plant = _Plant.from_buffer_copy(self._plant)
        scratch = np.zeros((3, 2 * n + 13))
        plant.arm_state = scratch[0].ctypes.data
        plant.arm_before = scratch[1].ctypes.data
        plant.debris_state = scratch[2].ctypes.data
        if self._module.read(ctypes.addressof(plant), DEBRIS_FULL) != OK:
            raise PhysicsError("an actual-state request through pybullet's C API failed")
        body = int(plant.arm_body)
        joints = pb.getJointStates(body, list(range(n)), physicsClientId=client)
        arm_read = np.array_equal(scratch[0], [s[0] for s in joints] + [s[1] for s in joints] + self._base(body))
        debris_read = plant.debris_body < 0 or np.array_equal(scratch[2, :13], self._base(int(plant.debris_body)))
        if not (arm_read and debris_read):
            raise PhysicsError("pybullet's C API reads another state than its module: not the module's client")

    def _base(self, body: int) -> list[float]:
        pb, client = self._pb, self._client
        position, orientation = pb.getBasePositionAndOrientation(body, physicsClientId=client)
        velocity, angular = pb.getBaseVelocity(body, physicsClientId=client)
        return list(position + orientation + velocity + angular)


def native_plant(pb: ModuleType, client: int, arm_body: int, n_joints: int, targets: NDArray[np.float64],
                 forces: NDArray[np.float64], arm_state: NDArray[np.float64],
                 arm_before: NDArray[np.float64]) -> NativePlant | str:
    """A :class:`NativePlant` for the arm, or why there is none (the fused tick then keeps
    PyBullet's Python calls): no symbol table, another pybullet build, not a DIRECT
    client, a read that disagrees with the module's, no C compiler, or turned off
    (``CAPTURE_TRAINER_NATIVE_PLANT=0``)."""
    if os.environ.get(SWITCH, "1") == "0":
        return f"turned off ({SWITCH}=0)"
    module = _module(pb)
    if isinstance(module, str):
        return module
    try:
        return NativePlant(module, pb, client, arm_body, n_joints, int(pb.VELOCITY_CONTROL), targets, forces,
                           arm_state, arm_before)
    except PhysicsError as error:
        return str(error)


def raise_step_error(code: int, targets: NDArray[np.float64]) -> None:
    """The error of ``ct_plant_step``'s return ``code`` (nothing for OK)."""
    if code == NONFINITE:
        raise ArmError(f"joint command holds a non-finite value: {targets.tolist()}")
    if code != OK:
        raise PhysicsError(f"the plant step through pybullet's C API failed (code {code})")
