"""Servo timing statistics from known timestamps."""

from __future__ import annotations

import gc
import math
import os

import numpy as np
import pytest

from tests.haptics.conftest import may_run_realtime
from haptics.timing import GIL_SHARER_PRIORITY, ServoTiming, frozen_heap, gil_sharer, realtime_loop, realtime_loop_active


def marked(times_s: list[float], **kwargs: object) -> ServoTiming:
    timing = ServoTiming(**kwargs)  # type: ignore[arg-type]
    for t in times_s:
        timing.mark(t)
    return timing


def test_summary_of_known_periods() -> None:
    # periods (ms): 1, 1, 1, 3, 1, 2  -> one overrun (3 > 1.5), one at 2 > 1.5 too
    times = np.cumsum([0.0, 1e-3, 1e-3, 1e-3, 3e-3, 1e-3, 2e-3]).tolist()
    s = marked(times).summary()
    assert s["ticks"] == 7 and s["periods"] == 6
    assert s["mean_period_ms"] == pytest.approx(9.0 / 6.0)
    assert s["max_period_ms"] == pytest.approx(3.0)
    assert s["p50_period_ms"] == pytest.approx(1.0)
    assert s["overruns"] == 2
    assert s["worst_tick"] == 4  # the tick that ended the 3 ms period
    assert s["rate_hz"] == pytest.approx(6 / 9e-3)
    assert sum(s["histogram_counts"]) == 6
    edges = np.array(s["histogram_edges_ms"])
    counts = np.array(s["histogram_counts"])
    assert counts[np.searchsorted(edges, 1.0, side="right") - 1] == 4
    assert counts[np.searchsorted(edges, 3.0, side="right") - 1] == 1


def test_percentiles_match_the_definition() -> None:
    rng = np.random.default_rng(3)
    periods = rng.uniform(0.5e-3, 1.5e-3, 5000)
    periods[[10, 400, 4000]] = [7e-3, 9e-3, 12e-3]
    s = marked(np.concatenate(([0.0], np.cumsum(periods))).tolist()).summary()
    ms = periods * 1e3
    assert s["p99_period_ms"] == pytest.approx(np.percentile(ms, 99))
    assert s["p999_period_ms"] == pytest.approx(np.percentile(ms, 99.9))
    assert s["max_period_ms"] == pytest.approx(12.0)
    assert s["overruns"] == 3
    assert s["worst_tick"] == 4001


def test_ring_buffer_keeps_whole_run_counts() -> None:
    times = np.cumsum([0.0, 1e-3, 5e-3, 1e-3, 1e-3, 1e-3]).tolist()
    timing = marked(times, capacity=3)
    s = timing.summary()
    assert s["periods"] == 5
    assert s["max_period_ms"] == pytest.approx(5.0)  # older than the ring, still counted
    assert s["overruns"] == 1
    assert np.allclose(timing.periods_s(), [1e-3, 1e-3, 1e-3])
    assert s["mean_period_ms"] == pytest.approx(9.0 / 5.0)


def test_batches_are_marked_as_the_ticks_they_ran_at_equal_periods() -> None:
    """A headless clock's calls of several ticks: the first at 0 ran 3 ticks, the next at
    6.45 ms ran 1, the last at 7.4 ms ran 4 and ended at 16 ms. Each call's ticks as
    equal periods: the same statistics as marking the tick starts 0, 2.15, 4.3, 6.45,
    7.4, 9.55, 11.7, 13.85 ms one by one."""
    timing = ServoTiming()
    timing.mark_ticks(0.0, 0)
    timing.mark_ticks(6.45e-3, 3)
    timing.mark_ticks(7.4e-3, 1)
    timing.end_ticks(16e-3, 4)
    s = timing.summary()
    expected = marked([0.0, 2.15e-3, 4.3e-3, 6.45e-3, 7.4e-3, 9.55e-3, 11.7e-3, 13.85e-3]).summary()
    assert s["ticks"] == 8 and s["periods"] == 7
    for key in ("mean_period_ms", "p50_period_ms", "max_period_ms", "rate_hz"):
        assert s[key] == pytest.approx(expected[key]), key
    assert s["overruns"] == expected["overruns"] == 6
    assert s["worst_tick"] == 1  # the first of the longest (equal) periods
    assert s["histogram_counts"] == expected["histogram_counts"]
    assert np.allclose(timing.periods_s(), [2.15e-3] * 3 + [0.95e-3] + [2.15e-3] * 3)


def test_a_batch_longer_than_the_ring_keeps_its_last_periods() -> None:
    timing = ServoTiming(capacity=4)
    timing.mark(0.0)
    timing.mark(5e-3)  # one 5 ms period, then a batch of 10 at 1 ms
    timing.mark_ticks(15e-3, 10)
    s = timing.summary()
    assert s["periods"] == 11 and s["max_period_ms"] == pytest.approx(5.0) and s["overruns"] == 1
    assert np.allclose(timing.periods_s(), [1e-3] * 4)
    assert s["mean_period_ms"] == pytest.approx(15.0 / 11.0)


def test_empty_and_single_tick() -> None:
    s = ServoTiming().summary()
    assert s["ticks"] == 0 and s["rate_hz"] == 0.0 and math.isnan(s["mean_period_ms"])
    one = marked([5.0]).summary()
    assert one["ticks"] == 1 and one["periods"] == 0


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        ServoTiming(expected_period_s=0.0)
    with pytest.raises(ValueError):
        ServoTiming(capacity=0)


def test_frozen_heap_freezes_once_and_unfreezes_for_collection() -> None:
    class Cycle:
        def __init__(self) -> None:
            self.me = self

    gc.collect()
    assert gc.get_freeze_count() == 0
    with frozen_heap():
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with frozen_heap():  # nested: no second freeze
            garbage = Cycle()
            del garbage
            assert gc.get_freeze_count() == frozen
        assert gc.get_freeze_count() == frozen
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert not any(type(o) is Cycle for o in gc.get_objects())


def test_gil_sharer_is_real_time_only_during_a_real_time_run() -> None:
    policy = os.sched_getscheduler(0)
    assert policy == os.SCHED_OTHER  # the test thread is an ordinary one
    with gil_sharer() as lifted:  # no real-time run: nothing changes
        assert lifted is False and os.sched_getscheduler(0) == policy
    assert not realtime_loop_active()
    with realtime_loop():
        with realtime_loop():  # nested runs count
            assert realtime_loop_active()
        assert realtime_loop_active()
        with gil_sharer() as lifted:
            assert lifted is may_run_realtime()
            if lifted:  # above every ordinary thread, below the servo loop
                assert os.sched_getscheduler(0) == os.SCHED_FIFO
                assert os.sched_getparam(0).sched_priority == GIL_SHARER_PRIORITY
            else:
                assert os.sched_getscheduler(0) == policy
        assert os.sched_getscheduler(0) == policy and os.sched_getparam(0).sched_priority == 0
    assert not realtime_loop_active()
