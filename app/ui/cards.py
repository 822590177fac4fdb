"""The score card after an attempt and the progress view over sessions (pygame drawing).

Both read only the trainee database (:mod:`app.ui.trainee_db`); lower is better for
every score shown. The score card leads with how the attempt ended, in plain words
(:mod:`app.ui.outcomes`: "Captured", "Contact lost", "Pushed away", "Missed", "Out of
time", "Aborted") and the trial's reason; the scores below it are those of the first
reach, compared with the earlier attempts that reached the debris. The progress view
counts captures by outcome and marks captured attempts with filled dots.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.ui.behaviours_view import StateTimeline, draw_timeline
from app.ui.outcomes import OUTCOME_HINTS, AttemptOutcome, outcome_label
from app.ui.palette import COLOURS
from app.ui.trainee_db import Attempt

@dataclass(frozen=True)
class ScoreRow:
    """One score as the card shows it.

    Attributes:
        name: the trainee database's score column (SI).
        label: the trainee's words.
        unit: the display unit.
        factor: SI -> display unit, applied after ``root``.
        resolution: the smallest difference [SI, after ``root``] the trainer can measure
            (see :data:`SCORE_ROWS`); smaller differences are "about the same", smaller
            values "none measurable" when ``floor`` is set.
        root: show the square root (an MSE [m²/s²] as an RMS [m/s]).
        decimals: decimals shown in the display unit.
        floor: values under ``resolution`` read "none measurable" (base disturbance).
    """

    name: str
    label: str
    unit: str
    factor: float
    resolution: float
    root: bool = False
    decimals: int = 1
    floor: bool = False

    def value(self, si: float) -> float:
        """The shown quantity in SI (the root of an MSE), NaN for NaN."""
        if not math.isfinite(si):
            return math.nan
        return math.sqrt(max(si, 0.0)) if self.root else si

    def format(self, shown_si: float) -> str:
        """``shown_si`` (already :meth:`value`-d) in the display unit, or "none measurable"."""
        if not math.isfinite(shown_si):
            return "—"
        if self.floor and abs(shown_si) < self.resolution:
            return "none measurable"
        return f"{shown_si * self.factor:.{self.decimals}f} {self.unit}"


#: The card's scores, all "lower is better". Resolutions (what counts as a measurable
#: difference, and why):
#:
#: - impact speed and the velocity error after contact, 1 mm/s: the relative velocity is
#:   sampled at 1 kHz, and at an approach's accelerations (up to about 1 m/s²) it changes
#:   by up to 1 mm/s between two samples, so a first-reach value is uncertain by that much;
#: - time to reach, 0.01 s: the reach is interpolated between 1 ms samples, but the hand's
#:   own start varies by more than 10 ms from attempt to attempt;
#: - position error after contact, 0.1 mm: a tenth of the capture's 1 mm hold gap;
#: - base torque, 1 mN m, and base attitude drift, 10 µrad: the reactionless IK leaves a
#:   numerical residue orders of magnitude below these; under them the card says "none
#:   measurable" rather than 0.00.
SCORE_ROWS: tuple[ScoreRow, ...] = (
    ScoreRow("impact_velocity_m_s", "speed at first touch", "mm/s", 1e3, 1e-3),
    ScoreRow("time_to_reach_s", "time to reach the debris", "s", 1.0, 0.01, decimals=2),
    ScoreRow("mse_velocity_m2_s2", "speed error in the scored second (RMS)", "mm/s", 1e3, 1e-3, root=True),
    ScoreRow("mse_position_m2", "gap in the scored second (RMS)", "mm", 1e3, 1e-4, root=True),
    ScoreRow("peak_base_torque_n_m", "spacecraft push, peak torque", "N m", 1.0, 1e-3, decimals=3, floor=True),
    ScoreRow("peak_base_attitude_rad", "spacecraft turn, peak", "mrad", 1e3, 1e-5, decimals=2, floor=True),
)
ROWS_BY_NAME: dict[str, ScoreRow] = {row.name: row for row in SCORE_ROWS}
#: The rows a trainee sees; the base-disturbance rows are the experimenter's.
TRAINEE_ROWS: tuple[str, ...] = ("impact_velocity_m_s", "time_to_reach_s", "mse_velocity_m2_s2",
                                 "mse_position_m2")


#: A score within this fraction of the earlier mean counts as the same.
SAME_FRACTION = 0.05
#: Scores below this (in SI units) count as zero when compared.
TINY = 1e-9
#: Each verdict in the trainee's words, and its colour key.
VERDICT_WORDS: dict[str, tuple[str, str]] = {
    "best": ("your best so far", "good"),
    "better": ("better than your average", "good"),
    "same": ("about the same", "text"),
    "worse": ("worse than your average", "bad"),
    "first": ("first one to compare", "dim"),
    "n/a": ("", "dim"),
}


@dataclass(frozen=True)
class Comparison:
    """One score of this attempt against the trainee's earlier attempts (same condition).

    ``value``, ``best_before``, ``mean_before`` and ``resolution`` are in SI, as shown
    (the root of an MSE for RMS rows)."""

    value: float
    best_before: float
    mean_before: float
    n_before: int
    resolution: float = 0.0

    @property
    def verdict(self) -> str:
        """``best`` (a new personal best by more than the resolution), ``better``/``same``/
        ``worse`` than the earlier mean (``same``: within the resolution or
        :data:`SAME_FRACTION` of it, or both below :data:`TINY`), ``first`` (nothing to
        compare with) or ``n/a`` (no value)."""
        if math.isnan(self.value):
            return "n/a"
        if self.n_before == 0 or math.isnan(self.mean_before):
            return "first"
        margin = max(self.resolution, SAME_FRACTION * abs(self.mean_before))
        close = abs(self.value - self.mean_before) <= margin
        if close or max(abs(self.value), abs(self.mean_before)) < max(TINY, self.resolution):
            return "same"
        if self.value < self.best_before - self.resolution:
            return "best"
        return "better" if self.value < self.mean_before else "worse"


def compare(attempt_scores: dict[str, float], earlier: list[Attempt]) -> dict[str, Comparison]:
    """Each score of an attempt against the finished, reached ``earlier`` attempts (as shown:
    RMS rows compare roots)."""
    out: dict[str, Comparison] = {}
    for row in SCORE_ROWS:
        values = np.array([row.value(a.scores[row.name]) for a in earlier if a.reached], dtype=float)
        values = values[~np.isnan(values)]
        out[row.name] = Comparison(
            value=row.value(float(attempt_scores.get(row.name, math.nan))),
            best_before=float(values.min()) if values.size else math.nan,
            mean_before=float(values.mean()) if values.size else math.nan,
            n_before=int(values.size),
            resolution=row.resolution,
        )
    return out


def plural(n: int, word: str, many: str | None = None) -> str:
    """``"1 session"``, ``"2 sessions"``, ``"0 sessions"``."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def verdict_line(contact_speed_m_s: float, band_m_s: float) -> tuple[str, str]:
    """The card's contact verdict, ``(text, colour key)``: soft / hard against the band, or
    missed (NaN: no contact)."""
    from app.ui.scene import contact_verdict

    word = contact_verdict(contact_speed_m_s, band_m_s)
    if word == "missed":
        return "No contact: missed.", "warn"
    sign = "at most" if word == "soft" else "above"
    return (f"{word.capitalize()} contact: {contact_speed_m_s * 1e3:.0f} mm/s closing, {sign} the "
            f"soft band of {band_m_s * 1e3:.0f} mm/s."), "good" if word == "soft" else "bad"


