"""The scenario seed means something: with the participant, repetition and run seed it
gives the trial's seed, the same in every process."""

from __future__ import annotations

import subprocess
import sys

import pytest

from scenarios.seeding import trial_seed


def test_the_trial_seed_is_pinned_and_the_same_in_another_process() -> None:
    assert trial_seed(2019, "P01", 0, 0) == 2319680784
    code = "from scenarios.seeding import trial_seed; print(trial_seed(2019, 'P01', 0, 0))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert int(out.stdout) == 2319680784


@pytest.mark.parametrize(
    "changed",
    [(2020, "P01", 0, 0), (2019, "P02", 0, 0), (2019, "P01", 1, 0), (2019, "P01", 0, 1)],
    ids=["scenario seed", "participant", "repetition", "run seed"],
)
def test_every_part_changes_the_seed(changed: tuple[int, str, int, int]) -> None:
    assert trial_seed(*changed) != trial_seed(2019, "P01", 0, 0)


def test_seeds_are_32_bit_and_spread() -> None:
    seeds = {trial_seed(scenario, "novice", repetition) for scenario in range(50) for repetition in range(20)}
    assert len(seeds) == 1000 and all(0 <= seed < 2**32 for seed in seeds)
