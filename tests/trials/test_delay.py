"""The delayed link between the operator's side and the arm's side (``trials.delay``)."""

from __future__ import annotations

import numpy as np
import pytest

from capture_trainer.trial_log import read_trial_log
from trials.delay import DelayConfig, DelayLine
from trials.runner import TrialRequest, run_trial

DT = 1e-3


def _run_line(config: DelayConfig, ticks: int, seed: int = 0) -> tuple[np.ndarray, DelayLine]:
    """Send the tick time every tick; return what the receiver holds at each tick."""
    line = DelayLine(1, config, DT, seed)
    out = np.full(1, np.nan)
    held = np.zeros(ticks)
    for k in range(ticks):
        t = k * DT
        line.send(t, np.array([t]))
        line.receive(t, out)
        held[k] = out[0]
    return held, line


def test_a_constant_delay_shifts_the_stream_by_whole_ticks() -> None:
    held, line = _run_line(DelayConfig(delay_s=0.05), 400)
    t = np.arange(400) * DT
    assert np.all(np.isnan(held[:50]))  # nothing has arrived during the first 50 ms
    np.testing.assert_allclose(held[50:], t[50:] - 0.05, atol=1e-12)
    assert line.lost == 0 and line.received == 350


def test_jitter_never_delivers_early_and_the_receiver_never_goes_back_in_time() -> None:
    held, line = _run_line(DelayConfig(delay_s=0.02, jitter_s=0.004), 5000, seed=3)
    t = np.arange(5000) * DT
    age = t[100:] - held[100:]
    assert age.min() >= 0.02 - 1e-9  # half-normal: never early
    assert np.all(np.diff(held[100:]) >= 0.0)  # newest first: a late old sample is dropped
    # the mean age of what is held: delay + E[jitter] = 0.02 + 0.004 sqrt(2/pi), plus the
    # wait for the next (a few ticks), within a couple of ms
    assert 0.02 + 0.004 * np.sqrt(2 / np.pi) - 1e-3 < age.mean() < 0.02 + 0.004 * np.sqrt(2 / np.pi) + 3e-3


def test_loss_drops_the_expected_share_and_the_receiver_holds() -> None:
    held, line = _run_line(DelayConfig(delay_s=0.01, loss=0.2), 20000, seed=5)
    assert line.lost / 20000 == pytest.approx(0.2, abs=0.015)  # binomial SD 0.003
    assert line.received + line.lost == pytest.approx(20000 - 10, abs=2)
    # holding: the value repeats exactly when a sample was lost
    repeats = np.count_nonzero(np.diff(held[20:]) == 0.0)
    assert repeats == pytest.approx(0.2 * 19980, rel=0.1)


def test_the_same_seed_gives_the_same_stream() -> None:
    config = DelayConfig(delay_s=0.01, jitter_s=0.003, loss=0.1)
    a, _ = _run_line(config, 2000, seed=9)
    b, _ = _run_line(config, 2000, seed=9)
    c, _ = _run_line(config, 2000, seed=10)
    assert np.array_equal(a, b, equal_nan=True) and not np.array_equal(a, c, equal_nan=True)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="loss"):
        DelayConfig(loss=1.0)
    with pytest.raises(ValueError, match="delay_s"):
        DelayConfig(delay_s=-0.1)


def test_a_trial_over_a_delayed_link_commands_the_slave_late(tmp_path) -> None:
    """The slave's recorded command is the automatic controller's command 80 ms late:
    the AS command is the debris' own path (contact-free until the first touch), so the
    command the slave got at t is where the debris was at t - 80 ms (relative to the
    standoff it aims at, which changes slowly)."""
    plain = run_trial(TrialRequest(condition="as", trial_id="plain", time_limit_s=1.0), tmp_path)
    late = run_trial(TrialRequest(condition="as", trial_id="late", time_limit_s=1.0, delay_s=0.08), tmp_path)
    a, _ = read_trial_log(plain["path"])
    b, meta = read_trial_log(late["path"])
    assert meta["link_delay"]["delay_s"] == pytest.approx(0.08)
    cmd_plain = a["cmd_v_x_m_s"].to_numpy()
    cmd_late = b["cmd_v_x_m_s"].to_numpy()
    # the slave holds still until the first command arrives
    assert np.all(cmd_late[:80] == 0.0)
    # the commanded velocity (the debris' own, exactly, before any contact) arrives 80 ticks late
    np.testing.assert_allclose(cmd_late[80:400], cmd_plain[0:320], atol=1e-9)
