"""Helpers shared by the bench commands: percentiles, memory, the machine, output."""

from __future__ import annotations

import json
import os
import platform
import resource
from collections.abc import Sequence
from typing import Any

import numpy as np

#: The scenario each model is benchmarked on.
MODEL_SCENARIOS = {"planar-3r": "paper-2019", "spatial-7dof": "tumbling-7dof"}


def percentiles_us(samples_s: Sequence[float] | np.ndarray) -> dict[str, float]:
    """Median, p99, p99.9 and max of durations given in seconds, in microseconds."""
    values = np.asarray(samples_s, dtype=float) * 1e6
    return {
        "median": float(np.median(values)),
        "p99": float(np.percentile(values, 99)),
        "p99.9": float(np.percentile(values, 99.9)),
        "max": float(values.max()),
        "mean": float(values.mean()),
    }


def rss_bytes() -> int:
    """Resident set size of this process now [bytes] (Linux /proc; else the peak)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def machine() -> dict[str, Any]:
    """What the figures were taken on."""
    return {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def emit(result: dict[str, Any], as_json: bool) -> None:
    """Print the result: one JSON object, or indented for people."""
    print(json.dumps(result) if as_json else json.dumps(result, indent=2))
