"""Phased study designs: between-subject groups, phases of blocks, guidance schedules.

A protocol with ``[[phases]]`` runs every participant through the phases in order (no
counterbalancing: the order *is* the design), e.g. the training-and-transfer design::

    [groups]                          # between-subject; participant i joins group i mod n
    fixed-dg  = { condition = "dg", schedule = "fixed" }
    fading-dg = { condition = "dg", schedule = "fading" }
    ng        = { condition = "ng" }

    [schedule.fading]                 # parameters of a schedule (guidance.schedule)
    forgetting = 0.8
    gain = 0.2

    [[phases]]
    name = "pre-test"
    condition = "ng"                  # a condition, or "group": the group's own
    blocks = 1
    trials = 3                        # per block and scenario
    # scenarios = [...]               # default: the protocol's ``scenarios``

Only the groups' trials in ``condition = "group"`` phases follow the group's schedule;
the other phases run the condition's law as designed (authority 1, or none for NG).
This module holds the design's plain data and its checks; planning the trials is
:func:`trials.protocol.plan_trials`'.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from capture_trainer.registry import suggestion
from guidance.schedule import SCHEDULES, ScheduleConfigError, make_schedule
from scenarios.toml_in import Problems, text_problem
from trials.conditions import CONDITIONS

#: The phase condition that stands for each group's own condition and schedule.
GROUP_CONDITION = "group"
#: Most phases, groups, blocks per phase and trials per block.
MAX_PHASES = 20
MAX_GROUPS = 10
MAX_BLOCKS = 100
MAX_TRIALS_PER_BLOCK = 100
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")
_PHASE_KEYS = ("name", "condition", "blocks", "trials", "scenarios")
_GROUP_KEYS = ("condition", "schedule")


@dataclass(frozen=True)
class Group:
    """A between-subject group: the condition of its ``group`` phases and its schedule.

    Attributes:
        name: the group's name (trial files and the report use it).
        condition: a name in ``trials.conditions.CONDITIONS`` (not the automatic one).
        schedule: a name in ``guidance.schedule.SCHEDULES``, or "" (the law as designed).
    """

    name: str
    condition: str
    schedule: str = ""


@dataclass(frozen=True)
class Phase:
    """One phase: ``blocks`` blocks of ``trials`` trials per scenario.

    Attributes:
        name: e.g. ``pre-test``, ``training``, ``retention``, ``transfer``.
        condition: a condition name, or :data:`GROUP_CONDITION`.
        blocks: blocks in the phase (learning curves are per block).
        trials: trials per block and scenario.
        scenarios: the phase's scenario references (empty: the protocol's).
    """

    name: str
    condition: str
    blocks: int
    trials: int
    scenarios: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScheduleSpec:
    """A protocol's ``[schedule.<name>]`` table: the schedule's name and parameters."""

    name: str
    params: tuple[tuple[str, Any], ...] = ()

    def as_params(self) -> dict[str, Any]:
        """The parameters as keyword arguments of ``guidance.schedule.make_schedule``."""
        return {key: list(value) if isinstance(value, tuple) else value for key, value in self.params}


def _name_problem(value: object) -> str | None:
    wrong = text_problem(value, allow_empty=False, single_line=True)
    if wrong is not None:
        return wrong
    if not _NAME.match(str(value)):
        return "a short name of lower-case letters, digits and '-' (at most 32)"
    return None


def _integer(problems: Problems, where: str, value: object, maximum: int) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        problems.expected(where, f"an integer >= 1 and <= {maximum}", value)
        return None
    number: int = value
    return number


def _condition(problems: Problems, where: str, value: object, allow_group: bool) -> str | None:
    names = tuple(name for name in CONDITIONS.names() if not CONDITIONS.get(name).automatic)
    allowed = names + ((GROUP_CONDITION,) if allow_group else ())
    if not isinstance(value, str) or value not in allowed:
        close = suggestion(str(value), allowed) if isinstance(value, str) else None
        problems.expected(where, f"one of {', '.join(allowed)}", value,
                          hint=f" (did you mean {close!r}?)" if close else "")
        return None
    return value


def parse_schedules(problems: Problems, value: object) -> tuple[ScheduleSpec, ...] | None:
    """The ``[schedule]`` table: ``{name: {param: value}}``, each checked by building it."""
    if value is None:
        return ()
    if not isinstance(value, dict):
        problems.expected("schedule", "a table of [schedule.<name>] tables", value)
        return None
    specs: list[ScheduleSpec] = []
    ok = True
    for name, params in value.items():
        if name not in SCHEDULES:
            close = suggestion(name, SCHEDULES.names())
            problems.expected(f"schedule.{name}", f"a schedule from {', '.join(SCHEDULES.names())}", name,
                              hint=f" (did you mean {close!r}?)" if close else "")
            ok = False
            continue
        if not isinstance(params, dict):
            problems.expected(f"schedule.{name}", "a table of parameters", params)
            ok = False
            continue
        try:
            make_schedule(name, **params)
        except ScheduleConfigError as error:
            problems.add(f"schedule.{name}", str(error))
            ok = False
            continue
        specs.append(ScheduleSpec(name, tuple((k, tuple(v) if isinstance(v, list) else v)
                                              for k, v in params.items())))
    return tuple(specs) if ok else None


def parse_groups(problems: Problems, value: object) -> tuple[Group, ...] | None:
    """The ``[groups]`` table: ``{name: {condition, schedule}}``."""
    if value is None:
        return ()
    if not isinstance(value, dict) or not value or len(value) > MAX_GROUPS:
        problems.expected("groups", f"a table of 1 to {MAX_GROUPS} groups", value)
        return None
    groups: list[Group] = []
    ok = True
    for name, table in value.items():
        where = f"groups.{name}"
        wrong = _name_problem(name)
        if wrong is not None:
            problems.add("groups", f"{name!r}: expected {wrong}")
            ok = False
            continue
        if not isinstance(table, dict):
            problems.expected(where, "a table { condition = ..., schedule = ... }", table)
            ok = False
            continue
        for key in table:
            if key not in _GROUP_KEYS:
                problems.add(f"{where}.{key}", f"unknown key; expected one of {', '.join(_GROUP_KEYS)}")
                ok = False
        condition = _condition(problems, f"{where}.condition", table.get("condition"), allow_group=False)
        schedule = table.get("schedule", "")
        if schedule != "" and schedule not in SCHEDULES:
            close = suggestion(str(schedule), SCHEDULES.names())
            problems.expected(f"{where}.schedule", f"one of {', '.join(SCHEDULES.names())}", schedule,
                              hint=f" (did you mean {close!r}?)" if close else "")
            ok = False
            continue
        if condition is None:
            ok = False
            continue
        groups.append(Group(name, condition, str(schedule)))
    return tuple(groups) if ok else None


def parse_phases(problems: Problems, value: object) -> list[tuple[Phase, object]] | None:
    """The ``[[phases]]`` list, each with its raw ``scenarios`` value (resolved and loaded
    by the protocol's loader, which knows the file's folder); None on problems."""
    if not isinstance(value, list) or not value or len(value) > MAX_PHASES:
        problems.expected("phases", f"a list of 1 to {MAX_PHASES} [[phases]] tables", value)
        return None
    phases: list[tuple[Phase, object]] = []
    names: set[str] = set()
    ok = True
    for index, table in enumerate(value):
        where = f"phases[{index}]"
        if not isinstance(table, dict):
            problems.expected(where, "a [[phases]] table", table)
            ok = False
            continue
        for key in table:
            if key not in _PHASE_KEYS:
                close = suggestion(key, _PHASE_KEYS)
                hint = f" (did you mean {close!r}?)" if close else ""
                problems.add(f"{where}.{key}", f"unknown key{hint}; expected one of {', '.join(_PHASE_KEYS)}")
                ok = False
        name = table.get("name")
        wrong = _name_problem(name)
        if wrong is not None:
            problems.expected(f"{where}.name", wrong, name)
            ok = False
        elif name in names:
            problems.expected(f"{where}.name", "a name not used by another phase", name)
            ok = False
        else:
            names.add(str(name))
        condition = _condition(problems, f"{where}.condition", table.get("condition"), allow_group=True)
        blocks = _integer(problems, f"{where}.blocks", table.get("blocks", 1), MAX_BLOCKS)
        trials = _integer(problems, f"{where}.trials", table.get("trials", 1), MAX_TRIALS_PER_BLOCK)
        if condition is None or blocks is None or trials is None or wrong is not None:
            ok = False
            continue
        phases.append((Phase(str(name), condition, blocks, trials), table.get("scenarios")))
    return phases if ok else None


def check_design(problems: Problems, phases: tuple[Phase, ...], groups: tuple[Group, ...],
                 schedules: tuple[ScheduleSpec, ...]) -> None:
    """Cross-checks: a ``group`` phase needs groups; groups need a ``group`` phase; a
    schedule table names a schedule some group uses."""
    uses_groups = any(phase.condition == GROUP_CONDITION for phase in phases)
    if uses_groups and not groups:
        problems.add("groups", "missing: a phase has condition = \"group\"")
    if groups and not uses_groups:
        problems.add("groups", "no phase has condition = \"group\", so the groups would not differ")
    used = {group.schedule for group in groups}
    for spec in schedules:
        if spec.name not in used:
            problems.add(f"schedule.{spec.name}", "no group uses this schedule")


def group_of(groups: tuple[Group, ...], participant_index: int) -> Group | None:
    """The group of participant ``participant_index`` (0-based): groups in rotation."""
    return groups[participant_index % len(groups)] if groups else None
