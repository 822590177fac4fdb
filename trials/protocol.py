"""Study protocols: who does which trials, in which counterbalanced order.

A protocol is a TOML file (or a built-in name such as ``paper-2019``)::

    name = "paper-2019"
    description = "Li & Yan 2019: DG, NG, APF x 3 repetitions, plus AS"
    seed = 2019                       # seeds the population and every trial
    scenarios = ["paper-2019"]        # built-in names or paths to scenario files
    conditions = ["dg", "ng", "apf"]  # counterbalanced per participant (Latin square)
    repetitions = 3
    controller_conditions = ["as"]    # run by the controller alone, no participant
    controller_repetitions = 3

    [participants]
    kind = "simulated"                # "simulated" (a sampled population) or "human"
    count = 10                        # simulated: how many
    mix = { novice = 0.5, expert = 0.5 }  # simulated: share of each operator kind
    # ids = ["P01", "P02"]            # human: participant ids

Every field is checked on loading; an error names the file, the field and what was
expected.
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from capture_trainer.catalog import CONDITIONS, PARTICIPANT_KINDS
from capture_trainer.errors import ScenarioError
from trials.counterbalance import condition_order

CONTROLLER_ID = "controller"
_PROTOCOL_KEYS = {
    "name",
    "description",
    "seed",
    "scenarios",
    "conditions",
    "repetitions",
    "controller_conditions",
    "controller_repetitions",
    "participants",
}
_PARTICIPANT_KEYS = {"kind", "count", "mix", "ids"}


@dataclass(frozen=True)
class ParticipantPlan:
    """Who takes part: a simulated population or human ids."""

    kind: str  # "simulated" | "human"
    count: int
    mix: tuple[tuple[str, float], ...] = ()
    ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Protocol:
    """A loaded, validated study protocol."""

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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TrialSpec:
    """One planned trial: everything a worker process needs to run it.

    Attributes:
        trial_id: unique within the study; the trial file is ``<trial_id>.parquet``.
        participant_index: 0-based index in the study (-1 for the controller).
        participant_params: the simulated operator's parameters (empty for humans).
        order_index: position of this trial in the participant's session.
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


def builtin_protocol_names() -> list[str]:
    """Names of the protocols shipped with the package."""
    return sorted(
        entry.name.removesuffix(".toml")
        for entry in resources.files("trials.protocols").iterdir()
        if entry.name.endswith(".toml")
    )


def load_protocol(name_or_path: str | Path) -> Protocol:
    """Load a built-in protocol by name, or a protocol file by path."""
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise ScenarioError(f"{path}: no such protocol file")
        source = str(path)
        text = path.read_bytes()
    else:
        names = builtin_protocol_names()
        if str(name_or_path) not in names:
            raise ScenarioError(
                f"unknown protocol {str(name_or_path)!r}: built-in protocols are "
                f"{', '.join(names)}, or give the path of a .toml file"
            )
        source = f"<built-in {name_or_path}>"
        text = resources.files("trials.protocols").joinpath(f"{name_or_path}.toml").read_bytes()
    try:
        data = tomllib.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ScenarioError(f"{source}: not a valid TOML file ({error})") from None
    return _parse(data, source)


def _fail(source: str, key: str, expected: str, got: object = None) -> ScenarioError:
    shown = "" if got is None else f", got {got!r}"
    return ScenarioError(f"{source}: field '{key}': expected {expected}{shown}")


