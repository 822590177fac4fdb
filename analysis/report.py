"""One self-contained HTML report of a study.

Sections: the study design (``study.json`` and the design actually found in the logs),
the summary per condition, the trials that never reached the target or did not finish,
the paired tests, one section per scenario (summary, outcomes, paired tests, a figure),
the study figures (bar charts per metric, trajectories), the full
figure set of example trials, the per-trial table and the metric definitions.

Self-contained: figures are embedded as base64 PNG ``data:`` URIs, the style sheet is
inline, there are no scripts and no external references, so the file can be mailed,
archived and opened offline.
"""

from __future__ import annotations

import base64
import html
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis import behaviours, figures
from analysis.metrics import METRIC_DESCRIPTIONS, PAPER_METRICS
from analysis.outcomes import ordered_outcomes
from analysis.stats import (
    CAPTURE_RATE,
    SUMMARY_METRICS,
    TEST_METRICS,
    condition_summary,
    friedman_tests,
    ordered_conditions,
    pairwise_tests,
    scenario_comparisons,
    scenario_condition_stats,
    scenario_summaries,
)
from analysis.study import ProgressCallback, Study, open_study, trial_metadata
from analysis.trial import Trial, read_trial
from capture_trainer.errors import AnalysisError

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: right; vertical-align: top; }
th { background: #f0f0f0; } td.l, th.l { text-align: left; }
.paper { background: #fff8e0; } .warn { color: #a00; } .muted { color: #777; }
figure { display: inline-block; margin: 0.5em; vertical-align: top; }
figcaption { font-size: 0.85em; color: #444; text-align: center; }
img { max-width: 100%; border: 1px solid #eee; }
pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto; font-size: 0.85em; }
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def format_number(value: Any) -> str:
    """A compact, 4-significant-digit rendering (``n/a`` for NaN or missing)."""
    if value is None or value is pd.NA:
        return "n/a"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(number):
        return "n/a"
    if number == 0.0 or 1e-3 <= abs(number) < 1e5:
        return f"{number:.4g}"
    return f"{number:.3e}"


def embed_figure(figure: Figure, caption: str) -> str:
    """A ``<figure>`` with the PNG embedded as a data URI."""
    encoded = base64.b64encode(figures.png_bytes(figure)).decode("ascii")
    return (
        f'<figure><img alt="{_e(caption)}" src="data:image/png;base64,{encoded}">'
        f"<figcaption>{_e(caption)}</figcaption></figure>"
    )


def _table(
    header: Sequence[str], rows: Iterable[Sequence[Any]], left_columns: int = 1, row_class: Sequence[str] = ()
) -> str:
    head = "".join(f'<th class="{"l" if i < left_columns else ""}">{_e(h)}</th>' for i, h in enumerate(header))
    lines = []
    for index, row in enumerate(rows):
        cells = "".join(
            f'<td class="{"l" if i < left_columns else ""}">{_e(format_number(v) if i >= left_columns else v)}</td>'
            for i, v in enumerate(row)
        )
        css = f' class="{row_class[index]}"' if index < len(row_class) and row_class[index] else ""
        lines.append(f"<tr{css}>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(lines)}</table>"


def _design_section(study: Study) -> str:
    parts = ["<h2>Study design</h2>"]
    if study.design is None:
        parts.append('<p class="muted">No study.json in the study directory; the design below is what the logs show.</p>')
    else:
        parts.append(_design_file_tables(study.design))
    table = study.table
    if len(table):
        counts = pd.crosstab(table["participant_id"], table["condition"])
        conditions = ordered_conditions(counts.columns)
        rows = [[participant, *counts.loc[participant, conditions].tolist()] for participant in counts.index]
        parts.append("<h3>Trials per participant and condition (found in the logs)</h3>")
        parts.append(_table(["participant", *[c.upper() for c in conditions]], rows))
        scenarios = ", ".join(sorted(set(table["scenario"])))
        models = ", ".join(sorted(set(table["model"])))
        parts.append(f"<p>Scenarios: {_e(scenarios)}. Models: {_e(models)}.</p>")
    return "".join(parts)


#: Participant parameters shown in the design table (the rest stay in study.json).
_PARTICIPANT_PARAMS = ("reaction_time_s", "hand_stiffness_n_m", "hand_damping_n_s_m", "compliance")


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _design_file_tables(design: Mapping[str, Any]) -> str:
    """study.json as a person reads it: the protocol, then one row per participant with
    their condition order and key parameters (the full file stays beside the trials)."""
    protocol = design.get("protocol")
    participants = design.get("participants")
    if not isinstance(protocol, dict) or not isinstance(participants, dict):
        rows = [(key, _short(value)) for key, value in design.items()]
        return "<h3>study.json</h3>" + _table(("field", "value"), rows, left_columns=2)
    rows = []
    for key, value in protocol.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}: {_short(v, 60)}" for k, v in value.items() if v not in ((), [], None))
        elif isinstance(value, (list, tuple)):
            value = ", ".join(map(str, value))
        rows.append((key, value))
    html = "<h3>Protocol</h3>" + _table(("field", "value"), rows, left_columns=2)
    condition_of = {trial.get("trial_id"): trial.get("condition") for trial in design.get("trials", [])}
    people = []
    for pid, entry in participants.items():
        order: list[str] = []
        for trial_id in entry.get("order", []):
            condition = str(condition_of.get(trial_id, "?")).upper()
            if not order or order[-1] != condition:
                order.append(condition)
        params = entry.get("params") or {}
        people.append(
            [pid, entry.get("kind", ""), " → ".join(order)]
            + [format_number(params[name]) if name in params else "" for name in _PARTICIPANT_PARAMS]
        )
    html += "<h3>Participants and their counterbalanced condition order</h3>"
    html += _table(["participant", "kind", "condition blocks", *_PARTICIPANT_PARAMS], people,
                   left_columns=3 + len(_PARTICIPANT_PARAMS))
    return html


def _summary_section(table: pd.DataFrame) -> str:
    summary = condition_summary(table, SUMMARY_METRICS)
    conditions = ordered_conditions(table["condition"])
    header = ["metric", *[f"{c.upper()} mean ± std [95 % CI] (n)" for c in conditions]]
    rows, classes = [], []
    for metric in SUMMARY_METRICS:
        cells: list[Any] = [metric]
        for condition in conditions:
            s = summary[(summary["condition"] == condition) & (summary["metric"] == metric)].iloc[0]
            cells.append(
                f"{format_number(s['mean'])} ± {format_number(s['std'])} "
                f"[{format_number(s['ci95_low'])}, {format_number(s['ci95_high'])}] ({s['n']})"
            )
        rows.append(cells)
        classes.append("paper" if metric in PAPER_METRICS else "")
    return (
        "<h2>Summary by condition</h2>"
        '<p>Over trials; rows shaded are the paper\'s metrics. Booleans are rates. '
        "n counts trials where the metric is defined (reach metrics need a reach).</p>"
        + _table(header, rows, left_columns=len(header), row_class=classes)
    )


def _problem_trials_section(table: pd.DataFrame) -> str:
    parts = ["<h2>Trials that did not reach the target or did not finish</h2>"]
    unreached = table[~table["reached"].astype(bool)]
    incomplete = table[~table["complete"].astype(bool)]
    columns = ["trial_id", "condition", "participant_id", "min_surface_distance_m", "duration_s", "end_reason", "file"]
    for title, subset in (("Never reached", unreached), ("Incomplete (crashed or unfinished)", incomplete)):
        parts.append(f"<h3>{_e(title)}: {len(subset)}</h3>")
        if len(subset):
            rows = subset[columns].astype(object).values.tolist()
            parts.append(_table(columns, rows, left_columns=3))
    return "".join(parts)


def _tests_section(table: pd.DataFrame) -> str:
    friedman = friedman_tests(table, TEST_METRICS)
    pairwise = pairwise_tests(table, TEST_METRICS)
    unpaired = pairwise[pairwise["n"] == 0]
    pairwise = pairwise[pairwise["n"] > 0]
    no_common = sorted({f"{a.upper()}–{b.upper()}" for a, b in zip(unpaired["condition_a"], unpaired["condition_b"])})
    note = f"<p>No participant in common (not compared): {_e(', '.join(no_common))}.</p>" if no_common else ""
    return (
        "<h2>Paired comparisons (per-participant means)</h2>"
        "<p>Friedman test across conditions (Kendall's W); pairwise two-sided Wilcoxon "
        "signed-rank tests, Holm-corrected within each metric; effect sizes: matched-pairs "
        "rank-biserial r and Cohen's d<sub>z</sub> of a − b.</p>"
        + _table(list(friedman.columns), friedman.astype(object).values.tolist(), left_columns=2)
        + _table(list(pairwise.columns), pairwise.astype(object).values.tolist(), left_columns=3)
        + note
    )


#: Metrics in each scenario's table of the report (the JSON has every metric).
SCENARIO_REPORT_METRICS: tuple[str, ...] = (
    *PAPER_METRICS,
    "impact_normal_velocity_m_s",
    "reached",
    "captured",
    CAPTURE_RATE,
    "n_contacts",
    "peak_base_torque_n_m",
)


def _cell(stats: Mapping[str, Any]) -> str:
    return (
        f"{format_number(stats['mean'])} ± {format_number(stats['std'])} "
        f"[{format_number(stats['ci95_low'])}, {format_number(stats['ci95_high'])}] ({stats['n']})"
    )


def _scenarios_section(table: pd.DataFrame) -> str:
    """One subsection per scenario: its summary by condition, outcomes, paired tests and a figure."""
    scenarios = scenario_summaries(table)
    parts = [
        "<h2>By scenario</h2>"
        "<p>Each scenario on its own: mean ± std [95 % CI] (n) over trials, t-intervals for "
        "means and Wilson intervals for rates; capture_rate counts the logged outcome "
        "<code>captured</code>, or, for logs without an outcome, the kinematic "
        "<code>captured</code> metric. Outcomes marked * are provisional (derived from "
        "end_reason and the reach; see the analysis documentation). Paired two-sided "
        "Wilcoxon signed-rank tests on the participants' means, Holm-corrected over all "
        "of the scenario's comparisons; effect size: matched-pairs rank-biserial r of a − b.</p>"
    ]
    for name, subset in scenarios.items():
        conditions = ordered_conditions(subset["condition"])
        parts.append(f"<h3>Scenario {_e(name)}: {len(subset)} trials</h3>")
        stats = {condition: scenario_condition_stats(subset, condition) for condition in conditions}
        header = ["metric", *[f"{c.upper()} mean ± std [95 % CI] (n)" for c in conditions]]
        rows = [[metric, *[_cell(stats[c][metric]) for c in conditions]] for metric in SCENARIO_REPORT_METRICS]
        classes = ["paper" if metric in PAPER_METRICS else "" for metric in SCENARIO_REPORT_METRICS]
        parts.append(_table(header, rows, left_columns=len(header), row_class=classes))
        provisional = set(subset.loc[subset["outcome_provisional"].astype(bool), "outcome"])
        outcomes = ordered_outcomes(subset["outcome"])
        counts = subset.groupby(["condition", "outcome"]).size().to_dict()
        outcome_rows = [[c.upper(), *[int(counts.get((c, o), 0)) for o in outcomes]] for c in conditions]
        parts.append(_table(["condition", *[o + ("*" if o in provisional else "") for o in outcomes]], outcome_rows))
        comparisons = scenario_comparisons(subset)
        shown = comparisons[comparisons["n"] > 0]
        columns = ["metric", "condition_a", "condition_b", "n", "median_difference", "p", "p_holm",
                   "rank_biserial", "note"]
        parts.append(_table(columns, shown[columns].astype(object).values.tolist(), left_columns=3))
        unpaired = comparisons[comparisons["n"] == 0]
        if len(unpaired):
            pairs = sorted(
                {f"{a.upper()}–{b.upper()}" for a, b in zip(unpaired["condition_a"], unpaired["condition_b"])}
            )
            parts.append(f"<p>No participant in common (not compared): {_e(', '.join(pairs))}.</p>")
        parts.append(
            embed_figure(
                figures.metric_bar_figure(subset, "impact_velocity_m_s"),
                f"{name}: impact_velocity_m_s, mean ± standard deviation, dots are trials",
            )
        )
    return "".join(parts)


def _figures_section(study: Study) -> str:
    parts = ["<h2>Figures by condition</h2>"]
    for metric, figure in figures.study_bar_figures(study.table).items():
        parts.append(embed_figure(figure, f"{metric}: mean ± standard deviation, dots are trials"))
    parts.append("<h3>Trajectories relative to the target</h3>")
    parts.append(
        embed_figure(
            figures.trajectory_figure(list(study.traces.values())),
            "End effector relative to the debris centre (x-y); o start, x first reach, circle = radius",
        )
    )
    return "".join(parts)


def example_trials(table: pd.DataFrame) -> list[str]:
    """Per condition, the complete reached trial with the median impact velocity.

    Falls back to any reached trial, then to the condition's first trial.
    """
    chosen = []
    for condition in ordered_conditions(table["condition"]):
        subset = table[table["condition"] == condition]
        reached = subset[subset["reached"].astype(bool)].sort_values(["impact_velocity_m_s", "trial_id"])
        complete = reached[reached["complete"].astype(bool)]
        pool = complete if len(complete) else reached if len(reached) else subset
        chosen.append(str(pool.iloc[(len(pool) - 1) // 2]["trial_id"]))
    return chosen


def _trial_section(trial: Trial, metrics_row: Mapping[str, Any] | None) -> str:
    condition = trial.metadata.get("condition", "?")
    participant = (trial.metadata.get("participant") or {}).get("id", "?")
    parts = [f"<h3>Trial {_e(trial.trial_id)} ({_e(str(condition).upper())}, participant {_e(participant)})</h3>"]
    if metrics_row is not None:
        shown = [(name, metrics_row[name]) for name in PAPER_METRICS + ("reached", "captured", "complete")]
        parts.append(_table(("metric", "value"), shown))
    for caption, figure in figures.trial_figures(trial).items():
        parts.append(embed_figure(figure, f"{trial.trial_id}: {caption}"))
    parts.append(_trial_post_capture(trial))
    return "".join(parts)


def _trial_post_capture(trial: Trial) -> str:
    """A trial's post-capture task: its outcome, each behaviour's result and figures,
    the time per state and the state timeline (nothing without a task)."""
    phase = behaviours.post_capture(trial.metadata)
    if phase is None:
        return ""
    rows = behaviours.behaviour_rows([(trial.trial_id, trial.metadata)])
    columns = ["state", "behaviour", "result", "duration_s", "peak_force_n", "limit_n",
               "base_attitude_change_rad", "min_sigma_ratio", "reason"]
    parts = [f"<h4>After the capture: task {_e((phase.get('task') or {}).get('name'))}, "
             f"{_e(phase.get('outcome'))}</h4><p>{_e(phase.get('reason') or '')}</p>",
             _table(columns, rows[columns].astype(object).values.tolist(), left_columns=3),
             _table(("state", "time [s]"), list(behaviours.state_times(trial).items()), left_columns=1)]
    figure = behaviours.state_timeline_figure(trial)
    if figure is not None:
        parts.append(embed_figure(figure, f"{trial.trial_id}: task states, contact force and its limit, "
                                          "base attitude change"))
    return "".join(parts)


def _post_capture_section(study: Study) -> str:
    """Behaviours across the study's trials: per kind, results, peak force over limit,
    base attitude disturbance (nothing when no trial ran a task)."""
    rows = behaviours.behaviour_rows((trial_id, trial_metadata(study, trial_id)) for trial_id in study.paths)
    if rows.empty:
        return ""
    summary = behaviours.behaviour_summary(rows)
    return ("<h2>After the capture: behaviours</h2><p>Per behaviour kind over every trial with a task: "
            "results, the largest peak contact force over the behaviour's wrench limit, the base attitude "
            "change each run caused, and ticks at a reaction singularity (reactionless tracking not "
            "possible).</p>" + _table(list(summary.columns), summary.astype(object).values.tolist(), left_columns=1))


def _trials_table_section(table: pd.DataFrame) -> str:
    columns = ["trial_id", "condition", "participant_id", "repetition", *PAPER_METRICS, "reached", "captured", "complete"]
    rows = table[columns].astype(object).values.tolist()
    return (
        f"<h2>All trials ({len(table)})</h2><details><summary>show the per-trial table</summary>"
        + _table(columns, rows, left_columns=3)
        + "</details>"
    )


def _definitions_section() -> str:
    rows = [(name, text) for name, text in METRIC_DESCRIPTIONS.items()]
    return (
        "<h2>Metric definitions</h2><p>p = end effector − debris centre, v = its rate, r = debris "
        "radius, all in the task frame; post-capture window = metadata post_capture_window_s "
        "after the first reach.</p>" + _table(("metric", "definition"), rows, left_columns=2)
    )


def build_report(study: Study, extra_trials: Sequence[str | os.PathLike[str]] = (), title: str | None = None) -> str:
    """The report's HTML text.

    Args:
        study: the loaded study.
        extra_trials: trial ids of the study, or trial files, to show with their full
            figure set besides the automatically chosen examples.
        title: the page title (default: the study directory's name).

    Raises:
        AnalysisError: an extra trial is neither a trial id of the study nor a trial file.
    """
    table = study.table
    title = title or f"Capture study: {study.root.name}"
    rows_by_id = {row["trial_id"]: row for row in cast(list[dict[str, Any]], table.to_dict("records"))}
    trial_sections = []
    requested = [_resolve_trial(study, item) for item in extra_trials]
    requested_ids = {trial.trial_id for trial in requested}
    examples = [read_trial(study.paths[i]) for i in example_trials(table) if i not in requested_ids]
    seen: set[str] = set()
    for trial in requested + examples:
        if trial.trial_id in seen:
            continue
        seen.add(trial.trial_id)
        trial_sections.append(_trial_section(trial, rows_by_id.get(trial.trial_id)))
    versions = sorted({str(v) for v in _package_versions(study)})
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    n_reached = int(table["reached"].astype(bool).sum())
    return "".join(
        [
            f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>',
            f"<style>{STYLE}</style></head><body><h1>{_e(title)}</h1>",
            f"<p>Source: <code>{_e(study.root)}</code>. {len(table)} trials, {n_reached} reached the target. ",
            f"Generated {generated}; trials written by capture-trainer {_e(', '.join(versions) or 'unknown')}.</p>",
            _design_section(study),
            _training_section(study),
            _summary_section(table),
            _problem_trials_section(table),
            _tests_section(table),
            _scenarios_section(table),
            _sweep_section(study, table),
            _post_capture_section(study),
            _figures_section(study),
            "<h2>Example trials</h2><p>Per condition the reached trial with the median impact velocity, "
            "and any trial asked for with --trial.</p>",
            *trial_sections,
            _trials_table_section(table),
            _definitions_section(),
            "</body></html>",
        ]
    )


def _training_section(study: Study) -> str:
    """A phased (training-and-transfer) study's learning curves and effects
    (:mod:`analysis.training`); nothing for another design."""
    from analysis import training

    if not training.is_training_design(study.design):
        return ""
    table = training.training_table(study)
    if not len(table):
        return ""
    curves = training.learning_curves(table)
    found = training.effects(table)
    modelled = training.simulated(table)
    parts = ["<h2>Training and transfer</h2>"]
    if modelled:
        parts.append('<p class="warn"><b>Simulated participants.</b> These learning curves and effects are the '
                     "behaviour of the simulated operator model (its kinds and parameters are in the design "
                     "above), not findings about people.</p>")
    parts.append("<p>Per group (between subjects) and block: the mean over participants of their block means, "
                 "95 % t interval (n − 1 degrees of freedom). Retention = retention − pre-test per participant "
                 "(paired t interval); transfer = the transfer phase's mean (unseen scenarios), compared with "
                 f"the reference group <b>{_e(training.reference_group(table))}</b> by Welch's t interval. "
                 "Impact velocity: lower is better; capture rate: higher is better.</p>")
    parts.append(embed_figure(training.learning_curve_figure(curves, table, modelled), "learning curves"))
    rows = [[r["group"], r["phase"], r["block"] + 1, r["metric"], r["n"], r["mean"],
             f"[{format_number(r['ci95_low'])}, {format_number(r['ci95_high'])}]", r["authority_mean"]]
            for r in cast(list[dict[str, Any]], curves.to_dict("records"))]
    parts.append("<h3>Learning curves</h3>" + _table(
        ["group", "phase", "block", "metric", "n", "mean", "95 % CI", "mean guidance authority"], rows,
        left_columns=4))
    rows = [[r["effect"], r["group"], r["metric"], r["n"], r["mean"],
             f"[{format_number(r['ci95_low'])}, {format_number(r['ci95_high'])}]", r["vs"] or "—",
             r["difference"], f"[{format_number(r['diff_ci95_low'])}, {format_number(r['diff_ci95_high'])}]",
             r["method"]] for r in cast(list[dict[str, Any]], found.to_dict("records"))]
    parts.append("<h3>Retention and transfer effects</h3>" + _table(
        ["effect", "group", "metric", "n", "mean", "95 % CI", "vs", "difference", "95 % CI of difference",
         "interval"], rows, left_columns=3))
    return "".join(parts)


def _sweep_section(study: Study, table: pd.DataFrame) -> str:
    """A sweep folder's response curves over its swept fields (nothing for a plain study)."""
    from analysis.sweep import SWEEP_FILE, read_sweep_design, sweep_figure, sweep_table

    if not (Path(study.root) / SWEEP_FILE).is_file():
        return ""
    from analysis import delay_study
    from analysis.sweep import curve_parameters

    design = read_sweep_design(study.root)
    swept = sweep_table(study.root, table)
    parameters = [str(p) for p in design["parameters"]]
    html = ("<h2>Sweep</h2>"
            f"<p>{len(design['points'])} scenario variants over {_e(', '.join(parameters))}: mean per condition "
            "over each swept field (the other fields averaged over).</p>"
            + embed_figure(sweep_figure(swept, curve_parameters(swept)), "response curves of the sweep"))
    if delay_study.is_delay_study(design):
        html += _delay_section(swept)
    return html


def _delay_section(swept: pd.DataFrame) -> str:
    """The delay study (``analysis.delay_study``): which compensator wins at which delay,
    and one figure per metric against the delay."""
    from analysis import delay_study

    cells = delay_study.delay_table(swept)
    stats = delay_study.cell_stats(cells)
    found = delay_study.findings(delay_study.winners(stats))
    parts = ["<h2>Delay study</h2>",
             "<p>Per one-way delay, the compensator with the best mean over the guidance conditions and "
             "participants (95 % confidence intervals: t for means, Wilson for the capture rate; "
             "&ldquo;not clear&rdquo;: the winner's interval overlaps the runner-up's, or one is undefined). The simulated "
             "participants' results are the model's, not a finding about people.</p><ul>"]
    parts += [f"<li>{_e(line)}</li>" for line in found]
    parts.append("</ul>")
    for metric, label, _ in delay_study.DELAY_METRICS:
        parts.append(embed_figure(delay_study.delay_figure(stats, metric), f"{label} against the delay"))
    return "".join(parts)


def _package_versions(study: Study) -> set[str]:
    return {str(trial_metadata(study, trial_id).get("package_version", "unknown")) for trial_id in study.paths}


def _resolve_trial(study: Study, item: str | os.PathLike[str]) -> Trial:
    if str(item) in study.paths:
        return read_trial(study.paths[str(item)])
    path = Path(item)
    if path.is_file():
        return read_trial(path)
    raise AnalysisError(f"--trial {item}: neither a trial id of the study nor a trial file")


def write_report(
    study: Study,
    path: str | os.PathLike[str],
    extra_trials: Sequence[str | os.PathLike[str]] = (),
    title: str | None = None,
) -> Path:
    """Write :func:`build_report`'s HTML to ``path`` (parent directories created)."""
    path = Path(path)
    text = build_report(study, extra_trials, title)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise AnalysisError(f"{path}: cannot write the report ({error})") from error
    return path


def default_report_path(source: str | os.PathLike[str]) -> Path:
    """``DIR/report.html`` for a study directory, ``<stem>.report.html`` beside one trial file."""
    source = Path(source)
    return source.with_name(f"{source.stem}.report.html") if source.is_file() else source / "report.html"


def report_study(
    root: str | os.PathLike[str],
    report_path: str | os.PathLike[str] | None = None,
    extra_trials: Sequence[str | os.PathLike[str]] = (),
    title: str | None = None,
    progress: ProgressCallback | None = None,
) -> Path:
    """Load the study under ``root`` and write its report; returns the report's path.

    The one call a demo or a study runner needs (``report_path`` defaults to
    :func:`default_report_path`).
    """
    study = open_study(root, progress)
    return write_report(study, report_path or default_report_path(root), extra_trials, title)
