"""`capture-trainer bench mixed`: Yang & Konno's mixed force/motion command over a delay.

Moves a captured payload 0.1 m and stops it (``robot.mixed_command.simulate_transfer``)
with the virtual-arm scheme (eq. 3 in full, the operator on the ground-side prediction),
with direct delayed commands (eq. 3 without the virtual arm, the operator on the delayed
slave) and with plain velocity commands (no local force feedback either), for each
payload mass and one-way delay; reports their metric, the mean square of the slave's
force (eq. 11), the peak force and the final error. One JSON object with ``--json``.
"""

from __future__ import annotations

import argparse
import json

#: The delays of the issue's study [s].
DELAYS_S = (0.0, 0.25, 0.5, 1.0, 2.0, 5.0)


def add_bench(subparsers: argparse._SubParsersAction) -> None:
    """Register ``bench mixed``."""
    parser = subparsers.add_parser("mixed", help="slave force MSE of the mixed force/motion command (virtual arm) "
                                   "against direct delayed commands, per payload mass and delay")
    parser.add_argument("--mass", type=float, nargs="+", default=[500.0, 4500.0], help="payload masses [kg]")
    parser.add_argument("--scenario", help="take the payload mass from this scenario's [debris] mass_kg instead")
    parser.add_argument("--delay", type=float, nargs="+", default=list(DELAYS_S), help="one-way delays [s]")
    parser.add_argument("--model-error", type=float, default=0.2,
                        help="relative error of the ground's payload-mass model (default 0.2)")
    parser.add_argument("--duration", type=float, default=60.0, help="simulated seconds per run (default 60)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from robot.mixed_command import SCHEMES, simulate_transfer

    masses = args.mass
    if args.scenario is not None:
        from trials.vocabulary import load_scenario

        masses = [load_scenario(args.scenario).debris.mass_kg]
    rows = []
    for mass in masses:
        for delay in args.delay:
            for scheme in SCHEMES:
                result = simulate_transfer(scheme, mass_kg=mass, delay_s=delay, model_error=args.model_error,
                                           duration_s=args.duration)
                rows.append({"mass_kg": mass, "delay_s": delay, "scheme": scheme,
                             "force_mse_n2": result.force_mse_n2, "peak_force_n": result.peak_force_n,
                             "final_error_m": result.final_error_m})
    if args.json:
        print(json.dumps({"model_error": args.model_error, "duration_s": args.duration, "runs": rows}))
        return 0
    print(f"{'mass kg':>8} {'delay s':>8} {'scheme':>9} {'MSE(f_s) N²':>14} {'peak N':>10} {'error m':>9}")
    for row in rows:
        print(f"{row['mass_kg']:8.0f} {row['delay_s']:8.2f} {row['scheme']:>9} {row['force_mse_n2']:14.4g} "
              f"{row['peak_force_n']:10.4g} {row['final_error_m']:9.4f}")
    return 0
