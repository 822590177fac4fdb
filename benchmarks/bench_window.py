"""`capture-trainer bench window`: the servo's rate while the trainer window draws.

Runs the trainee flow headless (SDL's dummy video driver unless ``SDL_VIDEODRIVER`` is
set): the real servo process and runner, a simulated device with a passive participant,
one guided attempt of ``--seconds`` of trial time while the window draws at its display
rate. Reports the servo's own timing statistics of that attempt (``haptics.timing``:
rate, period percentiles, overruns) beside the frames the window drew, so the claim
"drawing never slows the servo" is a measurement, read against its targets (rate >= 990
Hz, p99 period <= 1.5 ms), not an assertion in the test suite.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import emit, machine

#: The servo's timing figures copied into the JSON (from ``ServoTiming.summary``).
TIMING_KEYS = ("periods", "rate_hz", "mean_period_ms", "p50_period_ms", "p99_period_ms", "p999_period_ms",
               "max_period_ms", "overruns", "overrun_fraction")


def add_bench(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("window", help="servo rate while the trainer window draws (SDL dummy driver)")
    parser.add_argument("--seconds", type=float, default=4.0, help="trial time of the attempt [s]")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=_handler)


def measure_window(seconds: float) -> dict[str, Any]:
    """One automatic guided attempt in the trainer window; the servo's timing while it drew."""
    if seconds <= 0.0:
        raise ValueError(f"--seconds must be positive, got {seconds}")
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    from app.ui.window import WindowConfig, run_trainer

    with tempfile.TemporaryDirectory() as out:
        begun = time.perf_counter()
        results = run_trainer(WindowConfig(
            device="simulated", participant_kind="passive", out_dir=Path(out), trainee="bench", auto=("dg",),
            stop_after_s=seconds, quit_when_done=True,
        ))
        wall_s = time.perf_counter() - begun
    if len(results) != 1:
        raise RuntimeError(f"expected one attempt, the window ran {len(results)}")
    result = results[0]
    timing = result.timing
    return {
        "seconds": seconds,
        "status": result.status,
        "frames_drawn": result.frames_drawn,
        "wall_seconds": wall_s,
        "video_driver": os.environ["SDL_VIDEODRIVER"],
        "priority": result.priority,
        **{key: timing.get(key) for key in TIMING_KEYS},
        "targets": {"rate_hz_min": 990.0, "p99_period_ms_max": 1.5},
        "machine": machine(),
    }


def _handler(args: argparse.Namespace) -> int:
    emit(measure_window(args.seconds), args.json)
    return 0
