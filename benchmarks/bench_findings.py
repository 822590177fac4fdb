"""`capture-trainer bench findings`: how robust is the paper's ordering DG < APF < NG?

Runs the paper's design (the built-in ``paper-2019`` protocol's conditions DG, NG and
APF within subject, counterbalanced, its participant mix; no AS) as one study per
population seed, over the built-in ``paper-2019`` scenario and a family of scenarios
generated from ``--family-seed`` (``scenarios generate --seed S``, S = family seed,
family seed + 1, ...; written as TOML files into OUT), then analyses each study as
``analyze --json`` does (:func:`analysis.stats.scenario_json`) and reports, per
(scenario, population seed): the mean impact velocity per condition, whether
DG < APF < NG holds in those means, the paired Wilcoxon tests of dg-apf, apf-ng and
dg-ng on ``impact_velocity_m_s`` (p, Holm p as ``analyze`` reports it, Holm p over just
these three, significance at 0.05), capture and reach rates, outcome counts and the
expert and novice means per condition; plus a summary of where the ordering holds,
holds significantly, and which pair fails where it does not. Each scenario is also run
once by the automatic capture (condition ``as``, no participant), which tells a
scenario nobody can capture from a failure of the guidance.

Nothing is tuned here: the model is what the rest of the package makes it, and the
figures are whatever comes out. The studies are ordinary study directories
(``OUT/seed-S``, ``capture-trainer analyze`` reads them) and resume like ``study``: a
second run with the same design reuses every finished trial. Progress (one line per
trial, with the whole run's count and ETA) goes to stderr; with ``--json`` stdout
carries only the JSON object. See docs/benchmarks.md, "Robustness of the findings".
"""

from __future__ import annotations

import argparse
import io
import math
import resource
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

from benchmarks._common import emit, machine

if TYPE_CHECKING:
    import pandas as pd

    from trials.protocol import Protocol

#: The protocol whose design is run (conditions, participant mix and default count).
PAPER_PROTOCOL = "paper-2019"
#: The built-in scenario always in the family.
PAPER_SCENARIO = "paper-2019"
#: The name of the protocol of each study (part of every trial's fingerprint).
PROTOCOL_NAME = "findings"
#: The metric the ordering is about.
METRIC = "impact_velocity_m_s"
#: The paper's ordering, lowest first.
ORDER = ("dg", "apf", "ng")
#: The pairs (a, b) for which a < b is claimed.
PAIRS = (("dg", "apf"), ("apf", "ng"), ("dg", "ng"))
ALPHA = 0.05
#: Defaults: what finishes in a few minutes on two cores (docs/benchmarks.md).
DEFAULT_SEEDS = (0, 1)
DEFAULT_FAMILY = 4
DEFAULT_FAMILY_SEED = 0
DEFAULT_WORKERS = 2
#: Study folders and scenario files inside OUT.
SCENARIO_DIR = "scenarios"
AUTOMATIC_DIR = "automatic"


def pair_name(a: str, b: str) -> str:
    return f"{a}-{b}"


@dataclass(frozen=True)
class FindingsDesign:
    """What one ``bench findings`` run runs.

    Attributes:
        population_seeds: one study per seed (the protocol's seed: it samples the
            population and seeds every trial).
        family: generated scenarios per model.
        family_seed: the first generated scenario's seed (then + 1, + 2, ...).
        models: the models of the generated scenarios.
        participants: simulated participants per study.
        mix: participant kind -> share (the paper protocol's).
        conditions: the conditions, in the paper protocol's order.
        repetitions: of each condition per participant and scenario.
        time_limit_s: the generated scenarios' ``capture.time_limit_s`` (None: the
            generator's).
    """

    population_seeds: tuple[int, ...]
    family: int
    family_seed: int
    models: tuple[str, ...]
    participants: int
    mix: tuple[tuple[str, float], ...]
    conditions: tuple[str, ...]
    repetitions: int
    time_limit_s: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "base_protocol": PAPER_PROTOCOL,
            "population_seeds": list(self.population_seeds),
            "family": self.family,
            "family_seed": self.family_seed,
            "models": list(self.models),
            "participants": self.participants,
            "mix": dict(self.mix),
            "conditions": list(self.conditions),
            "repetitions": self.repetitions,
            "generated_time_limit_s": self.time_limit_s,
            "metric": METRIC,
            "ordering": list(ORDER),
            "pairs": [pair_name(a, b) for a, b in PAIRS],
            "alpha": ALPHA,
        }


