"""Capture scenarios: the TOML schema, its loader, target motions and built-in files.

Depends on nothing of ours but ``capture_trainer``. The main entry points are importable
from here (loaded on first use, so ``import scenarios`` stays cheap). The loader is
handed the registries a file's names refer to (``trials.vocabulary`` does that)::

    from scenarios import load_scenario, builtin_names
    scenario = load_scenario("paper-2019", vocabulary=Vocabulary(models=MODELS, laws=LAWS))
    motion = scenario.target_motion(ee0_m)
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "load_scenario": "scenarios.loader",
    "loads_scenario": "scenarios.loader",
    "builtin_names": "scenarios.loader",
    "Scenario": "scenarios.schema",
    "Vocabulary": "scenarios.schema",
    "trial_seed": "scenarios.seeding",
    "random_scenario": "scenarios.generator",
    "to_toml": "scenarios.toml_out",
    "TargetMotion": "scenarios.motion",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'scenarios' has no attribute {name!r}")
