"""The servo corner's verdict: green only when the rate is right and nothing overran
recently; amber on overruns; red on stalls or a low rate. Hand-made timing figures, the
live statistics the servo's guard publishes, and the priority notice."""

from __future__ import annotations

import math
import time

import pytest

from app.ui.servo import (
    OVERRUNS, PRIORITY, PRIORITY_CODES, RATE_HZ, RECENT_S, RECENT_WORST_MS, STATS_EVERY, TICKS,
    WORST_MS, ServoMonitor, ServoStats, _guarded, _priority_name, priority_notice, servo_health,
)


@pytest.mark.parametrize(
    ("rate_hz", "worst_ms", "silent_s", "level"),
    [
        (1000.0, 1.05, 0.0, "good"),    # on time
        (999.6, 1.95, 0.0, "good"),     # jitter below the amber line
        (1000.0, 2.5, 0.0, "warn"),     # one overrun a hand could feel
        (989.0, 1.2, 0.0, "warn"),      # rate below 99 %
        (1000.0, 12.0, 0.0, "bad"),     # a stall
        (998.0, 117.0, 0.0, "bad"),     # the case that used to show green
        (940.0, 1.4, 0.0, "bad"),       # rate below 95 %
        (1000.0, 1.0, 1.5, "bad"),      # no statistics for 1.5 s while running
        (0.0, 0.0, 0.0, "idle"),        # nothing measured yet
        (math.nan, 0.0, 0.0, "idle"),
    ],
)
def test_health_from_hand_made_figures(rate_hz: float, worst_ms: float, silent_s: float, level: str) -> None:
    health = servo_health(rate_hz, worst_ms, silent_s)
    assert health.level == level
    assert (health.reason == "") == (level in ("good", "idle"))


def _stats(ticks: int, rate: float, window_worst: float, overruns: int, worst: float,
           running: bool = True) -> ServoStats:
    return ServoStats(ticks=ticks, rate_hz=rate, overruns=overruns, worst_period_ms=worst,
                      running=running, recent_worst_ms=window_worst, priority="normal")


def test_monitor_turns_red_on_a_stall_and_green_once_it_is_older_than_the_window() -> None:
    monitor = ServoMonitor()
    t = 100.0
    ticks = 0
    # One window of 250 ticks with a 45 ms stall, then clean windows every 0.25 s.
    ticks += 250
    recent = monitor.update(_stats(ticks, 840.0, 45.0, 1, 45.0), t)
    assert recent.health.level == "bad" and "45 ms" in recent.health.reason
    assert recent.overruns == 1
    while t < 100.0 + RECENT_S - 0.3:
        t += 0.25
        ticks += 250
        recent = monitor.update(_stats(ticks, 1000.0, 1.1, 1, 45.0), t)
        assert recent.health.level == "bad"  # the stall is still within the window
    for _ in range(3):
        t += 0.25
        ticks += 250
        recent = monitor.update(_stats(ticks, 1000.0, 1.1, 1, 45.0), t)
    assert recent.health.level == "good"
    assert recent.overruns == 0 and recent.worst_period_ms == pytest.approx(1.1)
    assert recent.rate_hz == pytest.approx(1000.0)
    # The whole attempt still shows the stall.
    assert recent.attempt.level == "bad"


def test_monitor_counts_overruns_of_the_recent_window_only() -> None:
    monitor = ServoMonitor()
    figures = [(250, 1000.0, 1.2, 0), (500, 996.0, 3.1, 2), (750, 1000.0, 1.3, 2)]
    levels = [monitor.update(_stats(n, r, w, o, 3.1), 0.25 * i).health.level
              for i, (n, r, w, o) in enumerate(figures)]
    assert levels == ["good", "warn", "warn"]
    recent = monitor.update(_stats(750, 1000.0, 1.3, 2, 3.1), 0.6)
    assert recent.overruns == 2 and recent.worst_period_ms == pytest.approx(3.1)
    # Harmonic mean of the three windows' rates (each is 250 ticks).
    assert recent.rate_hz == pytest.approx(3 / (1 / 1000 + 1 / 996 + 1 / 1000))


def test_monitor_sees_a_loop_that_stopped_publishing() -> None:
    monitor = ServoMonitor()
    assert monitor.update(_stats(250, 1000.0, 1.0, 0, 1.0), 10.0).health.level == "good"
    assert monitor.update(_stats(250, 1000.0, 1.0, 0, 1.0), 10.8).health.level == "good"
    stuck = monitor.update(_stats(250, 1000.0, 1.0, 0, 1.0), 11.2)
    assert stuck.health.level == "bad" and "stalled" in stuck.health.reason
    # After the attempt has ended nothing is expected any more.
    assert monitor.update(_stats(250, 1000.0, 1.0, 0, 1.0, running=False), 20.0).health.level == "good"
    # A new attempt (the tick count starts again) starts afresh.
    fresh = monitor.update(_stats(0, 0.0, 0.0, 0, 0.0), 21.0)
    assert fresh.health.level == "idle" and fresh.attempt.level == "idle"


def test_the_guard_publishes_each_windows_worst_period(monkeypatch) -> None:
    clock = [0.0]
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    control = [0.0] * 8
    tick = _guarded(lambda: True, control, None, None, None, 10)
    periods = [1e-3] * STATS_EVERY
    periods[100] = 12e-3  # a stall in the first window
    periods += [1e-3] * STATS_EVERY
    for period in periods:
        clock[0] += period
        assert tick()
        if control[TICKS] == STATS_EVERY and clock[0] < 0.3:
            assert control[RECENT_WORST_MS] == pytest.approx(12.0)
            assert control[RATE_HZ] == pytest.approx(STATS_EVERY / 0.261, rel=1e-3)
    assert control[TICKS] == 2 * STATS_EVERY
    assert control[RECENT_WORST_MS] == pytest.approx(1.0)
    assert control[WORST_MS] == pytest.approx(12.0)  # the attempt's worst is kept
    assert control[OVERRUNS] == 1
    assert control[RATE_HZ] == pytest.approx(1000.0)


def test_priority_codes_round_trip_and_the_notice() -> None:
    control = [0.0] * 8
    assert _priority_name(control[PRIORITY]) == ""
    for name, code in PRIORITY_CODES.items():
        assert _priority_name(code) == name
    assert priority_notice("realtime") is None
    assert priority_notice("") is None  # not known yet
    assert priority_notice("normal", wanted="normal") is None  # nothing was asked for
    for got in ("normal", "high"):
        notice = priority_notice(got, executable="/usr/bin/python3")
        assert notice is not None
        assert "no real-time priority" in notice
        assert "setcap cap_sys_nice+ep /usr/bin/python3" in notice
        assert "rtprio" in notice
    assert "nice -10" in (priority_notice("high") or "")