def paper_design(population_seeds: Sequence[int] = DEFAULT_SEEDS, family: int = DEFAULT_FAMILY,
                 family_seed: int = DEFAULT_FAMILY_SEED, models: Sequence[str] = ("planar-3r",),
                 participants: int | None = None, repetitions: int | None = None,
                 time_limit_s: float | None = None) -> FindingsDesign:
    """The paper protocol's design (conditions, mix; its participant count and repetitions
    unless given)."""
    from trials.protocol import load_protocol

    paper = load_protocol(PAPER_PROTOCOL)
    return FindingsDesign(
        population_seeds=tuple(dict.fromkeys(population_seeds)),
        family=family,
        family_seed=family_seed,
        models=tuple(dict.fromkeys(models)),
        participants=paper.participants.count if participants is None else participants,
        mix=paper.participants.mix,
        conditions=tuple(c for c in paper.conditions if c in ORDER),
        repetitions=paper.repetitions if repetitions is None else repetitions,
        time_limit_s=time_limit_s,
    )


# -- the scenarios ---------------------------------------------------------------------


def write_family(design: FindingsDesign, out: Path) -> list[str]:
    """The scenario references of the run: ``paper-2019``, then per model the generated
    scenarios written to ``OUT/scenarios/<name>.toml`` (rewritten only when their text
    changed, so that a resumed run sees the same files)."""
    from capture_trainer.errors import ScenarioError
    from scenarios.toml_in import MAX_SEED
    from scenarios.toml_out import to_toml
    from trials.vocabulary import random_scenario

    references = [PAPER_SCENARIO]
    folder = out / SCENARIO_DIR
    for model in design.models:
        for index in range(design.family):
            seed = design.family_seed + index
            if seed > MAX_SEED:
                raise ScenarioError(f"--family-seed: scenario seeds run past {MAX_SEED}")
            scenario = random_scenario(seed, model)
            if design.time_limit_s is not None:
                scenario = replace(scenario, capture=replace(scenario.capture, time_limit_s=design.time_limit_s))
            text = to_toml(scenario)
            path = folder / f"{scenario.name}.toml"
            folder.mkdir(parents=True, exist_ok=True)
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
            references.append(str(path.absolute()))
    return references


def scenario_facts(reference: str) -> dict[str, Any]:
    """What a scenario is: name, model, motion, speed, start distance, time limit."""
    import numpy as np

    from trials.vocabulary import load_scenario

    scenario = load_scenario(reference)
    target = scenario.target
    return {
        "reference": reference,
        "generated": reference != PAPER_SCENARIO,
        "name": scenario.name,
        "seed": scenario.seed,
        "model": scenario.robot.model,
        "motion": target.motion,
        "speed_m_s": float(np.linalg.norm(target.velocity_m_s)),
        "start_distance_m": float(np.linalg.norm(target.start_offset_m)),
        "time_limit_s": scenario.capture.time_limit_s,
        "description": scenario.description,
    }


