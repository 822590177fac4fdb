"""`capture-trainer bench passivity`: Campbell's "bouncing higher" with and without the
passivity controller (docs/delay.md).

Campbell's free-body test, in one dimension (task ``z``): the operator's end point is a
free mass ``m`` under a bias force ``−m g`` (his simulated g-field), the arm follows its
position over the command path of a delayed link (:class:`trials.delay.DelayLine`), the
tool presses on a spring table ``f = k max(−z_arm, 0)``, and that contact force comes back
over the state path and is rendered on the mass through a compensator's force path
(:mod:`trials.compensators`, scale 1). Without delay the mass bounces back to the height
it fell from (a spring conserves energy); with a round trip ``τ`` the spring acts as
``−k x(t − τ) ≈ −k x + k τ ẋ``, a negative damper: each bounce multiplies the energy by
about ``exp(π ω τ / sqrt(1 − (ω τ / 2)²))`` with ``ω = sqrt(k/m)`` (the restitution of a
spring-damper of damping ratio ``−ω τ / 2``). The passivity controller keeps the energy
observed at the port non-negative, so the bounces cannot grow.

Prints, per compensator, the apex energies, the energy ratio per bounce and the observed
port energy's minimum; one JSON object with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass

import numpy as np

#: Campbell-like defaults: a 0.5 kg end point, a 2 m/s² field, a 200 N/m table (ω = 20 rad/s).
MASS_KG = 0.5
FIELD_M_S2 = 2.0
STIFFNESS_N_M = 200.0
DROP_M = 0.05
DT_S = 1e-3


@dataclass(frozen=True)
class BounceResult:
    """One run.

    Attributes:
        compensator: the compensator's name; delay_s: one-way delay [s].
        apex_energy_j: the end point's energy ``m g z`` at each apex, the drop first [J].
        energy_ratio_per_bounce: geometric mean of consecutive apex-energy ratios.
        min_port_energy_j: the smallest energy observed at the contact port [J].
        dissipated_j: what the passivity controller took out [J].
        predicted_ratio: ``exp(π ω τ / sqrt(1 − (ω τ/2)²))`` for the round trip ``τ`` (the
            linearised delay, module docstring).
    """

    compensator: str
    delay_s: float
    apex_energy_j: tuple[float, ...]
    energy_ratio_per_bounce: float
    min_port_energy_j: float
    dissipated_j: float
    predicted_ratio: float


def bounce(compensator: str, delay_s: float, duration_s: float = 3.0, *, mass_kg: float = MASS_KG,
           field_m_s2: float = FIELD_M_S2, stiffness_n_m: float = STIFFNESS_N_M, drop_m: float = DROP_M,
           dt_s: float = DT_S) -> BounceResult:
    """Drop the end point from ``drop_m`` and let it bounce for ``duration_s`` [s]."""
    from trials.compensators import CompensatorConfig, make_compensator
    from trials.delay import DelayConfig, DelayLine

    config = DelayConfig(delay_s=delay_s)
    command, state = DelayLine(1, config, dt_s, 1), DelayLine(1, config, dt_s, 2)
    shaper = make_compensator(CompensatorConfig(name=compensator, contact_feedback=True, contact_force_scale=1.0,
                                                max_damping_n_s_m=1e6), dt_s)
    z, v = drop_m, 0.0
    arm = np.array([drop_m])
    contact = np.zeros(1)
    sample = np.zeros(1)
    force, position = np.zeros(3), np.zeros(3)
    apexes = [mass_kg * field_m_s2 * drop_m]
    for k in range(int(round(duration_s / dt_s))):
        t = k * dt_s
        sample[0] = z
        command.send(t, sample)
        command.receive(t, arm)
        sample[0] = stiffness_n_m * max(-arm[0], 0.0)
        state.send(t, sample)
        state.receive(t, contact)
        force[2], position[2] = contact[0], z
        shaper.shape(t, force, position)
        v_before = v
        v += (force[2] / mass_kg - field_m_s2) * dt_s
        z += v * dt_s
        if v_before > 0.0 >= v and z > 0.0:
            apexes.append(mass_kg * field_m_s2 * z + 0.5 * mass_kg * v * v)
    ratios = [b / a for a, b in zip(apexes, apexes[1:]) if a > 0.0]
    mean_ratio = math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios and min(ratios) > 0 else math.nan
    omega = math.sqrt(stiffness_n_m / mass_kg)
    tau = 2.0 * delay_s
    figures = shaper.metadata()
    return BounceResult(compensator=compensator, delay_s=delay_s, apex_energy_j=tuple(apexes),
                        energy_ratio_per_bounce=mean_ratio, min_port_energy_j=float(figures["min_energy_j"]),
                        dissipated_j=float(figures["dissipated_j"]),
                        predicted_ratio=math.exp(math.pi * omega * tau / math.sqrt(1.0 - (omega * tau / 2.0) ** 2)))


def add_bench(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench passivity``."""
    parser = subparsers.add_parser("passivity", help="Campbell's bouncing-higher test: energy per bounce with "
                                   "delay, without and with the passivity controller")
    parser.add_argument("--delay-ms", type=float, default=5.0, help="one-way delay [ms] (default 5)")
    parser.add_argument("--duration", type=float, default=3.0, help="simulated seconds (default 3)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    results = {name: bounce(name, args.delay_ms * 1e-3, args.duration) for name in ("none", "passivity")}
    if args.json:
        print(json.dumps({name: asdict(result) for name, result in results.items()}))
        return 0
    for name, result in results.items():
        print(f"{name}: energy ratio per bounce {result.energy_ratio_per_bounce:.3f} (linearised "
              f"prediction {result.predicted_ratio:.3f}), apex energies "
              f"{', '.join(f'{e * 1e3:.2f}' for e in result.apex_energy_j[:6])} mJ, min port energy "
              f"{result.min_port_energy_j * 1e3:.3f} mJ, dissipated {result.dissipated_j * 1e3:.2f} mJ")
    return 0