def outcome_lines(outcome: AttemptOutcome | None, status: str, reached: bool | None) -> list[tuple[str, str, str]]:
    """The card's lines on how the attempt ended: ``(text, font, colour key)`` each.

    The outcome's label (large, in its colour), whether it reached the debris (and the
    status when the attempt did not finish: ``aborted``, ``error``), the trial's reason,
    and what the outcome means for the trainee. Without an outcome (an attempt that never
    ran): the status and the message.
    """
    reach = "" if reached is None else ("reached the debris" if reached else "did not reach the debris")
    shown_status = "" if status.startswith("finished") else status
    detail = "   ".join(part for part in (shown_status, reach) if part)
    if outcome is None or outcome.word is None:
        lines = [(detail, "normal", "good" if reached else "warn")]
        if outcome is not None and outcome.reason and outcome.reason not in status:
            lines.append((outcome.reason, "normal", "text"))
        return lines
    lines = [(outcome.label, "large", outcome.colour), (detail, "normal", "dim")]
    if outcome.reason:
        lines.append((outcome.reason, "normal", "text"))
    hint = OUTCOME_HINTS.get(outcome.word, "")
    if hint:
        lines.append((hint, "small", "dim"))
    return lines


@dataclass(frozen=True)
class CardExtras:
    """What the card shows besides the scores.

    Attributes:
        verdict: the contact verdict line (:func:`verdict_line`), or None.
        scored: the line on the scored second after contact.
        authority: the trainee's guidance authority (None: not known, not shown).
        experimenter: the experimenter's lines (servo figures, data-quality flags,
            trial file), each ``(text, colour key)``; shown only in the experimenter's view.
        timeline: the task's states over time after the capture
            (:class:`app.ui.behaviours_view.StateTimeline`), None: no task.
    """

    verdict: tuple[str, str] | None = None
    scored: str = ""
    authority: float | None = None
    experimenter: tuple[tuple[str, str], ...] = ()
    timeline: StateTimeline | None = None


