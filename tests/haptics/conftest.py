"""Fixtures for the haptics tests: the libHD double, built once per session.

libHD is loaded once per process (pyOpenHaptics opens it at import), so every test that
drives the OpenHaptics backend runs a scenario of ``libhd_double/scenarios.py`` in its
own subprocess and asserts on the JSON it prints.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from haptics._hd_api import LIBHD_ENV
from haptics._hd_double import build_double
from haptics.operators import HumanOperator
from haptics.participants import PARTICIPANT_PRESETS
from haptics.timing import GIL_SHARER_PRIORITY

REPO_ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = Path(__file__).resolve().parent / "libhd_double" / "scenarios.py"

RunScenario = Callable[..., dict]


def quiet_novice(dt_s: float = 1e-3, **changes: float) -> HumanOperator:
    """A novice without motor noise, guidance yielding or taking charge, reset at rest at
    the origin at t = 0 (seed 0, trial seed 0), with ``changes`` to its parameters."""
    params = replace(PARTICIPANT_PRESETS["novice"], noise_const_n=0.0, noise_gain=0.0, resist_probability=0.0,
                     yield_force_n=1e9, **changes)
    op = HumanOperator(params, seed=0, dt_s=dt_s)
    op.reset(0.0, np.zeros(3), trial_seed=0)
    return op


@pytest.fixture(scope="session")
def libhd_double(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Path of the freshly compiled libHD double (``libHD.so``)."""
    return build_double(tmp_path_factory.mktemp("libhd"))


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a subprocess: no libHD preload or search path unless given."""
    env = {k: v for k, v in os.environ.items() if k not in (LIBHD_ENV, "LD_LIBRARY_PATH", "LD_PRELOAD")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def subprocess_env() -> Callable[..., dict[str, str]]:
    """``subprocess_env(**extra)``: a clean environment for a child interpreter."""
    return clean_env


@pytest.fixture(scope="session")
def run_scenario(libhd_double: Path) -> RunScenario:
    """``run_scenario(name, with_libhd=True, **env) -> dict`` in a fresh interpreter."""

    def run(name: str, with_libhd: bool = True, **env: str) -> dict:
        extra = {LIBHD_ENV: str(libhd_double)} if with_libhd else {}
        result = subprocess.run(
            [sys.executable, str(SCENARIOS), name],
            env=clean_env(**extra, **env),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, f"scenario {name} failed:\n{result.stdout}\n{result.stderr}"
        return json.loads(result.stdout.strip().splitlines()[-1])

    return run


def may_run_realtime() -> bool:
    """Whether this process may make a thread SCHED_FIFO (tried on a scratch thread)."""
    allowed: list[bool] = []

    def attempt() -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(GIL_SHARER_PRIORITY))
            allowed.append(True)
        except (AttributeError, OSError):
            allowed.append(False)

    worker = threading.Thread(target=attempt)
    worker.start()
    worker.join()
    return allowed[0]
