"""`capture-trainer bench throughput` and `bench study`: headless speed.

``throughput`` runs one 10 s trial headless in a warmed-up worker process (the whole
trial: building, ticking and writing the file) and reports simulated seconds per wall
second, with the process's one-off start-up reported beside it. ``study`` runs a
30-trial study with one and with two worker processes.
"""

from __future__ import annotations

import argparse
import io
import tempfile
import time
from pathlib import Path

from benchmarks._common import MODEL_SCENARIOS, emit, machine


def add_bench(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("throughput", help="headless simulated s per wall s (JSON)")
    parser.add_argument("--model", choices=sorted(MODEL_SCENARIOS), default="planar-3r")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--workers", type=int, nargs="+", metavar="N",
                        help="also run the 30-trial study (as `bench study`) with these worker counts")
    parser.add_argument("--trials", type=int, default=30, help="trials of that study")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(handler=_throughput)

    study = subparsers.add_parser("study", help="a 30-trial study with 1 and 2 workers (JSON)")
    study.add_argument("--trials", type=int, default=30)
    study.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    study.add_argument("--json", action="store_true")
    study.set_defaults(handler=_study)


def measure_throughput(model: str, seconds: float) -> dict[str, object]:
    """Headless throughput of one worker process, in simulated seconds per wall second.

    The process first runs a short trial of the same model (what a study worker does
    once: imports, loading the compiled kernels from numba's cache, the first PyBullet
    client); then one trial of ``seconds`` is timed whole: building it, ticking it and
    writing its file. ``realtime_factor`` is that trial's; ``cold`` times the first
    trial of a fresh process, start-up included.
    """
    started = time.perf_counter()
    from trials.runner import TrialRequest, build_trial

    def request(limit_s: float) -> TrialRequest:
        return TrialRequest(
            scenario=MODEL_SCENARIOS[model], condition="dg", seed=1, time_limit_s=limit_s, end_on_capture=False
        )

    with tempfile.TemporaryDirectory() as out:
        warm_up = build_trial(request(0.1), Path(out) / "warm-up")
        warm_up_sim_s = warm_up.run()["sim_s"]
        start_up_s = time.perf_counter() - started
        begun = time.perf_counter()
        trial = build_trial(request(seconds), out)
        built = time.perf_counter()
        summary = trial.run()
        wall = time.perf_counter() - begun
    build_s = built - begun
    return {
        "model": model,
        "sim_seconds": summary["sim_s"],
        "wall_seconds": wall,
        "realtime_factor": summary["sim_s"] / wall,
        "build_seconds": build_s,
        "loop_realtime_factor": summary["sim_s"] / (wall - build_s),
        "tick_us_mean": 1e6 * (wall - build_s) / summary["ticks"],
        "cold": {
            "start_up_seconds": start_up_s,
            "note": "imports, kernel cache load and a first trial of "
            f"{warm_up_sim_s:.1f} s: paid once per worker process",
            "first_trial_realtime_factor": summary["sim_s"] / (wall + start_up_s),
        },
        "machine": machine(),
    }


def measure_study(trials: int, workers: list[int]) -> dict[str, object]:
    """A study of ``trials`` paper-2019 trials (simulated participants) per worker count."""
    from trials.protocol import load_protocol
    from trials.study import run_study

    participants = max(1, trials // 3)  # each does the three conditions once
    result: dict[str, object] = {"trials": 3 * participants, "machine": machine()}
    with tempfile.TemporaryDirectory() as tmp:
        protocol_path = Path(tmp) / "bench.toml"
        protocol_path.write_text(
            'name = "bench"\nseed = 1\nscenarios = ["paper-2019"]\n'
            'conditions = ["dg", "ng", "apf"]\nrepetitions = 1\n'
            f"[participants]\ncount = {participants}\nmix = {{ novice = 0.5, expert = 0.5 }}\n"
        )
        protocol = load_protocol(protocol_path)
        for count in workers:
            started = time.perf_counter()
            outcome = run_study(protocol, Path(tmp) / f"w{count}", workers=count, progress=io.StringIO())
            wall = time.perf_counter() - started
            result[f"workers_{count}"] = {
                "wall_seconds": wall,
                "trials": outcome.ran,
                "failed": len(outcome.failed),
                "trials_per_second": outcome.ran / wall,
            }
    return result


def _throughput(args: argparse.Namespace) -> int:
    if not args.seconds > 0.0:
        raise SystemExit(f"--seconds must be positive, got {args.seconds}")
    result = measure_throughput(args.model, args.seconds)
    if args.workers:
        result["study"] = measure_study(args.trials, args.workers)
    emit(result, args.json)
    return 0


def _study(args: argparse.Namespace) -> int:
    if args.trials < 1 or min(args.workers) < 1:
        raise SystemExit("--trials and --workers must be at least 1")
    emit(measure_study(args.trials, args.workers), args.json)
    return 0