def draw_score_card(surface: Any, fonts: dict[str, Any], title: str, status: str,
                    reached: bool | None, comparisons: dict[str, Comparison], hint: str,
                    footnote: str = "", outcome: AttemptOutcome | None = None,
                    extras: CardExtras | None = None) -> None:
    """The score card: how the attempt ended (:func:`outcome_lines`), the contact's
    verdict, then this attempt's scores, the best and the mean of the earlier ones, and a
    verdict per score that says "about the same" within the score's resolution. The
    base-disturbance rows and ``footnote`` are shown in the experimenter's view only."""
    extras = extras or CardExtras()
    experimenter = bool(extras.experimenter)
    surface.fill(COLOURS["background"])
    text = _text(surface, fonts)
    text(title, (60, 24), "large")
    y = 70
    for value, font, colour in outcome_lines(outcome, status, reached):
        if value:
            text(value, (60, y), font, colour)
        y += {"large": 40, "normal": 28}.get(font, 22)
    if extras.verdict is not None:
        text(extras.verdict[0], (60, y), "normal", extras.verdict[1])
        y += 28
    if extras.scored:
        text(extras.scored, (60, y), "small", "dim")
        y += 22
    if extras.authority is not None:
        text(f"Guidance authority: {extras.authority:.2f} (1 = full guidance, 0 = none)", (60, y), "normal")
        y += 28
    top = max(y + 12, 200)
    columns = (60, 520, 700, 880, 1040)
    for x, head in zip(columns, ("score (lower is better)", "this attempt", "your best",
                                 "your average", "")):
        text(head, (x, top), "normal", "dim")
    rows = [row for row in SCORE_ROWS if experimenter or row.name in TRAINEE_ROWS]
    for i, row in enumerate(rows):
        y = top + 34 + 32 * i
        c = comparisons[row.name]
        text(row.label, (columns[0], y), "normal")
        text(row.format(c.value), (columns[1], y), "normal")
        text(row.format(c.best_before), (columns[2], y), "normal", "dim")
        text(row.format(c.mean_before), (columns[3], y), "normal", "dim")
        words, colour = VERDICT_WORDS.get(c.verdict, (c.verdict, "dim"))
        text(words, (columns[4], y), "small", colour)
    n_before = max((c.n_before for c in comparisons.values()), default=0)
    y = top + 34 + 32 * len(rows) + 6
    text(f"compared with your {plural(n_before, 'earlier attempt')} of this kind that reached the debris; "
         "differences under 1 mm/s, 0.01 s or 0.1 mm count as about the same",
         (60, y), "small", "dim")
    y += 26
    for line, colour in extras.experimenter:
        text(line, (60, y), "small", colour)
        y += 20
    if extras.timeline is not None:
        import pygame

        draw_timeline(surface, pygame.Rect(60, y + 30, surface.get_width() - 120, 24), extras.timeline, fonts)
    if footnote and experimenter:
        text(footnote, (60, surface.get_height() - 80), "small", "dim")
    text(hint, (60, surface.get_height() - 50), "normal", "dim")


