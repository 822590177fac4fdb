"""The experimental conditions: what guides the hand, and who drives the slave.

:data:`CONDITIONS` is the one list of condition names (protocols, the CLI and the
runner read it). A condition names the guidance law the participant feels (a name in
``guidance.registry.LAWS``) and whether the automatic controller drives the slave
instead of a participant (the paper's AS).
"""

from __future__ import annotations

from dataclasses import dataclass

from capture_trainer.errors import TrialError
from capture_trainer.registry import Registry


@dataclass(frozen=True)
class Condition:
    """One experimental condition.

    Attributes:
        name: the condition's name in protocols, trial logs and ``--condition``.
        summary: one line for listings.
        law: the guidance law rendered to the participant (``guidance.registry.LAWS``).
        automatic: the automatic capture controller (eq. 10 with the paper's gains)
            drives the slave; no participant and no device.
    """

    name: str
    summary: str
    law: str
    automatic: bool = False


#: The conditions by name, in the paper's order (DG, NG, APF, then the automatic AS).
CONDITIONS: Registry[Condition] = Registry("condition", error=TrialError)
for _condition in (
    Condition("dg", "dynamic guidance along the re-planned capture path (eq. 11)", law="dg"),
    Condition("ng", "no guidance", law="ng"),
    Condition("apf", "artificial potential field: attraction by distance only", law="apf"),
    Condition("as", "automatic capture by the controller, no participant", law="ng", automatic=True),
):
    CONDITIONS.register(_condition.name, _condition)
