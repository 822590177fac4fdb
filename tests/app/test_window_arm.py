"""`train --arm ADDR` / `session ... --arm ADDR`: the trainer's attempts carry the arm
server's address and keys to the trial the servo process builds (real time over the
link; the link itself is tested in tests/robot/test_link_*.py).

An end-to-end attempt with the arm server on the same 2-core machine as the window and
the servo process does not hold the link's 10 ms watchdog (measured: silences of 10-32 ms
while three busy processes share two cores), so the served arm belongs on its own machine
or cores; this test checks the wiring, not the timing."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from app.cli import build_parser
from app.commands.window import _config
from app.ui.servo import AttemptSpec, ServoOptions, _request
from trials.runner import TrialRequest


def test_train_and_session_take_the_arm_and_its_keys(tmp_path: Path) -> None:
    args = build_parser().parse_args(["train", "--arm", "10.0.0.7:5557", "--keys", str(tmp_path)])
    config = _config(args)
    assert (config.arm, config.arm_keys) == ("10.0.0.7:5557", str(tmp_path))
    args = build_parser().parse_args(["session", "paper-2019", "--participant", "P01", "--device", "mouse",
                                      "--arm", "127.0.0.1:5557"])
    assert _config(args).arm == "127.0.0.1:5557" and _config(args).arm_keys is None


def test_an_attempt_builds_a_real_time_trial_on_the_served_arm(tmp_path: Path) -> None:
    spec = AttemptSpec(scenario="paper-2019", condition="dg", participant="ada", seed=3, out_dir=str(tmp_path),
                       device="mouse", arm="127.0.0.1:5557", arm_keys=str(tmp_path / "keys"))
    request = _request(spec, TrialRequest, ServoOptions())
    assert (request.arm, request.arm_keys) == ("127.0.0.1:5557", str(tmp_path / "keys"))
    assert request.paced  # a person watches: the link runs in real time, not lock-step
    # every TrialRequest field an attempt can set is one the runner knows
    # countdown_s is the servo's own (its hold before the first tick), not the runner's
    assert {f.name for f in fields(AttemptSpec)} - {"out_dir", "metadata", "countdown_s"} <= {
        f.name for f in fields(TrialRequest)}


def test_train_takes_the_delayed_link_in_si(tmp_path: Path) -> None:
    args = build_parser().parse_args(["train", "--delay-ms", "400", "--jitter-ms", "20", "--loss", "0.01"])
    config = _config(args)
    assert (config.delay_s, config.jitter_s, config.loss) == (0.4, 0.02, 0.01)
    spec = AttemptSpec(scenario="paper-2019", condition="dg", participant="ada", seed=3, out_dir=str(tmp_path),
                       device="mouse", delay_s=config.delay_s, jitter_s=config.jitter_s, loss=config.loss)
    request = _request(spec, TrialRequest, ServoOptions())
    assert (request.delay_s, request.jitter_s, request.loss) == (0.4, 0.02, 0.01)
