"""`capture-trainer analyze`: metrics, statistics and the HTML report of a study.

    capture-trainer analyze DIR [--report FILE] [--json] [--csv FILE] [--parquet FILE]
                                [--trial ID_OR_FILE ...] [--title TEXT] [--no-cache]

Without ``--json`` it writes the report (default ``DIR/report.html``) and prints its path.
With ``--json`` it prints exactly one JSON object (the summary per condition, pooled over
the scenarios, and per scenario: outcomes and paired comparisons) on stdout
and writes a report only if ``--report`` is given. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from app.commands import arguments

#: Show loading progress from this many trial files on.
PROGRESS_MIN_FILES = 20


def add_commands(subparsers: Any) -> None:
    """Register ``analyze`` on the ``capture-trainer`` parser."""
    parser = subparsers.add_parser(
        "analyze",
        help="compute metrics and statistics of a study and write an HTML report",
        description=(
            "Read every trial log (*.parquet) under DIR, compute the paper's metrics and "
            "more, compare the conditions, and write one self-contained HTML report."
        ),
    )
    parser.add_argument("dir", metavar="DIR", type=Path, help="study directory (or one trial file)")
    parser.add_argument("--report", type=arguments.output_file, help="HTML report to write (default DIR/report.html)")
    parser.add_argument("--json", action="store_true", help="print the summary per condition and per scenario as one JSON object")
    parser.add_argument("--csv", type=arguments.output_file, help="also write the per-trial table as CSV")
    parser.add_argument("--parquet", type=arguments.output_file, help="also write the per-trial table as Parquet")
    parser.add_argument(
        "--trial",
        action="append",
        default=[],
        metavar="ID_OR_FILE",
        help="show this trial's full figure set in the report (repeatable)",
    )
    parser.add_argument("--title", type=arguments.text(), help="report title")
    parser.add_argument("--no-cache", action="store_true",
                        help="read and measure every trial afresh, without the analysis cache (DIR/**/.analysis)")
    parser.set_defaults(handler=run_analyze)


def _progress_printer(stream: Any) -> Any:
    interactive = stream.isatty()

    def show(done: int, total: int) -> None:
        if total < PROGRESS_MIN_FILES:
            return
        if interactive:
            end = "\n" if done == total else ""
            print(f"\rloading trials {done}/{total}", end=end, file=stream, flush=True)
        elif done == total or done % max(1, total // 10) == 0:
            print(f"loading trials {done}/{total}", file=stream, flush=True)

    return show


def run_analyze(args: argparse.Namespace) -> int:
    """Handler of ``capture-trainer analyze``; returns the exit code."""
    import json

    from analysis.report import default_report_path, write_report
    from analysis.stats import json_summary
    from analysis.study import export_table, open_study

    study = open_study(args.dir, progress=_progress_printer(sys.stderr), use_cache=not args.no_cache)
    for path in (args.csv, args.parquet):
        if path is not None:
            export_table(study.table, path)
            print(f"wrote {path}", file=sys.stderr)
    report_path = args.report or (None if args.json else default_report_path(args.dir))
    if report_path is not None:
        write_report(study, report_path, args.trial, args.title)
    if args.json:
        if report_path is not None:
            print(f"wrote {report_path}", file=sys.stderr)
        summary = json_summary(study.table)
        from analysis import training

        if training.is_training_design(study.design):  # a phased design: curves and effects too
            summary["training"] = training.training_json(training.training_table(study))
        from analysis.behaviours import post_capture_json
        from analysis.study import trial_metadata

        behaviours = post_capture_json((trial_id, trial_metadata(study, trial_id)) for trial_id in study.paths)
        if behaviours is not None:  # trials that ran a task after the capture
            summary["post_capture"] = behaviours
        from analysis import delay_study
        from analysis.sweep import SWEEP_FILE, read_sweep_design, sweep_table

        if (Path(args.dir) / SWEEP_FILE).is_file() and delay_study.is_delay_study(read_sweep_design(args.dir)):
            summary["delay_study"] = delay_study.delay_json(sweep_table(args.dir, study.table))
        print(json.dumps(summary, allow_nan=False))
    else:
        print(report_path)
    return 0
