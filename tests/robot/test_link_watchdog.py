"""The watchdogs, timed from outside with real processes: ``capture-trainer arm serve``
in a subprocess; killing the client halts the server within its watchdog (rates ramped
to zero, not held); killing the server faults the client; a halted session faults its
client and never resumes (a new session is explicit)."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from capture_trainer.errors import ArmError
from robot.arm import JointCommand
from robot.backends import ARM_BACKENDS
from robot.link.client import LinkClient
from robot.link.keys import check_address, create_keys, load_client_keys
from robot.models import MODELS

MODEL = MODELS["planar-3r"]
START_S = 60.0  # a cold start may compile the numba kernels
WATCHDOG_S = 0.020  # the server's default: 20 periods at 1 kHz


def read_line(proc: subprocess.Popen, prefix: str, timeout_s: float = START_S) -> str:
    """The first line of ``proc``'s stdout starting with ``prefix`` (PyBullet prints a banner)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if sel.select(0.1):
                line = proc.stdout.readline()
                if not line:
                    break
                if line.startswith(prefix):
                    return line
    raise AssertionError(f"no {prefix!r} line from {proc.args}; stderr: {proc.stderr.read() if proc.stderr else ''}")


@contextlib.contextmanager
def arm_server(keys: Path, *options: str) -> Iterator[tuple[subprocess.Popen, str]]:
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "arm", "serve", "--model", MODEL.name,
                             "--bind", "tcp://127.0.0.1:*", "--keys", str(keys), *options],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        endpoint = read_line(proc, "listening").split()[1]
        yield proc, endpoint
    finally:
        proc.kill()
        proc.wait(timeout=10)


def report(endpoint: str, keys: Path) -> dict[str, Any]:
    client = LinkClient(check_address(endpoint, True, binding=False)[0], load_client_keys(keys))
    try:
        return client.query(timeout_s=2.0)
    finally:
        client.close()


def poll_report(endpoint: str, keys: Path, until, what: str, timeout_s: float = 5.0) -> tuple[float, dict]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = report(endpoint, keys)
        if until(got):
            return time.monotonic(), got
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("link") / "keys"
    create_keys(folder)
    return folder


@pytest.fixture(scope="module")
def served(keys: Path) -> Iterator[str]:
    with arm_server(keys, "--lockstep-timeout", "0.3") as (_, endpoint):
        yield endpoint


CLIENT = textwrap.dedent("""
    import sys
    import time
    import numpy as np
    from robot.arm import JointCommand
    from robot.backends import ARM_BACKENDS
    from robot.models import MODELS

    arm = ARM_BACKENDS.get("remote")(MODELS["planar-3r"], address=sys.argv[1], keys_dir=sys.argv[2],
                                     mode="realtime", timeout_s=1.0)
    rate = np.array([0.5, 0.0, 0.0])
    for k in range(100000):  # about 1 kHz
        arm.advance()
        arm.send(JointCommand(k * 1e-3, arm.state().q_rad.copy(), rate, np.zeros(3)))
        if k == 300:
            print("running", arm.transport, flush=True)
        time.sleep(1e-3)
""")


