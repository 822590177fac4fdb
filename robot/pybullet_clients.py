"""The process's PyBullet DIRECT clients, reused from one world to the next.

``pybullet.connect(DIRECT)`` starts an in-process physics server: 17-24 ms on an idle
machine, and the ``disconnect`` that ends it several more. A study worker builds and
closes thousands of trials in one process (one client per trial's arm, one more for a
debris world of its own), so instead of connecting and disconnecting each time a world
takes a client from the pool (:func:`client_pool`) and gives it back when it closes. A client given back
is emptied by ``resetSimulation``, which deletes the dynamics world and creates a new one
as ``connect`` does (every body, constraint, collision shape and user datum gone, body ids
from 0 again, the constraint solver back to the default one, gravity zero, Bullet's
solver defaults); every engine parameter a world needs (step, solver iterations and
residual threshold, sub-steps, solver type) is therefore set by its owner each time it
takes a client, as on a fresh one. A trial run in a reused client gives the same log,
bit for bit, as in a fresh one (``tests/robot/test_pybullet_clients.py``).

GUI clients are never pooled (one GUI per process, owned by whoever opened it). Two
worlds alive at once get two clients; a client disconnected behind the pool's back is
dropped when it is next taken (``isConnected``) or given back (``resetSimulation``
fails). At most :data:`MAX_IDLE` emptied clients are kept; the rest are disconnected,
and so are the idle ones when the process exits. A forked child forgets the parent's
idle clients (their servers are copies it does not own).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from types import ModuleType

from capture_trainer.errors import PhysicsError

log = logging.getLogger(__name__)

#: Emptied clients kept for reuse (a trial needs one, two with a debris world of its own).
MAX_IDLE = 4


class ClientPool:
    """Idle PyBullet DIRECT clients of this process, behind a lock (worlds are built and
    closed from any thread).

    Args:
        pybullet: the imported ``pybullet`` module.
        max_idle: emptied clients kept for reuse; the rest are disconnected.
    """

    def __init__(self, pybullet: ModuleType, max_idle: int = MAX_IDLE) -> None:
        self._pb = pybullet
        self._max_idle = int(max_idle)
        self._idle: list[int] = []
        self._lock = threading.Lock()
        #: Clients connected by this pool and reused, since the process started (tests, benches).
        self.connected = 0
        self.reused = 0

    def acquire(self) -> int:
        """A DIRECT client with an empty world: an idle one if one is still connected,
        else a new connection.

        Raises:
            PhysicsError: PyBullet refused a new connection.
        """
        pb = self._pb
        while True:
            with self._lock:
                if not self._idle:
                    break
                client = self._idle.pop()
            if pb.isConnected(physicsClientId=client):
                self.reused += 1
                return client
            log.debug("idle PyBullet client %s was disconnected; dropped", client)
        client = int(pb.connect(pb.DIRECT))
        if client < 0:
            raise PhysicsError("could not connect to PyBullet")
        self.connected += 1
        return client

    def release(self, client: int) -> None:
        """Give a client back: its world is emptied (``resetSimulation``) and it is kept
        for the next :meth:`acquire`, or disconnected when :data:`MAX_IDLE` are idle. A
        client that is no longer connected is forgotten. The caller must not use it again."""
        pb = self._pb
        try:
            pb.resetSimulation(physicsClientId=client)
        except pb.error:  # disconnected behind our back: nothing to keep
            log.debug("PyBullet client %s was already disconnected", client)
            return
        with self._lock:
            if client not in self._idle and len(self._idle) < self._max_idle:
                self._idle.append(client)
                return
        _disconnect(pb, client)

    def clear(self) -> None:
        """Disconnect every idle client (at exit; tests)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for client in idle:
            _disconnect(self._pb, client)

    def idle(self) -> tuple[int, ...]:
        """The idle clients' ids (tests)."""
        with self._lock:
            return tuple(self._idle)

    def _forget(self) -> None:
        """In a forked child: the idle clients' servers are the parent's, not ours."""
        self._lock = threading.Lock()
        self._idle = []


def _disconnect(pb: ModuleType, client: int) -> None:
    try:
        pb.disconnect(physicsClientId=client)
    except pb.error:  # already disconnected
        log.debug("PyBullet client %s was already disconnected", client)


_pool: ClientPool | None = None
_pool_lock = threading.Lock()


def client_pool(pybullet: ModuleType) -> ClientPool:
    """This process's pool (made on first use, emptied at exit)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            pool = ClientPool(pybullet)
            atexit.register(pool.clear)
            if hasattr(os, "register_at_fork"):
                os.register_at_fork(after_in_child=pool._forget)
            _pool = pool
        return _pool
