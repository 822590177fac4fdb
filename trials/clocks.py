"""Clocks that drive the servo tick when the device does not own one.

The tick is one function whatever drives it (docs/architecture.md, "One servo tick"): the
OpenHaptics scheduler calls it from its 1 kHz callback (that backend provides its own
``ServoClock``); :class:`PacedClock` calls it on a real-time 1 kHz schedule for the
simulated and mouse devices when a person watches; :class:`HeadlessClock` calls it as
fast as possible for headless trials and studies. Both record the achieved tick periods.
:data:`CLOCKS` names them (``CLOCKS.get("paced")(period_s)``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from capture_trainer.errors import TrialError
from capture_trainer.registry import Registry
from haptics.device import BatchTick, ServoClock, Tick
from haptics.timing import ServoTiming, frozen_heap

#: The clocks a trial can own, by name: ``CLOCKS.get(name)(period_s)`` builds one. A
#: device with its own scheduler (OpenHaptics) brings its own clock instead.
CLOCKS: Registry[Callable[[float], ServoClock]] = Registry("clock", error=TrialError)


@CLOCKS.register("headless")
@dataclass
class HeadlessClock:
    """Calls the tick back to back, as fast as possible (simulated time only).

    A tick that can run several periods in one call (``haptics.device.BatchTick``) is
    asked for up to ``batch_ticks`` at a time: nothing waits for the wall clock between
    them. Its timing then marks each call, and the periods a call ran as equal ones
    (``ServoTiming.mark_ticks``).

    Attributes:
        timing: wall-clock periods of the ticks, for throughput figures.
    """

    period_s: float = 1e-3
    batch_ticks: int = 1000
    timing: ServoTiming = field(init=False)

    def __post_init__(self) -> None:
        if not (isinstance(self.batch_ticks, int) and self.batch_ticks >= 1):
            raise TrialError(f"batch_ticks must be a positive integer, got {self.batch_ticks!r}")
        self.timing = ServoTiming(expected_period_s=self.period_s)

    def run(self, tick: Tick, max_ticks: int) -> None:
        """Call ``tick`` until it returns False or ``max_ticks`` ticks have run."""
        now = time.perf_counter
        if isinstance(tick, BatchTick) and self.batch_ticks > 1:
            self._run_batches(tick, max_ticks)
            return
        mark = self.timing.mark
        for _ in range(max_ticks):
            mark(now())
            if not tick():
                break

    def _run_batches(self, tick: BatchTick, max_ticks: int) -> None:
        mark_ticks = self.timing.mark_ticks
        now = time.perf_counter
        left, ran, batch = max_ticks, 0, self.batch_ticks
        try:
            while left > 0:
                mark_ticks(now(), ran)
                ran = 0  # marked; a call that raises ran none we could time
                alive, ran = tick.run_ticks(min(batch, left))
                left -= ran
                if not alive or ran == 0:
                    break
        finally:
            self.timing.end_ticks(now(), ran)


@CLOCKS.register("paced")
@dataclass
class PacedClock:
    """Calls the tick on absolute deadlines every ``period_s`` of wall-clock time.

    It sleeps until shortly before each deadline and spins the last ``spin_s`` so that
    the period jitter stays in the tens of microseconds; a late tick is not made up for
    by a burst (the schedule restarts from now when more than ``max_lag_s`` behind), and
    every overrun is counted in :attr:`timing`.
    """

    period_s: float = 1e-3
    spin_s: float = 2e-4
    max_lag_s: float = 5e-3
    timing: ServoTiming = field(init=False)

    def __post_init__(self) -> None:
        self.timing = ServoTiming(expected_period_s=self.period_s)

    def run(self, tick: Tick, max_ticks: int) -> None:
        """Call ``tick`` at 1/period_s Hz until it returns False or after ``max_ticks``."""
        with frozen_heap():
            self._run(tick, max_ticks)

    def _run(self, tick: Tick, max_ticks: int) -> None:
        now = time.perf_counter
        mark = self.timing.mark
        deadline = now()
        for _ in range(max_ticks):
            remaining = deadline - now()
            if remaining > self.spin_s:
                time.sleep(remaining - self.spin_s)
            while now() < deadline:
                pass
            mark(now())
            if not tick():
                break
            deadline += self.period_s
            if now() - deadline > self.max_lag_s:
                deadline = now()
