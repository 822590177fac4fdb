"""Write a :class:`~scenarios.schema.Scenario` back as TOML (generated scenarios, ``scenarios show``).

``loads_scenario(to_toml(s)) == s`` for every valid scenario ``s``.
"""

from __future__ import annotations

import json
from typing import Any

from scenarios.schema import Scenario

_MOTION_FIELDS = {
    "curved": ("turn_rate_rad_s", "turn_axis"),
    "tumbling": ("angular_velocity_rad_s", "lever_arm_m"),
}


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def _table(lines: list[str], name: str, data: dict[str, Any]) -> None:
    scalars = {k: v for k, v in data.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    if scalars or not tables:
        lines.append(f"\n[{name}]")
        lines.extend(f"{key} = {_value(value)}" for key, value in scalars.items())
    for key, sub in tables.items():
        _table(lines, f"{name}.{key}", sub)


def to_toml(scenario: Scenario) -> str:
    """The scenario as a TOML document (every field explicit, SI units)."""
    data = scenario.as_dict()
    target = data["target"]
    for kind, keys in _MOTION_FIELDS.items():
        if target["motion"] != kind:
            for key in keys:
                del target[key]
    lines: list[str] = []
    for key in ("name", "description", "seed"):
        lines.append(f"{key} = {_value(data.pop(key))}")
    for key, table in data.items():
        _table(lines, key, table)
    return "\n".join(lines) + "\n"