def automatic_capture(reference: str, folder: Path) -> dict[str, Any]:
    """The automatic capture (condition ``as``, no participant) on a scenario: can it be
    reached and captured at all? Its trial file is kept in ``folder`` under the
    scenario's name and content digest, and reused when complete."""
    from analysis.metrics import compute_metrics
    from analysis.outcomes import trial_outcome
    from analysis.trial import read_trial
    from capture_trainer.paths import trial_file
    from trials.runner import TrialRequest, run_trial
    from trials.study import is_complete, scenario_digest

    stem = Path(reference).stem if reference.endswith(".toml") else reference
    trial_id = f"{stem}-as-{scenario_digest(reference)[:12]}"
    path = trial_file(folder, trial_id)
    reused = is_complete(path)
    if not reused:
        folder.mkdir(parents=True, exist_ok=True)
        path = Path(run_trial(TrialRequest(scenario=reference, condition="as", trial_id=trial_id), folder)["path"])
    trial = read_trial(path)
    metrics = compute_metrics(trial)
    outcome, _ = trial_outcome(trial.metadata, metrics.reached, trial.complete)
    return {
        "reached": bool(metrics.reached),
        "outcome": outcome,
        "time_to_reach_s": _number(metrics.time_to_reach_s),
        "impact_velocity_m_s": _number(metrics.impact_velocity_m_s),
        "reused": reused,
    }


def study_protocol(design: FindingsDesign, seed: int, references: Sequence[str]) -> Protocol:
    """The study of one population seed: the paper's design over every scenario."""
    from trials.protocol import ParticipantPlan, Protocol, validate_protocol

    protocol = Protocol(
        name=PROTOCOL_NAME,
        description=f"bench findings: the {PAPER_PROTOCOL} design (no AS), population seed {seed}",
        seed=seed,
        scenarios=tuple(references),
        conditions=design.conditions,
        repetitions=design.repetitions,
        participants=ParticipantPlan(kind="simulated", count=design.participants, mix=design.mix),
    )
    validate_protocol(protocol)
    return protocol


# -- progress --------------------------------------------------------------------------


class RunProgress(io.StringIO):
    """The studies' progress lines, each prefixed with its population seed and followed
    by the whole run's count and ETA (a line starting with ``[`` is a finished trial)."""

    def __init__(self, stream: TextIO, total: int) -> None:
        super().__init__()
        self.stream = stream
        self.total = total
        self.done = 0
        self.label = ""
        self.started: float | None = None
        self._pending = ""

    def start(self) -> None:
        if self.started is None:
            self.started = time.perf_counter()

    def write(self, text: str) -> int:
        self._pending += text
        while "\n" in self._pending:
            line, self._pending = self._pending.split("\n", 1)
            self.line(line)
        return len(text)

    def line(self, line: str) -> None:
        if line.startswith("["):
            self.done += 1
            elapsed = time.perf_counter() - (self.started or time.perf_counter())
            eta = elapsed / self.done * max(0, self.total - self.done)
            line = f"{line}  [run {self.done}/{self.total}, {elapsed:.0f} s, eta {eta:.0f} s]"
        print(f"{self.label}{line}", file=self.stream, flush=True)

    def flush(self) -> None:
        self.stream.flush()


