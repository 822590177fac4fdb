"""`capture-trainer bench device-loop`: the OpenHaptics servo callback's period.

Runs the OpenHaptics backend against the libHD test double (built with the system C
compiler, or the library named by ``CAPTURE_TRAINER_LIBHD``) for ``--seconds`` with a
representative tick (read the stylus, render a spring, command the force through the
safety layer) and reports the achieved callback period (mean, p99, p99.9, max) and the
overruns (periods > 1.5 ms) from ``haptics.timing.ServoTiming``; with the double, also
how often and how late its scheduler thread was woken after a deadline it went to sleep
before (``scheduler_woken_late``: the machine's share of the tail, not the loop's).

``--contention`` adds runs with a Python thread beside the loop (what drawing or analysis
does to the GIL): a drawing-like thread (5 ms of Python per 60 Hz frame), and a thread
that never sleeps, once with the backend's switch interval (0.5 ms) and once with
Python's default (5 ms), to show why the backend lowers it (with 5 ms the loop cannot
post a fresh force every 4 ms: the force watchdog trips, and the run's ``fault`` says so).

``watchdog``: "stall begins -> zero force at the motors" of the independent force
watchdog (the C servo callback), for a tick that sleeps, a thread that holds the GIL (a C
call that keeps it) and a tick that never returns, each ``--stalls`` times for 100 ms
with 2 N on the motors; timed on the double's clock from its log of every force
committed (``haptics._hd_double.measure_stall``). The limit is ``force_deadline_s``
(10 ms).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from capture_trainer.errors import DeviceError

if TYPE_CHECKING:
    from haptics.openhaptics import OpenHapticsDevice

PERIOD_KEYS = (("mean", "mean_period_ms"), ("p50", "p50_period_ms"), ("p99", "p99_period_ms"),
               ("p99.9", "p999_period_ms"), ("max", "max_period_ms"))


def add_bench(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("device-loop", help="OpenHaptics callback period with the libHD double")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the measured run [s]")
    parser.add_argument("--contention", action="store_true",
                        help="also measure with a busy Python thread beside the loop")
    parser.add_argument("--stalls", type=int, default=5,
                        help="stalls of each kind timed for the force watchdog (0: none)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=_handler)


def _python_work(seconds: float) -> None:
    """Pure-Python work (holds the GIL as long as the interpreter lets it)."""
    end = time.perf_counter() + seconds
    acc = 0
    while time.perf_counter() < end:
        for i in range(1_000):
            acc += i * i % 7


def _busy_python(stop: threading.Event) -> None:
    """A thread that never sleeps: the worst neighbour of the servo loop."""
    while not stop.is_set():
        _python_work(0.01)


def _display_rate_python(stop: threading.Event) -> None:
    """A drawing-like thread: 5 ms of Python work per 60 Hz frame, sleeping between."""
    while not stop.wait(1.0 / 60.0 - 0.005):
        _python_work(0.005)


def _open_touch(**options: Any) -> OpenHapticsDevice:
    """The openhaptics backend through the registry (as the trials open it)."""
    from haptics.backends import open_device
    from haptics.openhaptics import OpenHapticsDevice

    device = open_device("openhaptics", **options)
    assert isinstance(device, OpenHapticsDevice)
    return device


def _measure(
    seconds: float,
    switch_interval_s: float | None,
    neighbour: Callable[[threading.Event], None] | None,
    lib: ctypes.CDLL,
) -> dict[str, Any]:
    import numpy as np

    from haptics._hd_double import double_stats

    force = np.zeros(3)
    stiffness_n_m = 200.0
    stop = threading.Event()
    with _open_touch(switch_interval_s=switch_interval_s) as device:
        device.set_engaged(True)
        rate_hz = device.spec.rate_hz

        def tick() -> bool:
            state = device.read()
            np.multiply(state.position_m, -stiffness_n_m, out=force)
            device.command_force(force)
            return True

        worker = threading.Thread(target=neighbour, args=(stop,), daemon=True) if neighbour else None
        if worker is not None:
            worker.start()
        if hasattr(lib, "hdd_reset_stats"):
            lib.hdd_reset_stats()  # the double's lateness counters cover the run only
        fault = None
        try:
            device.clock().run(tick, int(round(seconds * rate_hz)))
        except DeviceError as error:  # e.g. the force watchdog tripped: a result, not a crash
            fault = str(error)
        finally:
            stop.set()
            if worker is not None:
                worker.join()
        run = device.last_run
        stats = double_stats(lib)  # None for a libHD that is not the double
    if run is None:
        raise RuntimeError("the device recorded no run")
    result = {
        "period_ms": {key: run[field] for key, field in PERIOD_KEYS},
        "overruns": run["overruns"],
        "overrun_threshold_ms": 1.5 * run["expected_period_ms"],
        "periods_over_2ms": int(sum(
            count for count, low_ms in zip(run["histogram_counts"], run["histogram_edges_ms"]) if low_ms >= 2.0
        )),
        "ticks": run["ticks"],
        "rate_hz": run["rate_hz"],
        "callback_busy_ms": {"mean": run["busy_ms_mean"], "max": run["busy_ms_max"]},
        "switch_interval_s": switch_interval_s,
        "hd_errors": run["hd_errors"],
        "answered_in_frame": run["answered_in_frame"],
        "answered_late": run["answered_late"],
        "samples_skipped": run["samples_skipped"],
        "fault": fault,
    }
    if stats is not None:
        # The machine's share of the tail: the double's scheduler thread, asleep before
        # its deadline, woken more than a period late (the OS or the hypervisor).
        result["scheduler_woken_late"] = {
            "ticks": stats["wake_late_ticks"],
            "max_late_ms": 1e3 * stats["max_wake_late_s"],
            "sched_fifo": bool(stats["realtime"]),
        }
    return result


def _measure_watchdog(stalls: int, lib: ctypes.CDLL) -> dict[str, Any]:
    """Time "stall begins -> zero force" ``stalls`` times for each stall kind."""
    import statistics

    from haptics._hd_double import STALL_KINDS, measure_stall

    out: dict[str, Any] = {}
    for kind in STALL_KINDS:
        runs = []
        with _open_touch() as device:
            device.set_engaged(True)
            deadline_ms = 1e3 * device.safety.config.force_deadline_s
            for _ in range(stalls):
                device.clear_fault()
                runs.append(measure_stall(device, lib, kind))
        zeros = [r["zero_after_ms"] for r in runs if r["stalled"] and r["zero_after_ms"] is not None]
        out[kind] = {
            "stall_to_zero_ms": {
                "min": min(zeros) if zeros else None,
                "median": statistics.median(zeros) if zeros else None,
                "max": max(zeros) if zeros else None,
            },
            "within_deadline": sum(z <= deadline_ms for z in zeros),
            "stalls": len(runs),
            "stalled": sum(bool(r["stalled"]) for r in runs),
            "force_at_stall_n": [r["force_at_stall_n"] for r in runs],
            "max_force_after_zero_n": max((r["max_force_after_zero_n"] or 0.0) for r in runs),
            "fault_latched": all(r["fault"] is not None and "watchdog" in r["fault"] for r in runs),
            "deadline_ms": deadline_ms,
        }
    return out


def run_bench(seconds: float = 10.0, contention: bool = False, stalls: int = 5) -> dict[str, Any]:
    """Measure the device loop; returns the JSON-ready result."""
    from haptics._hd_api import LIBHD_ENV
    from haptics._hd_double import build_double

    path = os.environ.get(LIBHD_ENV) or str(build_double())
    os.environ[LIBHD_ENV] = path
    lib = ctypes.CDLL(path)
    if hasattr(lib, "hdd_set_hand_trajectory"):  # the double: a hand moving the stylus
        vec3 = ctypes.c_double * 3
        lib.hdd_set_hand_trajectory(vec3(0.0, 0.0, 0.0), vec3(20.0, 10.0, 5.0), ctypes.c_double(1.0))
    result = _measure(seconds, 5e-4, None, lib)
    result["seconds"] = seconds
    result["libhd"] = path
    result["machine"] = {
        "cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
        "processor": platform.processor() or platform.machine(),
    }
    if contention:
        result["contention"] = {
            "drawing_60hz_switch_0.5ms": _measure(seconds, 5e-4, _display_rate_python, lib),
            "busy_thread_switch_0.5ms": _measure(seconds, 5e-4, _busy_python, lib),
            "busy_thread_switch_default_5ms": _measure(seconds, None, _busy_python, lib),
        }
    if stalls > 0 and hasattr(lib, "hdd_motor_log"):  # timed on the double's motor log
        result["watchdog"] = _measure_watchdog(stalls, lib)
    return result


def _handler(args: argparse.Namespace) -> int:
    result = run_bench(args.seconds, args.contention, args.stalls)
    if args.json:
        print(json.dumps(result))
        return 0
    p = result["period_ms"]
    print(f"device loop ({result['seconds']:.0f} s, {result['libhd']}): period mean {p['mean']:.4f} ms, "
          f"p99 {p['p99']:.3f} ms, p99.9 {p['p99.9']:.3f} ms, max {p['max']:.3f} ms, "
          f"overruns {result['overruns']}, rate {result['rate_hz']:.1f} Hz")
    late = result.get("scheduler_woken_late")
    if late is not None:
        print(f"  the double's scheduler thread was woken > 1 period late {late['ticks']} times "
              f"(latest {late['max_late_ms']:.2f} ms): the machine's share")
    for name, run in result.get("contention", {}).items():
        q = run["period_ms"]
        print(f"  busy Python thread, {name}: mean {q['mean']:.3f} ms, p99 {q['p99']:.3f} ms, "
              f"max {q['max']:.3f} ms, overruns {run['overruns']}, rate {run['rate_hz']:.1f} Hz"
              + (f"; {run['fault']}" if run["fault"] else ""))
    for kind, wd in result.get("watchdog", {}).items():
        z = wd["stall_to_zero_ms"]
        if z["max"] is None:
            print(f"  force watchdog, {kind}: never zeroed ({wd['stalled']} of {wd['stalls']} stalls reached)")
            continue
        print(f"  force watchdog, {kind}: stall -> zero force {z['min']:.2f} / {z['median']:.2f} / "
              f"{z['max']:.2f} ms (min / median / max of {wd['stalled']}), "
              f"{wd['within_deadline']} within {wd['deadline_ms']:.0f} ms")
    return 0
