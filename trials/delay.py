"""Communication delay between the operator's side and the arm's side of a trial.

Real capture is commanded from the ground: ISS-to-ground links run about 0.8 s round
trip, relays 2-8 s (docs/trials.md). A :class:`DelayLine` carries one stream of samples
(a fixed number of floats per servo tick) across such a link: every sample sent at ``t``
arrives at ``t + d`` with ``d = delay + jitter`` (the jitter drawn per sample, seeded,
half-normal with SD ``jitter_s`` so that a sample is never early) or is lost (probability
``loss``); the receiver holds the newest sample that has arrived (a late sample that is
older than one already received is dropped, as a receiver ordering by timestamp would).

Two lines make a trial's link (:class:`DelayedLink`): the **command path** (the slave's
command: position, velocity, acceleration, and the hand's force on the stylus, the master
force of Yang & Konno's mixed command; task frame) and the **state path** (what the
operator's side sees of the arm's side: end effector, debris and the contact force on the
debris, task frame), each with
its own draws. Everything is preallocated; a tick copies a few floats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

#: Random draws per refill of a line's buffer (refilled in place).
_DRAWS = 4096


@dataclass(frozen=True)
class DelayConfig:
    """One-way delay of each path, its jitter and loss (the same for both paths).

    Attributes:
        delay_s: constant one-way delay [s].
        jitter_s: SD of the half-normal extra delay per sample [s].
        loss: probability that a sample is lost, in [0, 1).
    """

    delay_s: float = 0.0
    jitter_s: float = 0.0
    loss: float = 0.0

    def __post_init__(self) -> None:
        for name in ("delay_s", "jitter_s"):
            value = getattr(self, name)
            if not (value >= 0.0 and math.isfinite(value) and value <= 60.0):
                raise ValueError(f"{name} must be within [0, 60] s, got {value}")
        if not 0.0 <= self.loss < 1.0:
            raise ValueError(f"loss must be within [0, 1), got {self.loss}")

    @property
    def active(self) -> bool:
        """Anything to simulate."""
        return self.delay_s > 0.0 or self.jitter_s > 0.0 or self.loss > 0.0


class DelayLine:
    """One path: ``send(t, values)`` then ``receive(t, out)`` once per tick.

    Args:
        width: floats per sample.
        config: the path's delay, jitter and loss.
        dt_s: the tick [s] (the buffer holds ``delay + 6 jitter`` worth of ticks).
        seed: seeds the jitter and loss draws.
    """

    def __init__(self, width: int, config: DelayConfig, dt_s: float, seed: int) -> None:
        self.config = config
        span_s = config.delay_s + 6.0 * config.jitter_s + 2.0 * dt_s
        self.capacity = int(math.ceil(span_s / dt_s)) + 2
        self._values = np.zeros((self.capacity, width))
        self._arrival = np.full(self.capacity, math.inf)
        self._sent = np.full(self.capacity, -math.inf)
        self._head = 0  # next slot to write
        self._rng = np.random.default_rng(seed)
        self._jitter = np.zeros(_DRAWS)
        self._lost = np.zeros(_DRAWS, dtype=bool)
        self._draw = _DRAWS
        self._held_sent_s = -math.inf
        self.dt_s = dt_s
        #: how many slots, from the newest that can have arrived, may still be arriving
        self._window = int(math.ceil(6.0 * config.jitter_s / dt_s)) + 3
        self.received = 0
        self.lost = 0

    def _refill(self) -> None:
        config = self.config
        if config.jitter_s > 0.0:
            self._jitter[:] = np.abs(self._rng.standard_normal(_DRAWS)) * config.jitter_s
        if config.loss > 0.0:
            self._lost[:] = self._rng.random(_DRAWS) < config.loss
        self._draw = 0

    def send(self, t_s: float, values: NDArray[np.float64]) -> None:
        """Queue ``values`` sent at ``t_s`` [s]."""
        if self._draw >= _DRAWS:
            self._refill()
        slot = self._head
        self._head = (slot + 1) % self.capacity
        if self._lost[self._draw]:
            self._arrival[slot] = math.inf
            self.lost += 1
        else:
            self._values[slot] = values
            # a hair early, so that a delay of whole ticks is not lost to rounding
            self._arrival[slot] = t_s + self.config.delay_s + self._jitter[self._draw] - 1e-9
        self._sent[slot] = t_s
        self._draw += 1

    def receive(self, t_s: float, out: NDArray[np.float64]) -> bool:
        """Write the newest sample arrived by ``t_s`` into ``out``; False (``out``
        untouched: the receiver holds what it had) when nothing newer has arrived.

        Samples are sent once per tick, in order: the candidates are the few sent between
        ``t − delay − 6 jitter`` and ``t − delay``, scanned newest first (no allocation).
        """
        if self._head == 0 and self._sent[self.capacity - 1] == -math.inf:
            return False
        newest = (self._head - 1) % self.capacity
        latest_send = t_s - self.config.delay_s
        back = max(int((self._sent[newest] - latest_send) / self.dt_s) - 1, 0)
        window = self._window
        for step in range(back, min(back + window, self.capacity)):
            slot = (newest - step) % self.capacity
            sent = self._sent[slot]
            if sent <= self._held_sent_s:
                return False
            if self._arrival[slot] <= t_s:
                out[:] = self._values[slot]
                self._held_sent_s = float(sent)
                self.received += 1
                return True
        return False

    @property
    def age_s(self) -> float:
        """When the held sample was sent (−inf before the first) [s]."""
        return self._held_sent_s


class DelayedLink:
    """The command path and the state path of one trial.

    Args:
        config: delay, jitter and loss of each path.
        dt_s: the tick [s].
        seed: the trial's seed (the two paths draw from seeds derived from it).
    """

    #: position, velocity, acceleration [m, m/s, m/s²]; the hand's force on the stylus [N]
    #: (the mixed command's ``f_m``, ``trials.behaviours.mixed``)
    COMMAND_WIDTH = 12
    #: end effector position, velocity; debris position, velocity, acceleration; the
    #: contact force on the debris [N] (rendered to the hand with contact feedback)
    STATE_WIDTH = 18

    def __init__(self, config: DelayConfig, dt_s: float, seed: int) -> None:
        self.config = config
        seeds = np.random.SeedSequence(seed).spawn(2)
        self.command = DelayLine(self.COMMAND_WIDTH, config, dt_s, int(seeds[0].generate_state(1)[0]))
        self.state = DelayLine(self.STATE_WIDTH, config, dt_s, int(seeds[1].generate_state(1)[0]))
        self.command_buffer = np.zeros(self.COMMAND_WIDTH)
        self.state_buffer = np.zeros(self.STATE_WIDTH)

    def metadata(self) -> dict[str, float | int]:
        """The link's settings and counts, for the trial log."""
        c = self.config
        return {"delay_s": c.delay_s, "jitter_s": c.jitter_s, "loss": c.loss,
                "command_lost": self.command.lost, "state_lost": self.state.lost}