# -- the run ---------------------------------------------------------------------------


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its children that have ended."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_findings(design: FindingsDesign, out: str | Path, workers: int = DEFAULT_WORKERS, force: bool = False,
                 progress: TextIO | None | str = "stderr") -> dict[str, Any]:
    """Run (or resume) every study of ``design`` into ``out``, analyse them and report.

    Raises:
        TrialError: a study folder holds trials of another plan (without ``force``).
        ScenarioError: a scenario cannot be generated or loaded.
    """
    from trials.protocol import plan_trials
    from trials.study import check_folder, participants_for, run_study

    began = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if isinstance(progress, str):
        progress = sys.stderr
    log = progress if progress is not None else io.StringIO()

    references = write_family(design, out)
    facts = {reference: scenario_facts(reference) for reference in references}
    names = [facts[reference]["name"] for reference in references]

    automatic_began = time.perf_counter()
    scenarios: dict[str, dict[str, Any]] = {}
    for reference in references:
        entry = dict(facts[reference])
        entry["automatic_capture"] = automatic_capture(reference, out / AUTOMATIC_DIR)
        check = entry["automatic_capture"]
        print(f"automatic capture on {entry['name']}: {check['outcome']}"
              f"{' (reused)' if check['reused'] else ''}", file=log, flush=True)
        scenarios[entry["name"]] = entry
    automatic_s = time.perf_counter() - automatic_began

    protocols = {seed: study_protocol(design, seed, references) for seed in design.population_seeds}
    todo: dict[int, int] = {}
    planned: dict[int, int] = {}
    for seed, protocol in protocols.items():
        specs = plan_trials(protocol, participants_for(protocol))
        planned[seed] = len(specs)
        folder = check_folder(protocol, specs, out / f"seed-{seed}")
        todo[seed] = len(folder.todo)
    total_todo = sum(todo.values())
    print(f"findings: {len(protocols)} population seeds x {len(references)} scenarios x {design.participants} "
          f"participants x {len(design.conditions)} conditions x {design.repetitions} repetitions = "
          f"{sum(planned.values())} trials; {total_todo} to run, {sum(planned.values()) - total_todo} reused; "
          f"{workers} workers", file=log, flush=True)

    reporter = RunProgress(log, total_todo)
    runs: dict[str, dict[str, Any]] = {}
    study_s = 0.0
    cpu_s = 0.0
    start_ups: list[float] = []
    for seed, protocol in protocols.items():
        reporter.label = f"seed {seed}: "
        reporter.start()
        cpu_before = _cpu_seconds()
        result = run_study(protocol, out / f"seed-{seed}", workers=workers, progress=cast(TextIO, reporter),
                           force=force)
        cpu_s += _cpu_seconds() - cpu_before
        study_s += result.wall_s
        start_ups += result.worker_start_up_s
        runs[str(seed)] = {
            "study": str(result.out_dir),
            "planned": result.planned,
            "ran": result.ran,
            "reused": result.skipped,
            "failed": len(result.failed),
            "replaced": result.replaced,
            "wall_seconds": result.wall_s,
        }
        if not result.ran:
            print(f"seed {seed}: all {result.planned} trials reused", file=log, flush=True)

    analysis_began = time.perf_counter()
    results: list[dict[str, Any]] = []
    simulated: list[float] = []
    for seed in protocols:
        print(f"seed {seed}: analysing {planned[seed]} trials", file=log, flush=True)
        entries, durations = analyse_study(out / f"seed-{seed}", seed, names, design.conditions)
        results += entries
        simulated += durations
    analysis_s = time.perf_counter() - analysis_began

    ran = sum(int(run["ran"]) for run in runs.values())
    reused = sum(int(run["reused"]) for run in runs.values())
    return {
        "bench": "findings",
        "design": design.as_dict(),
        "out": str(out),
        "scenarios": scenarios,
        "results": results,
        "summary": summarise(results, names),
        "runs": runs,
        "cost": {
            "wall_seconds": time.perf_counter() - began,
            "study_wall_seconds": study_s,
            "analysis_wall_seconds": analysis_s,
            "automatic_capture_wall_seconds": automatic_s,
            "trials_run": ran,
            "trials_reused": reused,
            "workers": workers,
            "worker_start_up_seconds": list(start_ups),
            "wall_seconds_per_trial": study_s / ran if ran else None,
            "cpu_seconds_per_trial": cpu_s / ran if ran else None,
            "simulated_seconds_per_trial": sum(simulated) / len(simulated) if simulated else None,
            "analysis_seconds_per_trial": analysis_s / (ran + reused) if ran + reused else None,
        },
        "machine": machine(),
    }


# -- the analysis ----------------------------------------------------------------------


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def analyse_study(study_dir: Path, seed: int, names: Sequence[str],
                  conditions: Sequence[str]) -> tuple[list[dict[str, Any]], list[float]]:
    """Per scenario of ``names``, the ordering entry of one study (see :func:`scenario_entry`),
    and the simulated duration of each trial [s]."""
    from analysis.stats import scenario_json
    from analysis.study import load_study

    table = load_study(study_dir)
    table = table[table["scenario"].isin(list(names)) & table["condition"].isin(list(conditions))]
    per_scenario = scenario_json(table) if len(table) else {}
    entries = [scenario_entry(name, seed, per_scenario.get(name), table[table["scenario"] == name])
               for name in names]
    durations = [float(v) for v in table["duration_s"] if _number(v) is not None]
    return entries, durations


