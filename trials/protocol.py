"""Study protocols: who does which trials, in which counterbalanced order.

A protocol is a TOML file (or a built-in name such as ``paper-2019``)::

    name = "paper-2019"
    description = "Li & Yan 2019: DG, NG, APF x 3 repetitions, plus AS"
    seed = 2019                       # seeds the population and every trial
    scenarios = ["paper-2019"]        # built-in names or paths to scenario files (relative
                                      # to the protocol file's folder)
    conditions = ["dg", "ng", "apf"]  # counterbalanced per participant (Latin square)
    repetitions = 3
    controller_conditions = ["as"]    # run by the controller alone, no participant
    controller_repetitions = 3

    [participants]
    kind = "simulated"                # "simulated" (a sampled population) or "human"
    count = 10                        # simulated: how many
    mix = { novice = 0.5, expert = 0.5 }  # simulated: share of each operator kind
    # ids = ["P01", "P02"]            # human: participant ids

A **phased design** (``[[phases]]``, ``[groups]``, ``[schedule.<name>]``; see
:mod:`trials.phases`, the built-in ``training-transfer``) runs every participant
through its phases in order instead of counterbalanced condition blocks
(:func:`phased_trials`).

Every field is checked on loading; an error names the file, the field and what was
expected. A relative scenario path in a protocol file is resolved against the protocol
file's folder when the file is loaded (:func:`load_protocol`), so the loaded
:class:`Protocol` names the file the study runs wherever it is started from. Condition
names come from :data:`trials.conditions.CONDITIONS`, simulated kinds from :data:`haptics.participants.PARTICIPANT_PRESETS`, built-in protocol names from
:func:`builtin_protocols` (the ``trials/protocols/*.toml`` files).

Seeds: the protocol's seed samples the population and, per planned trial,
:func:`run_seed` gives the trial's run seed (from the scenario's trial name, not from
where its file lies); the runner combines that with the
scenario's own seed, the participant and the repetition
(:func:`scenarios.seeding.trial_seed`).
"""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import asdict, dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from capture_trainer.errors import ScenarioError
from capture_trainer.registry import Registry, packaged_files, suggestion
from haptics.participants import PARTICIPANT_PRESETS
from scenarios.toml_in import (
    MAX_REFERENCE_BYTES,
    MAX_SEED,
    Problems,
    file_reference,
    is_number,
    parse_toml,
    problem_lines,
    read_toml_file,
    text_problem,
)
from trials.conditions import CONDITIONS
from trials.counterbalance import condition_order
from trials.phases import (
    GROUP_CONDITION,
    Group,
    Phase,
    ScheduleSpec,
    check_design,
    group_of,
    parse_groups,
    parse_phases,
    parse_schedules,
)

CONTROLLER_ID = "controller"
_PROTOCOL_KEYS = (
    "name",
    "description",
    "seed",
    "scenarios",
    "conditions",
    "repetitions",
    "controller_conditions",
    "controller_repetitions",
    "participants",
    "groups",
    "phases",
    "schedule",
)
_PARTICIPANT_KEYS = ("kind", "count", "mix", "ids")
#: The tables that make a protocol file a sweep (``trials.sweep``): its design.
SWEEP_TABLES = ("grid", "random", "set")
#: Most repetitions of each condition (``repetitions``, ``controller_repetitions``).
MAX_REPETITIONS = 100
#: Most participants (a simulated ``count`` or human ``ids``).
MAX_PARTICIPANTS = 1000
#: Most scenarios in one protocol.
MAX_SCENARIOS = 100
#: Most trials one study plans (see :func:`planned_trial_count`).
MAX_PLANNED_TRIALS = 50_000
#: Largest share of one participant kind in ``mix`` (shares are relative).
MAX_SHARE = 1e6
#: Longest participant id [UTF-8 bytes]: it is part of every one of its trial files' names.
MAX_ID_BYTES = 64


