"""Simulated participants' parameters and the built-in participant kinds.

Plain data, no numerics, so that the CLI can list the kinds without loading the operator
model (:mod:`haptics.operators`, where the sources of the values are cited).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace

from capture_trainer.registry import Registry, suggestion


@dataclass(frozen=True)
class ParticipantParams:
    """One simulated participant (device frame, SI units).

    Attributes:
        kind: the participant kind (a name in :data:`PARTICIPANT_PRESETS`).
        participant_id: label recorded with the trial.
        reaction_time_s: visual feedback delay [s] (percepts are this old).
        extrapolation: fraction of the delay the operator compensates by extrapolating
            the target it sees with its perceived velocity (0 = none, 1 = full).
        forward_model_gain: how much the operator trusts its prediction of the end
            effector from its own hand (plus the learned hand-to-end-effector offset)
            over the delayed view (1 = fully, 0 = only the delayed view).
        offset_learn_s: time constant [s] with which it learns that offset.
        hand_mass_kg, hand_stiffness_n_m, hand_damping_n_s_m: arm endpoint impedance
            with the normal grip.
        resist_stiffness_gain: factor on stiffness and damping when resisting
            (co-contraction).
        fitts_a_s, fitts_b_s: movement time T = a + b log2(1 + D/W) [s].
        fitts_width_m: W [m], the operator's idea of the target size.
        min_duration_s: shortest submovement [s].
        endpoint_k_s: a submovement's endpoint error along the movement has SD
            ``k D / T`` [m] (Meyer et al. 1988: proportional to the mean speed), k [s].
        lateral_k_s: the same across the movement (each perpendicular direction) [s].
        duration_sd: SD of a submovement's duration error (fraction).
        speed_weber: SD of the perceived target speed (fraction, Weber).
        velocity_match_sd: SD of the planned final speed along the target's motion, as
            a fraction of the target's speed (0.3 of it again in any direction).
        aim_through: how far beyond the target a submovement aims, as a fraction of
            the gap it closes (people hit moving targets rather than stop at them:
            Brenner & Smeets 1996; contact then comes while the hand still moves,
            which is why unguided captures are fast). An interceptive habit that
            practice at a soft-capture task removes (expert 0); negative aims short.
        aim_through_sd: its SD across submovements (same units).
        undershoot_z: how far short of the contact point a submovement aims, in SDs of
            its own endpoint error along the movement (``endpoint_k_s`` D/T): when
            overshooting costs more than undershooting, the primary submovement is
            planned short so that few overshoot and a slow correction closes the rest
            (Meyer et al. 1988; Elliott et al. 2004, 2010). Here an overshoot is an
            impact; a skill that practice at the soft-capture task brings (expert 1.5:
            about 7 % of submovements overshoot; novice 0, whose habit is to hit).
        surface_offset_m: submovements aim this far short of the target's centre, at
            its near surface as the operator sees it [m] (grasping aims at contact
            points, not at the object's centre: Smeets & Brenner 1999), so that the
            plan's deceleration ends at contact rather than inside the target.
        clutch_margin_m: the operator clutches (releases the engage button) when the
            stylus, looking ``clutch_lookahead_s`` ahead at its velocity, comes within
            this distance of a face of the usable workspace and its plan goes on
            through it [m] (indexing: Conti & Khatib 2005).
        clutch_dwell_s: after the return movement the hand waits this long before it
            presses the button again [s].
        clutch_lookahead_s: see ``clutch_margin_m`` [s].
        learning: the participant's skill changes with practice (``haptics.learning``;
            the model's assumption).
        practice_exponent: α of the power law of practice (Newell & Rosenbloom 1981).
        practice_scale_trials: n₀ of the power law [trials].
        prior_practice_trials: practice before the study [trials] (0 novice-learner,
            ``haptics.learning.EXPERT_PRACTICE_TRIALS`` expert-learner).
        guided_practice_credit: how much of an unguided trial's practice a guided trial
            gives the operator's own control (guidance hypothesis, in [0, 1]).
        guidance_reliance: how far guided practice raises the compliance toward 1.
        overlap: fraction of a submovement after which the next one may start.
        replan_interval_s: shortest interval between submovement starts [s].
        replan_deviation_m: the hand more than this off its current submovement's plan
            [m] (felt: proprioception) starts an event-triggered correction
            (intermittent control: Gawthrop et al. 2011; about the detection threshold
            of an imposed arm displacement: Hall & McCloskey 1983).
        correction_latency_s: from the first tick the hand is that far off to the
            correction's start [s] (the voluntary response to a limb perturbation:
            100–150 ms, Pruszynski et al. 2008), not sooner than ``replan_interval_s``
            after the current submovement's start.
        noise_const_n: constant part of the motor noise SD [N].
        noise_gain: signal-dependent part: SD per newton of active hand force.
        noise_tau_s: correlation time of the motor noise [s].
        compliance: how much the operator yields to guidance forces, in [0, 1].
        yield_tau_s: time constant [s] of yielding at full compliance.
        yield_force_n: felt force [N] from which on the operator knows that guidance
            is on (and, as far as it complies, goes along with it for the trial).
        relaxed_grip: the fraction of its active impedance a fully compliant operator
            keeps while it feels guidance (it relaxes its grip and lets the force
            drive); the grip follows with time constant ``yield_tau_s``.
        disagree_weight: how much less a complying operator yields (and how much
            firmer it grips) when the felt force opposes the force it wants to apply
            itself: the yield is scaled by ``1 − w (1 − cos θ)/2`` (θ the angle between
            the two); 1 = it holds firm against a fully opposing force. The same
            weight, times how far the force opposes it, stiffens its grip up to
            ``resist_stiffness_gain`` (co-contraction against a perturbation).
        cocontraction_rate: how fast co-contraction ``c`` rises with the magnitude of the
            hand's error against its intended trajectory (the plan, shifted by what it
            yielded): ``dc/dt = r |ε| − γ``, ``ε = e + δ ė`` [1/(m s)] (the V-shaped
            adaptation rule of Franklin et al. 2008, applied in time); ``c`` adds to the
            grip, scaling stiffness and damping together.
        cocontraction_decay: ``γ``, the constant rate at which co-contraction falls
            without error [1/s].
        cocontraction_delta_s: ``δ``, the weight of the velocity error in ``ε`` [s].
        cocontraction_max: the largest co-contraction (``c``; the grip factor then is
            at most ``grip + c``).
        resist_probability: probability per trial that the operator takes charge
            (resists the guidance: compliance 0.1, co-contracted grip).
        has_intent: False for the passive follower (no plan: hand impedance only).
        tool_mass_kg: the stylus mass in the operator's internal model [kg]; the plan's
            acceleration times (hand + tool mass) is fed forward (an internal model of
            the limb's dynamics: Shadmehr & Mussa-Ivaldi 1994), so that the hand follows
            its minimum-jerk plan and the impedance only handles deviations.
    """

    kind: str
    participant_id: str = ""
    reaction_time_s: float = 0.25
    extrapolation: float = 0.9
    hand_mass_kg: float = 1.2
    hand_stiffness_n_m: float = 250.0
    hand_damping_n_s_m: float = 12.0
    resist_stiffness_gain: float = 1.8
    fitts_a_s: float = 0.35
    fitts_b_s: float = 0.22
    fitts_width_m: float = 0.01
    min_duration_s: float = 0.25
    endpoint_k_s: float = 0.1
    lateral_k_s: float = 0.015
    duration_sd: float = 0.12
    speed_weber: float = 0.10
    velocity_match_sd: float = 0.6
    aim_through: float = 0.2
    aim_through_sd: float = 0.1
    undershoot_z: float = 0.0
    surface_offset_m: float = 0.005
    clutch_margin_m: float = 0.008
    clutch_dwell_s: float = 0.15
    clutch_lookahead_s: float = 0.1
    haptic_cue_weight: float = 0.75
    learning: bool = False
    practice_exponent: float = 0.5
    practice_scale_trials: float = 5.0
    prior_practice_trials: float = 0.0
    guided_practice_credit: float = 0.3
    guidance_reliance: float = 0.5
    overlap: float = 0.75
    replan_interval_s: float = 0.3
    replan_deviation_m: float = 0.005
    correction_latency_s: float = 0.12
    noise_const_n: float = 0.05
    noise_gain: float = 0.08
    noise_tau_s: float = 0.04
    compliance: float = 0.7
    yield_tau_s: float = 0.15
    yield_force_n: float = 0.5
    relaxed_grip: float = 0.3
    disagree_weight: float = 1.0
    cocontraction_rate: float = 200.0
    cocontraction_decay: float = 0.5
    cocontraction_delta_s: float = 0.05
    cocontraction_max: float = 1.0
    resist_probability: float = 0.1
    has_intent: bool = True
    tool_mass_kg: float = 0.05
    forward_model_gain: float = 0.85
    offset_learn_s: float = 1.0

    def as_dict(self) -> dict[str, object]:
        """Plain-data form recorded with the trial metadata."""
        return asdict(self)


#: The practice [trials] the ``expert`` preset stands for in the learning law
#: (``haptics.learning``, eq. L2; the model's assumption).
EXPERT_PRACTICE_TRIALS = 30.0

#: The built-in participant kinds (the one list of their names) and their parameters.
#: Values from the sources in :mod:`haptics.operators`' docstring; "expert" reacts faster, predicts
#: fully, moves more accurately and matches velocity better.
PARTICIPANT_PRESETS: Registry[ParticipantParams] = Registry("participant kind")
for _preset in (
    ParticipantParams(kind="novice"),
    ParticipantParams(
        kind="expert",
        reaction_time_s=0.2,
        extrapolation=1.0,
        forward_model_gain=1.0,
        hand_stiffness_n_m=300.0,
        hand_damping_n_s_m=14.0,
        endpoint_k_s=0.04,
        lateral_k_s=0.008,
        duration_sd=0.07,
        speed_weber=0.06,
        velocity_match_sd=0.25,
        aim_through=0.0,
        aim_through_sd=0.03,
        undershoot_z=1.5,
        replan_interval_s=0.2,
        noise_gain=0.05,
        compliance=0.75,
    ),
    ParticipantParams(
        kind="passive",
        hand_mass_kg=0.8,
        hand_stiffness_n_m=0.0,
        hand_damping_n_s_m=4.0,
        noise_const_n=0.02,
        noise_gain=0.0,
        compliance=1.0,
        resist_probability=0.0,
        cocontraction_rate=0.0,
        has_intent=False,
    ),
):
    PARTICIPANT_PRESETS.register(_preset.kind, _preset)
#: Learning participants (``haptics.learning``): a novice and an expert whose skill
#: changes with practice in the study (the model's assumption).
PARTICIPANT_PRESETS.register(
    "novice-learner", replace(PARTICIPANT_PRESETS["novice"], kind="novice-learner", learning=True))
PARTICIPANT_PRESETS.register(
    "expert-learner", replace(PARTICIPANT_PRESETS["expert"], kind="expert-learner", learning=True,
                              prior_practice_trials=EXPERT_PRACTICE_TRIALS))


#: Parameters that are fractions in [0, 1].
_UNIT_FRACTIONS = frozenset({
    "extrapolation", "forward_model_gain", "compliance", "relaxed_grip", "resist_probability", "haptic_cue_weight",
    "guided_practice_credit", "guidance_reliance", "overlap", "disagree_weight",
})
#: Parameters that must be strictly positive (time constants, masses, sizes, scales).
_POSITIVE = frozenset({
    "hand_mass_kg", "fitts_width_m", "min_duration_s", "noise_tau_s", "yield_tau_s", "offset_learn_s",
    "practice_scale_trials", "replan_interval_s", "replan_deviation_m",
})
#: Upper bounds beyond which the operator model would not be an operator (the percept
#: buffer is sized by the reaction time) [the parameter's unit].
_UPPER = {"reaction_time_s": 2.0, "aim_through": 1.0}
#: Lower bounds other than 0.
_LOWER = {"aim_through": -1.0}


def parameter_names() -> tuple[str, ...]:
    """The :class:`ParticipantParams` fields a study may set per trial (all but ``kind``
    and ``participant_id``), in declaration order."""
    return tuple(f.name for f in fields(ParticipantParams) if f.name not in ("kind", "participant_id"))


def parameter_problem(name: str, value: object) -> str | None:
    """Why ``value`` cannot be participant parameter ``name`` (None: it can).

    Numbers must be finite and within the parameter's range (fractions in [0, 1], time
    constants, masses and sizes > 0, ``reaction_time_s`` at most 2 s, ``aim_through`` in
    [-1, 1], everything else >= 0); ``learning`` and ``has_intent`` take booleans.
    """
    names = parameter_names()
    if name not in names:
        close = suggestion(name, names)
        hint = f" (did you mean {close!r}?)" if close else ""
        return f"unknown participant parameter{hint}; expected one of {', '.join(names)}"
    if isinstance(getattr(PARTICIPANT_PRESETS["novice"], name), bool):
        return None if isinstance(value, bool) else f"expected true or false, got {value!r}"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"expected a finite number, got {value!r}"
    low = _LOWER.get(name, 0.0)
    high = 1.0 if name in _UNIT_FRACTIONS else _UPPER.get(name, math.inf)
    if name in _POSITIVE and not value > 0.0:
        return f"expected a number > 0, got {value!r}"
    if not low <= value <= high:
        bounds = f">= {low:g}" if math.isinf(high) else f"in [{low:g}, {high:g}]"
        return f"expected a number {bounds}, got {value!r}"
    return None
