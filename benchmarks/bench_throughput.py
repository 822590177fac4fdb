"""`capture-trainer bench throughput` and `bench study`: headless speed.

``throughput`` runs one 10 s trial headless in a warmed-up worker process (the whole
trial: building, ticking and writing the file) and reports simulated seconds per wall
second, with the process's one-off start-up reported beside it. ``study`` runs a
30-trial study with one and with two worker processes and reports each worker's
start-up, trials per second and the speed-up over one worker.
"""

from __future__ import annotations

import argparse
import io
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import MODEL_SCENARIOS, emit, machine


def add_bench(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("throughput", help="headless simulated s per wall s (JSON)")
    parser.add_argument("--model", choices=sorted(MODEL_SCENARIOS), default="planar-3r")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=3,
                        help="time the trial this many times; the figures are the median run's")
    parser.add_argument("--workers", type=int, nargs="+", metavar="N",
                        help="also run the 30-trial study (as `bench study`) with these worker counts")
    parser.add_argument("--trials", type=int, default=30, help="trials of that study")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(handler=_throughput)

    study = subparsers.add_parser("study", help="a 30-trial study with 1 and 2 workers (JSON)")
    study.add_argument("--trials", type=int, default=30)
    study.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    study.add_argument("--chunk-size", type=int, default=1, help="trials handed to a worker at a time")
    study.add_argument("--repeat", type=int, default=1,
                       help="run each worker count this many times; figures are the medians")
    study.add_argument("--json", action="store_true")
    study.set_defaults(handler=_study)


