"""`capture-trainer bench servo`: latency of the full servo tick, stage by stage.

Runs the complete tick (simulated device read, mapping, slave-control path with the LSE
IK, PyBullet step, target, guidance, rendering, safety layer, recorder append) for
20,000 ticks after a warm-up, headless, and reports whole-tick and per-stage latency in
microseconds (median, p99, p99.9, max) and the resident-memory growth over the run.
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time

import numpy as np

from benchmarks._common import MODEL_SCENARIOS, emit, machine, percentiles_us, rss_bytes

WARMUP_TICKS = 1000


def add_bench(subparsers: argparse._SubParsersAction) -> None:
    from trials.conditions import CONDITIONS

    parser = subparsers.add_parser("servo", help="servo-tick latency per stage (JSON)")
    parser.add_argument("--model", choices=sorted(MODEL_SCENARIOS), default="planar-3r")
    parser.add_argument("--ticks", type=int, default=20_000)
    parser.add_argument("--condition", default="dg", choices=CONDITIONS.names())
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(handler=_handler)


def measure_servo(model: str, ticks: int, condition: str = "dg") -> dict[str, object]:
    """Time ``ticks`` servo ticks of ``model``'s benchmark scenario (see module doc)."""
    from trials.runner import DT_S, TrialRequest, build_trial
    from trials.tick import STAGES, StageTimer

    with tempfile.TemporaryDirectory() as out:
        request = TrialRequest(
            scenario=MODEL_SCENARIOS[model],
            condition=condition,
            participant="novice",
            seed=1,
            time_limit_s=(ticks + WARMUP_TICKS + 10) * DT_S,
            end_on_capture=False,
        )
        trial = build_trial(request, out)
        tick = trial.tick
        for _ in range(WARMUP_TICKS):
            tick()
        profile = StageTimer(ticks)
        tick.timer = profile
        gc.collect()
        rss_before = rss_bytes()
        started = time.perf_counter()
        for _ in range(ticks):
            if not tick():
                break
        wall = time.perf_counter() - started
        rss_after = rss_bytes()
        trial.finish()
    stamps = profile.stamps[: profile.count]
    stage_s = np.diff(stamps, axis=1)
    return {
        "model": model,
        "condition": condition,
        "ticks": int(profile.count),
        "tick_us": percentiles_us(stamps[:, -1] - stamps[:, 0]),
        "stages_us": {
            name: percentiles_us(stage_s[:, i]) for i, name in enumerate(STAGES)
        },
        "rss_growth_bytes": int(rss_after - rss_before),
        "realtime_factor": profile.count * DT_S / wall,
        "machine": machine(),
    }


def _handler(args: argparse.Namespace) -> int:
    emit(measure_servo(args.model, args.ticks, args.condition), args.json)
    return 0
