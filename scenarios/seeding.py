"""What a scenario's ``seed`` means: it seeds every random draw of a trial of the scenario.

A trial's seed is :func:`trial_seed` of the scenario's seed, the participant, the
repetition and the run's own seed (``capture-trainer run --seed``; in a study, the seed
its protocol plans for the trial). The same four give the same draws (the simulated
participant's motor noise and choices) in any process; changing the scenario's seed
changes the draws of every trial of it. The target motions themselves are
deterministic (closed form), so the seed never moves the target.
"""

from __future__ import annotations

import hashlib


def trial_seed(scenario_seed: int, participant: str, repetition: int, run_seed: int = 0) -> int:
    """The 32-bit seed of one trial (pure, stable across processes and platforms).

    Args:
        scenario_seed: ``Scenario.seed`` (>= 0).
        participant: the participant's id or simulated kind (``"controller"`` for AS).
        repetition: 0-based repetition index.
        run_seed: the run's seed (``run --seed``, or the study's planned seed).

    Returns:
        An integer in ``[0, 2**32)``, e.g. for ``numpy.random.default_rng``.
    """
    key = repr(("scenario-trial", int(scenario_seed), str(participant), int(repetition), int(run_seed)))
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "little")
