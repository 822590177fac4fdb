"""Servo timing statistics: tick periods, overruns and the worst tick of a run.

Every trial records how regular its servo loop was: the period
between consecutive ticks, its distribution (mean, median, p99, p99.9, max), the
achieved rate, the overruns (a period longer than 1.5x the expected one) and a
histogram. ``mark`` is called once per tick and only stores a float into a
preallocated array; everything else happens in ``summary`` after the run.

Also what keeps a servo run's Python thread from being held off: ``frozen_heap`` (no
full garbage collection during a run) and ``realtime_loop`` / ``gil_sharer`` (a thread
that takes the GIL during a real-time run works at a real-time priority).
"""

from __future__ import annotations

import gc
import math
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import cast

import numpy as np
from numpy.typing import NDArray

#: A period longer than this multiple of the expected period counts as an overrun.
OVERRUN_FACTOR = 1.5

_frozen_runs = 0
_frozen_lock = threading.Lock()


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Keep the garbage collector's full passes out of a real-time servo run.

    A full (generation 2) collection walks every object the process tracks (tens of
    thousands once numpy, PyBullet and numba are loaded) holding the GIL for 11-12 ms
    (measured in the ``bench device-loop`` process, where it ran while importing): ten
    lost ticks at 1 kHz, should one fall inside a run. The tick allocates few objects
    that live, so that is rare, but nothing in the run prevents it. For the run the heap
    is frozen (``gc.freeze``: ignored by every later collection), so the collector only
    ever looks at what the run itself allocates, in passes well under a millisecond;
    after the run the heap is unfrozen and its garbage collected as usual. Nothing is collected on the way in: a full pass there would
    stall a device's scheduler thread, already calling back, just the same. Nested uses
    freeze once.
    """
    global _frozen_runs
    with _frozen_lock:
        if _frozen_runs == 0:
            gc.freeze()
        _frozen_runs += 1
    try:
        yield
    finally:
        with _frozen_lock:
            _frozen_runs -= 1
            if _frozen_runs == 0:
                gc.unfreeze()


#: SCHED_FIFO priority of a thread inside ``gil_sharer`` during a real-time servo run:
#: the lowest real-time priority, above every ordinary thread and below the servo loop.
GIL_SHARER_PRIORITY = 1

_realtime_loops = 0


@contextmanager
def realtime_loop() -> Iterator[None]:
    """Mark a real-time (SCHED_FIFO) servo run of this process as active (nests).

    The run's thread waits for the GIL whenever another Python thread holds it. An
    ordinary thread that holds it can be preempted by any other process; the servo
    thread then waits, real-time or not, until the scheduler gives that thread the CPU
    again: one time slice, ~4 ms on a busy machine, the force watchdog's whole limit
    (priority inversion; the GIL has no priority inheritance). ``gil_sharer`` lifts such a
    thread above ordinary processes while this is active.
    """
    global _realtime_loops
    with _frozen_lock:
        _realtime_loops += 1
    try:
        yield
    finally:
        with _frozen_lock:
            _realtime_loops -= 1


def realtime_loop_active() -> bool:
    """Whether a ``realtime_loop`` is active in this process."""
    return _realtime_loops > 0


@contextmanager
def gil_sharer() -> Iterator[bool]:
    """Run the calling thread's GIL-holding work without holding up a real-time servo run.

    During a ``realtime_loop`` the calling thread runs SCHED_FIFO at
    ``GIL_SHARER_PRIORITY`` (below the loop: the loop still preempts it, and takes the
    GIL within one switch interval) for the block, so that no ordinary process preempts
    it while the servo thread waits for the GIL it holds; its policy is restored after
    the block. Outside a real-time run, or where real-time scheduling is not allowed,
    nothing changes. For background work that runs during a trial (the trial
    recorder's flushes): short, periodic, never for a thread that runs all the time.

    Yields:
        Whether the thread runs real-time for the block.
    """
    if not realtime_loop_active():
        yield False
        return
    try:
        policy = os.sched_getscheduler(0)
        if policy in (os.SCHED_FIFO, os.SCHED_RR):
            previous = None  # already real-time
        else:
            previous = (policy, os.sched_getparam(0).sched_priority)
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(GIL_SHARER_PRIORITY))
    except (AttributeError, OSError):  # not Linux, or no CAP_SYS_NICE / rtprio limit
        yield False
        return
    try:
        yield True
    finally:
        if previous is not None:
            try:
                os.sched_setscheduler(0, previous[0], os.sched_param(previous[1]))
            except OSError:
                pass


class ServoTiming:
    """Records tick timestamps and summarises the tick periods.

    Args:
        expected_period_s: nominal servo period [s] (1 ms for 1 kHz).
        capacity: number of periods kept for percentiles and the histogram. Longer
            runs keep exact counts, mean, maximum and overruns for the whole run, and
            percentiles over the most recent ``capacity`` periods (a ring buffer).
        histogram_bins: number of equal-width bins from 0 to 4x the expected period;
            one more bin collects everything longer.
    """

    def __init__(
        self,
        expected_period_s: float = 1e-3,
        capacity: int = 600_000,
        histogram_bins: int = 40,
    ) -> None:
        if not (expected_period_s > 0.0 and math.isfinite(expected_period_s)):
            raise ValueError(f"expected_period_s must be positive, got {expected_period_s}")
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        if histogram_bins < 1:
            raise ValueError(f"histogram_bins must be at least 1, got {histogram_bins}")
        self.expected_period_s = float(expected_period_s)
        self.capacity = int(capacity)
        self.histogram_bins = int(histogram_bins)
        self._periods_s: NDArray[np.float64] = np.zeros(self.capacity)
        # mark's store, which every tick pays: a memoryview item is set from a Python
        # float in about half the time of a numpy element
        self._period_slots = cast("memoryview[float]", self._periods_s.data)
        self._overrun_s = OVERRUN_FACTOR * self.expected_period_s
        self.reset()

    def reset(self) -> None:
        """Forget every mark (the buffer is kept)."""
        self._last_t_s = math.nan
        self._first_t_s = math.nan
        self._n_periods = 0
        self._sum_s = 0.0
        self._max_s = 0.0
        self._worst_index = -1
        self._overruns = 0

    @property
    def ticks(self) -> int:
        """Number of ticks marked (periods + 1 once at least one tick was marked)."""
        return 0 if math.isnan(self._first_t_s) else self._n_periods + 1

    def mark(self, t_s: float) -> None:
        """Record that a tick started at ``t_s`` [s] (any monotonic clock).

        Allocation-free; a timestamp that goes backwards counts as a zero period.
        """
        last = self._last_t_s
        self._last_t_s = t_s
        if last != last:  # first tick (NaN check without a call)
            self._first_t_s = t_s
            return
        period = t_s - last
        if period < 0.0:
            period = 0.0
        n = self._n_periods
        self._period_slots[n % self.capacity] = period
        self._n_periods = n + 1
        self._sum_s += period
        if period > self._max_s:
            self._max_s = period
            self._worst_index = n
        if period > self._overrun_s:
            self._overruns += 1

    def mark_ticks(self, t_s: float, ticks: int) -> None:
        """Record that ``ticks`` periods ran back to back since the last mark and the next
        starts at ``t_s`` [s]: ``ticks`` periods of equal length (a headless clock's batch,
        whose periods are not timed one by one); with no mark before or 0 ticks, as
        :meth:`mark`."""
        last = self._last_t_s
        if ticks <= 1 or last != last:
            self.mark(t_s)
            return
        self._equal_periods(max(t_s - last, 0.0) / ticks, ticks)
        self._last_t_s = t_s

    def end_ticks(self, t_s: float, ticks: int) -> None:
        """The last call ran ``ticks`` periods and ended at ``t_s`` [s]: record the starts
        of the ``ticks - 1`` after its first (marked already) at equal periods of
        ``(t_s - last mark) / ticks``, as one period a call would have marked them."""
        last = self._last_t_s
        if ticks <= 1 or last != last:
            return
        period = max(t_s - last, 0.0) / ticks
        self._equal_periods(period, ticks - 1)
        self._last_t_s = last + (ticks - 1) * period

    def _equal_periods(self, period: float, count: int) -> None:
        n, capacity, slots = self._n_periods, self.capacity, self._period_slots
        for i in range(max(n, n + count - capacity), n + count):  # the ring keeps the last capacity
            slots[i % capacity] = period
        self._n_periods = n + count
        self._sum_s += period * count
        if period > self._max_s:
            self._max_s = period
            self._worst_index = n
        if period > self._overrun_s:
            self._overruns += count

    def periods_s(self) -> NDArray[np.float64]:
        """The recorded periods [s], oldest first (a copy; at most ``capacity``)."""
        n = self._n_periods
        if n <= self.capacity:
            return self._periods_s[:n].copy()
        start = n % self.capacity
        return np.concatenate((self._periods_s[start:], self._periods_s[:start]))

    def summary(self) -> dict[str, object]:
        """Plain-data statistics recorded with the trial.

        Returns:
            ``ticks``, ``periods``, ``expected_period_ms``, ``mean_period_ms``,
            ``p50_period_ms``, ``p99_period_ms``, ``p999_period_ms``,
            ``max_period_ms``, ``rate_hz`` (periods / elapsed time),
            ``overruns`` (periods > 1.5x expected), ``overrun_fraction``,
            ``worst_tick`` (index of the tick that ended the longest period, ticks
            counted from 0), ``histogram_edges_ms`` (bins + 1 edges; the last edge is
            the longest period when it exceeds 4x expected) and ``histogram_counts``.
            Statistics are NaN (rate 0) before two ticks were marked.
        """
        n = self._n_periods
        expected_ms = self.expected_period_s * 1e3
        top_ms = 4.0 * expected_ms
        edges = np.linspace(0.0, top_ms, self.histogram_bins + 1)
        out: dict[str, object] = {
            "ticks": self.ticks,
            "periods": n,
            "expected_period_ms": expected_ms,
            "overruns": self._overruns,
            "overrun_fraction": self._overruns / n if n else 0.0,
            "worst_tick": self._worst_index + 1 if n else -1,
        }
        if n == 0:
            nan = math.nan
            out.update(
                mean_period_ms=nan, p50_period_ms=nan, p99_period_ms=nan,
                p999_period_ms=nan, max_period_ms=nan, rate_hz=0.0,
                histogram_edges_ms=[*edges.tolist(), top_ms], histogram_counts=[0] * (self.histogram_bins + 1),
            )
            return out
        periods_ms = self.periods_s() * 1e3
        p50, p99, p999 = np.percentile(periods_ms, [50.0, 99.0, 99.9])
        max_ms = self._max_s * 1e3
        all_edges = np.append(edges, max(max_ms, top_ms) + 1e-9)
        counts, _ = np.histogram(periods_ms, bins=all_edges)
        elapsed = self._last_t_s - self._first_t_s
        out.update(
            mean_period_ms=self._sum_s / n * 1e3,
            p50_period_ms=float(p50),
            p99_period_ms=float(p99),
            p999_period_ms=float(p999),
            max_period_ms=max_ms,
            rate_hz=n / elapsed if elapsed > 0.0 else 0.0,
            histogram_edges_ms=all_edges.tolist(),
            histogram_counts=counts.astype(int).tolist(),
        )
        return out
