from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest


def scenario_with(tmp_path: Path, time_limit_s: float, name: str = "short") -> Path:
    """The built-in paper-2019 scenario with another time limit, written to a file."""
    text = resources.files("scenarios.builtin").joinpath("paper-2019.toml").read_text()
    text = text.replace("time_limit_s = 10.0", f"time_limit_s = {time_limit_s}")
    assert f"time_limit_s = {time_limit_s}" in text
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


@pytest.fixture
def short_scenario(tmp_path: Path) -> Path:
    return scenario_with(tmp_path, 0.6)
