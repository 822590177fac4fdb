"""A shared-memory snapshot of the servo loop for a display in another process.

The servo loop (1 kHz) and the display (about 60 Hz) run in different processes so
that drawing never takes the servo thread's GIL. Every few ticks the servo side copies
a handful of numbers into one shared float64 block; the display side copies them out.
A sequence counter (a seqlock) tells a torn read from a clean one: the writer makes the
counter odd, writes, then makes it even; a reader retries when the counter was odd or
changed while it copied. Writing is one slice assignment, allocation-free.

All vectors are task frame and SI unless the field name starts with ``dev_``.
"""

from __future__ import annotations

from dataclasses import dataclass
from multiprocessing import shared_memory

import numpy as np
from numpy.typing import NDArray

from capture_trainer import trial_log

#: Posts of a task's fixtures the snapshot carries (more are not drawn).
MAX_POSTS = 4
#: Scalar and vector fields, in block order; ``links`` (n_joints + 2 points) comes last.
FIELDS: tuple[tuple[str, int], ...] = (
    ("seq", 1),
    ("t_s", 1),
    ("servo_rate_hz", 1),
    ("servo_overruns", 1),
    ("servo_worst_period_ms", 1),
    ("servo_p99_period_ms", 1),
    ("ee_position_m", 3),
    ("ee_velocity_m_s", 3),
    ("target_position_m", 3),
    ("target_velocity_m_s", 3),
    ("command_position_m", 3),
    ("guidance_force_n", 3),
    ("dev_force_calc_n", 3),
    ("dev_force_act_n", 3),
    ("base_torque_n_m", 3),
    ("base_attitude_rad", 3),
    ("distance_m", 1),
    ("flags", 1),  # bit mask of FLAG_BITS
    ("phase", 1),  # PHASES index
    ("reached_at_s", 1),  # NaN until the first reach
    ("first_contact_s", 1),  # NaN until the tool first touches the debris
    ("captured_at_s", 1),  # NaN until the tool closes on the debris
    ("released_at_s", 1),  # NaN until the tool opens again (the task's ``open``)
    ("sigma_ratio", 1),  # the IK's reaction-singularity gauge (the reactionless margin)
    ("ghost_ee_position_m", 3),  # the real end effector as it arrived over a delayed link; NaN without one
    ("virtual_ee_position_m", 3),  # a predicting compensator's virtual end effector; NaN without one
    # after the capture, with a task (trials.behaviours; the trial log's post-capture columns):
    ("post_state_index", 1),  # into the task's states; -1 outside a running machine
    ("post_behaviour_index", 1),  # into trials.behaviours.BEHAVIOURS' names; -1: none
    ("attractor_m", 3),  # the admittance controller's attractor (zero outside a running task)
    ("wrench_force_n", 3),  # the posts' force on the payload
    ("wrench_limit_n", 1),  # the running behaviour's limit on |wrench_force_n|; inf: none (RWE)
    ("post_outcome", 1),  # 0 while no machine ended, else 1 + index in machine.MACHINE_OUTCOMES
    ("pin_m", 3),  # the payload's pin; NaN before the capture or without fixtures
    ("posts_m", 3 * MAX_POSTS),  # the posts, row after row; NaN rows: no post
)
#: The flag of each bit of the "flags" field: the trial log's flags, in their order.
FLAG_BITS = trial_log.FLAGS
PHASES = ("idle", "running", "done", "aborted")


@dataclass(frozen=True)
class SnapshotLayout:
    """Offsets of every field in the shared block for a model with ``n_joints`` joints."""

    n_joints: int

    @property
    def offsets(self) -> dict[str, slice]:
        offsets: dict[str, slice] = {}
        start = 0
        for name, size in FIELDS:
            offsets[name] = slice(start, start + size)
            start += size
        offsets["links"] = slice(start, start + 3 * (self.n_joints + 2))
        return offsets

    @property
    def size(self) -> int:
        stop: int = self.offsets["links"].stop
        return stop


class SharedSnapshot:
    """The shared block; create it on one side, attach by name on the other.

    Args:
        layout: field offsets (both sides must use the same ``n_joints``).
        name: attach to an existing block with this name; None creates a new one.
    """

    def __init__(self, layout: SnapshotLayout, name: str | None = None) -> None:
        self.layout = layout
        nbytes = layout.size * 8
        self._owner = name is None
        self._shm = shared_memory.SharedMemory(name=name, create=self._owner, size=nbytes)
        self.block: NDArray[np.float64] = np.ndarray((layout.size,), np.float64, self._shm.buf)
        if self._owner:
            self.block[:] = 0.0
        #: The writer's staging buffer: fill it, then :meth:`publish`.
        self.staging = np.zeros(layout.size)
        self._read_buffer = np.zeros(layout.size)
        self.offsets = layout.offsets

    @property
    def name(self) -> str:
        return self._shm.name

    def publish(self) -> None:
        """Copy :attr:`staging` into the shared block under the seqlock (writer side)."""
        seq = self.block[0] + 1.0
        self.block[0] = seq  # odd: writing
        self.block[1:] = self.staging[1:]
        self.block[0] = seq + 1.0  # even: consistent

    def read(self, retries: int = 100) -> NDArray[np.float64] | None:
        """A consistent copy of the block (reader side), or None if the writer kept it busy."""
        for _ in range(retries):
            before = self.block[0]
            if before % 2.0 == 1.0:
                continue
            self._read_buffer[:] = self.block
            if self.block[0] == before:
                return self._read_buffer
        return None

    def field(self, values: NDArray[np.float64], name: str) -> NDArray[np.float64]:
        """The view of one field in a block-sized array (staging or a read copy)."""
        return values[self.offsets[name]]

    def close(self) -> None:
        """Detach; the creating side also frees the block."""
        del self.block
        self._shm.close()
        if self._owner:
            self._shm.unlink()
