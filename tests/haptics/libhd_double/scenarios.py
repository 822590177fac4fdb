"""Scenarios run against the libHD double, one per process (libHD loads once per process).

Usage: ``CAPTURE_TRAINER_LIBHD=/path/libHD.so python scenarios.py NAME``; prints one JSON
object with raw measurements. The assertions live in ``tests/haptics/test_openhaptics.py``;
this script only drives the device and reports what it saw.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import runtime_checkable

import numpy as np

from haptics._hd_double import double_stats
from haptics.device import Device, ServoClock


ServoClockCheck = runtime_checkable(ServoClock)


def _double() -> ctypes.CDLL:
    return ctypes.CDLL(os.environ["CAPTURE_TRAINER_LIBHD"])


def _vec(values: list[float]) -> ctypes.Array:
    return (ctypes.c_double * len(values))(*values)


def _stats(hdd: ctypes.CDLL) -> dict[str, float]:
    stats = double_stats(hdd)
    assert stats is not None, "CAPTURE_TRAINER_LIBHD is not the libHD double"
    return stats


def _motor_force(hdd: ctypes.CDLL) -> list[float]:
    out = (ctypes.c_double * 3)()
    hdd.hdd_motor_force(out)
    return list(out)


def _device(**kwargs: object):
    from haptics.backends import open_device

    return open_device("openhaptics", **kwargs)


def _tolerant_device():
    """A device whose watchdogs ignore a loaded test machine's scheduling hiccups.

    These scenarios check rendering, reading and errors, not the watchdogs (the stall
    scenario and the safety layer's tests do): a 4 ms gap on a busy CI machine must not
    restart their force ramp, nor trip the latched force watchdog and end their run.
    """
    from haptics.safety import SafetyConfig

    return _device(safety_config=SafetyConfig(max_tick_gap_s=0.5, stale_timeout_s=0.5, force_deadline_s=1.0))


def rate() -> dict[str, object]:
    """2 s of ticks: timestamps of each tick call and the double's own counters."""
    hdd = _double()
    stamps = np.zeros(2000)
    count = [0]
    with _tolerant_device() as dev:
        before = _stats(hdd)

        def tick() -> bool:
            stamps[count[0]] = time.perf_counter()
            dev.read()
            dev.command_force(np.zeros(3))
            count[0] += 1
            return True

        dev.clock().run(tick, 2000)
        after = _stats(hdd)
        summary = dev.last_run
    return {
        "ticks": count[0],
        "first_s": stamps[0],
        "last_s": stamps[count[0] - 1],
        "double_ticks": after["ticks"] - before["ticks"],
        "double_callback_calls": after["callback_calls"] - before["callback_calls"],
        "timing_ticks": summary["ticks"],
        "timing_rate_hz": summary["rate_hz"],
    }


def limits() -> dict[str, object]:
    """Adversarial commands (huge, NaN, inf, alternating): what reached the motors."""
    hdd = _double()
    hdd.hdd_set_buttons(1)  # engage
    hdd.hdd_set_hand_hold(_vec([0.0, 0.0, 0.0]), ctypes.c_double(300.0), ctypes.c_double(3.0))
    commands = [
        [1e6, -1e6, 1e6], [math.nan, 0.0, 0.0], [math.inf, 1.0, 1.0], [0.0, -math.inf, 0.0],
        [50.0, 0.0, 0.0], [-50.0, 0.0, 0.0], [3.0, 3.0, 3.0], [1e300, 1e300, 1e300],
    ]
    cmds = np.array(commands)
    returned = np.zeros((1500, 3))
    n = [0]
    with _tolerant_device() as dev:
        hdd.hdd_reset_stats()

        def tick() -> bool:
            i = n[0]
            dev.read()
            # Alternate every 7 ticks between the commands (sign flips and non-finite bursts).
            returned[i] = dev.command_force(cmds[(i // 7) % len(cmds)])
            n[0] = i + 1
            return True

        dev.clock().run(tick, 1500)
        stats = _stats(hdd)
        spec = dev.spec.as_dict()
        fallbacks = dev.info["spec_fallbacks"] + dev.info["state_fallbacks"]
        motor_after = _motor_force(hdd)
    norms = np.linalg.norm(returned[: n[0]], axis=1)
    return {
        "spec": spec,
        "fallbacks": fallbacks,
        "stats": stats,
        "returned_max_norm": float(norms.max()),
        "returned_all_finite": bool(np.all(np.isfinite(returned[: n[0]]))),
        "returned_reached_n": float(norms.max()),
        "motor_after": motor_after,
    }


def spring() -> dict[str, object]:
    """A compliant hand holds the stylus at an anchor; a spring pulls toward the origin."""
    hdd = _double()
    anchor_mm = [30.0, 20.0, -10.0]
    hand_k, hand_c, spring_k = 60.0, 2.0, 30.0
    hdd.hdd_set_stylus(_vec(anchor_mm), _vec([0.0, 0.0, 0.0]))
    hdd.hdd_set_hand_hold(_vec(anchor_mm), ctypes.c_double(hand_k), ctypes.c_double(hand_c))
    hdd.hdd_set_buttons(1)
    force = np.zeros(3)
    end_pos, end_vel = np.zeros(3), np.zeros(3)
    with _tolerant_device() as dev:
        start = dev.read().position_m.copy()

        def tick() -> bool:
            state = dev.read()
            end_pos[:] = state.position_m
            end_vel[:] = state.velocity_m_s
            np.multiply(state.position_m, -spring_k, out=force)
            dev.command_force(force)
            return True

        dev.clock().run(tick, 1500)
        result = {
            "anchor_m": [a * 1e-3 for a in anchor_mm],
            "hand_k": hand_k,
            "spring_k": spring_k,
            "start_m": start.tolist(),
            "end_m": end_pos.tolist(),
            "end_velocity_m_s": end_vel.tolist(),
            "motor_after": _motor_force(hdd),
        }
    return result


def _hold_the_gil(stop: threading.Event) -> None:
    """Pure Python that never sleeps: the servo callback waits for the GIL every tick."""
    acc = 0
    while not stop.is_set():
        for i in range(1000):
            acc += i * i % 7


def kinematics() -> dict[str, object]:
    """A scripted hand moves the stylus on a known sinusoid with a known orientation."""
    hdd = _double()
    center, amplitude, freq = [10.0, -5.0, 0.0], [20.0, 10.0, 0.0], 2.0
    angle = math.radians(30.0)
    rot = [math.cos(angle), -math.sin(angle), 0.0, math.sin(angle), math.cos(angle), 0.0, 0.0, 0.0, 1.0]
    hdd.hdd_set_orientation(_vec(rot))
    hdd.hdd_set_hand_trajectory(_vec(center), _vec(amplitude), ctypes.c_double(freq))
    hdd.hdd_set_buttons(2)
    pos = np.zeros((800, 3))
    vel = np.zeros((800, 3))
    buttons = np.zeros(800, dtype=int)
    n = [0]
    rotations: list[list[list[float]]] = []
    with _tolerant_device() as dev:

        def tick() -> bool:
            i = n[0]
            state = dev.read()
            pos[i] = state.position_m
            vel[i] = state.velocity_m_s
            buttons[i] = state.buttons
            if i == 100:
                rotations.append(dev.stylus_rotation().tolist())
            n[0] = i + 1
            return True

        hog_stop = threading.Event()
        hog = threading.Thread(target=_hold_the_gil, args=(hog_stop,), daemon=True)
        if os.environ.get("SCENARIO_GIL_HOG") == "1":  # every callback then waits for the GIL
            hog.start()
        try:
            dev.clock().run(tick, 800)
        finally:
            hog_stop.set()
        outside = dev.read()
        result = {
            "center_mm": center, "amplitude_mm": amplitude, "freq_hz": freq, "rot_row_major": rot,
            "pos_min": pos[: n[0]].min(axis=0).tolist(), "pos_max": pos[: n[0]].max(axis=0).tolist(),
            "vel_min": vel[: n[0]].min(axis=0).tolist(), "vel_max": vel[: n[0]].max(axis=0).tolist(),
            # a sinusoid spends 13 % of its time within 2 % of its peaks: these miss them by
            # under 0.1 %, and no single late sample (a stalled machine) moves them
            "vel_p01": np.percentile(vel[: n[0]], 1, axis=0).tolist(),
            "vel_p99": np.percentile(vel[: n[0]], 99, axis=0).tolist(),
            "buttons": sorted(set(buttons[: n[0]].tolist())),
            "rotation_in_tick": rotations[0],
            "rotation_outside": dev.stylus_rotation().tolist(),
            "transform_position_m": dev.stylus_transform()[:3, 3].tolist(),
            "transform_last_row": dev.stylus_transform()[3].tolist(),
            "position_outside_m": outside.position_m.tolist(),
            "outside_t_s": outside.t_s,
            "is_device": isinstance(dev, Device),
            "spec": dev.spec.as_dict(),
            "info": dev.info,
            "clock_is_servo_clock": isinstance(dev.clock(), ServoClockCheck),
        }
    return result


def button_next() -> dict[str, object]:
    """The device's second button as the task's "next": the trial's commander on the
    Touch (``trials.runner._haptic_commander``), a two-state task's post-capture phase
    started as at a capture, both run in the device's scheduler through the servo's
    guard (``app.ui.servo._guarded``). The double's hand holds button 1 (engage) and
    presses button 2 from tick 100 to 149; the machine's state is recorded every tick."""
    # this script's folder is first on sys.path and its name would shadow the project's
    # ``scenarios`` package, which the trial modules import
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    sys.modules.pop("scenarios", None)
    from app.ui.servo import _CONTROL_SIZE, REQUEST_COUNT, REQUEST_STATE, _guarded
    from robot.arm import ArmMeasurement
    from robot.slave import SlaveStatus
    from trials.behaviours.machine import parse_task
    from trials.behaviours.phase import PostCapturePhase
    from trials.runner import _haptic_commander
    from trials.vocabulary import load_scenario

    hdd = _double()
    hdd.hdd_set_buttons(1)
    ticks = 300
    states = np.full(ticks, -1)
    buttons = np.zeros(ticks, dtype=int)
    control = [0.0] * _CONTROL_SIZE
    measured, status = ArmMeasurement(3), SlaveStatus(3)
    pos, vel, acc, zero = np.zeros(3), np.zeros(3), np.zeros(3), np.zeros(3)
    # hold, then go (PTWL, long enough to still run at the end), hold's successor is go
    task = parse_task({"states": {"hold": {"behaviour": "ptwl", "params": {"duration_s": 5.0},
                                           "on": {"succeeded": "go"}},
                                  "go": {"behaviour": "ptwl", "params": {"duration_s": 5.0, "displacement_m": 0.01},
                                         "on": {"succeeded": "done"}}}}, "two", "button_next")
    post = PostCapturePhase(task, 1e-3)
    n = [0]
    with _tolerant_device() as dev:
        commander = _haptic_commander(load_scenario("berthing-planar"), dev)
        commander.start(zero)
        post.captured(0.0, measured, status, None, 5.0)

        def tick() -> bool:
            i = n[0]
            if i == 100:
                hdd.hdd_set_buttons(1 | 2)
            elif i == 150:
                hdd.hdd_set_buttons(1)
            t = i * 1e-3
            commander.command(t, pos, vel, acc)
            post.command(t, measured, status, pos, vel, acc)
            commander.render(zero)
            commander.actuate(t, zero, zero, zero, zero)
            states[i] = post.machine.state_index
            buttons[i] = commander.buttons
            n[0] = i + 1
            return True

        dev.clock().run(_guarded(tick, control, None, None, None, 10, post, commander), ticks)
    return {"states": states.tolist(), "buttons": buttons.tolist(), "state_names": list(post.task.state_names),
            "request_count": control[REQUEST_COUNT], "request_state": control[REQUEST_STATE],
            "results": [[r.state, r.result, r.reason] for r in post.machine.results]}


def _force_then(action: Callable[[ctypes.CDLL], None]) -> dict[str, object]:
    """Command 2 N (engaged) for 400 ticks, then ``action``; report what happened."""
    hdd = _double()
    hdd.hdd_set_buttons(1)
    hdd.hdd_set_hand_hold(_vec([0.0, 0.0, 0.0]), ctypes.c_double(400.0), ctypes.c_double(3.0))
    command = np.array([0.0, 2.0, 0.0])
    sent = np.zeros(1000)
    stamps = np.zeros(1000)
    n = [0]
    out: dict[str, object] = {}
    with _tolerant_device() as dev:

        def tick() -> bool:
            i = n[0]
            stamps[i] = dev.read().t_s
            sent[i] = dev.command_force(command)[1]
            n[0] = i + 1
            if i == 400:
                out["motor_before"] = _motor_force(hdd)
                action(hdd)
            return True

        try:
            dev.clock().run(tick, 1000)
            out["raised"] = None
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            out["raised"] = type(exc).__name__
            out["message"] = str(exc)
        out["motor_after"] = _motor_force(hdd)
        out["ticks"] = n[0]
        out["fault"] = dev.fault
        out["first_sent"] = sent[:5].tolist()
        out["sent_at_100"] = float(sent[100])
        out["elapsed_at_100_s"] = float(stamps[100] - stamps[0])
        try:
            dev.clock().run(lambda: False, 10)
            out["second_run"] = "ran"
        except Exception as exc:  # noqa: BLE001
            out["second_run"] = type(exc).__name__
        dev.clear_fault()
        dev.clock().run(lambda: False, 10)
        out["after_clear"] = "ran"
        out["last_run_stopped_by"] = dev.last_run["stopped_by"]
    return out


def tick_raises() -> dict[str, object]:
    def boom(_hdd: ctypes.CDLL) -> None:
        raise RuntimeError("boom in the tick")

    return _force_then(boom)


def hd_error() -> dict[str, object]:
    code = int(os.environ.get("SCENARIO_HD_ERROR", "0x200"), 0)
    return _force_then(lambda hdd: hdd.hdd_inject_error(ctypes.c_uint(code), 7))


def ramp_out() -> dict[str, object]:
    """A run that ends normally with 2 N commanded: the force must be zero after run()."""
    hdd = _double()
    hdd.hdd_set_buttons(1)
    hdd.hdd_set_hand_hold(_vec([0.0, 0.0, 0.0]), ctypes.c_double(400.0), ctypes.c_double(3.0))
    command = np.array([0.0, 2.0, 0.0])
    with _tolerant_device() as dev:

        def tick() -> bool:
            dev.read()
            dev.command_force(command)
            return True

        dev.clock().run(tick, 600)
        motor_after = _motor_force(hdd)
        stopped_by = dev.last_run["stopped_by"]
    calls_closed = _stats(hdd)["callback_calls"]
    # A second device in the same process: only possible if the first released libHD.
    with _device() as dev2:
        dev2.clock().run(lambda: False, 5)
    return {"motor_after": motor_after, "stopped_by": stopped_by, "calls_closed": calls_closed,
            "calls_later": _stats(hdd)["callback_calls"]}


def dropped() -> dict[str, object]:
    """Open a device, drop every reference, collect garbage, let libHD keep calling."""
    import gc

    hdd = _double()
    dev = _device()
    dev.open()
    del dev
    gc.collect()
    start = _stats(hdd)["callback_calls"]
    give_up = time.monotonic() + 5.0
    while _stats(hdd)["callback_calls"] < start + 200 and time.monotonic() < give_up:
        time.sleep(0.001)  # polling libHD's counter: the thunk must still be alive
    return {"calls_after_gc": _stats(hdd)["callback_calls"] - start}


def open_error() -> dict[str, object]:
    """Open the backend and report the error (for missing libHD / missing device)."""
    try:
        dev = _device()
    except Exception as exc:  # noqa: BLE001
        return {"raised": type(exc).__name__, "message": str(exc)}
    dev.close()
    return {"raised": None}


def stall() -> dict[str, object]:
    """2 N on the motors, then the servo loop stalls (SCENARIO_STALL: a haptics._hd_double
    STALL_KINDS name) for 100 ms: when did the force at the motors reach zero?"""
    from haptics._hd_double import measure_stall

    hdd = _double()
    hdd.hdd_set_buttons(1)
    hdd.hdd_set_hand_hold(_vec([0.0, 0.0, 0.0]), ctypes.c_double(400.0), ctypes.c_double(3.0))
    from haptics.safety import SafetyConfig

    # The default watchdog timing (zero within 10 ms); a short ramp-in and lead keep the
    # run before the stall short, so that a loaded machine seldom stalls it first.
    with _device(safety_config=SafetyConfig(ramp_in_s=0.01)) as dev:
        dev.set_engaged(True)
        attempts = 0
        while True:
            attempts += 1
            out = measure_stall(dev, hdd, os.environ["SCENARIO_STALL"], lead_ticks=30)
            if out["stalled"] or attempts == 5:
                break
            dev.clear_fault()  # the machine stalled the loop before the stall began: again
        out["attempts"] = attempts
        out["config"] = dev.safety.config.as_dict()
        try:
            dev.clock().run(lambda: False, 10)
            out["second_run"] = "ran"
        except Exception as exc:  # noqa: BLE001
            out["second_run"] = type(exc).__name__
        sent = np.zeros(50)
        n = [0]

        def tick() -> bool:
            dev.read()
            sent[n[0]] = dev.command_force(np.array([0.0, 1.0, 0.0]))[1]
            n[0] += 1
            return True

        for _ in range(5):  # again if the machine stalls this short run (as above)
            dev.clear_fault()
            n[0] = 0
            try:
                dev.clock().run(tick, 50)
                break
            except Exception:  # noqa: BLE001
                continue
        out["after_clear_max_n"] = float(sent.max())
        out["motor_after"] = _motor_force(hdd)
    return out


def slow_first_tick() -> dict[str, object]:
    """The default watchdog; the run's first tick takes 30 ms (a warm-up), then 1 N.

    (The safety layer's in-tick watchdog sees the 30 ms gap and ramps in again after
    ``recover_s``: 250 ticks cover it.)"""
    hdd = _double()
    hdd.hdd_set_buttons(1)
    hdd.hdd_set_hand_hold(_vec([0.0, 0.0, 0.0]), ctypes.c_double(400.0), ctypes.c_double(3.0))
    from haptics.safety import SafetyConfig

    sent = np.zeros(250)
    n = [0]
    with _device(safety_config=SafetyConfig(ramp_in_s=0.01)) as dev:
        dev.set_engaged(True)

        def tick() -> bool:
            if n[0] == 0:
                time.sleep(0.03)  # the warm-up being simulated, not a synchronisation
            dev.read()
            sent[n[0]] = dev.command_force(np.array([0.0, 1.0, 0.0]))[1]
            n[0] += 1
            return True

        try:
            dev.clock().run(tick, 250)
            raised = None
        except Exception as exc:  # noqa: BLE001
            raised = f"{type(exc).__name__}: {exc}"
        return {"raised": raised, "ticks": n[0], "max_sent_n": float(sent.max()), "fault": dev.fault,
                "first_period_ms": dev.last_run["max_period_ms"] if dev.last_run else None}


SCENARIOS: dict[str, Callable[[], dict[str, object]]] = {
    f.__name__: f
    for f in (rate, limits, spring, kinematics, tick_raises, hd_error, ramp_out, dropped, open_error, stall,
              slow_first_tick, button_next)
}

if __name__ == "__main__":
    print(json.dumps(SCENARIOS[sys.argv[1]]()))
