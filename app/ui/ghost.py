"""The operator's view under delay: the predicted arm and the ghost (docs/delay.md).

With a delayed link the servo publishes two end effectors besides the real one:

* ``ghost_ee_position_m``: the real end effector as it arrived over the state path (NaN
  without a link), drawn as a hollow ring: what the arm really did one delay ago;
* ``virtual_ee_position_m``: the ``predictive`` compensator's virtual end effector (NaN
  without one), where the arm will be one command delay after now: what the trainee
  steers and feels. The compensator's virtual arm is a Cartesian model of the end point,
  so its links are drawn by propagating the real arm's links to it (:func:`predicted_links`:
  FABRIK, Aristidou & Lasenby 2011, from the end effector back to the shoulder and out
  again: the same link lengths, the shoulder kept, the chain bent no more than it must).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.ui.palette import COLOURS

#: The ghost's colour (a pale grey-blue) and ring radius [px].
GHOST_COLOUR = COLOURS["ghost"]
GHOST_PX = 9
#: The predicted arm's colour (near white), its links' width and its end effector's radius [px].
PREDICTED_COLOUR = COLOURS["predicted"]
PREDICTED_WIDTH_PX = 3
PREDICTED_EE_PX = 6
#: FABRIK's tolerance on the tip [m] and its iteration cap.
_TIP_TOLERANCE_M = 1e-7
_MAX_ITERATIONS = 50


def _finite(point: NDArray[np.float64] | None) -> bool:
    return point is not None and all(math.isfinite(float(v)) for v in point)


def draw_ghost(surface: Any, view: Callable[[NDArray[np.float64]], tuple[int, int]],
               ghost_m: NDArray[np.float64] | None) -> None:
    """A ring at ``ghost_m`` (task frame, projected by ``view``); nothing when it is None or NaN."""
    if ghost_m is None or not _finite(ghost_m):
        return
    import pygame

    pygame.draw.circle(surface, GHOST_COLOUR, view(ghost_m), GHOST_PX, 2)


def predicted_links(links_m: NDArray[np.float64], ee_m: NDArray[np.float64]) -> NDArray[np.float64]:
    """The arm's drawing points bent to reach ``ee_m`` [m] (task frame).

    Args:
        links_m: (n + 2, 3) the real arm's points (``ArmBackend.link_positions_m``: base
            centre, joint origins, end effector).
        ee_m: the end effector to reach [m].

    Returns:
        (n + 2, 3): the base centre and the first joint (the shoulder) as given, every
        other point moved by FABRIK so that consecutive points keep their distances and
        the last is at ``ee_m`` (on the line towards it, stretched out, when it is beyond
        the reach).
    """
    points = np.array(links_m, dtype=float)
    chain = points[1:]  # shoulder ... end effector
    lengths = np.linalg.norm(np.diff(chain, axis=0), axis=1)
    root = chain[0].copy()
    goal = np.asarray(ee_m, dtype=float)
    if len(chain) < 2:
        return points

    def place(anchor: NDArray[np.float64], toward: NDArray[np.float64], length: float) -> NDArray[np.float64]:
        """The point ``length`` from ``anchor`` on the way to ``toward``."""
        step = toward - anchor
        norm = float(np.linalg.norm(step))
        return toward if norm < 1e-12 else anchor + step * (length / norm)

    if float(np.linalg.norm(goal - root)) >= float(lengths.sum()):  # beyond the reach: stretched out
        for i in range(len(lengths)):
            chain[i + 1] = place(chain[i], goal, lengths[i])
        return points
    for _ in range(_MAX_ITERATIONS):
        chain[-1] = goal  # backward: from the end effector to the shoulder
        for i in range(len(lengths) - 1, -1, -1):
            chain[i] = place(chain[i + 1], chain[i], lengths[i])
        chain[0] = root  # forward: from the shoulder out
        for i in range(len(lengths)):
            chain[i + 1] = place(chain[i], chain[i + 1], lengths[i])
        if float(np.linalg.norm(chain[-1] - goal)) < _TIP_TOLERANCE_M:
            break
    return points


def draw_predicted_arm(surface: Any, view: Callable[[NDArray[np.float64]], tuple[int, int]],
                       links_m: NDArray[np.float64], virtual_ee_m: NDArray[np.float64] | None) -> None:
    """The predicted arm (thin links, joints as dots, a disc at its end effector) from the
    shoulder to ``virtual_ee_m``; nothing when it is None or NaN."""
    if virtual_ee_m is None or not _finite(virtual_ee_m) or len(links_m) < 3:
        return
    import pygame

    points = [view(p) for p in predicted_links(links_m, virtual_ee_m)[1:]]
    pygame.draw.lines(surface, PREDICTED_COLOUR, False, points, PREDICTED_WIDTH_PX)
    for point in points[:-1]:
        pygame.draw.circle(surface, PREDICTED_COLOUR, point, 3)
    pygame.draw.circle(surface, PREDICTED_COLOUR, points[-1], PREDICTED_EE_PX)
