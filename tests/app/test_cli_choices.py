"""The CLI's choices are the registries' names, wherever an option offers them."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from app.cli import build_parser
from haptics.backends import BACKENDS
from haptics.participants import PARTICIPANT_PRESETS
from robot.models import MODELS
from trials.conditions import CONDITIONS

#: Option destination -> the registry names it must offer.
REGISTRY_OPTIONS: dict[str, tuple[str, ...]] = {
    "condition": CONDITIONS.names(),
    "device": BACKENDS.names(),
    "participant_kind": PARTICIPANT_PRESETS.names(),
    "model": MODELS.names(),
}


def _actions(parser: argparse.ArgumentParser, path: str = "") -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _actions(sub, f"{path} {name}".strip())
        else:
            yield path, action


def test_every_registry_option_offers_exactly_the_registry_names() -> None:
    seen: dict[str, list[str]] = {dest: [] for dest in REGISTRY_OPTIONS}
    for command, action in _actions(build_parser()):
        if action.dest in REGISTRY_OPTIONS and action.choices is not None:
            assert tuple(action.choices) == REGISTRY_OPTIONS[action.dest], (command, action.dest)
            if action.default is not None:
                assert action.default in REGISTRY_OPTIONS[action.dest], (command, action.dest)
            seen[action.dest].append(command)
    assert all(seen.values()), seen  # every registry is offered by at least one command
    assert "run" in seen["condition"] and "run" in seen["device"] and "train" in seen["participant_kind"]
    assert {"robot urdf", "robot capture", "scenarios generate", "bench reaction"} <= set(seen["model"]), seen
