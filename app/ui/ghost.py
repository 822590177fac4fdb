"""The delayed real end effector, drawn as a ghost over the trainer's view (docs/delay.md).

With a delayed link the servo publishes, in the snapshot's ``ghost_ee_position_m``, the
real end effector as it arrived over the state path (NaN without a link). Drawn as a
hollow ring: what the arm really did one delay ago, next to what the trainee steers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

#: The ghost's colour (a pale grey-blue) and ring radius [px].
GHOST_COLOUR = (150, 170, 210)
GHOST_PX = 9


def draw_ghost(surface: Any, view: Callable[[NDArray[np.float64]], tuple[int, int]],
               ghost_m: NDArray[np.float64] | None) -> None:
    """A ring at ``ghost_m`` (task frame, projected by ``view``); nothing when it is None or NaN."""
    if ghost_m is None or not all(math.isfinite(float(v)) for v in ghost_m):
        return
    import pygame

    pygame.draw.circle(surface, GHOST_COLOUR, view(ghost_m), GHOST_PX, 2)
