"""`capture-trainer bench ...`: every module ``benchmarks/bench_*.py`` adds one bench.

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
    for info in sorted(pkgutil.iter_modules(benchmarks.__path__), key=lambda m: m.name):
        if info.name.startswith("bench_"):
            importlib.import_module(f"benchmarks.{info.name}").add_bench(bench_parsers)