def measure_throughput(model: str, seconds: float, repeat: int = 3) -> dict[str, object]:
    """Headless throughput of one worker process, in simulated seconds per wall second.

    The process first runs a short trial of the same model (what a study worker does
    once: imports, loading the compiled kernels from numba's cache, the first PyBullet
    client); then one trial of ``seconds`` is timed whole, ``repeat`` times: building it,
    ticking it and writing its file. The figures are those of the median run (by
    ``realtime_factor``; ``runs`` lists every run's, ``realtime_factor_range`` their
    spread): one 10 s trial takes well under a second, and a shared machine's speed
    wanders by a third over seconds. ``realtime_factor`` is that trial's;
    ``cpu_realtime_factor`` the same over the process's CPU seconds (the recorder's
    flusher thread included): on a machine shared with other work, the figure the
    machine's own load does not set. ``cold`` times the first
    trial of a fresh process, start-up included. The trial runs the tick as trials do
    (fused when its parts allow: ``fused``, ``tick_path``; ``plant_path``: whether its
    plant stage steps PyBullet through its C API, and if not why; ``quiet_ticks``: how
    many of the last run's ticks ran whole in compiled code, ``FusedTick.quiet``, in
    ``quiet_calls`` calls: the headless clock's batches, ``HeadlessClock.batch_ticks`` at
    most); ``reference`` is the same trial on the staged path, timed once right after.
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
        runs = []
        for index in range(repeat):
            begun, cpu_begun = time.perf_counter(), time.process_time()
            trial = build_trial(request(seconds), Path(out) / f"run-{index}")
            built = time.perf_counter()
            summary = trial.run()
            wall = time.perf_counter() - begun
            cpu = time.process_time() - cpu_begun
            runs.append(_timed_run(summary, wall, built - begun, cpu))
        path = trial.tick.path
        fused_tick = trial.tick.fused
        plant_path = None if fused_tick is None else fused_tick.plant_path
        quiet_ticks = None if fused_tick is None else fused_tick.quiet_ticks
        quiet_calls = None if fused_tick is None else fused_tick.quiet_calls
        reference_begun, reference_cpu_begun = time.perf_counter(), time.process_time()
        reference_trial = build_trial(request(seconds), Path(out) / "reference", staged=True)
        reference_built = time.perf_counter()
        reference_summary = reference_trial.run()
        reference_wall = time.perf_counter() - reference_begun
        reference_cpu = time.process_time() - reference_cpu_begun
    median_run = sorted(runs, key=lambda run: run["realtime_factor"])[(repeat - 1) // 2]
    reference = _timed_run(reference_summary, reference_wall, reference_built - reference_begun, reference_cpu)
    return {
        "model": model,
        **median_run,
        "repeat": repeat,
        "runs": runs,
        "realtime_factor_range": [min(run["realtime_factor"] for run in runs),
                                  max(run["realtime_factor"] for run in runs)],
        "fused": path.fused,
        "tick_path": path.as_dict(),
        "plant_path": plant_path,
        "quiet_ticks": quiet_ticks,
        "quiet_calls": quiet_calls,
        "reference": {
            "realtime_factor": reference["realtime_factor"],
            "loop_realtime_factor": reference["loop_realtime_factor"],
            "tick_us_mean": reference["tick_us_mean"],
            "cpu_realtime_factor": reference["cpu_realtime_factor"],
            "note": "the same trial on the staged path (every stage in Python), timed right after",
        },
        "cold": {
            "start_up_seconds": start_up_s,
            "note": "imports, kernel cache load and a first trial of "
            f"{warm_up_sim_s:.1f} s: paid once per worker process",
            "first_trial_realtime_factor": runs[0]["sim_seconds"] / (runs[0]["wall_seconds"] + start_up_s),
        },
        "machine": machine(),
    }


def _timed_run(summary: dict[str, Any], wall_s: float, build_s: float, cpu_s: float) -> dict[str, float]:
    """One timed trial's figures: ``summary`` (``Trial.run``'s) over its wall, build and
    CPU seconds."""
    sim_s = summary["sim_s"]
    return {
        "sim_seconds": sim_s,
        "wall_seconds": wall_s,
        "realtime_factor": sim_s / wall_s,
        "build_seconds": build_s,
        "loop_realtime_factor": sim_s / (wall_s - build_s),
        "tick_us_mean": 1e6 * (wall_s - build_s) / summary["ticks"],
        "cpu_seconds": cpu_s,
        "cpu_realtime_factor": sim_s / cpu_s,
    }


def measure_study(trials: int, workers: list[int], chunk_size: int = 1, repeat: int = 1) -> dict[str, object]:
    """A study of ``trials`` paper-2019 trials (simulated participants) per worker count.

    Like with like: one worker is a fresh spawned process running the study in-process
    (start-up: its spawn, imports and warm-up), N workers are a study from this process
    with N spawned workers (start-up: the same, per worker). Per worker count, medians
    over ``repeat`` runs (each a fresh study; the counts alternate, so a change in the
    machine's load hits all of them):
    ``trials_per_second`` over the whole run, start-ups included;
    ``start_up_seconds``, per worker, from the run's start until it was warmed up
    (process start, imports, kernel cache, a first 0.05 s trial);
    ``after_start_up_trials_per_second``, the trials over the run less its slowest
    start-up. ``cores_used``: CPU seconds of the study process and its workers over the
    wall seconds (2 for two workers that never wait), with ``cpu_seconds_per_trial``.
    ``speed_up`` divides each by the one-worker figure. ``parallel_capacity``
    is what the machine offers at the time (:func:`parallel_capacity`, before and after
    the runs): the ceiling of any speed-up.
    """
    from trials.protocol import load_protocol
    from trials.study import run_study

    participants = max(1, trials // 3)  # each does the three conditions once
    result: dict[str, object] = {"trials": 3 * participants, "chunk_size": chunk_size, "repeat": repeat,
                                 "machine": machine()}
    capacity = [parallel_capacity(max(workers))]
    runs: dict[int, list[dict[str, object]]] = {count: [] for count in workers}
    with tempfile.TemporaryDirectory() as tmp:
        protocol_path = Path(tmp) / "bench.toml"
        protocol_path.write_text(
            'name = "bench"\nseed = 1\nscenarios = ["paper-2019"]\n'
            'conditions = ["dg", "ng", "apf"]\nrepetitions = 1\n'
            f"[participants]\ncount = {participants}\nmix = {{ novice = 0.5, expert = 0.5 }}\n"
        )
        protocol = load_protocol(protocol_path)
        for run in range(repeat):
            for count in workers:
                started = time.perf_counter()
                if count == 1:
                    run_result = _one_worker_in_a_fresh_process(protocol_path, Path(tmp) / f"w1-{run}", chunk_size)
                else:
                    cpu_before = _cpu_seconds()
                    outcome = run_study(protocol, Path(tmp) / f"w{count}-{run}", workers=count,
                                        progress=io.StringIO(), chunk_size=chunk_size)
                    run_result = (outcome.ran, len(outcome.failed), list(outcome.worker_start_up_s),
                                  _cpu_seconds() - cpu_before)
                wall = time.perf_counter() - started
                ran, failed, start_up, cpu = run_result
                runs[count].append({
                    "wall_seconds": wall,
                    "trials": ran,
                    "failed": failed,
                    "trials_per_second": ran / wall,
                    "start_up_seconds": start_up,
                    "after_start_up_trials_per_second": ran / (wall - max(start_up, default=0.0)),
                    "cores_used": cpu / wall,
                    "cpu_seconds_per_trial": cpu / max(ran, 1),
                })
    capacity.append(parallel_capacity(max(workers)))
    result["parallel_capacity"] = {"before": capacity[0], "after": capacity[1]}
    for count in workers:
        median = {key: statistics.median(float(r[key]) for r in runs[count])  # type: ignore[arg-type]
                  for key in ("wall_seconds", "trials_per_second", "after_start_up_trials_per_second",
                              "cores_used", "cpu_seconds_per_trial")}
        result[f"workers_{count}"] = {
            **median,
            "trials": min(int(r["trials"]) for r in runs[count]),  # type: ignore[call-overload]
            "failed": max(int(r["failed"]) for r in runs[count]),  # type: ignore[call-overload]
            "start_up_seconds": [statistics.median(values) for values in
                                 zip(*(r["start_up_seconds"] for r in runs[count]))],
            "runs": runs[count],
        }
    if 1 in workers:
        one = result["workers_1"]
        result["speed_up"] = {
            f"workers_{count}": {
                key: result[f"workers_{count}"][key] / one[key]  # type: ignore[index]
                for key in ("trials_per_second", "after_start_up_trials_per_second")
            }
            for count in workers if count != 1
        }
    return result


def _one_worker_in_a_fresh_process(protocol_path: Path, out: Path,
                                   chunk_size: int) -> tuple[int, int, list[float], float]:
    """A one-worker study in a new spawned process, as a worker process would run it:
    (ran, failed, [start-up from the spawn until warmed up [s]], CPU seconds)."""
    import multiprocessing
    import os
    from concurrent.futures import ProcessPoolExecutor

    from trials.study import _worker_init  # a study worker's signals and parent watchdog

    context = multiprocessing.get_context("spawn")
    started = time.time()
    with ProcessPoolExecutor(max_workers=1, mp_context=context, initializer=_worker_init,
                             initargs=(os.getpid(),)) as pool:
        ran, failed, warm_up_done, cpu = pool.submit(_run_one_worker_study, protocol_path, out, chunk_size).result()
    return ran, failed, [warm_up_done - started], cpu


def _run_one_worker_study(protocol_path: Path, out: Path, chunk_size: int) -> tuple[int, int, float, float]:
    """In the fresh process: (ran, failed, wall-clock time when warmed up, this process's
    CPU seconds over its whole life, imports included)."""
    from trials.protocol import load_protocol
    from trials.study import run_study

    begun_wall, begun = time.time(), time.perf_counter()
    outcome = run_study(load_protocol(protocol_path), out, workers=1, progress=io.StringIO(), chunk_size=chunk_size)
    warm_up = outcome.worker_start_up_s[0] if outcome.worker_start_up_s else time.perf_counter() - begun
    own = resource.getrusage(resource.RUSAGE_SELF)
    return outcome.ran, len(outcome.failed), begun_wall + warm_up, own.ru_utime + own.ru_stime


def _cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and of its children that have ended."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _spin(n: int) -> float:
    begun = time.perf_counter()
    total = 0
    for i in range(n):
        total += i * i
    return time.perf_counter() - begun


def parallel_capacity(processes: int, n: int = 3_000_000) -> float:
    """How many cores' worth of pure-Python work ``processes`` spawned processes get right
    now: ``processes`` × (one process's time for a fixed loop) / (the time of that loop in
    ``processes`` processes at once). ``processes`` on an idle machine with as many cores;
    less when other processes hold a core."""
    import multiprocessing

    if processes < 2:
        return 1.0
    pool = multiprocessing.get_context("spawn").Pool(processes)
    try:
        pool.map(_spin, [1000] * processes)  # started and importing before the clock
        one = min(pool.apply(_spin, (n,)) for _ in range(2))
        begun = time.perf_counter()
        pool.map(_spin, [n] * processes, chunksize=1)
        together = time.perf_counter() - begun
    finally:
        pool.close()
        pool.join()  # reaped here, so their CPU time is not counted in a study's
    return processes * one / together


def _throughput(args: argparse.Namespace) -> int:
    if not args.seconds > 0.0:
        raise SystemExit(f"--seconds must be positive, got {args.seconds}")
    if args.repeat < 1:
        raise SystemExit(f"--repeat must be at least 1, got {args.repeat}")
    result = measure_throughput(args.model, args.seconds, args.repeat)
    if args.workers:
        result["study"] = measure_study(args.trials, args.workers)
    emit(result, args.json)
    return 0


def _study(args: argparse.Namespace) -> int:
    if min(args.trials, min(args.workers), args.chunk_size, args.repeat) < 1:
        raise SystemExit("--trials, --workers, --chunk-size and --repeat must be at least 1")
    emit(measure_study(args.trials, args.workers, args.chunk_size, args.repeat), args.json)
    return 0
