"""The server's busy-poll window: where the next command of a periodic client is due.

Hand-made send and receive times (nanoseconds) with known periods and delays; the window
must sit at last send + period + least delay, from ``lead_s`` before to ``lag_s`` after.
"""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

from robot.link.arrivals import DELAY_BUCKET, RESEED_AFTER, ArrivalForecast, SpinWindow

MS = 1_000_000  # [ns]
US = 1_000  # [ns]
SPIN = SpinWindow(lead_s=100e-6, lag_s=300e-6)


def fed(sends_ns: list[int], delays_ns: list[int], spin: SpinWindow = SPIN) -> ArrivalForecast:
    forecast = ArrivalForecast(spin)
    for sent, delay in zip(sends_ns, delays_ns, strict=True):
        forecast.note(sent, sent + delay)
    return forecast


def test_a_steady_client_gets_a_window_around_its_next_send_plus_the_least_delay() -> None:
    start = 5_000 * MS
    sends = [start + k * MS for k in range(20)]
    delays = [120 * US, 80 * US, 150 * US, 95 * US] * 5
    window = fed(sends, delays).window()
    assert window is not None
    expected_s = (sends[-1] + MS + 80 * US) * 1e-9  # next send, least delay seen
    assert window[0] == pytest.approx(expected_s - 100e-6, abs=1e-9)
    assert window[1] == pytest.approx(expected_s + 300e-6, abs=1e-9)


def test_no_window_before_a_period_is_known_or_for_a_slow_client() -> None:
    assert ArrivalForecast(SPIN).window() is None
    assert fed([7 * MS], [50 * US]).window() is None  # one send: no period yet
    slow = [k * 50 * MS for k in range(1, 6)]  # 20 Hz: beyond PERIOD_RANGE_S, sleeping costs nothing
    assert fed(slow, [50 * US] * 5).window() is None


def test_a_late_tick_does_not_move_the_period_but_a_new_rate_does() -> None:
    sends = [k * MS for k in range(1, 11)] + [13 * MS]  # one tick 3 ms late (the client's schedule restarted)
    forecast = fed(sends, [60 * US] * len(sends))
    assert forecast.period_ns == pytest.approx(MS)
    # a client that now sends every 2 ms: after RESEED_AFTER intervals the estimate follows
    later = [13 * MS + k * 2 * MS for k in range(1, RESEED_AFTER + 3)]
    for sent in later:
        forecast.note(sent, sent + 60 * US)
    assert forecast.period_ns == pytest.approx(2 * MS, rel=0.02)


def test_the_window_is_at_most_the_duty_share_of_a_short_period() -> None:
    period = 200 * US  # 5 kHz: a 400 us window would spin all the time
    sends = [k * period for k in range(1, 30)]
    window = fed(sends, [40 * US] * len(sends), SpinWindow(lead_s=100e-6, lag_s=300e-6, max_duty=0.5)).window()
    assert window is not None
    assert window[1] - window[0] == pytest.approx(0.5 * period * 1e-9, rel=1e-6)
    expected_s = (sends[-1] + period + 40 * US) * 1e-9
    assert window[0] == pytest.approx(expected_s - 0.25 * 0.5 * period * 1e-9, abs=1e-9)  # lead keeps its quarter


def test_an_old_least_delay_is_forgotten_after_two_buckets() -> None:
    forecast = ArrivalForecast(SPIN)
    sent = MS
    forecast.note(sent, sent + 10 * US)  # an early, unusually fast one
    for _ in range(2 * DELAY_BUCKET):
        sent += MS
        forecast.note(sent, sent + 70 * US)
    assert forecast.delay_ns == 70 * US


def test_the_clocks_offset_is_part_of_the_delay() -> None:
    # another machine's monotonic clock starts elsewhere: only differences of its send
    # times and the constant offset matter
    offset = -123_456_789_000
    sends = [k * MS for k in range(1, 12)]
    here = [sent - offset + 90 * US for sent in sends]
    forecast = ArrivalForecast(SPIN)
    for sent, received in zip(sends, here, strict=True):
        forecast.note(sent, received)
    window = forecast.window()
    assert window is not None
    assert window[0] == pytest.approx((here[-1] + MS) * 1e-9 - 100e-6, abs=1e-9)


