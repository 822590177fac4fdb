"""When the next command of a periodic client should arrive: the server's busy-poll window.

A server that sleeps in ``select()`` between two commands pays a thread wake-up (and, in
a virtual machine, a vCPU wake-up) on every command: on a 2-vCPU VM that was the largest
part of the link's round trip. Spinning all the time would hold a CPU. A client of the
link sends at a fixed rate (1 kHz), so the server can sleep until just before the next
command is due and spin only around that moment (:meth:`ArrivalForecast.window`).

The forecast uses the client's own send times (``t_ns``, its monotonic clock, see
``docs/arm-link.md``) for the period, so the period is exact even when the server woke
late, and the least observed delay ``arrival - t_ns`` (over a sliding window) to place
the next send on the server's clock: on loopback both clocks are the same and that delay
is the transit time; across machines it also holds the clocks' offset, which is
constant. The forecast only moves the moment the server starts to spin: nothing else
depends on it (no message is accepted or refused because of it).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Commands per bucket of the sliding minimum of the delay (two buckets are kept).
DELAY_BUCKET = 256
#: A send interval this far from the period estimate (relative) is an outlier (a late tick).
OUTLIER = 0.25
#: Outliers in a row after which the period estimate restarts from the last interval.
RESEED_AFTER = 8
#: The period estimate's smoothing: each interval moves it by this fraction of the error.
GAIN = 0.125
#: Periods the forecast accepts [s]; a slower or irregular client gets no window.
PERIOD_RANGE_S = (1e-4, 0.02)


@dataclass(frozen=True)
class SpinWindow:
    """How long the server spins around a command's expected arrival [s]: ``lead_s``
    before it and ``lag_s`` after; never more than ``max_duty`` of a period."""

    lead_s: float = 2.0e-4
    lag_s: float = 1.0e-4
    max_duty: float = 0.5

    @property
    def span_s(self) -> float:
        """The whole window [s]."""
        return self.lead_s + self.lag_s


class ArrivalForecast:
    """Forecast of a periodic sender's next message on the receiver's clock.

    Call :meth:`note` with each periodic message (its sender's ``t_ns`` and the time it
    was received, both in nanoseconds), then :meth:`window` for where to spin.
    """

    def __init__(self, spin: SpinWindow) -> None:
        self.spin = spin
        self.period_ns = 0.0
        self.last_sent_ns = 0
        self._outliers = 0
        self._delay_ns: int | None = None  # least delay over this bucket and the one before
        self._bucket_min: int | None = None
        self._bucket_count = 0

    @property
    def delay_ns(self) -> int | None:
        """The least ``received - sent`` seen lately [ns] (None before the first note)."""
        return self._delay_ns

    def note(self, sent_ns: int, received_ns: int) -> None:
        """One periodic message: sent at ``sent_ns`` (sender's clock), received at
        ``received_ns`` (this clock)."""
        if self.last_sent_ns:
            interval = sent_ns - self.last_sent_ns
            period = self.period_ns
            if period == 0.0 or abs(interval - period) <= OUTLIER * period:
                self.period_ns = float(interval) if period == 0.0 else period + GAIN * (interval - period)
                self._outliers = 0
            else:
                self._outliers += 1
                if self._outliers >= RESEED_AFTER:
                    self.period_ns = float(interval)
                    self._outliers = 0
        self.last_sent_ns = sent_ns
        delay = received_ns - sent_ns
        if self._bucket_min is None or delay < self._bucket_min:
            self._bucket_min = delay
        if self._delay_ns is None or delay < self._delay_ns:
            self._delay_ns = delay
        self._bucket_count += 1
        if self._bucket_count >= DELAY_BUCKET:  # forget delays older than two buckets
            self._delay_ns = self._bucket_min
            self._bucket_min = None
            self._bucket_count = 0

    def window(self) -> tuple[float, float] | None:
        """``(start_s, stop_s)`` on the receiver's clock (``time.perf_counter``, whose
        nanoseconds :meth:`note` was given) around the next expected message, or None
        while the period is unknown or outside :data:`PERIOD_RANGE_S`."""
        period_s = self.period_ns * 1e-9
        if self._delay_ns is None or not PERIOD_RANGE_S[0] <= period_s <= PERIOD_RANGE_S[1]:
            return None
        spin = self.spin
        scale = min(1.0, spin.max_duty * period_s / spin.span_s) if spin.span_s > 0.0 else 0.0
        expected_s = (self.last_sent_ns + self.period_ns + self._delay_ns) * 1e-9
        return expected_s - spin.lead_s * scale, expected_s + spin.lag_s * scale