def test_killing_the_client_halts_the_server_within_its_watchdog(served: str, keys: Path) -> None:
    client = subprocess.Popen([sys.executable, "-c", CLIENT, served, str(keys)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert read_line(client, "running").split()[1] == "udp"  # the commands come as datagrams
        running = report(served, keys)
        assert running["status"] == "running" and running["qd_rad_s"][0] == pytest.approx(0.5, abs=1e-3)
        halts = running["halts"]
        killed = time.monotonic()
        os.kill(client.pid, signal.SIGKILL)
    finally:
        client.kill()
        client.wait(timeout=10)
    seen, tripped = poll_report(served, keys, lambda r: r["halts"] > halts, "the server to halt")
    _, halted = poll_report(served, keys, lambda r: r["status"] == "halted", "the ramp to end")
    assert "watchdog" in tripped["last_halt_reason"]
    # the server's own measure: silence from the last command to the trip
    assert WATCHDOG_S <= halted["last_halt_silence_s"] < WATCHDOG_S + 0.015, halted
    # ramped at the joint's acceleration limit (0.5 rad/s at 20 rad/s^2: 25 periods), not held
    assert 0.020 <= halted["last_halt_ramp_s"] < 0.1, halted
    assert halted["qd_rad_s"] == pytest.approx([0.0, 0.0, 0.0], abs=1e-9)
    assert seen - killed < 0.5  # seen from outside (status polls included)


def test_a_silent_client_sees_its_session_halted_and_reconnecting_is_explicit(served: str, keys: Path) -> None:
    arm = ARM_BACKENDS.get("remote")(MODEL, address=served, keys_dir=keys, mode="realtime", timeout_s=1.0)
    first = arm.session
    try:
        for k in range(50):
            arm.advance()
            arm.send(JointCommand(k * 1e-3, arm.state().q_rad.copy(), np.zeros(3), np.zeros(3)))
            time.sleep(1e-3)
        with pytest.raises(ArmError, match="halted"):
            for _ in range(5000):  # advancing without commanding: the watchdog trips after 20 periods
                arm.advance()
                time.sleep(1e-3)
        with pytest.raises(ArmError, match="halted"):
            arm.measure()  # the fault is latched
    finally:
        arm.close()
    again = ARM_BACKENDS.get("remote")(MODEL, address=served, keys_dir=keys, mode="realtime", timeout_s=1.0)
    try:
        assert again.session != first
        assert np.allclose(again.state().q_rad, MODEL.q0_rad, atol=1e-3)  # a fresh session, a fresh plant
    finally:
        again.close()


def test_a_realtime_client_that_starts_late_commands_from_a_fresh_state(served: str, keys: Path) -> None:
    """A trial builds its arm, then opens its device and controller: the first command
    comes long after the welcome, and must name a state the server deems fresh."""
    arm = ARM_BACKENDS.get("remote")(MODEL, address=served, keys_dir=keys, mode="realtime", timeout_s=1.0)
    try:
        before = report(served, keys)["rejected"]["stale"]
        time.sleep(0.1)  # set-up time, 100 server periods (not a synchronisation)
        for k in range(20):
            state = arm.state()
            arm.send(JointCommand(k * 1e-3, state.q_rad.copy(), np.zeros(3), np.zeros(3)))
            arm.advance()
            time.sleep(1e-3)
        assert arm.state().t_s > 0.1 and arm.fault is None
        assert report(served, keys)["rejected"]["stale"] == before
    finally:
        arm.close()


def test_a_lockstep_session_halts_after_its_timeout(served: str, keys: Path) -> None:
    arm = ARM_BACKENDS.get("remote")(MODEL, address=served, keys_dir=keys)
    try:
        arm.send(JointCommand(0.0, arm.state().q_rad.copy(), np.array([0.2, 0.0, 0.0]), np.zeros(3)))
        arm.advance()
        before = report(served, keys)["rejected"]["halted"]
        poll_report(served, keys, lambda r: r["status"] == "halted", "the lock-step timeout (0.3 s)")
        with pytest.raises(ArmError, match="halted"):
            arm.advance()
        assert report(served, keys)["rejected"]["halted"] == before + 1
    finally:
        arm.close()


@pytest.mark.parametrize("stream", [True, False])
def test_killing_the_server_faults_the_client_within_its_watchdog(keys: Path, stream: bool) -> None:
    timeout_s = 0.020  # the default is 10 ms; a little more keeps a loaded test machine from false alarms
    with arm_server(keys) as (proc, endpoint):
        arm = ARM_BACKENDS.get("remote")(MODEL, address=endpoint, keys_dir=keys, mode="realtime", timeout_s=timeout_s,
                                         stream=stream)
        try:
            assert arm.transport == ("udp" if stream else "zmq")
            for k in range(200):
                arm.advance()
                arm.send(JointCommand(k * 1e-3, arm.state().q_rad.copy(), np.zeros(3), np.zeros(3)))
                time.sleep(1e-3)
            arm.advance()
            killed = time.monotonic()
            proc.kill()
            with pytest.raises(ArmError, match="silent") as info:
                while time.monotonic() < killed + 5.0:
                    arm.advance()
                    time.sleep(1e-4)
            faulted = time.monotonic()
        finally:
            arm.close()
    assert faulted - killed < timeout_s + 0.03, (faulted - killed, str(info.value))


def test_a_paced_trial_runs_over_a_realtime_link(served: str, keys: Path, monkeypatch, tmp_path: Path) -> None:
    """The trial machinery unchanged, on the wall clock, against the arm in another process."""
    import functools

    import trials.runner

    remote = functools.partial(ARM_BACKENDS.get("remote"), address=served, keys_dir=keys, mode="realtime",
                               timeout_s=0.2)
    monkeypatch.setattr(trials.runner, "ARM_BACKENDS", {"pybullet": remote})
    request = trials.runner.TrialRequest(scenario="paper-2019", condition="dg", participant="novice", seed=1,
                                         trial_id="rt", paced=True, time_limit_s=1.0, end_on_capture=False)
    summary = trials.runner.run_trial(request, tmp_path)
    assert summary["end_reason"] == "time_limit" and summary["ticks"] == 1000
    assert report(served, keys)["status"] == "idle"  # the trial's close said bye
