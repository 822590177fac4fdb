"""Learning simulated participants: skill that changes with practice.

**This is the model's assumption, never a finding about people.** A study run with
learning participants shows what this law produces; it says nothing about how people
learn. Every trial of a learning participant records the law, its parameters and the
practice it assumed (:func:`participant_model`, the trial's ``participant_model``
metadata).

The law (docs/haptics.md, "Learning participants"):

* **Power law of practice** (Newell & Rosenbloom 1981): performance improves with the
  number of practice trials as a power function with diminishing returns. Skill after
  ``n`` trials of practice is

      s(n) = 1 − ((n₀ + n) / n₀)^(−α)                                        (L1)

  with ``α`` the exponent (``practice_exponent``) and ``n₀`` the practice that makes the
  first trials count (``practice_scale_trials``: N&R's prior experience ``E`` of a
  naive participant). ``s`` rises from 0 toward 1.
* **Skill moves the skill parameters** (:data:`SKILL_PARAMETERS`: delay, prediction,
  movement time, endpoint and velocity-matching errors, the interceptive habit, motor
  noise) from the ``novice`` preset toward the ``expert`` preset, which stands for
  :data:`EXPERT_PRACTICE_TRIALS` trials of practice. A participant that has practised
  ``E`` trials before the study (``prior_practice_trials``) and ``n`` in it moves by the
  fraction

      φ = (s(E + n) − s(E)) / s(E_expert)                                     (L2)

  of the novice-to-expert difference from its own starting values: multiplicatively
  (``θ · (θ_expert/θ_novice)^φ``) for positive parameters, additively for the others,
  fractions clipped to [0, 1]. ``novice-learner`` starts as the novice (E = 0);
  ``expert-learner`` as the expert (E = E_expert) and still improves, slowly.
* **Guidance hypothesis** (Salmoni, Schmidt & Walter 1984; Winstein, Pohl & Lewthwaite
  1994; Schmidt & Bjork 1992): guidance that does the task for the learner helps during
  practice but learns less of the learner's own control. A guided trial (DG, APF)
  counts ``w_g`` (``guided_practice_credit``) of an unguided trial:

      n = n_unguided + w_g · n_guided                                          (L3)

  and the operator comes to rely on the force: its compliance (how far it goes along
  with felt guidance) rises with guided practice,

      c(n_guided) = c + (1 − c) · ρ · s(n_guided)                               (L4)

  with ``ρ`` = ``guidance_reliance``. The sizes of ``w_g`` and ``ρ`` are the model's
  choices; the sources give the direction of the effects, not these numbers.

Everything is a pure function of the participant's parameters and its practice counts
(the trials before this one, from the study's plan: ``trials.study``), so a study stays
deterministic per seed and runs in any worker process.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from haptics.participants import EXPERT_PRACTICE_TRIALS, PARTICIPANT_PRESETS, ParticipantParams

__all__ = ["ASSUMPTION", "EXPERT_PRACTICE_TRIALS", "SKILL_PARAMETERS", "effective_practice", "participant_model",
           "practised", "progress", "skill"]

#: The parameters practice changes (the rest, e.g. arm impedance, stays the person's).
SKILL_PARAMETERS = (
    "reaction_time_s",
    "extrapolation",
    "forward_model_gain",
    "fitts_a_s",
    "fitts_b_s",
    "endpoint_k_s",
    "lateral_k_s",
    "duration_sd",
    "speed_weber",
    "velocity_match_sd",
    "aim_through",
    "aim_through_sd",
    "undershoot_z",
    "replan_interval_s",
    "noise_gain",
)
#: Skill parameters that are fractions in [0, 1].
_FRACTIONS = frozenset({"extrapolation", "forward_model_gain"})

#: What the trial metadata says of a learning participant, word for word.
ASSUMPTION = ("simulated participant; its learning (power law of practice, guidance "
              "hypothesis) is the model's assumption, not a finding about people")


def skill(practice_trials: float, exponent: float, scale_trials: float) -> float:
    """(L1): skill in [0, 1) after ``practice_trials`` trials of practice.

    Args:
        practice_trials: effective practice n >= 0 [trials].
        exponent: α > 0.
        scale_trials: n₀ > 0 [trials].
    """
    if practice_trials < 0.0 or exponent <= 0.0 or scale_trials <= 0.0:
        raise ValueError(f"need n >= 0, alpha > 0, n0 > 0; got {practice_trials}, {exponent}, {scale_trials}")
    return 1.0 - float(((scale_trials + practice_trials) / scale_trials) ** (-exponent))


def effective_practice(params: ParticipantParams, unguided_trials: float, guided_trials: float) -> float:
    """(L3): unguided trials plus ``guided_practice_credit`` per guided trial [trials]."""
    if unguided_trials < 0 or guided_trials < 0:
        raise ValueError(f"practice counts must be >= 0, got {unguided_trials}, {guided_trials}")
    return float(unguided_trials) + params.guided_practice_credit * float(guided_trials)


def progress(params: ParticipantParams, unguided_trials: float, guided_trials: float) -> float:
    """(L2): the fraction φ of the novice-to-expert difference gained in the study."""
    a, n0 = params.practice_exponent, params.practice_scale_trials
    prior = params.prior_practice_trials
    n = effective_practice(params, unguided_trials, guided_trials)
    return (skill(prior + n, a, n0) - skill(prior, a, n0)) / skill(EXPERT_PRACTICE_TRIALS, a, n0)


def practised(params: ParticipantParams, unguided_trials: float, guided_trials: float) -> ParticipantParams:
    """The participant after its practice in the study ((L2) and (L4)); itself when it
    does not learn (``learning`` false)."""
    if not params.learning:
        return params
    novice, expert = PARTICIPANT_PRESETS["novice"], PARTICIPANT_PRESETS["expert"]
    phi = progress(params, unguided_trials, guided_trials)
    changes: dict[str, Any] = {}
    for name in SKILL_PARAMETERS:
        own, start, end = getattr(params, name), getattr(novice, name), getattr(expert, name)
        if own > 0.0 and start > 0.0 and end > 0.0:
            value = own * (end / start) ** phi
        else:
            value = own + phi * (end - start)
        if name in _FRACTIONS:
            value = min(1.0, max(0.0, value))
        changes[name] = value
    reliance = params.guidance_reliance * skill(float(guided_trials), params.practice_exponent,
                                                params.practice_scale_trials)
    changes["compliance"] = params.compliance + (1.0 - params.compliance) * reliance
    return replace(params, **changes)


def participant_model(params: ParticipantParams, unguided_trials: int = 0, guided_trials: int = 0) -> dict[str, Any]:
    """The trial's ``participant_model`` metadata: what the simulated participant is, and
    for a learning one the law, its parameters, the practice and the resulting skill."""
    entry: dict[str, Any] = {"model": "haptics.operators.HumanOperator", "kind": params.kind,
                             "simulated": True, "assumption": ASSUMPTION}
    if params.learning:
        after = practised(params, unguided_trials, guided_trials)
        entry["learning"] = {
            "law": "power law of practice (Newell & Rosenbloom 1981) with the guidance hypothesis "
                   "(Salmoni, Schmidt & Walter 1984): docs/haptics.md",
            "practice_exponent": params.practice_exponent,
            "practice_scale_trials": params.practice_scale_trials,
            "prior_practice_trials": params.prior_practice_trials,
            "expert_practice_trials": EXPERT_PRACTICE_TRIALS,
            "guided_practice_credit": params.guided_practice_credit,
            "guidance_reliance": params.guidance_reliance,
            "unguided_trials": int(unguided_trials),
            "guided_trials": int(guided_trials),
            "effective_practice_trials": effective_practice(params, unguided_trials, guided_trials),
            "progress": progress(params, unguided_trials, guided_trials),
            "skill_parameters": {name: getattr(after, name) for name in SKILL_PARAMETERS},
            "compliance": after.compliance,
        }
    else:
        entry["learning"] = None
    return entry
