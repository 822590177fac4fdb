"""Compile every hot kernel into numba's on-disk cache before anything needs it.

Numba compiles a kernel the first time it is called with a new type signature, and
caches the machine code beside its source. A fresh install therefore pays tens of
seconds of compilation in its first trials: harmless in a headless study, and a missed
force deadline in the first paced trial on a real device (the servo tick would stall
while the servo callback keeps running). :func:`warm_up_kernels` runs short headless
trials that call the kernels the way trials do: both arm models, every guidance
condition, the staged reference path beside the fused tick, a capture with the tool
closing, and the delay compensators with the contact force in the hand. Once cached, a
run of it takes seconds (loading the cache). ``make setup`` runs it
(``capture-trainer warm-up``).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from trials.runner import TrialRequest, build_trial

#: Length of each warm-up trial [s] unless its case says otherwise.
WARM_UP_S = 0.3


@dataclass(frozen=True)
class WarmUpCase:
    """One warm-up trial: the request, and whether it runs on the staged reference path."""

    request: TrialRequest
    staged: bool = False

    @property
    def label(self) -> str:
        """What the progress line says."""
        r = self.request
        extras = [f"{r.compensator} delay" if r.compensator else "", "staged" if self.staged else ""]
        return " ".join(part for part in (r.scenario, r.condition, *extras) if part)


def warm_up_cases() -> tuple[WarmUpCase, ...]:
    """The trials that call the kernels trials call (see the module docstring)."""
    base = TrialRequest(time_limit_s=WARM_UP_S, end_on_capture=False, participant="novice", seed=0,
                        trial_id="warm-up")
    cases: list[WarmUpCase] = []
    for scenario in ("paper-2019", "tumbling-7dof"):
        for condition in ("dg", "apf", "ng", "as"):
            request = replace(base, scenario=scenario, condition=condition)
            cases += [WarmUpCase(request), WarmUpCase(request, staged=True)]
    # the automatic capture to the tool's closing and the post-capture window (both models,
    # both paths: a staged tick after the capture reads the carried debris on its own)
    cases += [WarmUpCase(replace(base, scenario=scenario, condition="as", time_limit_s=3.5), staged=staged)
              for scenario in ("paper-2019", "tumbling-7dof") for staged in (False, True)]
    # the delayed link with each compensator and the contact force in the hand
    for compensator in ("predictive", "passivity"):
        cases.append(WarmUpCase(replace(base, scenario="paper-2019", delay_s=0.05, compensator=compensator,
                                        contact_feedback=True, time_limit_s=0.5)))
    return tuple(cases)


def warm_up_kernels(progress: Callable[[int, int, str], None] | None = None) -> dict[str, float | int]:
    """Run :func:`warm_up_cases` headless into a temporary folder.

    Args:
        progress: called before each trial with (index from 1, count, label).

    Returns:
        ``trials`` run and ``wall_s`` [s] taken.
    """
    cases = warm_up_cases()
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="capture-trainer-warm-up-") as tmp:
        for index, case in enumerate(cases, start=1):
            if progress is not None:
                progress(index, len(cases), case.label)
            build_trial(case.request, Path(tmp) / f"case-{index}", staged=case.staged).run()
    return {"trials": len(cases), "wall_s": time.perf_counter() - began}