def _text(surface: Any, fonts: dict[str, Any]) -> Any:
    def text(value: str, pos: tuple[int, int], font: str = "normal", colour: str = "text") -> None:
        surface.blit(fonts[font].render(value, True, COLOURS[colour]), pos)

    return text


def outcome_tally(attempts: list[Attempt]) -> str:
    """How the attempts ended, e.g. "Captured 3, Contact lost 1, Pushed away 2" (outcome
    order; attempts without a recorded outcome counted as "no outcome recorded")."""
    from analysis.outcomes import OUTCOMES

    counts: dict[str, int] = {}
    for attempt in attempts:
        key = attempt.outcome or ""
        counts[key] = counts.get(key, 0) + 1
    parts = [f"{outcome_label(word)} {counts[word]}" for word in OUTCOMES if counts.get(word)]
    parts += [f"{outcome_label(word)} {n}" for word, n in sorted(counts.items()) if word and word not in OUTCOMES]
    if counts.get(""):
        parts.append(f"no outcome recorded {counts['']}")
    return ", ".join(parts) if parts else "no attempts yet"


#: The progress view's colour key of each condition.
CONDITION_COLOURS: dict[str, str] = {"dg": "guidance", "ng": "target", "apf": "force_calc", "as": "arm"}
#: Each condition in the trainee's words.
CONDITION_WORDS: dict[str, str] = {"dg": "DG: practice with guidance", "ng": "NG: test without guidance",
                                   "apf": "APF: attracting force", "as": "AS: automatic"}


def conditions_used(attempts: list[Attempt]) -> list[str]:
    """The conditions the trainee used, in :data:`CONDITION_COLOURS` order then first use."""
    used = {a.condition for a in attempts}
    known = [c for c in CONDITION_COLOURS if c in used]
    return known + sorted(used - set(known))


def axis_ticks(top: float) -> list[float]:
    """Tick values 0, step, ..., up to ``top`` (1-2-5 steps, about five of them)."""
    from app.ui.scene import nice_step

    if not top > 0.0:
        return [0.0]
    step = nice_step(top / 5.0)
    return [i * step for i in range(int(math.floor(top / step + 1e-9)) + 1)]


