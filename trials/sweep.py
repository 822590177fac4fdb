"""Sweeps: a study protocol plus a design over scenario fields, participant parameters and
conditions, expanded into a study.

A sweep file is a protocol (``docs/file-formats.md``) with a ``[grid]`` table and/or a
``[random]`` table, and optionally a ``[set]`` table::

    name = "dg-gains"
    seed = 5
    scenarios = ["paper-2019"]
    conditions = ["dg", "apf"]
    [participants]
    kind = "simulated"
    count = 2
    [grid]                            # every combination (a full factorial)
    "guidance.dg.k_p" = [5.0, 7.7]
    "participant.reaction_time_s" = [0.15, 0.3]
    [random]                          # or: samples drawn uniformly within ranges
    samples = 20
    "debris.mass_kg" = [5.0, 500.0]
    "target.velocity_m_s" = [[-0.1, -0.02], [0.0, 0.05], [0.0, 0.0]]   # per component
    [set]                             # the same value at every point (not swept)
    "capture.time_limit_s" = 20.0

Keys are, in any of the three tables:

* dotted paths of scenario fields (``table.field`` or ``table.sub.field``): each design
  point of each base scenario becomes a scenario variant, the base file's TOML with the
  values set, validated by the scenario loader exactly as a file would be, written to
  ``OUT/scenarios/<base>--p<NNN>.toml``;
* ``participant.<parameter>`` (a :class:`haptics.participants.ParticipantParams` field,
  simulated participants only): the point's trials give every participant that value
  instead of its sampled one, checked by :func:`haptics.participants.parameter_problem`;
* ``condition`` (``[grid]`` only): the point's trials run that condition only; the
  protocol's ``conditions`` are then the swept ones (and the file names none).

A bad value is reported with the sweep file, the point and the field. The variants then
run as one study in ``OUT`` (:func:`run_sweep`, :func:`trials.study.run_study`): every
trial is keyed by its full plan (the variant's content, the condition, the participant's
parameters), so re-running resumes, a changed design re-runs what changed, and a killed
sweep loses only the trials in flight. ``OUT/sweep.json`` maps each variant to its point
(``analysis.sweep`` joins it to the trial metrics). A sweep file can be a built-in
(``trials/protocols/*.toml`` with a design table, e.g. ``delay``).
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from capture_trainer.errors import ScenarioError
from capture_trainer.registry import suggestion
from haptics.participants import parameter_problem
from scenarios.loader import builtin_scenarios
from scenarios.toml_in import ProblemsError, file_reference, parse_toml, read_toml_file
from scenarios.toml_out import to_toml
from trials.conditions import CONDITIONS
from trials.protocol import (
    CONTROLLER_ID,
    SWEEP_TABLES,
    Protocol,
    TrialSpec,
    builtin_protocols,
    load_protocol,
    plan_trials,
    run_seed,
    scenario_stem,
)

#: Most design points of one sweep (per base scenario).
MAX_POINTS = 10_000
SWEEP_FILE = "sweep.json"
DESIGN_TABLES = SWEEP_TABLES
#: Design keys of participant parameters start with this.
PARTICIPANT_PREFIX = "participant."
#: The design key of the condition.
CONDITION_KEY = "condition"


@dataclass(frozen=True)
class SweepPoint:
    """One scenario variant.

    Attributes:
        scenario: the variant's name (``<base>--p<NNN>``).
        base: the base scenario as the sweep file names it.
        values: ``{design key: value}`` of this point (what is swept, not ``[set]``).
        path: the variant's scenario file.
        condition: the only condition its trials run (None: the protocol's).
        participant: participant parameters its trials use instead of the sampled ones
            (the ``[set]`` table's and the point's).
        seed_name: the scenario name its trials' run seeds are derived from
            (``trials.protocol.run_seed``): the variant's own name, or with
            ``common_seeds = true`` the base's, so that a participant's trial of a
            condition and repetition gets the same seed at every point.
    """

    scenario: str
    base: str
    values: dict[str, Any]
    path: Path
    condition: str | None = None
    participant: dict[str, Any] = field(default_factory=dict)
    seed_name: str = ""


def _kind(key: str) -> str:
    """``condition``, ``participant`` or ``scenario``: what a design key sets."""
    if key == CONDITION_KEY:
        return "condition"
    return "participant" if key.startswith(PARTICIPANT_PREFIX) else "scenario"


def _ranges(key: str, bounds: Any, source: str) -> list[tuple[float, float]] | tuple[float, float]:
    """A ``[random]`` entry: ``[low, high]`` (a number) or ``[[low, high], ...]`` (a vector,
    one range per component)."""
    def pair(value: Any) -> tuple[float, float] | None:
        ok = (isinstance(value, list) and len(value) == 2
              and all(isinstance(b, (int, float)) and not isinstance(b, bool) and math.isfinite(b) for b in value)
              and value[0] <= value[1])
        return (float(value[0]), float(value[1])) if ok else None

    if isinstance(bounds, list) and bounds and all(isinstance(b, list) for b in bounds):
        pairs = [pair(b) for b in bounds]
        if _kind(key) == "scenario" and all(p is not None for p in pairs):
            return [p for p in pairs if p is not None]
        raise ScenarioError(f"{source}: random.{key}: expected [low, high] or, for a vector field, one [low, high] "
                            f"per component, each with low <= high, got {bounds!r}")
    single = pair(bounds)
    if single is None:
        raise ScenarioError(f"{source}: random.{key}: expected [low, high] with low <= high (or one [low, high] per "
                            f"component of a vector field), got {bounds!r}")
    return single


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
        ranges = {}
        for key, bounds in random_table.items():
            if _kind(key) == "condition":
                raise ScenarioError(f"{source}: random.{key}: a condition is not drawn from a range; sweep it in "
                                    "[grid]")
            ranges[key] = _ranges(key, bounds, source)
        rng = np.random.default_rng(seed)

        def draw(bounds: list[tuple[float, float]] | tuple[float, float]) -> Any:
            if isinstance(bounds, list):
                return [float(rng.uniform(*b)) for b in bounds]
            return float(rng.uniform(*bounds))

        drawn = [{key: draw(bounds) for key, bounds in ranges.items()} for _ in range(samples)]
        points = [{**point, **sample} for point in points for sample in drawn]
    if len(points) > MAX_POINTS:
        raise ScenarioError(f"{source}: {len(points)} design points; at most {MAX_POINTS}")
    return points


def _check_keys(tables: dict[str, Any], data: dict[str, Any], source: str) -> dict[str, Any]:
    """Check what the design keys set against the protocol part; returns the ``[set]``
    table. A key appears in one table only; ``condition`` only in ``[grid]`` (and then
    the file names no ``conditions``); participant keys only with simulated participants."""
    fixed = dict(tables.get("set") or {})
    seen: dict[str, str] = {}
    for name in SWEEP_TABLES:
        for key in tables.get(name) or {}:
            if name == "random" and key in ("samples", "seed"):
                continue
            if key in seen:
                raise ScenarioError(f"{source}: {name}.{key}: also in [{seen[key]}]; a field is in one table only")
            seen[key] = name
    if CONDITION_KEY in fixed:
        raise ScenarioError(f"{source}: set.{CONDITION_KEY}: list the conditions in `conditions`, or sweep them in "
                            "[grid]")
    if seen.get(CONDITION_KEY) == "grid" and "conditions" in data:
        raise ScenarioError(f"{source}: conditions: leave it out when [grid] sweeps {CONDITION_KEY!r} (the swept "
                            "values are the study's conditions)")
    table = data.get("participants")
    participants: dict[str, Any] = table if isinstance(table, dict) else {}
    people = [key for key in seen if _kind(key) == "participant"]
    if people and participants.get("kind", "simulated") != "simulated":
        raise ScenarioError(f"{source}: {seen[people[0]]}.{people[0]}: participant parameters are swept only with "
                            f"simulated participants (participants.kind is {participants.get('kind')!r})")
    for key in people:
        problem = parameter_problem(key[len(PARTICIPANT_PREFIX):], 0.5)
        if problem is not None and problem.startswith("unknown"):
            raise ScenarioError(f"{source}: {seen[key]}.{key}: {problem}")
    for key, value in fixed.items():
        if _kind(key) == "participant":
            problem = parameter_problem(key[len(PARTICIPANT_PREFIX):], value)
            if problem is not None:
                raise ScenarioError(f"{source}: set.{key}: {problem}")
    return fixed


def _check_point(values: dict[str, Any], where: str) -> None:
    """The point's participant parameters and condition, checked like the fields they replace."""
    for key, value in values.items():
        kind = _kind(key)
        if kind == "participant":
            problem = parameter_problem(key[len(PARTICIPANT_PREFIX):], value)
            if problem is not None:
                raise ScenarioError(f"{where}: {key}: {problem}")
        elif kind == "condition" and (not isinstance(value, str) or value not in CONDITIONS):
            close = suggestion(str(value), CONDITIONS.names()) if isinstance(value, str) else None
            hint = f" (did you mean {close!r}?)" if close else ""
            raise ScenarioError(f"{where}: {key}: expected one of {', '.join(CONDITIONS.names())}, got {value!r}{hint}")


def _base_data(reference: str) -> dict[str, Any]:
    """A base scenario's TOML data (a built-in name or a file)."""
    path = file_reference(reference)
    if path is not None:
        return read_toml_file(path, reference)
    return parse_toml(builtin_scenarios().get(reference).read_text(encoding="utf-8"), f"builtin:{reference}")


def _set(data: dict[str, Any], dotted: str, value: Any, where: str) -> None:
    keys = dotted.split(".")
    if len(keys) < 2 or not all(keys):
        raise ScenarioError(f"{where}: {dotted!r}: expected a dotted scenario field such as 'guidance.dg.k_p', "
                            f"'{PARTICIPANT_PREFIX}<parameter>' or '{CONDITION_KEY}'")
    table = data
    for key in keys[:-1]:
        table = table.setdefault(key, {})
        if not isinstance(table, dict):
            raise ScenarioError(f"{where}: {dotted!r}: {key} is not a table")
    table[keys[-1]] = value


def read_sweep_file(reference: str | Path) -> tuple[dict[str, Any], str, Path | None]:
    """A sweep file's data, its name for messages and its folder (None for a built-in):
    a path, or the name of a built-in sweep (``trials/protocols/<name>.toml``).

    Raises:
        ScenarioError: unreadable, unknown, or not a sweep (no design table).
    """
    text = str(reference)
    path = file_reference(text)
    if path is not None:
        data, source, folder = read_toml_file(path, text), text, path.absolute().parent
    else:
        source = f"<built-in {text}>"
        data, folder = parse_toml(builtin_protocols().get(text).read_text(encoding="utf-8"), source), None
    if not any(name in data for name in ("grid", "random")):
        raise ScenarioError(f"{source}: not a sweep: it needs a [grid] or a [random] table of dotted scenario fields")
    return data, source, folder


def is_sweep_reference(reference: str | Path) -> bool:
    """True when ``reference`` (a built-in protocol name or a .toml path) names a sweep
    file; False for a plain protocol or anything unreadable (the protocol loader then
    says what is wrong)."""
    try:
        read_sweep_file(reference)
    except ScenarioError:
        return False
    return True


def prepare_sweep(sweep_file: str | Path, out_dir: str | Path) -> tuple[Protocol, list[SweepPoint]]:
    """Expand ``sweep_file`` (a path or a built-in sweep's name) into scenario variants in
    ``out_dir`` and the study protocol that runs them (validated completely before
    anything runs).

    Raises:
        ScenarioError: the sweep file, a swept value or the protocol part is wrong (every
            problem of a variant is listed, one line each, naming the point).
    """
    data, source, folder = read_sweep_file(sweep_file)
    tables = {name: data.pop(name) for name in DESIGN_TABLES if name in data}
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise ScenarioError(f"{source}: [{name}] must be a table of dotted scenario fields")
    fixed = _check_keys(tables, data, source)
    common_seeds = data.pop("common_seeds", False)
    if not isinstance(common_seeds, bool):
        raise ScenarioError(f"{source}: common_seeds: expected true or false, got {common_seeds!r}")
    if common_seeds and "phases" in data:
        raise ScenarioError(f"{source}: common_seeds: not with [[phases]] (a phased design's seeds name its phases)")
    points_design = _design(tables, source)
    bases = data.get("scenarios")
    if not isinstance(bases, list) or not bases or not all(isinstance(b, str) for b in bases):
        raise ScenarioError(f"{source}: scenarios: expected a non-empty list of scenario names or files")
    out = Path(out_dir).absolute()
    (out / "scenarios").mkdir(parents=True, exist_ok=True)
    from scenarios.loader import scenario_from_dict
    from trials.vocabulary import SCENARIO_VOCABULARY

    fixed_people = {k[len(PARTICIPANT_PREFIX):]: v for k, v in fixed.items() if _kind(k) == "participant"}
    points: list[SweepPoint] = []
    for base in bases:
        reference = base
        if folder is not None and file_reference(base) is not None and not Path(base).is_absolute():
            reference = str(folder / base)
        for index, values in enumerate(points_design):
            variant = _base_data(reference)
            base_name = str(variant.get("name") or Path(base).stem)
            name = f"{base_name}--p{index:03d}"
            where = f"{source}: point {index} ({', '.join(f'{k}={v!r}' for k, v in values.items())})"
            _check_point(values, where)
            for dotted, value in fixed.items():
                if _kind(dotted) == "scenario":
                    _set(variant, dotted, value, f"{source}: set")
            for dotted, value in values.items():
                if _kind(dotted) == "scenario":
                    _set(variant, dotted, value, where)
            variant["name"] = name
            try:
                scenario = scenario_from_dict(variant, where, name, vocabulary=SCENARIO_VOCABULARY)
            except ProblemsError as error:
                raise ScenarioError(str(error)) from None
            path = out / "scenarios" / f"{name}.toml"
            path.write_text(to_toml(scenario), encoding="utf-8")
            people = {**fixed_people, **{k[len(PARTICIPANT_PREFIX):]: v for k, v in values.items()
                                         if _kind(k) == "participant"}}
            seed_name = scenario_stem(reference) if common_seeds else name
            points.append(SweepPoint(name, base, dict(values), path, values.get(CONDITION_KEY), people, seed_name))
    data["scenarios"] = [str(point.path) for point in points]
    swept_conditions = [p.condition for p in points if p.condition is not None]
    if swept_conditions:
        data["conditions"] = list(dict.fromkeys(swept_conditions))
    protocol_path = out / "sweep-protocol.toml"
    protocol_path.write_text(_protocol_toml(data), encoding="utf-8")
    protocol = load_protocol(protocol_path)
    design = {"sweep": source, "parameters": sorted({k for p in points for k in p.values}), "set": fixed,
              "common_seeds": common_seeds,
              "points": [{"scenario": p.scenario, "base": p.base, "values": p.values} for p in points]}
    (out / SWEEP_FILE).write_text(json.dumps(design, indent=2), encoding="utf-8")
    return protocol, points


def sweep_specs(protocol: Protocol, points: list[SweepPoint]) -> list[TrialSpec]:
    """The sweep's trials: the protocol's plan (``trials.protocol.plan_trials``), each
    variant's trials restricted to the point's condition (when it sets one) and given
    the point's participant parameters (over the sampled ones; the controller's trials
    keep theirs)."""
    from trials.study import participants_for

    by_scenario = {str(point.path): point for point in points}
    specs: list[TrialSpec] = []
    for spec in plan_trials(protocol, participants_for(protocol)):
        point = by_scenario.get(spec.scenario)
        if point is None:
            specs.append(spec)
            continue
        if point.seed_name and point.seed_name != point.scenario:
            spec = replace(spec, seed=run_seed(protocol.seed, spec.participant_id, point.seed_name, spec.condition,
                                               spec.repetition))
        if spec.participant_id != CONTROLLER_ID:
            if point.condition is not None and spec.condition != point.condition:
                continue
            if point.participant:
                spec = replace(spec, participant_params={**spec.participant_params, **point.participant})
        specs.append(spec)
    return specs


def sweep_design(points: list[SweepPoint]) -> dict[str, Any] | None:
    """What of the design the variants' files do not hold (per point its condition and
    participant parameters), for the study's fingerprint; None when every point is a
    scenario variant only (such a sweep's fingerprint is a plain study's)."""
    if not any(point.condition is not None or point.participant or point.seed_name != point.scenario
               for point in points):
        return None
    return {"points": [{"scenario": p.scenario, "condition": p.condition, "participant": p.participant,
                        "seed_name": p.seed_name} for p in points]}


def run_sweep(sweep_file: str | Path, out_dir: str | Path,
              prepared: tuple[Protocol, list[SweepPoint]] | None = None, **study: Any) -> tuple[Any, list[SweepPoint]]:
    """Prepare ``sweep_file`` in ``out_dir`` (unless ``prepared`` is what
    :func:`prepare_sweep` returned for it) and run (or resume) it as one study
    (:func:`trials.study.run_study` with ``study``'s options: workers, executor, force ...).

    Returns:
        The :class:`trials.study.StudyResult` and the design points.
    """
    from trials.study import run_study

    protocol, points = prepared if prepared is not None else prepare_sweep(sweep_file, out_dir)
    result = run_study(protocol, out_dir, specs=sweep_specs(protocol, points), design=sweep_design(points), **study)
    return result, points


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