def _parse(data: dict[str, Any], source: str) -> Protocol:
    unknown = set(data) - _PROTOCOL_KEYS
    if unknown:
        raise _fail(source, sorted(unknown)[0], f"one of {sorted(_PROTOCOL_KEYS)}", "unknown key")
    for key in ("name", "scenarios", "conditions", "participants"):
        if key not in data:
            raise _fail(source, key, "a value", "nothing (missing)")
    name = data["name"]
    if not isinstance(name, str) or not name:
        raise _fail(source, "name", "a non-empty string", name)
    seed = data.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise _fail(source, "seed", "a non-negative integer", seed)
    scenarios = data["scenarios"]
    if not isinstance(scenarios, list) or not scenarios or not all(
        isinstance(s, str) and s for s in scenarios
    ):
        raise _fail(source, "scenarios", "a non-empty list of scenario names or paths", scenarios)
    conditions = _conditions(data["conditions"], source, "conditions", allow_empty=False)
    controller = _conditions(
        data.get("controller_conditions", []), source, "controller_conditions", allow_empty=True
    )
    repetitions = _positive_int(data.get("repetitions", 1), source, "repetitions")
    controller_repetitions = _positive_int(
        data.get("controller_repetitions", 1), source, "controller_repetitions"
    )
    return Protocol(
        name=name,
        description=str(data.get("description", "")),
        seed=seed,
        scenarios=tuple(scenarios),
        conditions=conditions,
        repetitions=repetitions,
        participants=_participants(data["participants"], source),
        controller_conditions=controller,
        controller_repetitions=controller_repetitions,
        source=source,
    )


def _positive_int(value: object, source: str, key: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise _fail(source, key, "a positive integer", value)
    return value


def _conditions(value: object, source: str, key: str, allow_empty: bool) -> tuple[str, ...]:
    if not isinstance(value, list) or (not value and not allow_empty):
        raise _fail(source, key, f"a list drawn from {list(CONDITIONS)}", value)
    for item in value:
        if item not in CONDITIONS:
            raise _fail(source, key, f"conditions from {list(CONDITIONS)}", item)
    if len(set(value)) != len(value):
        raise _fail(source, key, "each condition once", value)
    return tuple(value)


def _participants(value: object, source: str) -> ParticipantPlan:
    if not isinstance(value, dict):
        raise _fail(source, "participants", "a table", value)
    unknown = set(value) - _PARTICIPANT_KEYS
    if unknown:
        key = sorted(unknown)[0]
        raise _fail(source, f"participants.{key}", f"one of {sorted(_PARTICIPANT_KEYS)}", "unknown key")
    kind = value.get("kind", "simulated")
    if kind == "human":
        ids = value.get("ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i for i in ids):
            raise _fail(source, "participants.ids", "a non-empty list of participant ids", ids)
        if len(set(ids)) != len(ids):
            raise _fail(source, "participants.ids", "unique ids", ids)
        return ParticipantPlan(kind="human", count=len(ids), ids=tuple(ids))
    if kind != "simulated":
        raise _fail(source, "participants.kind", '"simulated" or "human"', kind)
    count = _positive_int(value.get("count", 1), source, "participants.count")
    mix = value.get("mix", {"novice": 1.0})
    if not isinstance(mix, dict) or not mix:
        raise _fail(source, "participants.mix", "a table of kind = share", mix)
    for kind_name, share in mix.items():
        if kind_name not in PARTICIPANT_KINDS:
            raise _fail(source, "participants.mix", f"kinds from {list(PARTICIPANT_KINDS)}", kind_name)
        if not isinstance(share, int | float) or isinstance(share, bool) or share < 0:
            raise _fail(source, f"participants.mix.{kind_name}", "a non-negative number", share)
    if sum(mix.values()) <= 0:
        raise _fail(source, "participants.mix", "shares that add up to more than 0", mix)
    return ParticipantPlan(
        kind="simulated", count=count, mix=tuple((k, float(v)) for k, v in mix.items())
    )


def trial_seed(study_seed: int, *parts: object) -> int:
    """A stable 32-bit seed from the study seed and a trial's identity (process-independent)."""
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
            seed=trial_seed(protocol.seed, pid, scenario, condition, repetition),
            order_index=order,
            participant_params=params,
        )

    specs: list[TrialSpec] = []
    for index, (pid, kind, params) in enumerate(participants):
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


def _trial_id(participant: str, scenario: str, condition: str, repetition: int) -> str:
    scenario_stem = Path(scenario).stem if scenario.endswith(".toml") else scenario
    return f"{participant}_{scenario_stem}_{condition}_r{repetition + 1}"
