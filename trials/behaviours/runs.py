"""The run of each behaviour kind: the one place that maps a behaviour to its run.

:mod:`.execute` holds the runs of the PTWL seed's kinds, :mod:`.mixed` the mixed
force/motion command's; this module imports both, so neither imports the other.
"""

from __future__ import annotations

from trials.behaviours.execute import BehaviourRun, JiggleRun, OpenRun, PhaseView, PtwlRun, RweRun
from trials.behaviours.mixed import MixedRun
from trials.behaviours.spec import Behaviour, Jiggle, Mixed, Open, Ptwl, Rwe


def start_behaviour(state: str, behaviour: Behaviour, view: PhaseView) -> BehaviourRun:
    """The run of ``behaviour`` for machine state ``state``, starting now."""
    if isinstance(behaviour, Ptwl):
        return PtwlRun(state, behaviour, view)
    if isinstance(behaviour, Rwe):
        return RweRun(state, behaviour, view)
    if isinstance(behaviour, Jiggle):
        return JiggleRun(state, behaviour, view)
    if isinstance(behaviour, Mixed):
        return MixedRun(state, behaviour, view)
    if isinstance(behaviour, Open):
        return OpenRun(state, behaviour, view)
    raise TypeError(f"no run for behaviour {behaviour!r}")
