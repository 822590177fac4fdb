"""The registries a scenario file names, handed to the scenario loader.

``scenarios`` imports nothing of ``robot`` or ``guidance`` (the arrows point from
``trials`` down), so the loader is given the model and guidance-law registries here:
use these functions, not ``scenarios.loader``'s, wherever a scenario is loaded for use.
"""

from __future__ import annotations

from pathlib import Path

from guidance.registry import LAWS
from robot.models import MODELS
from scenarios.generator import random_scenario as _random_scenario
from scenarios.loader import load_scenario as _load_scenario
from scenarios.loader import loads_scenario as _loads_scenario
from scenarios.schema import Scenario, Vocabulary
from trials.compensators import COMPENSATORS
from trials.contact_modes import CONTACT_MODES

#: Manipulator models, guidance laws, delay compensators and contact modes, by their own registries.
SCENARIO_VOCABULARY = Vocabulary(models=MODELS, laws=LAWS, compensators=COMPENSATORS, contact_modes=CONTACT_MODES)


def load_scenario(path_or_name: str | Path) -> Scenario:
    """A scenario from a ``.toml`` path or a built-in name, checked against the registries.

    Raises:
        ScenarioError: unreadable, malformed or out-of-range file, or an unknown name
            (scenario, model, guidance law or law parameter).
    """
    return _load_scenario(path_or_name, vocabulary=SCENARIO_VOCABULARY)


def loads_scenario(text: str, source: str = "<string>", default_name: str = "unnamed") -> Scenario:
    """A scenario from TOML ``text`` (``source`` names it in messages), checked likewise."""
    return _loads_scenario(text, source, default_name, vocabulary=SCENARIO_VOCABULARY)


def random_scenario(seed: int, model: str) -> Scenario:
    """A seeded random scenario for the registered ``model`` (``scenarios.generator``)."""
    return _random_scenario(seed, model, models=MODELS)