def scenario_entry(name: str, seed: int, analysed: dict[str, Any] | None, table: pd.DataFrame) -> dict[str, Any]:
    """One (scenario, population seed): means, ordering, paired tests, rates, kinds.

    ``analysed`` is the scenario's part of ``analyze --json`` (:func:`scenario_json`),
    ``table`` its trials (for the participant kinds).
    """
    from analysis.stats import holm

    conditions = (analysed or {}).get("conditions", {})

    def stat(condition: str, metric: str, key: str = "mean") -> Any:
        return ((conditions.get(condition) or {}).get(metric) or {}).get(key)

    means = {c: _number(stat(c, METRIC)) for c in ORDER}
    outcomes = {c: dict((conditions.get(c) or {}).get("outcomes", {})) for c in ORDER}
    trials = {c: int(sum(outcomes[c].values())) for c in ORDER}
    comparisons = {(row["a"], row["b"]): row for row in (analysed or {}).get("comparisons", [])
                   if row["metric"] == METRIC}
    rows: dict[str, dict[str, Any]] = {}
    for a, b in PAIRS:
        row = comparisons.get((a, b))
        sign = 1.0
        if row is None and (b, a) in comparisons:
            row, sign = comparisons[(b, a)], -1.0
        row = row or {}
        effect = _number(row.get("effect_size"))
        mean_a, mean_b = means[a], means[b]
        rows[pair_name(a, b)] = {
            "a": a,
            "b": b,
            "mean_a": mean_a,
            "mean_b": mean_b,
            "difference": mean_a - mean_b if mean_a is not None and mean_b is not None else None,
            "holds": bool(mean_a is not None and mean_b is not None and mean_a < mean_b),
            "test": row.get("test"),
            "n": int(row.get("n") or 0),
            "p": _number(row.get("p")),
            "p_holm": _number(row.get("p_holm")),
            "effect_size": None if effect is None else sign * effect,
            "note": row.get("note") or "",
        }
    # Holm over just the three comparisons of the ordering claim.
    three = holm([math.nan if r["p"] is None else r["p"] for r in rows.values()])
    for row_out, adjusted in zip(rows.values(), three, strict=True):
        row_out["p_holm_3"] = _number(adjusted)
        row_out["significant"] = row_out["p_holm"] is not None and row_out["p_holm"] < ALPHA
        row_out["significant_holm_3"] = row_out["p_holm_3"] is not None and row_out["p_holm_3"] < ALPHA
    holds = all(r["holds"] for r in rows.values())
    failing = [key for key, r in rows.items() if not r["holds"]]
    return {
        "scenario": name,
        "population_seed": seed,
        "trials": trials,
        "impact_velocity_m_s": means,
        "impact_n": {c: int(stat(c, METRIC, "n") or 0) for c in ORDER},
        "ordering_holds": holds,
        "comparisons": rows,
        "ordering_holds_significantly": holds and all(r["significant"] for r in rows.values()),
        "ordering_holds_significantly_holm_3": holds and all(r["significant_holm_3"] for r in rows.values()),
        "failing_pairs": failing,
        "why": [_why(key, rows[key]) for key in failing],
        "not_significant_pairs": [key for key, r in rows.items() if not r["significant"]],
        "capture_rate": {c: outcomes[c].get("captured", 0) / trials[c] if trials[c] else None for c in ORDER},
        "reached_rate": {c: _number(stat(c, "reached")) for c in ORDER},
        "time_to_reach_s": {c: _number(stat(c, "time_to_reach_s")) for c in ORDER},
        "outcomes": outcomes,
        "expert_vs_novice": expert_vs_novice(table),
    }


def _why(key: str, row: dict[str, Any]) -> str:
    a, b = row["a"].upper(), row["b"].upper()
    if row["mean_a"] is None or row["mean_b"] is None:
        missing = " and ".join(n for n, m in ((a, row["mean_a"]), (b, row["mean_b"])) if m is None)
        return f"{key}: no impact velocity for {missing} (no trial reached the target)"
    return f"{key}: {a} {row['mean_a']:.4f} >= {b} {row['mean_b']:.4f} m/s"


