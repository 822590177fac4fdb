"""The one registry type, declared parameters, and a conformance check over every registry."""

from __future__ import annotations

from typing import Any

import pytest

from capture_trainer.errors import CaptureTrainerError, DeviceError, ScenarioError, TrialError, UnknownNameError
from capture_trainer.params import Param
from capture_trainer.registry import Registry, suggestion


def test_names_in_registration_order_call_and_decorator() -> None:
    shapes: Registry[object] = Registry("shape")
    shapes.register("square", 4)

    @shapes.register("circle")
    class Circle:
        pass

    assert shapes.names() == ("square", "circle") == tuple(shapes) == shapes.keys()
    assert shapes.get("circle") is Circle and shapes["square"] == 4
    assert "circle" in shapes and "oval" not in shapes and 3 not in shapes
    assert len(shapes) == 2 and dict(shapes) == {"square": 4, "circle": Circle}
    assert shapes.items() == (("square", 4), ("circle", Circle)) and shapes.values() == (4, Circle)


def test_registering_a_name_twice_or_no_name_is_a_programming_error() -> None:
    shapes: Registry[int] = Registry("shape")
    shapes.register("square", 4)
    with pytest.raises(ValueError, match="'square' is registered twice"):
        shapes.register("square", 5)
    with pytest.raises(ValueError, match="non-empty name"):
        shapes.register("", 5)


def test_unknown_name_says_what_was_asked_the_nearest_and_what_exists() -> None:
    shapes: Registry[int] = Registry("shape")
    for name, corners in (("square", 4), ("triangle", 3)):
        shapes.register(name, corners)
    with pytest.raises(UnknownNameError) as info:
        shapes.get("sqare")
    assert str(info.value) == "unknown shape 'sqare'; did you mean 'square'? known: square, triangle"
    assert isinstance(info.value, CaptureTrainerError) and isinstance(info.value, ValueError)
    with pytest.raises(UnknownNameError, match=r"^unknown shape 'hexagon'; known: square, triangle$"):
        shapes["hexagon"]
    with pytest.raises(UnknownNameError, match="unknown shape"):
        shapes.get(None)  # type: ignore[arg-type]
    assert suggestion("trangle", shapes.names()) == "triangle" and suggestion("x", ()) is None


def test_a_registry_raises_its_package_error_with_its_hint() -> None:
    files: Registry[str] = Registry("built-in file", error=ScenarioError, hint="or give a path")
    files.register("paper", "paper.toml")
    with pytest.raises(ScenarioError, match=r"^unknown built-in file 'papr'; did you mean 'paper'\? known: paper \(or give a path\)$"):
        files.get("papr")


@pytest.mark.parametrize(
    "param, good, bad",
    [
        (Param("m_kg", "kg", minimum=0.0, strict=True), [1e-9, 5, 5.0], [0.0, -1.0, float("nan"), float("inf"), True, "5", None]),
        (Param("k_d", "1/s", minimum=0.0), [0.0, 3.5], [-1e-9]),
        (Param("gain", "", minimum=0.0, maximum=1.0), [0.0, 1.0], [1.0 + 1e-9]),
        (Param("d_m", "m", minimum=0.0, strict=True, optional=True), [None, 0.1], [0.0]),
    ],
)
def test_declared_parameters_check_type_and_range(param: Param, good: list[Any], bad: list[Any]) -> None:
    for value in good:
        assert param.accepts(value), value
        assert param.check_optional(value) == (None if value is None else float(value))
    for value in bad:
        assert not param.accepts(value), value
        with pytest.raises(ValueError, match=rf"^{param.name}: expected a number"):
            param.check_optional(value)


def test_expected_names_the_range_and_unit() -> None:
    assert Param("m_kg", "kg", minimum=0.0, strict=True).expected() == "a number > 0 [kg]"
    assert Param("g", "", minimum=0.0, maximum=1.0).expected() == "a number >= 0 and <= 1"
    assert Param("z_m", "m", maximum=2.0).expected() == "a number <= 2 [m]"


def _registries() -> dict[str, tuple[Registry[Any], type[Exception]]]:
    """Every registry of the house, with the error an unknown name raises."""
    from guidance.registry import LAWS, GuidanceConfigError
    from haptics.backends import BACKENDS
    from haptics.participants import PARTICIPANT_PRESETS
    from robot.backends import ARM_BACKENDS
    from robot.models import MODELS
    from scenarios.loader import builtin_scenarios
    from trials.clocks import CLOCKS
    from trials.conditions import CONDITIONS
    from trials.protocol import builtin_protocols

    return {
        "models": (MODELS, UnknownNameError),
        "guidance laws": (LAWS, GuidanceConfigError),
        "device backends": (BACKENDS, DeviceError),
        "participant kinds": (PARTICIPANT_PRESETS, UnknownNameError),
        "arm backends": (ARM_BACKENDS, UnknownNameError),
        "scenarios": (builtin_scenarios(), ScenarioError),
        "protocols": (builtin_protocols(), ScenarioError),
        "clocks": (CLOCKS, TrialError),
        "conditions": (CONDITIONS, TrialError),
    }


@pytest.mark.parametrize("kind", sorted(_registries()))
def test_every_registry_suggests_the_name_meant_for_a_typo(kind: str) -> None:
    registry, error = _registries()[kind]
    assert registry.names(), kind
    for name in registry.names():
        typo = name + name[-1]
        with pytest.raises(error) as info:
            registry.get(typo)
        message = str(info.value)
        assert f"unknown {registry.kind} {typo!r}; did you mean {name!r}?" in message, message
        assert "\n" not in message
        assert all(other in message for other in registry.names())
        assert isinstance(info.value, CaptureTrainerError)


def test_conditions_name_registered_guidance_laws() -> None:
    from guidance.registry import LAWS
    from trials.conditions import CONDITIONS

    assert CONDITIONS.names() == ("dg", "ng", "apf", "as")
    for condition in CONDITIONS.values():
        assert condition.law in LAWS, condition
    assert [c.name for c in CONDITIONS.values() if c.automatic] == ["as"]


def test_analysis_orders_the_registered_conditions_without_importing_trials() -> None:
    from analysis.stats import PAPER_ORDER, ordered_conditions, study_condition_order
    from trials.conditions import CONDITIONS

    assert set(CONDITIONS.names()) <= set(PAPER_ORDER)
    assert ordered_conditions(["as", "zz", "apf", "dg", "ng"]) == ["dg", "ng", "apf", "as", "zz"]
    design = {"protocol": {"conditions": ["apf", "dg"], "controller_conditions": ["as"]}}
    assert study_condition_order(design) == ("apf", "dg", "as")
    assert ordered_conditions(["dg", "ng", "apf", "as"], study_condition_order(design)) == ["apf", "dg", "as", "ng"]
    assert study_condition_order({"conditions": ["ng", "dg"]}) == ("ng", "dg") and study_condition_order(None) == ()
