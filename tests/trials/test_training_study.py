"""A phased study end to end (a few trials): the fading schedule's authority follows the
participant's measured errors, the authority scales the guidance force, and the report
has the training section, labelled as the model's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from capture_trainer import trial_log
from capture_trainer.errors import TrialError
from trials.protocol import load_protocol
from trials.runner import TrialRequest, build_trial
from trials.study import TRIALS_DIR, run_study, scheduled_authority
from trials.protocol import TrialSpec

PROTOCOL = """
name = "tiny-training"
seed = 5
scenarios = ["paper-2019"]
participants = { kind = "simulated", count = 1, mix = { expert = 1.0 } }

[groups]
fading-dg = { condition = "dg", schedule = "fading" }

[schedule.fading]
forgetting = 0.9
gain = 0.5
initial = 0.6

[[phases]]
name = "pre-test"
condition = "ng"

[[phases]]
name = "training"
condition = "group"
trials = 2

[[phases]]
name = "transfer"
condition = "ng"
scenarios = ["side-approach"]
"""


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-training")
    path = folder / "tiny.toml"
    path.write_text(PROTOCOL)
    result = run_study(load_protocol(path), folder / "out", progress=None)
    assert result.ran == 4 and not result.failed
    return folder / "out"


def _metadata(study: Path, trial_id: str) -> dict:
    return trial_log.read_metadata(study / TRIALS_DIR / f"{trial_id}.parquet")


def test_the_fading_authority_follows_the_measured_error(study: Path) -> None:
    first = _metadata(study, "S01_training_b1_paper-2019_dg_t1")
    second = _metadata(study, "S01_training_b1_paper-2019_dg_t2")
    assert first["guidance_authority"] == pytest.approx(0.6)  # a(0) = initial
    speed = (first["first_contact"] or {}).get("normal_speed_m_s")
    error = 2.0 if speed is None else min(speed / first["capture_rules"]["capture_speed_m_s"], 2.0)
    # a(1) = 0.9 a(0) + 0.5 e(0), clipped to [0, 1]
    expected = min(max(0.9 * 0.6 + 0.5 * error, 0.0), 1.0)
    assert second["guidance_authority"] == pytest.approx(expected, abs=1e-12)
    assert second["guidance_schedule"]["index"] == 1
    assert second["guidance_schedule"]["errors"] == [pytest.approx(error)]
    assert second["study"]["phase"] == "training" and second["study"]["group"] == "fading-dg"
    for unguided in ("S01_pre-test_b1_paper-2019_ng_t1", "S01_transfer_b1_side-approach_ng_t1"):
        meta = _metadata(study, unguided)
        assert meta["guidance_authority"] is None and "guidance_schedule" not in meta


def test_a_scheduled_trial_needs_the_earlier_trials_complete(study: Path, tmp_path: Path) -> None:
    document = json.loads((study / "study.json").read_text())
    entry = next(t for t in document["trials"] if t["trial_id"].endswith("_dg_t2"))
    spec = TrialSpec(**entry)
    assert scheduled_authority(spec, study)["authority"] == pytest.approx(
        _metadata(study, spec.trial_id)["guidance_authority"])
    copy = tmp_path / "copy"
    (copy / TRIALS_DIR).mkdir(parents=True)
    (copy / "study.json").write_text((study / "study.json").read_text())
    with pytest.raises(TrialError, match="earlier trial"):
        scheduled_authority(spec, copy)


def test_the_report_has_the_training_section_labelled_as_the_model(study: Path) -> None:
    from analysis.report import _training_section
    from analysis.study import open_study
    from analysis.training import training_table

    opened = open_study(study)
    table = training_table(opened)
    assert list(table["phase"]) == ["pre-test", "training", "training", "transfer"]
    assert list(table["step"]) == [0, 1, 1, 2]
    assert table["guidance_authority"].iloc[1] == pytest.approx(0.6)
    text = _training_section(opened)  # the section the report adds (the whole report takes seconds)
    assert "<h2>Training and transfer</h2>" in text
    assert "Simulated participants" in text and "not findings about people" in text


def _first_forces(tmp_path: Path, authority: float) -> tuple[np.ndarray, np.ndarray, float]:
    request = TrialRequest(scenario="paper-2019", condition="dg", participant="passive", seed=3,
                           trial_id=f"g{authority}", time_limit_s=0.02, guidance_authority=authority)
    trial = build_trial(request, tmp_path)
    summary = trial.run()
    table, metadata = trial_log.read_trial_log(summary["path"])
    calc = np.column_stack([table[c].to_numpy() for c in trial_log.DEVICE_FORCE_CALCULATED])
    act = np.column_stack([table[c].to_numpy() for c in trial_log.DEVICE_FORCE_ACTUATED])
    assert metadata["guidance_authority"] == authority
    return calc, act, float(metadata["device"]["max_force_n"])


def test_the_authority_scales_the_calculated_force_and_the_safety_layer_still_clamps(tmp_path: Path) -> None:
    full, _, _ = _first_forces(tmp_path, 1.0)
    half, _, _ = _first_forces(tmp_path, 0.5)
    # the first tick: the same state, so exactly half the force (no fixture acts at the start)
    assert np.linalg.norm(full[0]) > 1.0
    np.testing.assert_allclose(half[0], 0.5 * full[0], rtol=1e-9, atol=1e-12)
    augmented, actuated, max_force = _first_forces(tmp_path, -2.0)
    np.testing.assert_allclose(augmented[0], -2.0 * full[0], rtol=1e-9, atol=1e-12)
    assert np.all(np.isfinite(actuated))
    assert np.max(np.abs(actuated)) <= max_force + 1e-9
    with pytest.raises(TrialError, match="authority"):
        build_trial(TrialRequest(scenario="paper-2019", condition="dg", participant="passive",
                                 guidance_authority=float("inf")), tmp_path)
