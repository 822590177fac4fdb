"""The headless clock's batches: a tick that can run several periods a call
(``haptics.device.BatchTick``) is asked for at most ``batch_ticks`` and never more than
the ticks left; a plain tick is called once a period; every period run is timed."""

from __future__ import annotations

import pytest

from capture_trainer.errors import TrialError
from trials.clocks import HeadlessClock


class CountingTick:
    """Runs at most ``per_call`` periods a call until ``total`` have run (then over)."""

    def __init__(self, total: int, per_call: int) -> None:
        self.total, self.per_call, self.k = total, per_call, 0
        self.asked: list[int] = []

    def __call__(self) -> bool:
        return self.run_ticks(1)[0]

    def run_ticks(self, most: int) -> tuple[bool, int]:
        self.asked.append(most)
        ran = min(most, self.per_call, self.total - self.k)
        self.k += ran
        return self.k < self.total, ran


def test_a_batch_tick_is_asked_for_batches_within_the_ticks_left() -> None:
    clock = HeadlessClock(batch_ticks=10)
    tick = CountingTick(total=1000, per_call=7)
    clock.run(tick, max_ticks=30)
    assert tick.k == 30  # 7 a call, the last call the 2 left
    assert tick.asked == [10, 10, 10, 9, 2]  # never more than the ticks left
    assert clock.timing.summary()["ticks"] == 30


def test_the_trial_ending_inside_a_batch_stops_the_clock() -> None:
    clock = HeadlessClock(batch_ticks=50)
    tick = CountingTick(total=73, per_call=50)
    clock.run(tick, max_ticks=10_000)
    assert tick.k == 73 and tick.asked == [50, 50]
    assert clock.timing.summary()["ticks"] == 73


def test_a_plain_tick_and_batches_of_one_run_a_period_a_call() -> None:
    calls = []

    def plain() -> bool:
        calls.append(1)
        return len(calls) < 5

    clock = HeadlessClock()
    clock.run(plain, max_ticks=100)
    assert len(calls) == 5 and clock.timing.summary()["ticks"] == 5
    single = HeadlessClock(batch_ticks=1)
    tick = CountingTick(total=1000, per_call=7)
    single.run(tick, max_ticks=12)
    assert tick.k == 12 and tick.asked == [1] * 12


@pytest.mark.parametrize("bad", [0, -3, 2.5])
def test_a_batch_size_that_is_not_a_positive_integer_is_refused(bad: object) -> None:
    with pytest.raises(TrialError, match="batch_ticks"):
        HeadlessClock(batch_ticks=bad)  # type: ignore[arg-type]
