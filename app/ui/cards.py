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

from app.ui.outcomes import OUTCOME_HINTS, AttemptOutcome, outcome_label
from app.ui.scene import COLOURS
from app.ui.trainee_db import Attempt

#: (score column, label, display unit, factor from SI to the display unit).
SCORE_ROWS: tuple[tuple[str, str, str, float], ...] = (
    ("impact_velocity_m_s", "impact velocity", "mm/s", 1e3),
    ("time_to_reach_s", "time to reach", "s", 1.0),
    ("mse_velocity_m2_s2", "tracking error, velocity (MSE)", "mm²/s²", 1e6),
    ("mse_position_m2", "tracking error, position (MSE)", "mm²", 1e6),
    ("peak_base_torque_n_m", "base disturbance, peak torque", "mN m", 1e3),
    ("peak_base_attitude_rad", "base disturbance, attitude drift", "mrad", 1e3),
)


#: A score within this fraction of the earlier mean counts as the same.
SAME_FRACTION = 0.05
#: Scores below this (in SI units) count as zero when compared.
TINY = 1e-9


@dataclass(frozen=True)
class Comparison:
    """One score of this attempt against the trainee's earlier attempts (same condition)."""

    value: float
    best_before: float
    mean_before: float
    n_before: int

    @property
    def verdict(self) -> str:
        """``best`` (a new personal best), ``better``/``same``/``worse`` than the earlier
        mean (``same``: within :data:`SAME_FRACTION` of it, or both below :data:`TINY`),
        ``first`` (nothing to compare with) or ``n/a`` (no value)."""
        if math.isnan(self.value):
            return "n/a"
        if self.n_before == 0 or math.isnan(self.mean_before):
            return "first"
        close = abs(self.value - self.mean_before) <= SAME_FRACTION * abs(self.mean_before)
        if close or max(abs(self.value), abs(self.mean_before)) < TINY:
            return "same"
        if self.value < self.best_before:
            return "best"
        return "better" if self.value < self.mean_before else "worse"


def compare(attempt_scores: dict[str, float], earlier: list[Attempt]) -> dict[str, Comparison]:
    """Each score of an attempt against the finished, reached ``earlier`` attempts."""
    out: dict[str, Comparison] = {}
    for name, *_ in SCORE_ROWS:
        values = np.array([a.scores[name] for a in earlier if a.reached], dtype=float)
        values = values[~np.isnan(values)]
        out[name] = Comparison(
            value=float(attempt_scores.get(name, math.nan)),
            best_before=float(values.min()) if values.size else math.nan,
            mean_before=float(values.mean()) if values.size else math.nan,
            n_before=int(values.size),
        )
    return out


def _fmt(value: float, factor: float) -> str:
    return "—" if math.isnan(value) else f"{value * factor:9.2f}"


def outcome_lines(outcome: AttemptOutcome | None, status: str, reached: bool | None) -> list[tuple[str, str, str]]:
    """The card's lines on how the attempt ended: ``(text, font, colour key)`` each.

    The outcome's label (large, in its colour), the attempt's status and whether it
    reached the debris, the trial's reason, and what the outcome means for the trainee.
    Without an outcome (an attempt that never ran): the status and the message.
    """
    reach = "" if reached is None else ("reached the debris" if reached else "did not reach the debris")
    detail = "   ".join(part for part in (status, reach) if part)
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


def draw_score_card(surface: Any, fonts: dict[str, Any], title: str, status: str,
                    reached: bool | None, comparisons: dict[str, Comparison], hint: str,
                    footnote: str = "", outcome: AttemptOutcome | None = None) -> None:
    """The score card: how the attempt ended (:func:`outcome_lines`), then this attempt's
    scores, the best and the mean of the earlier ones, a verdict."""
    surface.fill(COLOURS["background"])
    text = _text(surface, fonts)
    text(title, (60, 30), "large")
    y = 80
    for value, font, colour in outcome_lines(outcome, status, reached):
        if value:
            text(value, (60, y), font, colour)
        y += {"large": 40, "normal": 28}.get(font, 22)
    top = max(y + 14, 170)
    columns = (60, 470, 640, 810, 980)
    for x, head in zip(columns, ("score (lower is better)", "this attempt", "best before",
                                 "mean before", "")):
        text(head, (x, top), "normal", "dim")
    verdict_colour = {"best": "good", "better": "good", "same": "text", "worse": "bad"}
    for i, (name, label, unit, factor) in enumerate(SCORE_ROWS):
        y = top + 40 + 40 * i
        c = comparisons[name]
        text(f"{label} [{unit}]", (columns[0], y), "normal")
        text(_fmt(c.value, factor), (columns[1], y), "normal")
        text(_fmt(c.best_before, factor), (columns[2], y), "normal", "dim")
        text(_fmt(c.mean_before, factor), (columns[3], y), "normal", "dim")
        text(c.verdict, (columns[4], y), "normal", verdict_colour.get(c.verdict, "dim"))
    n_before = max((c.n_before for c in comparisons.values()), default=0)
    text(f"scores of the first reach, compared with {n_before} earlier attempt(s) of this condition "
         "that reached the debris", (60, top + 40 + 40 * len(SCORE_ROWS) + 10), "small", "dim")
    if footnote:
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


