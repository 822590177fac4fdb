"""The OpenHaptics backend end to end against the libHD double (real pyOpenHaptics path).

Each test runs one scenario of ``libhd_double/scenarios.py`` in a fresh interpreter
(see conftest) and checks its measurements against independent expectations: the
double's published limits, closed-form equilibria and kinematics, the real hd.h codes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from capture_trainer.errors import DeviceError
from haptics import _hd_api
from haptics.backends import BACKENDS, open_device, probe

# Limits the double publishes (a Touch's data sheet), the expectation for the spec.
TOUCH_MAX_FORCE_N = 3.3
TOUCH_CONTINUOUS_N = 0.88


def test_callbacks_run_at_1khz_for_2_s(run_scenario) -> None:
    out = run_scenario("rate")
    assert out["ticks"] == 2000
    mean_rate_hz = (out["ticks"] - 1) / (out["last_s"] - out["first_s"])
    assert 950.0 <= mean_rate_hz <= 1050.0
    # Every scheduler tick of the double called our callback (one callback, no misses).
    assert out["double_callback_calls"] == out["double_ticks"]
    assert out["timing_ticks"] == 2000  # ServoTiming recorded every tick of the run


def test_every_force_reaching_the_device_is_within_its_limits(run_scenario) -> None:
    out = run_scenario("limits")
    stats, spec = out["stats"], out["spec"]
    # The limits come from the device, not from constants in the backend.
    assert spec["max_force_n"] == TOUCH_MAX_FORCE_N
    assert spec["continuous_force_n"] == TOUCH_CONTINUOUS_N
    assert spec["model"] == "Touch" and spec["vendor"] == "3D Systems"
    assert spec["workspace_min_m"] == pytest.approx([-0.080, -0.060, -0.035])
    assert spec["workspace_max_m"] == pytest.approx([0.080, 0.060, 0.035])
    assert spec["rate_hz"] == 1000.0
    assert out["fallbacks"] == []  # every limit and reading came from libHD
    # What the backend wrote with HD_CURRENT_FORCE (before libHD's own clamp) ...
    assert stats["max_commanded_norm_n"] <= TOUCH_MAX_FORCE_N * (1 + 1e-9)
    assert stats["nonfinite_forces"] == 0
    # ... and what reached the motors.
    assert stats["over_limit_sent"] == 0
    assert stats["max_sent_norm_n"] <= TOUCH_MAX_FORCE_N * (1 + 1e-9)
    assert stats["force_commits"] > 1000
    # Forces did flow (the test can fail the other way: a backend that sends nothing).
    assert stats["max_sent_norm_n"] > 1.0
    assert out["returned_all_finite"]
    assert out["returned_max_norm"] <= TOUCH_MAX_FORCE_N * (1 + 1e-9)
    # Force output and HD_MAX_FORCE_CLAMPING were enabled explicitly (both start off).
    assert stats["force_output_enabled"] == 1 and stats["clamping_enabled"] == 1
    assert out["motor_after"] == [0.0, 0.0, 0.0]


def test_held_stylus_moves_toward_the_spring_origin(run_scenario) -> None:
    out = run_scenario("spring")
    anchor = np.array(out["anchor_m"])
    start, end = np.array(out["start_m"]), np.array(out["end_m"])
    assert np.allclose(start, anchor, atol=1e-9)  # mm -> m at the edge
    assert np.linalg.norm(end) < 0.8 * np.linalg.norm(start)
    # Static equilibrium of hand spring k_h (to the anchor) against the rendered spring
    # k (to the origin): k_h (a - x) = k x  ->  x = a k_h / (k_h + k).
    expected = anchor * out["hand_k"] / (out["hand_k"] + out["spring_k"])
    assert np.allclose(end, expected, atol=5e-4)
    assert np.linalg.norm(out["end_velocity_m_s"]) < 5e-3
    assert out["motor_after"] == [0.0, 0.0, 0.0]  # ramped out at the end of the run


def test_position_velocity_buttons_and_transform_are_read_in_si(run_scenario) -> None:
    out = run_scenario("kinematics")
    center = np.array(out["center_mm"]) * 1e-3
    amp = np.array(out["amplitude_mm"]) * 1e-3
    w = 2 * math.pi * out["freq_hz"]
    # 0.8 s of a 2 Hz sinusoid covers its extremes: center ± amplitude, ± A w.
    assert np.allclose(out["pos_min"], center - amp, atol=2e-5)
    assert np.allclose(out["pos_max"], center + amp, atol=2e-5)
    assert np.allclose(out["vel_max"], amp * w, rtol=1e-3, atol=1e-6)
    assert np.allclose(out["vel_min"], -amp * w, rtol=1e-3, atol=1e-6)
    assert out["buttons"] == [2]  # HD_DEVICE_BUTTON_2 -> BUTTON_TRAINER
    rot = np.array(out["rot_row_major"]).reshape(3, 3)
    assert np.allclose(out["rotation_in_tick"], rot, atol=1e-12)
    assert np.allclose(out["rotation_outside"], rot, atol=1e-12)
    # Translation column of the column-major transform == HD_CURRENT_POSITION.
    assert np.allclose(out["transform_position_m"], out["position_outside_m"], atol=1e-12)
    assert out["transform_last_row"] == [0.0, 0.0, 0.0, 1.0]
    assert out["is_device"] and out["clock_is_servo_clock"]  # the haptics.device protocols


def test_differenced_velocity_uses_the_sample_times_not_the_gil_s(run_scenario) -> None:
    # A busy Python thread delays each callback by up to a switch interval after the
    # sample; differencing over callback times then misreads the speed by 1.8x. Over
    # the ticks' start times the error is a few per cent at worst (6 % seen in 1 of 12
    # runs: a thread switch can still fall between reading the clock and the stamp).
    # The 1st and 99th percentiles, not the extremes: a misreading of every sample moves
    # them as much, one sample late behind a stalled machine (1.44x once) does not.
    out = run_scenario("kinematics", LIBHD_DOUBLE_MINIMAL="1", SCENARIO_GIL_HOG="1")
    amp = np.array(out["amplitude_mm"]) * 1e-3
    w = 2 * math.pi * out["freq_hz"]
    assert np.allclose(out["vel_p99"], amp * w, rtol=0.15, atol=1e-6)
    assert np.allclose(out["vel_p01"], -amp * w, rtol=0.15, atol=1e-6)


def test_a_minimal_libhd_without_position_velocity_or_limits_still_works(run_scenario) -> None:
    # Like an emulator of only what pyOpenHaptics queries: transform and buttons.
    out = run_scenario("kinematics", LIBHD_DOUBLE_MINIMAL="1")
    center = np.array(out["center_mm"]) * 1e-3
    amp = np.array(out["amplitude_mm"]) * 1e-3
    w = 2 * math.pi * out["freq_hz"]
    assert np.allclose(out["pos_min"], center - amp, atol=2e-5)  # from the transform
    assert np.allclose(out["pos_max"], center + amp, atol=2e-5)
    assert np.allclose(out["vel_max"], amp * w, rtol=0.2, atol=1e-6)  # differenced
    assert np.allclose(out["rotation_in_tick"], np.array(out["rot_row_major"]).reshape(3, 3), atol=1e-12)
    assert out["info"]["state_fallbacks"] == ["HD_CURRENT_POSITION", "HD_CURRENT_VELOCITY"]
    assert "HD_NOMINAL_MAX_FORCE" in out["info"]["spec_fallbacks"]
    assert out["spec"]["max_force_n"] == TOUCH_MAX_FORCE_N


def test_a_tick_that_raises_leaves_zero_force_and_latches_a_fault(run_scenario) -> None:
    out = run_scenario("tick_raises")
    assert out["motor_before"][1] == pytest.approx(2.0)  # the force was really on
    assert out["raised"] == "RuntimeError" and "boom" in out["message"]
    assert out["motor_after"] == [0.0, 0.0, 0.0]
    assert out["ticks"] == 401  # the loop stopped at the raising tick
    assert "RuntimeError" in out["fault"]
    assert out["second_run"] == "DeviceError"  # latched until cleared
    assert out["after_clear"] == "ran"


def test_force_ramps_in_at_the_start_of_a_run(run_scenario) -> None:
    out = run_scenario("tick_raises")
    first = np.array(out["first_sent"])
    # Engage ramp (SafetyConfig default 0.25 s): gain = (one period + elapsed) / 0.25 s.
    assert first[0] == pytest.approx(2.0 * 1e-3 / 0.25, rel=1e-6)
    assert np.all(np.diff(first) > 0)
    expected = 2.0 * (1e-3 + out["elapsed_at_100_s"]) / 0.25
    assert out["sent_at_100"] == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize(
    ("code", "name"),
    [(0x0200, "HD_WARM_MOTORS"), (0x0102, "HD_INVALID_OPERATION"), (0x0302, "HD_COMM_ERROR"),
     (0x0201, "HD_EXCEEDED_MAX_FORCE")],
)
def test_hd_errors_stop_the_run_with_their_real_names(run_scenario, code: int, name: str) -> None:
    out = run_scenario("hd_error", SCENARIO_HD_ERROR=hex(code))
    assert out["raised"] == "DeviceError"
    assert f"{name} (0x{code:04x}" in out["message"]
    assert out["motor_after"] == [0.0, 0.0, 0.0]
    assert out["second_run"] == "DeviceError"


def test_run_ends_with_zero_force_and_close_releases_the_device(run_scenario) -> None:
    out = run_scenario("ramp_out")
    assert out["stopped_by"] == "max_ticks"
    assert out["motor_after"] == [0.0, 0.0, 0.0]
    assert out["calls_later"] > out["calls_closed"]  # a second device opened and ran


def test_an_open_device_dropped_without_close_keeps_its_callback_alive(run_scenario) -> None:
    # pyOpenHaptics keeps no reference to its ctypes callback: a collected thunk crashes.
    out = run_scenario("dropped")  # exits normally: atexit closes the device
    assert out["calls_after_gc"] >= 200


def test_missing_libhd_gives_one_clear_message(run_scenario) -> None:
    out = run_scenario("open_error", with_libhd=False)
    assert out["raised"] == "DeviceError"
    message = out["message"]
    assert "libHD.so" in message and "OpenHaptics" in message and "Touch" in message
    assert "driver" in message and "simulated" in message  # what works now
    assert "OSError" not in message


def test_missing_libhd_file_named_by_env(run_scenario, tmp_path) -> None:
    out = run_scenario("open_error", with_libhd=False, CAPTURE_TRAINER_LIBHD=str(tmp_path / "nope.so"))
    assert out["raised"] == "DeviceError"
    assert "CAPTURE_TRAINER_LIBHD" in out["message"] and "OpenHaptics" in out["message"]


def test_missing_device_gives_one_clear_message(run_scenario) -> None:
    out = run_scenario("open_error", LIBHD_DOUBLE_NO_DEVICE="1")
    assert out["raised"] == "DeviceError"
    assert "HD_DEVICE_FAULT (0x0300" in out["message"]
    assert "Touch" in out["message"] and "simulated" in out["message"]


def test_error_table_matches_the_real_hd_defines() -> None:
    # Values from OpenHaptics' hdDefines.h (pyOpenHaptics 1.0.1 has 0x103 for the first).
    real = {"HD_INVALID_OPERATION": 0x0102, "HD_INVALID_INPUT_TYPE": 0x0103, "HD_BAD_HANDLE": 0x0104,
            "HD_WARM_MOTORS": 0x0200, "HD_EXCEEDED_MAX_FORCE": 0x0201, "HD_DEVICE_FAULT": 0x0300,
            "HD_ILLEGAL_BEGIN": 0x0400, "HD_FRAME_ERROR": 0x0402, "HD_SCHEDULER_FULL": 0x0501,
            "HD_INVALID_LICENSE": 0x0600}
    for name, value in real.items():
        assert getattr(_hd_api, name) == value
        assert _hd_api.ERROR_NAMES[value] == name
    assert "unknown" in _hd_api.error_text(0x0999)


def test_registry_names_the_backends_and_typos_get_a_suggestion() -> None:
    assert BACKENDS.names() == ("simulated", "openhaptics", "mouse")
    with pytest.raises(DeviceError, match="did you mean 'openhaptics'"):
        open_device("openhaptic")
    with pytest.raises(DeviceError, match="did you mean"):
        probe("simulted")
    assert probe("simulated")[0] is True


@pytest.mark.parametrize("kind", ["sleeping_tick", "gil_hog", "stuck_tick"])
def test_a_stalled_servo_loop_zeroes_the_force_within_10_ms_and_latches_a_fault(run_scenario, kind: str) -> None:
    # 2 N on the motors, then the tick sleeps, another thread holds the GIL (a C call that
    # keeps it) or the tick never returns, for 100 ms. Timed on the double's clock.
    out = run_scenario("stall", SCENARIO_STALL=kind)
    assert out["stalled"], "the loop never got to the stall"
    assert out["force_at_stall_n"] == pytest.approx(2.0)  # the force was really on
    assert out["zero_after_ms"] is not None and out["zero_after_ms"] <= 10.0
    # held at zero for the rest of the stall: latched, not a dip
    assert out["max_force_after_zero_n"] == 0.0
    # the fault is latched and reported: run() raised, the device stays faulted
    assert out["raised"] == "DeviceError" and "watchdog" in out["message"]
    assert "watchdog" in out["fault"]
    assert out["watchdog"]["no_fresh_force_ms"] > out["config"]["max_tick_gap_s"] * 1e3
    assert out["second_run"] == "DeviceError"
    # cleared, the next run sends forces again (the watchdog re-armed), and ends at zero
    assert out["after_clear_max_n"] == pytest.approx(1.0)
    assert out["motor_after"] == [0.0, 0.0, 0.0]


def test_a_slow_first_tick_is_a_warm_up_not_a_stall(run_scenario) -> None:
    # No force is held before the run's first one: the watchdog watches from there on.
    out = run_scenario("slow_first_tick")
    assert out["raised"] is None and out["fault"] is None
    assert out["first_period_ms"] >= 30.0  # the warm-up did take longer than the 4 ms limit
    assert out["ticks"] == 250 and out["max_sent_n"] == pytest.approx(1.0)


def test_button_two_after_the_capture_asks_the_task_for_its_next_state(run_scenario) -> None:
    """HD_DEVICE_BUTTON_2 reaches the servo's control array as the window's keys do: one
    press (held 50 ticks) is one request, for the running state's succeeded target
    (hold -> go), which starts on the tick after the guard saw it."""
    out = run_scenario("button_next")
    names, states, buttons = out["state_names"], np.array(out["states"]), np.array(out["buttons"])
    # the commander kept what libHD reported: engage (1) always, button 2 (2) on ticks 100-149
    # (the double's frame may lag the press by a tick)
    assert set(buttons[:100].tolist()) == {1} and set(buttons[152:].tolist()) == {1}
    pressed = np.flatnonzero(buttons & 2)
    assert 100 <= pressed[0] <= 101 and 149 <= pressed[-1] <= 150 and pressed.size >= 48
    assert out["request_count"] == 1.0 and names[int(out["request_state"])] == "go"
    first = int(np.flatnonzero(states == names.index("go"))[0])
    assert set(states[:first].tolist()) == {names.index("hold")}
    assert first == pressed[0] + 1  # read on the press's tick, requested by the guard before the next
    assert set(states[first:].tolist()) == {names.index("go")}  # held 50 ticks: still one request
    assert out["results"] == [["hold", "aborted", f"the operator chose 'go' at {first * 1e-3:.3f} s"]]
