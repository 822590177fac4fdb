"""``--view pybullet``: PyBullet's 3-D view of the running attempt, as a kinematic mirror.

Opening PyBullet's GUI on the servo's own physics client cannot hold 1 kHz: every
client call then synchronises with the GUI's render thread (measured here with the
runner's ``gui=True``: 65 Hz at normal priority, 490 Hz with a 14.6 ms p99 period at
real-time priority, and a disconnect that hangs). So the servo keeps its DIRECT client
and this module mirrors the attempt in a separate viewer process with its own GUI
client: the same URDF (:func:`robot.urdf.model_urdf`), posed at about 30 Hz from the
shared snapshot (base centre ``links[0]``, base attitude as a rotation vector from the
identity start attitude, debris position) and the joint angles the servo publishes
(:attr:`app.ui.servo.ServoProcess.joints`). No physics runs here.

The capture tool is drawn at the end-effector point as in the window
(:mod:`app.ui.scene`): the probe tip as a small sphere, the capture envelope as a
translucent sphere, both in the colour of the contact state (``tool``, ``contact``,
``captured``), at the debris sphere's magnification (the debris is drawn at least
:data:`MIN_DEBRIS_RADIUS_M`; the tool's radii are scaled by the same factor, so their
proportions are true).
"""

from __future__ import annotations

import logging
import math
import os
import tempfile
import time
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
from numpy.typing import NDArray

from capture_trainer.errors import CaptureTrainerError

log = logging.getLogger(__name__)

#: Viewer frame rate [Hz].
VIEW_RATE_HZ = 30.0
#: Smallest debris sphere drawn [m] (the paper's debris has a 4.4 mm radius).
MIN_DEBRIS_RADIUS_M = 0.02
#: How far ahead the debris' constant-velocity path is drawn [s].
PATH_HORIZON_S = 3.0
#: Opacity of the capture envelope's sphere.
ENVELOPE_ALPHA = 0.35


def state_rgba(state: str, alpha: float = 1.0) -> list[float]:
    """The window's colour of a tool state (``tool``, ``contact``, ``captured``) as RGBA 0..1."""
    from app.ui.palette import COLOURS

    return [c / 255.0 for c in COLOURS[state]] + [alpha]


def quaternion_xyzw(rotation_vector_rad: NDArray[np.float64]) -> list[float]:
    """Unit quaternion (x, y, z, w) of a rotation vector [rad] (axis times angle)."""
    angle = float(np.linalg.norm(rotation_vector_rad))
    if angle < 1e-12:
        return [0.0, 0.0, 0.0, 1.0]
    axis = np.asarray(rotation_vector_rad, dtype=float) / angle
    s = math.sin(0.5 * angle)
    return [float(axis[0] * s), float(axis[1] * s), float(axis[2] * s), math.cos(0.5 * angle)]


class PoseMirror:
    """A PyBullet body of ``model_name`` and a debris sphere, posed from snapshots.

    Args:
        pb: the ``pybullet`` module.
        client: a connected client id (GUI for the viewer, DIRECT in tests).
        model_name: ``robot.models`` name of the attempt's manipulator.
        target_radius_m: the debris radius [m] (drawn at least :data:`MIN_DEBRIS_RADIUS_M`).
    """

    def __init__(self, pb: Any, client: int, model_name: str, target_radius_m: float) -> None:
        from robot.models import get_model
        from robot.urdf import model_urdf

        self.pb = pb
        self.client = client
        self.model = get_model(model_name)
        fd, path = tempfile.mkstemp(suffix=".urdf", prefix=f"{model_name}-view-")
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(model_urdf(self.model))
            self.body = pb.loadURDF(path, useFixedBase=True, physicsClientId=client)
        finally:
            os.unlink(path)
        shape = pb.createVisualShape(
            pb.GEOM_SPHERE, radius=max(target_radius_m, MIN_DEBRIS_RADIUS_M),
            rgbaColor=[1.0, 0.28, 0.22, 1.0], physicsClientId=client,
        )
        self.debris = pb.createMultiBody(baseMass=0.0, baseVisualShapeIndex=shape,
                                         physicsClientId=client)
        tool = self.model.capture_tool
        #: The magnification of the debris sphere, applied to the tool too.
        self.detail = max(1.0, MIN_DEBRIS_RADIUS_M / target_radius_m) if target_radius_m > 0.0 else 1.0
        self.tip = self._sphere(tool.tip_radius_m * self.detail, state_rgba("tool"))
        self.envelope = self._sphere(tool.envelope_radius_m * self.detail, state_rgba("tool", ENVELOPE_ALPHA))
        self.tool_state = "tool"
        self._path_line = -1

    def _sphere(self, radius_m: float, rgba: list[float]) -> int:
        """A visual-only sphere body (no collision, no mass)."""
        pb = self.pb
        shape = pb.createVisualShape(pb.GEOM_SPHERE, radius=radius_m, rgbaColor=rgba, physicsClientId=self.client)
        body: int = pb.createMultiBody(baseMass=0.0, baseVisualShapeIndex=shape, physicsClientId=self.client)
        return body

    def update(self, frame: Any, joints_rad: NDArray[np.float64] | list[float]) -> None:
        """Pose the arm and the debris as in ``frame`` (a :class:`app.ui.scene.Frame`)."""
        pb, client = self.pb, self.client
        pb.resetBasePositionAndOrientation(
            self.body, [float(v) for v in frame.links_m[0]],
            quaternion_xyzw(frame.base_attitude_rad), physicsClientId=client,
        )
        for j in range(self.model.n_joints):
            pb.resetJointState(self.body, j, float(joints_rad[j]), physicsClientId=client)
        pb.resetBasePositionAndOrientation(
            self.debris, [float(v) for v in frame.target_m], [0.0, 0.0, 0.0, 1.0],
            physicsClientId=client,
        )
        ee = [float(v) for v in frame.ee_m]
        for body in (self.tip, self.envelope):
            pb.resetBasePositionAndOrientation(body, ee, [0.0, 0.0, 0.0, 1.0], physicsClientId=client)
        state = frame.tool_state
        if state != self.tool_state:
            self.tool_state = state
            pb.changeVisualShape(self.tip, -1, rgbaColor=state_rgba(state), physicsClientId=client)
            pb.changeVisualShape(self.envelope, -1, rgbaColor=state_rgba(state, ENVELOPE_ALPHA),
                                 physicsClientId=client)

    def draw_path(self, frame: Any) -> None:
        """The debris' predicted path (a debug line, replaced in place)."""
        end = frame.target_m + frame.target_v_m_s * PATH_HORIZON_S
        self._path_line = self.pb.addUserDebugLine(
            [float(v) for v in frame.target_m], [float(v) for v in end], [0.7, 0.3, 0.3], 2.0,
            replaceItemUniqueId=self._path_line, physicsClientId=self.client,
        )

    def joint_origins_m(self) -> NDArray[np.float64]:
        """(n_joints, 3) world positions of the joint frames [m] (as ``links[1:-1]``)."""
        pb = self.pb
        return np.array([
            pb.getLinkState(self.body, j, computeForwardKinematics=True,
                            physicsClientId=self.client)[4]
            for j in range(self.model.n_joints)
        ])

    def remove(self) -> None:
        self.pb.removeBody(self.body, physicsClientId=self.client)
        self.pb.removeBody(self.debris, physicsClientId=self.client)
        self.pb.removeBody(self.tip, physicsClientId=self.client)
        self.pb.removeBody(self.envelope, physicsClientId=self.client)


