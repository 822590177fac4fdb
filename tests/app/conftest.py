"""Fixtures for the application's tests, shared with the packages' own tests.

``capture-trainer analyze`` runs on the synthetic study of ``tests/analysis/conftest.py``
(known answers) and ``capture-trainer devices`` on the libHD double of
``tests/haptics/conftest.py``. Conftest modules cannot be imported by name in importlib
mode, so those two are loaded from their files and their fixtures re-exported here.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

TESTS = Path(__file__).resolve().parents[1]


def _load(package: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_app_tests_{package}_conftest", TESTS / package / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_analysis = _load("analysis")
_haptics = _load("haptics")

study_dir = _analysis.study_dir
synth = _analysis.synth
libhd_double = _haptics.libhd_double
subprocess_env = _haptics.subprocess_env


@pytest.fixture
def pygame(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """pygame with SDL's dummy video driver, display and fonts initialised (the window's
    drawing tests)."""
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    import pygame as pg

    pg.display.init()
    pg.font.init()
    yield pg
    pg.display.quit()
