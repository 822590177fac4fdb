"""Sweeps: a study protocol plus a design over scenario fields, expanded into a study.

A sweep file is a protocol (``docs/file-formats.md``) with a ``[grid]`` table and/or a
``[random]`` table::

    name = "dg-gains"
    seed = 5
    scenarios = ["paper-2019"]
    conditions = ["dg", "apf"]
    [participants]
    kind = "simulated"
    count = 2
    [grid]                            # every combination (a full factorial)
    "guidance.dg.k_p" = [5.0, 7.7]
    "guidance.dg.k_d" = [3.0, 5.0]
    [random]                          # or: samples drawn uniformly within ranges
    samples = 20
    "debris.mass_kg" = [5.0, 500.0]

Keys are dotted paths of scenario fields (``table.field`` or ``table.sub.field``). Each
design point of each base scenario becomes a scenario variant: the base file's TOML with
the swept values set, validated by the scenario loader exactly as a file would be (a bad
value is reported with the sweep file, the point and the field), written to
``OUT/scenarios/<base>--p<NNN>.toml``. The variants then run as one study in ``OUT``
(:func:`trials.study.run_study`): every trial is keyed by its full plan, so re-running
resumes, a changed design re-runs what changed, and a killed sweep loses only the trials
in flight. ``OUT/sweep.json`` maps each variant to its point (``analysis.sweep`` joins
it to the trial metrics).
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from capture_trainer.errors import ScenarioError
from scenarios.loader import builtin_scenarios
from scenarios.toml_in import ProblemsError, file_reference, parse_toml, read_toml_file
from scenarios.toml_out import to_toml
from trials.protocol import Protocol, load_protocol
from trials.vocabulary import SCENARIO_VOCABULARY

#: Most design points of one sweep (per base scenario).
MAX_POINTS = 10_000
SWEEP_FILE = "sweep.json"
DESIGN_TABLES = ("grid", "random")


@dataclass(frozen=True)
class SweepPoint:
    """One scenario variant.

    Attributes:
        scenario: the variant's name (``<base>--p<NNN>``).
        base: the base scenario as the sweep file names it.
        values: ``{dotted path: value}`` of this point.
        path: the variant's scenario file.
    """

    scenario: str
    base: str
    values: dict[str, Any]
    path: Path


def _design(tables: dict[str, Any], source: str) -> list[dict[str, Any]]:
    """The design points: the grid's full factorial, times the random samples (each
    table alone if the other is absent)."""
    grid = dict(tables.get("grid") or {})
    random_table = dict(tables.get("random") or {})
    if not grid and not random_table:
        raise ScenarioError(f"{source}: a sweep needs a [grid] or a [random] table of dotted scenario fields")
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise ScenarioError(f"{source}: grid.{key}: expected a non-empty list of values, got {values!r}")
    points = [dict(zip(grid, combo)) for combo in itertools.product(*grid.values())] if grid else [{}]
    if random_table:
        samples = random_table.pop("samples", None)
        seed = random_table.pop("seed", 0)
        if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= MAX_POINTS:
            raise ScenarioError(f"{source}: random.samples: expected an integer >= 1 and <= {MAX_POINTS}, "
                                f"got {samples!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ScenarioError(f"{source}: random.seed: expected an integer >= 0, got {seed!r}")
        rng = np.random.default_rng(seed)
        for key, bounds in random_table.items():
            ok = (isinstance(bounds, list) and len(bounds) == 2
                  and all(isinstance(b, (int, float)) and not isinstance(b, bool) and math.isfinite(b) for b in bounds)
                  and bounds[0] <= bounds[1])
            if not ok:
                raise ScenarioError(f"{source}: random.{key}: expected [low, high] with low <= high, got {bounds!r}")
        drawn = [{key: float(rng.uniform(*bounds)) for key, bounds in random_table.items()} for _ in range(samples)]
        points = [{**point, **sample} for point in points for sample in drawn]
    if len(points) > MAX_POINTS:
        raise ScenarioError(f"{source}: {len(points)} design points; at most {MAX_POINTS}")
    return points


def _base_data(reference: str) -> dict[str, Any]:
    """A base scenario's TOML data (a built-in name or a file)."""
    path = file_reference(reference)
    if path is not None:
        return read_toml_file(path, reference)
    return parse_toml(builtin_scenarios().get(reference).read_text(encoding="utf-8"), f"builtin:{reference}")