def test_a_spinning_server_answers_a_lockstep_session_like_a_sleeping_one() -> None:
    """The same commands to a server that busy-polls and to one that sleeps give the
    same states (the window changes when the server looks, never what it does), and the
    spinning server's forecast follows the client's send times: its period is a smoothed
    interval between two of the client's commands, so it lies between the shortest and
    the longest (1 ms of sleep plus a round trip; in one process the spinning server
    thread also holds the GIL for up to a window, so they vary)."""
    from robot.backends import ARM_BACKENDS
    from robot.link.client import LinkClient
    from robot.link.server import LinkServer, spin_window
    from robot.models import MODELS

    model = MODELS["planar-3r"]
    results = []
    for spin in (None, spin_window(300.0)):
        server = LinkServer(model, ARM_BACKENDS.get("pybullet"), "tcp://127.0.0.1:*", spin=spin).start()
        client = LinkClient(server.endpoint, None)
        try:
            welcome = client.hello("lockstep", model, np.array(model.q0_rad), 1e-3, connect_timeout_s=5.0)
            step, q = welcome["step"], list(welcome["q_rad"])
            states = []
            sent_ns = []
            for k in range(120):
                time.sleep(1e-3)
                rate = [0.3 * np.sin(0.05 * k), -0.2, 0.1]
                seq = client.send("command", {"state_seq": step, "t_s": k * 1e-3, "q_rad": q, "qd_rad_s": rate,
                                              "qdd_rad_s2": [0.0] * 3})
                sent_ns.append(client._t_ns)  # the command's t_ns
                while (msg := client.recv(time.perf_counter() + 2.0)) is not None and msg.get("cmd_seq") != seq:
                    pass
                assert msg is not None and msg["type"] == "state"
                step, q = msg["step"], msg["q_rad"]
                states.append(msg["q_rad"] + msg["qd_rad_s"] + msg["ee_position_m"])
            session = server._session
            period_ns = None if session is None or session.arrivals is None else session.arrivals.period_ns
            client.bye()
        finally:
            client.close()
            server.close()
        results.append((np.array(states), period_ns, np.diff(sent_ns)))
    (sleeping, no_forecast, _), (spinning, period_ns, intervals_ns) = results
    assert no_forecast is None
    assert period_ns is not None and intervals_ns.min() <= period_ns <= intervals_ns.max()
    assert intervals_ns.min() >= 1e6  # the sleep: the bounds are meaningful
    np.testing.assert_array_equal(spinning, sleeping)


def test_serve_refuses_busy_polling_with_a_fifo_priority() -> None:
    done = subprocess.run([sys.executable, "-m", "app.cli", "arm", "serve", "--model", "planar-3r", "--bind",
                           "tcp://127.0.0.1:*", "--spin-us", "200", "--rt-priority", "10"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--spin-us" in done.stderr and "--rt-priority" in done.stderr


def test_a_real_time_session_never_spins() -> None:
    """A real-time command takes effect at the server's next period wherever it falls in
    the period, so only lock-step sessions get a forecast (and a window)."""
    from robot.backends import ARM_BACKENDS
    from robot.link.client import LinkClient
    from robot.link.server import LinkServer, spin_window
    from robot.models import MODELS

    model = MODELS["planar-3r"]
    server = LinkServer(model, ARM_BACKENDS.get("pybullet"), "tcp://127.0.0.1:*", spin=spin_window(400.0))
    client = LinkClient(server.endpoint, None)
    try:
        client.send("hello", {"mode": "realtime", "model": model.name, "fingerprint": server.fingerprint,
                              "q0_rad": [float(v) for v in model.q0_rad], "dt_s": 1e-3,
                              "base_mass_kg": float(model.base_mass_kg),
                              "base_inertia_kg_m2": model.arrays.base_inertia.ravel().tolist()})
        deadline = time.perf_counter() + 10.0
        while server._session is None and time.perf_counter() < deadline:  # the server's loop, in this thread
            server._handle(server._wait(0.1))
        session = server._session
        assert session is not None and session.mode == "realtime" and session.arrivals is None
        assert server.spin is not None
    finally:
        client.close()
        server.close()
