"""Compliant behaviours after the capture (the PTWL seed): behaviours as data, task state
machines from TOML files, and the post-capture phase the servo tick runs.

See ``docs/behaviours.md``. Modules: :mod:`.spec` (the frozen behaviours and their
registry), :mod:`.execute` (one behaviour tick by tick), :mod:`.mixed` (Yang & Konno's
mixed force/motion command, ``docs/delay.md``), :mod:`.runs` (which run each kind gets),
:mod:`.machine` (task files and the state machine), :mod:`.phase` (the plug-in of the
servo tick).
"""

from trials.behaviours.spec import (BEHAVIOURS, RESULTS, BehaviourError, Jiggle, Mixed, Open, Ptwl, Rwe,
                                    make_behaviour)

__all__ = ["BEHAVIOURS", "RESULTS", "BehaviourError", "Jiggle", "Mixed", "Open", "Ptwl", "Rwe", "make_behaviour"]