def draw_progress(surface: Any, fonts: dict[str, Any], trainee: str, attempts: list[Attempt],
                  hint: str, soft_band_m_s: float = 0.05, authority: float | None = None) -> None:
    """Every attempt in order, sessions separated: the speed at first touch (with the soft
    band as a line) and the time to reach, with y ticks; attempts that did not reach the
    debris drawn as crosses on a "no contact" row above the chart, stopped ones in grey;
    the legend lists only the conditions used."""
    import pygame

    surface.fill(COLOURS["background"])
    text = _text(surface, fonts)
    text(f"Progress of {trainee}", (60, 24), "large")
    reached = [a for a in attempts if a.reached and math.isfinite(a.scores.get("impact_velocity_m_s", math.nan))]
    sessions = sorted({a.session_id for a in attempts})
    captured = sum(1 for a in attempts if a.captured)
    text(f"{plural(len(sessions), 'session')}, {plural(len(attempts), 'attempt')}: {captured} captured, "
         f"{len(reached)} reached the debris", (60, 62), "normal", "dim")
    text(outcome_tally(attempts), (60, 88), "small", "dim")
    if authority is not None:
        text(f"Guidance authority now: {authority:.2f} (1 = full guidance, 0 = none)", (700, 88), "small")
    width = surface.get_width() - 160
    charts = (("impact_velocity_m_s", "speed at first touch [mm/s]", 1e3, soft_band_m_s * 1e3),
              ("time_to_reach_s", "time to reach the debris [s]", 1.0, math.nan))
    n = len(attempts)
    for k, (name, label, factor, soft) in enumerate(charts):
        rect = pygame.Rect(100, 136 + k * 262, width, 200)
        pygame.draw.rect(surface, COLOURS["panel"], rect)
        text(label, (rect.x, rect.y - 22), "small")
        values = [a.scores.get(name, math.nan) * factor for a in attempts]
        finite = [v for v in values if math.isfinite(v)]
        if not attempts:
            text("no attempts yet", (rect.x + 20, rect.centery), "normal", "dim")
            continue
        peak = max([*finite, soft if math.isfinite(soft) else 0.0, 1e-9])
        ticks = axis_ticks(peak * 1.1)
        top = ticks[-1] if ticks[-1] >= peak else ticks[-1] + (ticks[1] - ticks[0] if len(ticks) > 1 else peak)
        plot = rect.inflate(-40, -44)
        plot.y = rect.y + 32

        def y_of(v: float, plot: Any = plot, top: float = top) -> int:
            return int(plot.bottom - plot.height * v / top)

        def x_of(i: int, plot: Any = plot, n: int = n) -> int:
            return int(plot.x + plot.width * ((i + 0.5) / max(n, 1)))

        for tick in axis_ticks(top):
            ty = y_of(tick)
            pygame.draw.line(surface, COLOURS["grid"], (plot.x, ty), (plot.right, ty), 1)
            label_surface = fonts["small"].render(f"{tick:g}", True, COLOURS["dim"])
            surface.blit(label_surface, (rect.x - 8 - label_surface.get_width(), ty - 7))
        miss_row = rect.y + 14
        text("no contact", (rect.x - 88, miss_row - 7), "small", "dim")
        if math.isfinite(soft):
            sy = y_of(soft)
            pygame.draw.line(surface, COLOURS["good"], (plot.x, sy), (plot.right, sy), 2)
            text(f"soft capture: under {soft:g} mm/s", (plot.right - 210, sy - 18), "small", "good")
        previous, number = None, 0
        for i, attempt in enumerate(attempts):
            if attempt.session_id != previous:
                number += 1
                x = x_of(i) - plot.width / max(n, 1) / 2
                if i:
                    pygame.draw.line(surface, COLOURS["dim"], (x, rect.y), (x, rect.bottom), 1)
                text(f"session {number}", (int(x) + 4, rect.bottom - 18), "small", "dim")
            previous = attempt.session_id
        for condition in conditions_used(attempts):
            key = CONDITION_COLOURS.get(condition, "text")
            points = [(x_of(i), y_of(values[i])) for i, a in enumerate(attempts)
                      if a.condition == condition and math.isfinite(values[i])]
            if len(points) > 1:
                pygame.draw.lines(surface, COLOURS[key], False, points, 1)
            for i, attempt in enumerate(attempts):
                if attempt.condition != condition:
                    continue
                x = x_of(i)
                if math.isfinite(values[i]):
                    pygame.draw.circle(surface, COLOURS[key], (x, y_of(values[i])), 6, 0 if attempt.captured else 2)
                else:  # no contact (missed, out of time) in the condition's colour; stopped in grey
                    colour = COLOURS["dim" if attempt.outcome in ("aborted", None) or attempt.status != "finished" else key]
                    pygame.draw.line(surface, colour, (x - 6, miss_row - 6), (x + 6, miss_row + 6), 2)
                    pygame.draw.line(surface, colour, (x - 6, miss_row + 6), (x + 6, miss_row - 6), 2)
        text("attempts, oldest first", (plot.right - 150, rect.bottom + 2), "small", "dim")
    legend_y = 136 + 2 * 262 - 40
    for i, condition in enumerate(conditions_used(attempts)):
        pygame.draw.circle(surface, COLOURS[CONDITION_COLOURS.get(condition, "text")], (110 + 300 * i, legend_y + 8), 6)
        text(CONDITION_WORDS.get(condition, condition.upper()), (122 + 300 * i, legend_y), "small")
    text("filled dot: captured; ring: touched, not captured; cross: no contact (grey: stopped); "
         "lines join attempts of one kind", (100, legend_y + 22), "small", "dim")
    text(hint, (60, surface.get_height() - 40), "normal", "dim")
