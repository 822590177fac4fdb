"""`capture-trainer bench ...`: every module ``benchmarks/bench_*.py`` adds one bench
(and ``app.bench_window``, which runs the application's window).

A bench module exposes ``add_bench(subparsers)``; its handler prints one JSON object
(with ``--json``) or a short human summary. No figure is asserted in tests (only the
JSON shapes, on short runs: ``tests/benchmarks``).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil

import benchmarks


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("bench", help="timing and throughput measurements")
    bench_parsers = parser.add_subparsers(dest="bench", metavar="BENCH", required=True)
    modules = [f"benchmarks.{info.name}" for info in pkgutil.iter_modules(benchmarks.__path__)
               if info.name.startswith("bench_")]
    modules.append("app.bench_window")  # it runs the application's window: it lives in app
    for name in sorted(modules, key=lambda module: module.rsplit(".", 1)[1]):
        importlib.import_module(name).add_bench(bench_parsers)
