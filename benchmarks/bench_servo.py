"""`capture-trainer bench servo`: latency of the full servo tick, stage by stage.

Runs the complete tick (simulated device read, mapping, slave-control path with the LSE
IK, PyBullet step, target, guidance, rendering, safety layer, recorder append) for
20,000 ticks after a warm-up, headless, and reports whole-tick and per-stage latency in
microseconds (median, p99, p99.9, max) and the resident-memory growth over the run.

Two runs of the same trial, back to back in one process: the tick as trials run it
(fused when the parts allow, :mod:`trials.fused`) gives ``tick_us``, ``realtime_factor``,
``fused_stages_us`` (pre-plant, plant, post-plant), ``tick_to_plant_ratio`` (its tick
median over its plant stage's median) and ``tick_minus_plant_us`` (their difference: what
the tick costs besides the PyBullet world); the staged reference path gives ``stages_us``
(the nine stages) and the ``reference`` figures. ``plant_ceiling_realtime_factor`` is
what a tick made of its plant stage alone would reach (one period over the plant stage's
median): no trial of this world runs faster, whatever the rest of the tick costs. The
fused plant stage is the PyBullet world: the joint command sent, one step, the arm's
read-out and the debris' read (the staged path's plant and target stages, and the slave
stage's ``arm.send``), through PyBullet's C API where it can be reached (``plant_path``:
``native: ...``, or ``python: `` and why not; :mod:`robot.pybullet_native`).
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
    from trials.fused import FUSED_STAGE_CONTENTS, FUSED_STAGES
    from trials.runner import DT_S

    reference = _measure(model, ticks, condition, staged=True)
    result = _measure(model, ticks, condition, staged=False)
    plant = FUSED_STAGES.index("plant")
    fused = result["path"]["fused"]  # type: ignore[index]
    stages = result.pop("stages")
    ref_stages = reference.pop("stages")
    result["stages_us"] = ref_stages
    if fused:
        result["fused_stages_us"] = stages
        result["fused_stage_contents"] = FUSED_STAGE_CONTENTS
        plant_us = stages[FUSED_STAGES[plant]]["median"]  # type: ignore[index]
    else:
        result["fused_stages_us"] = None
        plant_us = ref_stages["plant"]["median"]  # type: ignore[index]
    result["tick_to_plant_ratio"] = result["tick_us"]["median"] / plant_us  # type: ignore[index]
    result["tick_minus_plant_us"] = result["tick_us"]["median"] - plant_us  # type: ignore[index]
    result["plant_ceiling_realtime_factor"] = 1e6 * DT_S / plant_us
    result["fused"] = fused
    reference.pop("plant_path")
    reference.pop("prepared_event_ticks")
    result["reference"] = {
        "tick_us": reference["tick_us"],
        "realtime_factor": reference["realtime_factor"],
        "rss_growth_bytes": reference["rss_growth_bytes"],
        "tick_to_plant_ratio": reference["tick_us"]["median"] / ref_stages["plant"]["median"],  # type: ignore[index]
        "note": "the staged path (every stage in Python, calling its own kernels), same trial, run just before",
    }
    result["machine"] = machine()
    return result


def _measure(model: str, ticks: int, condition: str, staged: bool) -> dict[str, object]:
    """One timed run; ``staged``: the reference path."""
    from trials.fused import FUSED_STAGES
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
        trial = build_trial(request, out, staged=staged)
        tick = trial.tick
        for _ in range(WARMUP_TICKS):
            tick()
        fused = tick.fused
        profile = StageTimer(ticks, FUSED_STAGES if fused is not None else STAGES)
        tick.timer = profile
        gc.collect()
        rss_before = rss_bytes()
        started = time.perf_counter()
        for _ in range(ticks):
            if not tick():
                break
        wall = time.perf_counter() - started
        rss_after = rss_bytes()
        staged_ticks = None if fused is None else fused.staged_ticks
        prepared_ticks = None if fused is None else fused.prepared_ticks
        plant_path = None if fused is None else fused.plant_path
        trial.finish()
    stamps = profile.stamps[: profile.count]
    stage_s = np.diff(stamps, axis=1)
    return {
        "model": model,
        "condition": condition,
        "ticks": int(profile.count),
        "tick_us": percentiles_us(stamps[:, -1] - stamps[:, 0]),
        "stages": {
            name: percentiles_us(stage_s[:, i]) for i, name in enumerate(profile.names)
        },
        "rss_growth_bytes": int(rss_after - rss_before),
        "realtime_factor": profile.count * DT_S / wall,
        "path": tick.path.as_dict(),
        "staged_event_ticks": staged_ticks,
        "prepared_event_ticks": prepared_ticks,
        "plant_path": plant_path,
    }


def _handler(args: argparse.Namespace) -> int:
    emit(measure_servo(args.model, args.ticks, args.condition), args.json)
    return 0
