"""`capture-trainer bench throughput` and `bench study`: headless speed.

``throughput`` runs one 10 s trial headless (the whole trial: building, ticking and
writing the file) and reports simulated seconds per wall second. ``study`` runs a
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
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(handler=_throughput)

    study = subparsers.add_parser("study", help="a 30-trial study with 1 and 2 workers (JSON)")
    study.add_argument("--trials", type=int, default=30)
    study.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    study.add_argument("--json", action="store_true")
    study.set_defaults(handler=_study)


def measure_throughput(model: str, seconds: float) -> dict[str, object]:
    """One headless trial of ``seconds`` simulated seconds; the whole trial is timed."""
    from trials.runner import TrialRequest, build_trial

    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        trial = build_trial(
            TrialRequest(
                scenario=MODEL_SCENARIOS[model],
                condition="dg",
                seed=1,
                time_limit_s=seconds,
                end_on_capture=False,
            ),
            out,
        )
        built = time.perf_counter()
        summary = trial.run()
        wall = time.perf_counter() - started
    return {
        "model": model,
        "sim_seconds": summary["sim_s"],
        "wall_seconds": wall,
        "realtime_factor": summary["sim_s"] / wall,
        "build_seconds": built - started,
        "loop_realtime_factor": summary["sim_s"] / (wall - (built - started)),
        "machine": machine(),
    }


def measure_study(trials: int, workers: list[int]) -> dict[str, object]:
    """A study of ``trials`` paper-2019 trials (simulated participants) per worker count."""
    from trials.protocol import load_protocol
    from trials.study import run_study

    result: dict[str, object] = {"trials": trials, "machine": machine()}
    with tempfile.TemporaryDirectory() as tmp:
        protocol_path = Path(tmp) / "bench.toml"
        participants = max(1, trials // 3)
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
    emit(measure_throughput(args.model, args.seconds), args.json)
    return 0


def _study(args: argparse.Namespace) -> int:
    emit(measure_study(args.trials, args.workers), args.json)
    return 0