def draw_progress(surface: Any, fonts: dict[str, Any], trainee: str, attempts: list[Attempt],
                  hint: str) -> None:
    """Impact velocity and time to reach of every scored attempt, sessions separated."""
    import pygame

    surface.fill(COLOURS["background"])
    text = _text(surface, fonts)
    text(f"Progress of {trainee}", (60, 30), "large")
    scored = [a for a in attempts if a.status == "finished" and a.reached]
    sessions = sorted({a.session_id for a in attempts})
    captured = sum(1 for a in attempts if a.captured)
    text(f"{len(sessions)} sessions, {len(attempts)} attempts: {captured} captured, "
         f"{len(scored)} reached the debris", (60, 66), "normal", "dim")
    text(outcome_tally(attempts), (60, 92), "small", "dim")
    width = surface.get_width() - 120
    charts = (("impact_velocity_m_s", "impact velocity [mm/s]", 1e3),
              ("time_to_reach_s", "time to reach [s]", 1.0))
    condition_colour = {"dg": "guidance", "ng": "target", "apf": "force_calc", "as": "arm"}
    for k, (name, label, factor) in enumerate(charts):
        rect = pygame.Rect(60, 120 + k * 270, width, 220)
        pygame.draw.rect(surface, COLOURS["panel"], rect)
        text(label, (rect.x + 8, rect.y + 6), "small", "dim")
        values = [a.scores[name] * factor for a in scored]
        if not values:
            text("no scored attempts yet", (rect.x + 20, rect.centery), "normal", "dim")
            continue
        top = max(values) * 1.15 or 1.0
        n = len(scored)

        def point(i: int, v: float, rect: Any = rect, top: float = top, n: int = n) -> tuple[int, int]:
            x = rect.x + 30 + (rect.width - 60) * (i / max(n - 1, 1))
            return int(x), int(rect.bottom - 10 - (rect.height - 40) * v / top)

        previous_session = None
        session_number = 0
        for i, attempt in enumerate(scored):
            if attempt.session_id != previous_session:
                session_number += 1
                x = point(i, 0.0)[0] - 0.5 * (rect.width - 60) / max(n - 1, 1)
                if i:
                    pygame.draw.line(surface, COLOURS["dim"], (x, rect.y + 24), (x, rect.bottom), 1)
                text(f"session {session_number}", (max(int(x) + 6, rect.x + 8), rect.y + 26),
                     "small", "dim")
            previous_session = attempt.session_id
        for condition, key in condition_colour.items():
            points = [point(i, values[i]) for i, a in enumerate(scored) if a.condition == condition]
            if len(points) > 1:
                pygame.draw.lines(surface, COLOURS[key], False, points, 1)
            for p, attempt in zip(points, (a for a in scored if a.condition == condition)):
                pygame.draw.circle(surface, COLOURS[key], p, 6, 0 if attempt.captured else 2)
        text(f"max {top / 1.15:.2f}", (rect.right - 110, rect.y + 6), "small", "dim")
    legend_y = 120 + 2 * 270
    for i, (cond, key) in enumerate(condition_colour.items()):
        pygame.draw.circle(surface, COLOURS[key], (70 + 120 * i, legend_y + 8), 6)
        text(cond.upper(), (82 + 120 * i, legend_y), "small")
    text("lines join attempts of one condition; vertical lines separate sessions",
         (560, legend_y), "small", "dim")
    text("filled dot: captured; ring: reached, not captured", (560, legend_y + 20), "small", "dim")
    text(hint, (60, surface.get_height() - 40), "normal", "dim")