def viewer_main(conn: Connection, joints: Any) -> None:
    """The viewer process: a GUI client that mirrors whichever attempt is announced.

    Messages from the window: ``("attempt", started_payload)``, ``("idle", None)``,
    ``("quit", None)``. Sends ``("error", message)`` if the GUI cannot open.
    """
    import pybullet as pb

    from trials.snapshot import SharedSnapshot, SnapshotLayout
    from app.ui.scene import Frame

    client = pb.connect(pb.GUI)
    if client < 0:
        conn.send(("error", "PyBullet could not open its GUI window (is there a display?)"))
        return
    pb.configureDebugVisualizer(pb.COV_ENABLE_GUI, 0, physicsClientId=client)
    mirror: PoseMirror | None = None
    snapshot: SharedSnapshot | None = None
    n_joints = 0
    period = 1.0 / VIEW_RATE_HZ
    frames = 0
    try:
        while pb.isConnected(physicsClientId=client):
            while conn.poll():
                kind, payload = conn.recv()
                if kind == "quit":
                    return
                if snapshot is not None:
                    snapshot.close()
                    snapshot = None
                if kind == "attempt":
                    if mirror is None or mirror.model.name != payload["model"]:
                        if mirror is not None:
                            mirror.remove()
                        mirror = PoseMirror(pb, client, payload["model"], payload["target_radius_m"])
                        _aim_camera(pb, client, payload)
                    n_joints = payload["n_joints"]
                    snapshot = SharedSnapshot(SnapshotLayout(n_joints), name=payload["snapshot"])
            if snapshot is not None and mirror is not None:
                frame = Frame.read(snapshot)
                if frame is not None:
                    mirror.update(frame, joints[:n_joints])
                    if frames % int(VIEW_RATE_HZ / 5) == 0:
                        mirror.draw_path(frame)
                    frames += 1
            time.sleep(period)  # display pacing
    except (EOFError, OSError):
        return
    finally:
        if snapshot is not None:
            snapshot.close()
        if pb.isConnected(physicsClientId=client):
            pb.disconnect(physicsClientId=client)


def _aim_camera(pb: Any, client: int, payload: dict[str, Any]) -> None:
    spatial = not str(payload["model"]).startswith("planar")
    pb.resetDebugVisualizerCamera(
        cameraDistance=2.2, cameraYaw=0.0 if not spatial else 30.0,
        cameraPitch=-89.0 if not spatial else -30.0, cameraTargetPosition=[0.6, 0.0, 0.0],
        physicsClientId=client,
    )


class ViewerProcess:
    """The window's handle on the viewer process (started only with ``--view pybullet``)."""

    def __init__(self, joints: Any) -> None:
        import multiprocessing

        check_gui_display()
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self.process = ctx.Process(target=viewer_main, args=(child, joints),
                                   name="capture-trainer-pybullet-view", daemon=True)
        self.process.start()
        child.close()

    def attach(self, started: dict[str, Any]) -> None:
        """Mirror the attempt the servo announced (its ``started`` message)."""
        self._send("attempt", started)

    def detach(self) -> None:
        self._send("idle", None)

    def _send(self, kind: str, payload: Any) -> None:
        try:
            self._conn.send((kind, payload))
        except (BrokenPipeError, OSError):
            log.warning("the PyBullet view has closed")

    def close(self, timeout_s: float = 5.0) -> None:
        self._send("quit", None)
        self.process.join(timeout_s)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(timeout_s)
        self._conn.close()


def check_gui_display() -> None:
    """Fail with one clear line when PyBullet's GUI cannot open here."""
    import sys

    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        raise CaptureTrainerError(
            "--view pybullet opens PyBullet's OpenGL window and needs a display, but neither "
            "DISPLAY nor WAYLAND_DISPLAY is set; use the default --view window, or run under "
            "a desktop session or xvfb-run"
        )
