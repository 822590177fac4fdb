"""The arm backends by name: what a trial's plan may choose to be its arm.

Each factory is ``factory(model, q0_rad=None, dt_s=1e-3, **options) -> ArmBackend`` and
imports its implementation only when called; a backend refuses an option it does not
know (:class:`ArmError`). ``tests/robot/test_arm_contract.py`` runs the arm contract over
every name registered here, so a new backend is tested by registering it.

* ``pybullet``: the simulated plant, in process (no options).
* ``remote``: an arm behind the link (:class:`robot.link.client.RemoteArm`), options
  ``address`` (``HOST:PORT`` of ``capture-trainer arm serve`` or a real arm's server;
  None starts a private loopback server running the ``pybullet`` plant, owned and closed
  by the backend), ``keys_dir``, ``mode`` (``lockstep`` | ``realtime``), ``timeout_s``.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from capture_trainer.errors import ArmError
from capture_trainer.registry import Registry, suggestion
from robot.arm import ArmBackend
from robot.models import ManipulatorModel


class ArmFactory(Protocol):
    """Builds an arm backend for ``model`` at the start pose ``q0_rad`` (the model's own
    when None) with servo period ``dt_s`` [s]; ``options`` are the backend's own."""

    def __call__(self, model: ManipulatorModel, q0_rad: NDArray[np.float64] | None = None,
                 dt_s: float = 1e-3, **options: Any) -> ArmBackend: ...


ARM_BACKENDS: Registry[ArmFactory] = Registry("arm backend")

#: The options of the ``remote`` backend.
REMOTE_OPTIONS = ("address", "keys_dir", "mode", "timeout_s", "stream")


def _refuse_unknown(backend: str, options: dict[str, Any], known: tuple[str, ...]) -> None:
    unknown = sorted(set(options) - set(known))
    if unknown:
        close = suggestion(unknown[0], known)
        hint = f"; did you mean {close!r}?" if close else ";"
        raise ArmError(f"arm backend {backend!r} has no option {unknown[0]!r}{hint} "
                       f"known: {', '.join(known) or '(none)'}")


def _pybullet(model: ManipulatorModel, q0_rad: NDArray[np.float64] | None = None, dt_s: float = 1e-3,
              **options: Any) -> ArmBackend:
    """The simulated free-floating plant (DIRECT, gravity zero, 1 kHz); option ``gui``
    opens PyBullet's own window instead (needs a display)."""
    _refuse_unknown("pybullet", options, ("gui",))
    from robot.pybullet_arm import PyBulletArm

    return PyBulletArm(model, q0_rad=q0_rad, dt_s=dt_s, gui=bool(options.get("gui", False)))


def _remote(model: ManipulatorModel, q0_rad: NDArray[np.float64] | None = None, dt_s: float = 1e-3,
            **options: Any) -> ArmBackend:
    """An arm behind the link; without ``address`` a private loopback server (lock-step
    by default) runs the ``pybullet`` plant."""
    _refuse_unknown("remote", options, REMOTE_OPTIONS)
    from robot.link.client import RemoteArm

    return RemoteArm(model, q0_rad, dt_s, address=options.get("address"), keys_dir=options.get("keys_dir"),
                     mode=options.get("mode", "lockstep"), timeout_s=options.get("timeout_s"), plant_factory=_pybullet,
                     stream=bool(options.get("stream", True)))


ARM_BACKENDS.register("pybullet", _pybullet)
ARM_BACKENDS.register("remote", _remote)
