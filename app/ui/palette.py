"""The trainer windows' colours and the one drawing primitive the scene and the
post-capture view share (pygame, imported when drawing)."""

from __future__ import annotations

import math
from typing import Any

COLOURS: dict[str, tuple[int, int, int]] = {
    "background": (14, 18, 28),
    "panel": (24, 30, 44),
    "grid": (34, 42, 60),
    "text": (220, 226, 236),
    "dim": (130, 140, 160),
    "base": (110, 122, 146),
    "arm": (80, 160, 255),
    "joint": (200, 220, 255),
    "ee": (255, 226, 60),
    "trail": (120, 110, 50),
    "target": (255, 72, 56),
    "path": (170, 80, 70),
    "command": (60, 220, 230),
    "guidance": (70, 230, 110),
    "force_calc": (255, 160, 30),
    "force_act": (235, 50, 235),
    "good": (70, 200, 110),
    "warn": (240, 190, 50),
    "bad": (240, 70, 60),
    "tool": (190, 170, 255),  # the capture tool before any contact
    "contact": (255, 105, 180),  # the tool touches the fixture (the "contact" flag)
    "captured": (120, 255, 200),  # the tool has closed on the fixture (the "captured" flag)
    "open": (255, 200, 120),  # the tool has opened again after the capture (the task's "open")
    "reach": (90, 120, 200),  # the pointer's reach (--device mouse)
    "cursor": (255, 255, 255),  # the pointer's cursor (--device mouse)
    "shadow": (78, 86, 110),  # depth cues: shadows on the ground plane
    "moment": (255, 250, 200),  # the marks of the first contact and the capture
    "predicted": (235, 235, 250),  # the predicted (virtual) arm under delay (app.ui.ghost)
    "ghost": (150, 170, 210),  # the delayed real end effector (app.ui.ghost)
}


def arrow(surface: Any, colour: tuple[int, int, int], start: tuple[int, int],
          delta: tuple[float, float], width: int = 4, max_px: float = 160.0) -> None:
    """An arrow from ``start`` [px] along ``delta`` [px], its length capped at ``max_px``;
    nothing under 2 px."""
    import pygame

    length = math.hypot(*delta)
    if length < 2.0:
        return
    if length > max_px:
        delta = (delta[0] * max_px / length, delta[1] * max_px / length)
        length = max_px
    end = (start[0] + delta[0], start[1] + delta[1])
    pygame.draw.line(surface, colour, start, end, width)
    ux, uy = delta[0] / length, delta[1] / length
    head = min(14.0, 0.5 * length)
    left = (end[0] - head * ux + 0.5 * head * uy, end[1] - head * uy - 0.5 * head * ux)
    right = (end[0] - head * ux - 0.5 * head * uy, end[1] - head * uy + 0.5 * head * ux)
    pygame.draw.polygon(surface, colour, (end, left, right))