@dataclass(frozen=True)
class ParticipantPlan:
    """Who takes part: a simulated population or human ids."""

    kind: str  # "simulated" | "human"
    count: int
    mix: tuple[tuple[str, float], ...] = ()
    ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Protocol:
    """A loaded, validated study protocol.

    ``scenarios`` holds the references the study runs: built-in names and absolute paths
    as written, and relative paths of a protocol file joined to that file's folder
    (:func:`load_protocol`); relative paths of a protocol built in code stay relative to
    the current folder.
    """

    name: str
    description: str
    seed: int
    scenarios: tuple[str, ...]
    conditions: tuple[str, ...]
    repetitions: int
    participants: ParticipantPlan
    controller_conditions: tuple[str, ...] = ()
    controller_repetitions: int = 1
    source: str = ""
    groups: tuple[Group, ...] = ()
    phases: tuple[Phase, ...] = ()
    schedules: tuple[ScheduleSpec, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """Plain data; the fields of a phased design only when it is one (so a plain
        protocol's record, and its plan's fingerprint, are what they always were)."""
        data = asdict(self)
        for key in PHASED_FIELDS:
            if not data[key]:
                del data[key]
        return data


#: The :class:`Protocol` fields of a phased design (``trials.phases``).
PHASED_FIELDS = ("groups", "phases", "schedules")


@dataclass(frozen=True)
class TrialSpec:
    """One planned trial: everything a worker process needs to run it.

    Attributes:
        trial_id: unique within the study; the trial file is ``<trial_id>.parquet``.
        participant_index: 0-based index in the study (-1 for the controller).
        participant_params: the simulated operator's parameters (empty for humans).
        order_index: position of this trial in the participant's session.
        seed: the trial's run seed (:func:`run_seed`); the runner combines it with the
            scenario's seed (:func:`scenarios.seeding.trial_seed`).
        phase, block, group: a phased design's phase, 0-based block in it, and the
            participant's group ("" and 0 otherwise; ``trials.phases``).
        schedule: the guidance schedule of the trial, ``{"name", "params"}`` (empty: the
            law as designed); the study computes its authority from the participant's
            earlier trials of that schedule (``trials.study.scheduled_authority``).
    """

    trial_id: str
    scenario: str
    condition: str
    participant_id: str
    participant_kind: str
    participant_index: int
    repetition: int
    seed: int
    order_index: int
    participant_params: dict[str, Any] = field(default_factory=dict)
    phase: str = ""
    block: int = 0
    group: str = ""
    schedule: dict[str, Any] = field(default_factory=dict)


@functools.cache
def builtin_protocols() -> Registry[Traversable]:
    """The protocol files shipped with the package (``trials/protocols/*.toml``) by name,
    sorted: the one list of built-in protocol names."""
    return packaged_files("built-in protocol", "trials.protocols", ".toml", error=ScenarioError,
                          hint="or give the path of a .toml file")


def builtin_protocol_names() -> tuple[str, ...]:
    """Names of the protocols shipped with the package, sorted."""
    return builtin_protocols().names()


def load_protocol(name_or_path: str | Path) -> Protocol:
    """Load and completely validate a built-in protocol by name, or a protocol file by path.

    Every field is checked, and every scenario the protocol names is loaded and checked
    too, so a protocol that loads can be run: nothing needs to be written before its
    problems are known. A relative scenario path in a protocol file is resolved against
    the file's folder (see :func:`_scenario_file`); the returned protocol holds the
    resolved path, so it runs the same file whatever the current folder.

    Raises:
        ScenarioError: the file cannot be read or parsed (one line), or it has problems:
            a :class:`~scenarios.toml_in.ProblemsError` listing every one, the protocol's
            own and its scenarios' (``FILE: scenarios[1]: SCENARIO: FIELD: ...``; for a
            relative path, ``SCENARIO`` as written and `` (resolved: PATH)`` at the end).
    """
    reference = str(name_or_path)
    wrong = text_problem(reference, max_bytes=MAX_REFERENCE_BYTES, allow_empty=False, single_line=True)
    if wrong is not None:
        raise ScenarioError(f"protocol: expected a built-in name or the path of a .toml file: {wrong}")
    path = file_reference(reference)
    if path is not None:
        source = reference
        data = read_toml_file(path, source)
        _refuse_sweep(data, source)
        return _parse(data, source, _folder_of(path, source))
    source = f"<built-in {reference}>"
    data = parse_toml(builtin_protocols().get(reference).read_text(encoding="utf-8"), source)
    _refuse_sweep(data, source)
    return _parse(data, source)


def is_sweep(data: dict[str, Any]) -> bool:
    """A parsed protocol file with a design table (:data:`SWEEP_TABLES`) is a sweep."""
    return any(name in data for name in SWEEP_TABLES)


def _refuse_sweep(data: dict[str, Any], source: str) -> None:
    if is_sweep(data):
        raise ScenarioError(f"{source}: a sweep (it has a [{', '.join(t for t in SWEEP_TABLES if t in data)}] "
                            "table): run it with `capture-trainer sweep` or `capture-trainer study`")


def _folder_of(path: Path, source: str) -> Path:
    """The absolute folder of the protocol file ``path`` (links not followed)."""
    try:
        return path.absolute().parent
    except OSError as error:  # the current folder is gone
        raise ScenarioError(f"{source}: cannot tell the protocol file's folder: {error.strerror or error}") from None


def validate_protocol(protocol: Protocol) -> None:
    """Check a protocol built in code as :func:`load_protocol` checks a file (every field,
    the bounds, and every scenario it names, loaded). Its scenario references are taken
    as they are (a loaded protocol's are already resolved; a relative path is relative to
    the current folder).

    Raises:
        ProblemsError: every problem, one line each.
    """
    plan = protocol.participants
    participants: dict[str, Any] = {"kind": plan.kind}
    if plan.kind == "human":
        participants["ids"] = list(plan.ids)
    else:
        participants.update(count=plan.count, mix=dict(plan.mix))
    data = {
        "name": protocol.name,
        "description": protocol.description,
        "seed": protocol.seed,
        "scenarios": list(protocol.scenarios),
        "conditions": list(protocol.conditions),
        "repetitions": protocol.repetitions,
        "controller_conditions": list(protocol.controller_conditions),
        "controller_repetitions": protocol.controller_repetitions,
        "participants": participants,
    }
    if protocol.phases:
        del data["conditions"], data["repetitions"]
        data["phases"] = [{"name": p.name, "condition": p.condition, "blocks": p.blocks, "trials": p.trials,
                           **({"scenarios": list(p.scenarios)} if p.scenarios else {})} for p in protocol.phases]
        if protocol.groups:
            data["groups"] = {g.name: {"condition": g.condition, **({"schedule": g.schedule} if g.schedule else {})}
                              for g in protocol.groups}
        if protocol.schedules:
            data["schedule"] = {spec.name: spec.as_params() for spec in protocol.schedules}
    _parse(data, protocol.source or f"protocol {protocol.name!r}")


def planned_trial_count(protocol: Protocol) -> int:
    """How many trials :func:`plan_trials` plans for ``protocol``."""
    controller = len(protocol.controller_conditions) * protocol.controller_repetitions * len(protocol.scenarios)
    if protocol.phases:
        per_participant = sum(phase.blocks * phase.trials * len(phase.scenarios or protocol.scenarios)
                              for phase in protocol.phases)
        return protocol.participants.count * per_participant + controller
    per_scenario = protocol.participants.count * len(protocol.conditions) * protocol.repetitions
    return per_scenario * len(protocol.scenarios) + controller


def all_scenarios(protocol: Protocol) -> tuple[str, ...]:
    """Every scenario reference the protocol runs: its ``scenarios``, then the phases'
    own, each once, in order."""
    seen = dict.fromkeys(protocol.scenarios)
    for phase in protocol.phases:
        seen.update(dict.fromkeys(phase.scenarios))
    return tuple(seen)


class _Fields:
    """A protocol table being read: named getters that record problems and return None."""

    def __init__(self, problems: Problems, prefix: str, data: dict[str, Any], keys: tuple[str, ...]) -> None:
        self.problems = problems
        self.prefix = prefix
        self.data = data
        for key in data:
            if key not in keys:
                close = suggestion(key, keys)
                hint = f" (did you mean {close!r}?)" if close else ""
                shown = key if len(key) <= 80 else key[:77] + "..."
                problems.add(f"{prefix}{shown}", f"unknown key{hint}; expected one of {', '.join(sorted(keys))}")

    def fail(self, key: str, expected: str, got: object = ..., hint: str = "") -> None:
        self.problems.expected(f"{self.prefix}{key}", expected, got, hint=hint)

    def get(self, key: str, expected: str, required: bool) -> Any:
        if key not in self.data:
            if required:
                self.problems.add(f"{self.prefix}{key}", f"missing (expected {expected})")
            return None
        return self.data[key]

    def integer(self, key: str, default: int, minimum: int, maximum: int) -> int | None:
        expected = f"an integer >= {minimum} and <= {maximum}"
        value = self.get(key, expected, required=False)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
            self.fail(key, expected, value)
            return None
        number: int = value
        return number

    def text(self, key: str, default: str | None, *, allow_empty: bool = True) -> str | None:
        value = self.get(key, "a string", required=default is None)
        if value is None:
            return default
        wrong = text_problem(value, allow_empty=allow_empty, single_line=not allow_empty)
        if wrong is not None:
            self.problems.add(f"{self.prefix}{key}", f"expected {wrong}")
            return None
        string: str = value
        return string


def _parse(data: dict[str, Any], source: str, base: Path | None = None) -> Protocol:
    """Validate parsed protocol ``data`` completely (its scenarios included).

    Args:
        base: the protocol file's folder, against which relative scenario paths are
            resolved (None: they are kept as written).

    Raises:
        ProblemsError: every problem, one line each.
    """
    problems = Problems(source)
    fields = _Fields(problems, "", data, _PROTOCOL_KEYS)
    name = fields.text("name", None, allow_empty=False)
    description = fields.text("description", "")
    seed = fields.integer("seed", 0, 0, MAX_SEED)
    references = _scenario_references(fields, base)
    scenarios = None if references is None else tuple(resolved for _, resolved in references)
    phased = "phases" in data
    phases, phase_references = _phases(fields, base) if phased else ((), [])
    groups = parse_groups(problems, data.get("groups")) if phased else ()
    schedules = parse_schedules(problems, data.get("schedule")) if phased else ()
    for key in ("groups", "schedule"):
        if not phased and key in data:
            fields.fail(key, "this table only with [[phases]] (a phased design)")
    if phased:
        for key in ("conditions", "repetitions"):
            if key in data:
                fields.fail(key, "no such field in a phased design (each [[phases]] table has its condition, "
                            "blocks and trials)")
        if phases is not None and groups is not None and schedules is not None:
            check_design(problems, phases, groups, schedules)
    conditions = (_phase_conditions(phases, groups) if phased
                  else _conditions(fields, "conditions", allow_empty=False))
    controller = _conditions(fields, "controller_conditions", allow_empty=True)
    repetitions = fields.integer("repetitions", 1, 1, MAX_REPETITIONS)
    controller_repetitions = fields.integer("controller_repetitions", 1, 1, MAX_REPETITIONS)
    participants = _participants(fields)
    protocol = Protocol(
        name=name,  # type: ignore[arg-type]
        description=description,  # type: ignore[arg-type]
        seed=seed,  # type: ignore[arg-type]
        scenarios=scenarios,  # type: ignore[arg-type]
        conditions=conditions,  # type: ignore[arg-type]
        repetitions=repetitions,  # type: ignore[arg-type]
        participants=participants,  # type: ignore[arg-type]
        controller_conditions=controller or (),
        controller_repetitions=controller_repetitions,  # type: ignore[arg-type]
        source=source,
        groups=groups or (),
        phases=phases or (),
        schedules=schedules or (),
    )
    parts = (scenarios, conditions, controller, repetitions, controller_repetitions, participants, phases, groups,
             schedules)
    if all(part is not None for part in parts):
        planned = planned_trial_count(protocol)
        if planned > MAX_PLANNED_TRIALS:
            problems.add(
                "", f"expected at most {MAX_PLANNED_TRIALS} planned trials (participants x conditions x "
                f"repetitions x scenarios, plus the controller's), got {planned}",
            )
    if references is not None:
        _check_scenarios(problems, references)
    for prefix, phase_refs in phase_references:
        _check_scenarios(problems, phase_refs, prefix)
    problems.check()
    return protocol


def _phases(fields: _Fields, base: Path | None) -> tuple[tuple[Phase, ...] | None, list[tuple[str, Any]]]:
    """The ``[[phases]]`` with their scenario references resolved as the protocol's
    (``trials.phases``); and per phase with its own scenarios, (prefix, references)."""
    parsed = parse_phases(fields.problems, fields.data.get("phases"))
    if parsed is None:
        return None, []
    phases: list[Phase] = []
    checks: list[tuple[str, Any]] = []
    ok = True
    for index, (phase, raw) in enumerate(parsed):
        if raw is None:
            phases.append(phase)
            continue
        prefix = f"phases[{index}]."
        references = _scenario_references(_Fields(fields.problems, prefix, {"scenarios": raw}, ("scenarios",)), base)
        if references is None:
            ok = False
            continue
        checks.append((prefix, references))
        phases.append(Phase(phase.name, phase.condition, phase.blocks, phase.trials,
                            tuple(resolved for _, resolved in references)))
    return (tuple(phases) if ok else None), checks


def _phase_conditions(phases: tuple[Phase, ...] | None, groups: tuple[Group, ...] | None) -> tuple[str, ...] | None:
    """The conditions a phased design runs (registry order)."""
    if phases is None or groups is None:
        return None
    used = {phase.condition for phase in phases if phase.condition != GROUP_CONDITION}
    used |= {group.condition for group in groups}
    return tuple(name for name in CONDITIONS.names() if name in used)


def _scenario_references(fields: _Fields, base: Path | None) -> tuple[tuple[str, str], ...] | None:
    """The ``scenarios`` list as (written, resolved) pairs (:func:`_scenario_file`):
    readable references, at most :data:`MAX_SCENARIOS`, and distinct trial names (two
    references may not share a file stem)."""
    expected = f"a non-empty list of at most {MAX_SCENARIOS} built-in scenario names or .toml paths"
    value = fields.get("scenarios", expected, required=True)
    if value is None:
        return None
    if not isinstance(value, list) or not value or len(value) > MAX_SCENARIOS:
        shown = value if not isinstance(value, list) or len(value) <= MAX_SCENARIOS else f"{len(value)} entries"
        fields.fail("scenarios", expected, shown)
        return None
    references: list[tuple[str, str]] = []
    stems: dict[str, int] = {}
    for index, item in enumerate(value):
        wrong = text_problem(item, max_bytes=MAX_REFERENCE_BYTES, allow_empty=False, single_line=True)
        if wrong is not None:
            fields.problems.add(f"scenarios[{index}]", f"expected a built-in scenario name or a .toml path: {wrong}")
            continue
        resolved = _scenario_file(item, base)
        wrong = text_problem(resolved, max_bytes=MAX_REFERENCE_BYTES, allow_empty=False, single_line=True)
        if wrong is not None:  # the protocol's folder made it too long, or not one line
            fields.problems.add(f"scenarios[{index}]", f"{item}: expected a path that resolves to {wrong}")
            continue
        stem = scenario_stem(resolved)
        if stem in stems:
            fields.fail(f"scenarios[{index}]", f"a scenario not already listed (its trials would be named "
                        f"like those of scenarios[{stems[stem]}])", item)
            continue
        stems[stem] = index
        references.append((item, resolved))
    return tuple(references) if len(references) == len(value) else None


def _scenario_file(reference: str, base: Path | None) -> str:
    """A protocol's scenario reference as the study runs it.

    With ``base`` (the protocol file's folder), a relative path is joined to it; a
    reference is a path as :func:`scenarios.toml_in.file_reference` decides (a ``.toml``
    suffix, a separator, or an existing file), the existing file looked for in ``base``
    rather than in the current folder. Built-in names, absolute paths, and every
    reference without ``base``, are returned unchanged.
    """
    if base is None:
        return reference
    path = Path(reference)
    if path.is_absolute():
        return reference
    candidate = base / path
    if path.suffix != ".toml" and os.sep not in reference and "/" not in reference:
        try:
            if not candidate.exists():
                return reference  # a built-in name
        except (OSError, ValueError):
            pass  # as file_reference: a name that cannot be looked up is taken as a path
    return str(candidate)


def _check_scenarios(problems: Problems, references: tuple[tuple[str, str], ...], prefix: str = "") -> None:
    """Load every scenario the protocol names; record their problems under
    ``<prefix>scenarios[i]`` (a resolved relative path: as written, with
    `` (resolved: PATH)`` at the end)."""
    from trials.vocabulary import load_scenario

    for index, (written, resolved) in enumerate(references):
        try:
            load_scenario(resolved)
        except ScenarioError as error:
            if written == resolved:
                problems.extend(f"{prefix}scenarios[{index}]", error)
                continue
            for line in problem_lines(error):
                if line.startswith(f"{resolved}: "):
                    line = f"{written}: {line[len(resolved) + 2:]}"
                problems.add(f"{prefix}scenarios[{index}]", f"{line} (resolved: {resolved})")


def _hint(names: tuple[str, ...], got: object) -> str:
    """`` (did you mean 'x'?)`` when a name in ``names`` is close to ``got``."""
    close = suggestion(str(got), names) if isinstance(got, str) else None
    return f" (did you mean {close!r}?)" if close else ""


def _conditions(fields: _Fields, key: str, allow_empty: bool) -> tuple[str, ...] | None:
    names = CONDITIONS.names()
    expected = f"a {'' if allow_empty else 'non-empty '}list of conditions from {', '.join(names)}, each once"
    value = fields.get(key, expected, required=not allow_empty)
    if value is None:
        return () if allow_empty else None
    if not isinstance(value, list) or (not value and not allow_empty) or len(value) > len(names):
        fields.fail(key, expected, value)
        return None
    ok = True
    for index, item in enumerate(value):
        if not isinstance(item, str) or item not in CONDITIONS:
            fields.fail(f"{key}[{index}]", f"one of {', '.join(names)}", item, hint=_hint(names, item))
            ok = False
    if ok and len(set(value)) != len(value):
        fields.fail(key, "each condition once", value)
        ok = False
    return tuple(value) if ok else None


def _participants(root: _Fields) -> ParticipantPlan | None:
    value = root.get("participants", "a table [participants]", required=True)
    if value is None:
        return None
    if not isinstance(value, dict):
        root.fail("participants", "a table [participants]", value)
        return None
    fields = _Fields(root.problems, "participants.", value, _PARTICIPANT_KEYS)
    kind = value.get("kind", "simulated")
    if kind not in ("simulated", "human"):
        fields.fail("kind", "'simulated' or 'human'", kind)
        return None
    only = {"simulated": ("count", "mix"), "human": ("ids",)}
    for owner, keys in only.items():
        for key in keys:
            if owner != kind and key in value:
                fields.fail(key, f"this field only with kind = {owner!r} (kind is {kind!r})")
    if kind == "human":
        ids = _participant_ids(fields)
        return None if ids is None else ParticipantPlan(kind="human", count=len(ids), ids=ids)
    count = fields.integer("count", 1, 1, MAX_PARTICIPANTS)
    mix = _mix(fields)
    if count is None or mix is None:
        return None
    return ParticipantPlan(kind="simulated", count=count, mix=mix)


def _participant_ids(fields: _Fields) -> tuple[str, ...] | None:
    expected = f"a non-empty list of at most {MAX_PARTICIPANTS} participant ids"
    ids = fields.get("ids", expected, required=True)
    if ids is None:
        return None
    if not isinstance(ids, list) or not ids or len(ids) > MAX_PARTICIPANTS:
        fields.fail("ids", expected, ids if not isinstance(ids, list) or len(ids) <= 10 else f"{len(ids)} ids")
        return None
    ok = True
    seen: set[str] = set()
    for index, pid in enumerate(ids):
        wrong = text_problem(pid, max_bytes=MAX_ID_BYTES, allow_empty=False, single_line=True)
        if wrong is not None:
            fields.problems.add(f"participants.ids[{index}]", f"expected {wrong}")
            ok = False
        elif pid == CONTROLLER_ID or pid in seen:
            reason = "the controller's id" if pid == CONTROLLER_ID else "a duplicate"
            fields.fail(f"ids[{index}]", f"a unique id other than {CONTROLLER_ID!r}", pid, hint=f" ({reason})")
            ok = False
        else:
            seen.add(pid)
    return tuple(ids) if ok else None


def _mix(fields: _Fields) -> tuple[tuple[str, float], ...] | None:
    value = fields.get("mix", "a table of kind = share", required=False)
    if value is None:
        return (("novice", 1.0),)
    kinds = PARTICIPANT_PRESETS.names()
    if not isinstance(value, dict) or not value:
        fields.fail("mix", f"a table of kind = share, kinds from {', '.join(kinds)}", value)
        return None
    ok = True
    for kind_name, share in value.items():
        if kind_name not in PARTICIPANT_PRESETS:
            shown = kind_name if len(kind_name) <= 80 else kind_name[:77] + "..."
            fields.fail(f"mix.{shown}", f"a participant kind from {', '.join(kinds)}", kind_name,
                        hint=_hint(kinds, kind_name))
            ok = False
        elif not is_number(share) or not 0 <= share <= MAX_SHARE:
            fields.fail(f"mix.{kind_name}", f"a number >= 0 and <= {MAX_SHARE:g} (a share)", share)
            ok = False
    if ok and sum(value.values()) <= 0:
        fields.fail("mix", "shares that add up to more than 0", value)
        ok = False
    return tuple((k, float(v)) for k, v in value.items()) if ok else None


def run_seed(study_seed: int, *parts: object) -> int:
    """A planned trial's run seed: stable 32 bits from the study seed and the trial's
    identity (process-independent)."""
    digest = hashlib.sha256(repr((study_seed, *parts)).encode()).digest()
    return int.from_bytes(digest[:4], "little")


def plan_trials(
    protocol: Protocol, participants: list[tuple[str, str, dict[str, Any]]]
) -> list[TrialSpec]:
    """Every trial of the study, each participant's in counterbalanced order.

    Args:
        protocol: the loaded protocol.
        participants: (id, kind, params) per participant, in participant order.

    Returns:
        Participant trials (condition blocks ordered by a balanced Latin square row per
        participant; repetitions and scenarios inside a block), then controller trials.
    """
    def spec(pid: str, kind: str, index: int, scenario: str, condition: str, repetition: int,
             order: int, params: dict[str, Any]) -> TrialSpec:
        return TrialSpec(
            trial_id=_trial_id(pid, scenario, condition, repetition),
            scenario=scenario,
            condition=condition,
            participant_id=pid,
            participant_kind=kind,
            participant_index=index,
            repetition=repetition,
            seed=run_seed(protocol.seed, pid, scenario_stem(scenario), condition, repetition),
            order_index=order,
            participant_params=params,
        )

    specs: list[TrialSpec] = []
    for index, (pid, kind, params) in enumerate(participants):
        if protocol.phases:
            specs += phased_trials(protocol, pid, kind, index, params)
            continue
        blocks = [
            (condition, repetition, scenario)
            for condition in condition_order(protocol.conditions, index)
            for repetition in range(protocol.repetitions)
            for scenario in protocol.scenarios
        ]
        for order, (condition, repetition, scenario) in enumerate(blocks):
            specs.append(spec(pid, kind, index, scenario, condition, repetition, order, params))
    for condition in protocol.controller_conditions:
        for repetition in range(protocol.controller_repetitions):
            for scenario in protocol.scenarios:
                specs.append(
                    spec(CONTROLLER_ID, "controller", -1, scenario, condition, repetition, repetition, {})
                )
    return specs


def phased_trials(protocol: Protocol, pid: str, kind: str, index: int, params: dict[str, Any]) -> list[TrialSpec]:
    """One participant's trials of a phased design (``trials.phases``), in session order:
    the phases in order; in each, its blocks; in each block, ``trials`` rounds of the
    phase's scenarios. The participant's group is ``group_of(groups, index)``; in a
    ``group`` phase the trials take the group's condition and schedule.

    Trial ids: ``<pid>_<phase>_b<block>_<scenario>_<condition>_t<n>`` (1-based block and
    n, n counting the phase's trials of that scenario); ``repetition`` is n - 1.
    """
    group = group_of(protocol.groups, index)
    schedules = {spec.name: spec.as_params() for spec in protocol.schedules}
    specs: list[TrialSpec] = []
    for phase in protocol.phases:
        own = phase.condition == GROUP_CONDITION
        condition = group.condition if own and group is not None else phase.condition
        schedule: dict[str, Any] = {}
        if own and group is not None and group.schedule:
            schedule = {"name": group.schedule, "params": schedules.get(group.schedule, {})}
        for block in range(phase.blocks):
            for trial in range(phase.trials):
                for scenario in phase.scenarios or protocol.scenarios:
                    repetition = block * phase.trials + trial
                    stem = scenario_stem(scenario)
                    specs.append(TrialSpec(
                        trial_id=f"{pid}_{phase.name}_b{block + 1}_{stem}_{condition}_t{repetition + 1}",
                        scenario=scenario,
                        condition=condition,
                        participant_id=pid,
                        participant_kind=kind,
                        participant_index=index,
                        repetition=repetition,
                        seed=run_seed(protocol.seed, pid, phase.name, stem, condition, repetition),
                        order_index=len(specs),
                        participant_params=params,
                        phase=phase.name,
                        block=block,
                        group="" if group is None else group.name,
                        schedule=schedule,
                    ))
    return specs


def _trial_id(participant: str, scenario: str, condition: str, repetition: int) -> str:
    return f"{participant}_{scenario_stem(scenario)}_{condition}_r{repetition + 1}"


def scenario_stem(scenario: str) -> str:
    """A scenario reference as trial ids and run seeds name it: a ``.toml`` file's stem,
    another file's name, a built-in's name; never the folder, so that a study's trial
    ids and seeds do not depend on where its scenario files lie."""
    name = Path(scenario).name
    return Path(name).stem if name.endswith(".toml") else name