def expert_vs_novice(table: pd.DataFrame) -> dict[str, Any] | None:
    """Per condition, the experts' and the novices' mean impact velocity (reached trials)
    and how many trials each mean is of; None unless both kinds took part."""
    import pandas as pd

    if not {"expert", "novice"} <= set(table["participant_kind"]):
        return None
    result: dict[str, Any] = {}
    for condition in ORDER:
        entry: dict[str, Any] = {}
        for kind in ("expert", "novice"):
            rows = table[(table["condition"] == condition) & (table["participant_kind"] == kind)]
            values = pd.to_numeric(rows[METRIC], errors="coerce").dropna()
            entry[kind] = {"mean": _number(values.mean()) if len(values) else None, "n": int(len(values)),
                           "trials": int(len(rows))}
        expert, novice = entry["expert"]["mean"], entry["novice"]["mean"]
        entry["expert_minus_novice"] = expert - novice if expert is not None and novice is not None else None
        result[condition] = entry
    return result


def summarise(results: Sequence[dict[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    """How often the ordering holds, holds significantly, and which pair fails where."""
    keys = [pair_name(a, b) for a, b in PAIRS]
    by_scenario: dict[str, dict[str, Any]] = {}
    for name in names:
        entries = [e for e in results if e["scenario"] == name]
        by_scenario[name] = {
            "seeds": len(entries),
            "ordering_holds": sum(e["ordering_holds"] for e in entries),
            "ordering_holds_significantly": sum(e["ordering_holds_significantly"] for e in entries),
            "failing_pairs": {key: sum(key in e["failing_pairs"] for e in entries) for key in keys},
        }
    return {
        "cases": len(results),
        "ordering_holds": sum(e["ordering_holds"] for e in results),
        "ordering_holds_significantly": sum(e["ordering_holds_significantly"] for e in results),
        "ordering_holds_significantly_holm_3": sum(e["ordering_holds_significantly_holm_3"] for e in results),
        "pair_holds": {key: sum(e["comparisons"][key]["holds"] for e in results) for key in keys},
        "pair_significant": {key: sum(e["comparisons"][key]["significant"] for e in results) for key in keys},
        "pair_fails": {key: sum(key in e["failing_pairs"] for e in results) for key in keys},
        "failures": [{"scenario": e["scenario"], "population_seed": e["population_seed"],
                      "failing_pairs": e["failing_pairs"], "why": e["why"]}
                     for e in results if not e["ordering_holds"]],
        "by_scenario": by_scenario,
    }


# -- the command -----------------------------------------------------------------------


def _count(minimum: int, maximum: int) -> Any:
    def convert(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}") from None
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum} and <= {maximum}, got {text!r}")
        return value

    convert.__name__ = "integer"
    return convert


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not (math.isfinite(value) and 0.0 < value <= 600.0):
        raise argparse.ArgumentTypeError(f"expected a number > 0 and <= 600, got {text!r}")
    return value


def add_bench(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench findings``."""
    from robot.models import MODELS
    from scenarios.toml_in import MAX_SEED
    from trials.protocol import MAX_PARTICIPANTS, MAX_REPETITIONS, MAX_SCENARIOS

    parser = subparsers.add_parser(
        "findings", help="does DG < APF < NG (impact velocity) hold over population seeds and generated scenarios?")
    parser.add_argument("--population-seeds", type=_count(0, MAX_SEED), nargs="+", default=list(DEFAULT_SEEDS),
                        metavar="SEED", help=f"one study per seed (default {' '.join(map(str, DEFAULT_SEEDS))})")
    parser.add_argument("--family", type=_count(0, MAX_SCENARIOS - 1), default=DEFAULT_FAMILY, metavar="N",
                        help=f"generated scenarios per model, besides paper-2019 (default {DEFAULT_FAMILY})")
    parser.add_argument("--family-seed", type=_count(0, MAX_SEED), default=DEFAULT_FAMILY_SEED, metavar="S",
                        help="seed of the first generated scenario; the others S+1, S+2, ... (default 0)")
    parser.add_argument("--model", choices=MODELS.names(), nargs="+", default=None,
                        help="model of the generated scenarios (default planar-3r)")
    parser.add_argument("--participants", type=_count(1, MAX_PARTICIPANTS), default=None, metavar="K",
                        help=f"simulated participants per study, in the {PAPER_PROTOCOL} protocol's mix "
                        "(default: its count, 10)")
    parser.add_argument("--repetitions", type=_count(1, MAX_REPETITIONS), default=None, metavar="R",
                        help=f"repetitions of each condition (default: the {PAPER_PROTOCOL} protocol's, 3)")
    parser.add_argument("--time-limit", type=_seconds, default=None, metavar="S",
                        help="time limit of the generated scenarios [s] (default the generator's, 15)")
    parser.add_argument("--workers", type=_count(1, 64), default=DEFAULT_WORKERS, metavar="W",
                        help=f"worker processes (default {DEFAULT_WORKERS})")
    parser.add_argument("--out", default="runs/findings", metavar="DIR",
                        help="scenario files, studies and automatic captures (default runs/findings); "
                        "a second run resumes")
    parser.add_argument("--force", action="store_true",
                        help="replace trials of another plan in OUT (as `study --force`)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=_findings)


def _findings(args: argparse.Namespace) -> int:
    from robot.models import MODELS

    models = tuple(dict.fromkeys(args.model or ["planar-3r"]))
    design = paper_design(args.population_seeds, args.family, args.family_seed, models, args.participants,
                          args.repetitions, args.time_limit)
    result = run_findings(design, args.out, workers=args.workers, force=args.force)
    if args.json:
        emit(result, as_json=True)
    else:
        print(describe(result))
    return 0


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def describe(result: dict[str, Any]) -> str:
    """The run for people: one line per (scenario, seed), then the summary."""
    lines = [f"{'scenario':<22} {'seed':>4}  {'DG':>6} {'APF':>6} {'NG':>6}  {'order':<8} "
             f"{'p dg-apf':>9} {'p apf-ng':>9} {'p dg-ng':>9}  (Holm)       capture DG/APF/NG"]
    for e in result["results"]:
        v = e["impact_velocity_m_s"]
        order = "yes*" if e["ordering_holds_significantly"] else "yes" if e["ordering_holds"] else "NO"
        rows = [e["comparisons"][pair_name(a, b)] for a, b in PAIRS]
        ps = " ".join(f"{_fmt(r['p']):>9}" for r in rows)
        holm_ps = "/".join(_fmt(r["p_holm"], 2) for r in rows)
        capture = "/".join(_fmt(e["capture_rate"][c], 1) for c in ORDER)
        lines.append(f"{e['scenario']:<22} {e['population_seed']:>4}  {_fmt(v['dg']):>6} {_fmt(v['apf']):>6} "
                     f"{_fmt(v['ng']):>6}  {order:<8} {ps}  ({holm_ps})  {capture}")
        for why in e["why"]:
            lines.append(f"{'':<28}fails: {why}")
    s = result["summary"]
    cost = result["cost"]
    lines += [
        "",
        f"impact velocity [m/s], means of the reached trials; yes* = every pair significant (Holm p < {ALPHA})",
        f"ordering DG < APF < NG holds in {s['ordering_holds']} of {s['cases']} (scenario, seed) cases, "
        f"significantly in {s['ordering_holds_significantly']} "
        f"({s['ordering_holds_significantly_holm_3']} with Holm over the three pairs only)",
        "pairs in order: " + ", ".join(f"{k} {n}" for k, n in s["pair_holds"].items())
        + "; significant: " + ", ".join(f"{k} {n}" for k, n in s["pair_significant"].items()),
        f"{cost['trials_run']} trials run, {cost['trials_reused']} reused; {cost['wall_seconds']:.0f} s in all"
        + (f", {cost['wall_seconds_per_trial']:.2f} s per trial" if cost["wall_seconds_per_trial"] else ""),
    ]
    return "\n".join(lines)
