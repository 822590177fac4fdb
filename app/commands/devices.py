"""`capture-trainer devices`: list the haptic backends and probe which work here."""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "devices",
        help="list the haptic device backends and whether each is available here",
        description="Probe every device backend (loading libHD and initialising the Touch "
        "for openhaptics) and say why the unavailable ones are not.",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=_devices)


def _devices(args: argparse.Namespace) -> int:
    from haptics.backends import BACKENDS

    rows: list[dict[str, Any]] = []
    for name, backend in BACKENDS.items():
        ok, reason = backend.probe()
        rows.append({"name": name, "available": ok, "summary": backend.summary, "reason": reason})
    if args.json:
        print(json.dumps({"backends": rows}))
        return 0
    width = max(len(row["name"]) for row in rows)
    for row in rows:
        status = "available" if row["available"] else "unavailable"
        print(f"{row['name']:<{width}}  {status:<11}  {row['summary']}")
        print(f"{'':<{width}}  {'':<11}  {row['reason']}")
    return 0