def _set(data: dict[str, Any], dotted: str, value: Any, where: str) -> None:
    keys = dotted.split(".")
    if len(keys) < 2 or not all(keys):
        raise ScenarioError(f"{where}: {dotted!r}: expected a dotted scenario field such as 'guidance.dg.k_p'")
    table = data
    for key in keys[:-1]:
        table = table.setdefault(key, {})
        if not isinstance(table, dict):
            raise ScenarioError(f"{where}: {dotted!r}: {key} is not a table")
    table[keys[-1]] = value


def prepare_sweep(sweep_file: str | Path, out_dir: str | Path) -> tuple[Protocol, list[SweepPoint]]:
    """Expand ``sweep_file`` into scenario variants in ``out_dir`` and the study protocol
    that runs them (validated completely before anything runs).

    Raises:
        ScenarioError: the sweep file, a swept value or the protocol part is wrong (every
            problem of a variant is listed, one line each, naming the point).
    """
    source = str(sweep_file)
    data = read_toml_file(Path(sweep_file), source)
    tables = {name: data.pop(name) for name in DESIGN_TABLES if name in data}
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise ScenarioError(f"{source}: [{name}] must be a table of dotted scenario fields")
    points_design = _design(tables, source)
    bases = data.get("scenarios")
    if not isinstance(bases, list) or not bases or not all(isinstance(b, str) for b in bases):
        raise ScenarioError(f"{source}: scenarios: expected a non-empty list of scenario names or files")
    folder = Path(sweep_file).absolute().parent
    out = Path(out_dir).absolute()
    (out / "scenarios").mkdir(parents=True, exist_ok=True)
    from scenarios.loader import scenario_from_dict

    points: list[SweepPoint] = []
    for base in bases:
        reference = base if file_reference(base) is None else str(folder / base) if not Path(base).is_absolute() else base
        for index, values in enumerate(points_design):
            variant = _base_data(reference)
            base_name = str(variant.get("name") or Path(base).stem)
            name = f"{base_name}--p{index:03d}"
            where = f"{source}: point {index} ({', '.join(f'{k}={v!r}' for k, v in values.items())})"
            for dotted, value in values.items():
                _set(variant, dotted, value, where)
            variant["name"] = name
            try:
                scenario = scenario_from_dict(variant, where, name, vocabulary=SCENARIO_VOCABULARY)
            except ProblemsError as error:
                raise ScenarioError(str(error)) from None
            path = out / "scenarios" / f"{name}.toml"
            path.write_text(to_toml(scenario), encoding="utf-8")
            points.append(SweepPoint(name, base, dict(values), path))
    data["scenarios"] = [str(point.path) for point in points]
    protocol_path = out / "sweep-protocol.toml"
    protocol_path.write_text(_protocol_toml(data), encoding="utf-8")
    protocol = load_protocol(protocol_path)
    design = {"sweep": source, "parameters": sorted({k for p in points for k in p.values}),
              "points": [{"scenario": p.scenario, "base": p.base, "values": p.values} for p in points]}
    (out / SWEEP_FILE).write_text(json.dumps(design, indent=2), encoding="utf-8")
    return protocol, points


def _toml_value(value: Any) -> str:
    """A TOML value: strings, numbers, booleans, lists and inline tables."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def _protocol_toml(data: dict[str, Any]) -> str:
    """The protocol part of a sweep file as TOML (scalars and lists, then tables)."""
    lines: list[str] = []
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    for key, value in data.items():
        if not isinstance(value, dict):
            lines.append(f"{json.dumps(key)} = {_toml_value(value)}")
    for name, table in tables.items():
        lines.append(f"\n[{name}]")
        for key, value in table.items():
            lines.append(f"{json.dumps(key)} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"
