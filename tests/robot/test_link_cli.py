"""`capture-trainer arm keys|serve|status|link-test` as documented: keys owner-only, the
server started from the CLI, the link figures as one JSON object, refusals in one line."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.cli import main


def test_keys_are_made_once_and_owner_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "keys"
    assert main(["arm", "keys", str(folder)]) == 0
    written = [Path(line) for line in capsys.readouterr().out.split()]
    assert len(written) == 4 and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in written)
    assert main(["arm", "keys", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--force" in err


@pytest.mark.parametrize("argv", [
    ["arm", "serve", "--model", "planar-3r", "--bind", "0.0.0.0:5599"],
    ["arm", "link-test", "192.0.2.1:5599", "--duration", "1"],
    ["arm", "status", "arm.example:5599"],
])
def test_off_loopback_without_keys_is_refused_in_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "non-loopback" in err and "arm keys" in err


def test_serve_status_and_link_test_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keys = tmp_path / "keys"
    assert main(["arm", "keys", str(keys)]) == 0
    server = subprocess.Popen([sys.executable, "-m", "app.cli", "arm", "serve", "--model", "spatial-7dof", "--bind",
                               "tcp://127.0.0.1:*", "--keys", str(keys)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        deadline = time.monotonic() + 60.0
        line = ""
        while not line.startswith("listening") and time.monotonic() < deadline:
            line = server.stdout.readline()
        endpoint = line.split()[1]
        capsys.readouterr()
        assert main(["arm", "status", endpoint, "--keys", str(keys), "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert status["status"] == "idle" and status["model"] == "spatial-7dof" and status["n_joints"] == 7
        for mode, transport in (("lockstep", "udp"), (None, "udp"), ("lockstep", "zmq")):
            options = ["--no-stream"] if transport == "zmq" else []
            options += ["--mode", mode] if mode else []
            assert main(["arm", "link-test", endpoint, "--keys", str(keys), "--duration", "0.5", "--json",
                         *options]) == 0
            mode = mode or "realtime"  # the default: the arm's real-time loop, as a real arm runs
            figures = json.loads(capsys.readouterr().out)
            assert figures["mode"] == mode and figures["model"] == "spatial-7dof"
            assert figures["transport"] == transport  # loopback: the datagram stream unless --no-stream
            # how many commands 0.5 s holds depends on the machine's load: a measurement
            # (`arm link-test --duration 60`), not a test; every one sent must be applied
            assert figures["sent"] > 0 and figures["lost"] == 0 and figures["applied"] == figures["sent"]
            assert figures["rejected"] == dict.fromkeys(figures["rejected"], 0)
            assert 0.0 < figures["rtt_median_us"] <= figures["rtt_p99_us"] <= figures["rtt_max_us"]
            assert 0.0 < figures["achieved_rate_hz"] < 1100.0  # paced at 1 kHz: never faster
        # without keys the CURVE server does not answer: one line, exit 2
        assert main(["arm", "status", endpoint]) == 2
        assert capsys.readouterr().err.count("\n") == 1
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert server.returncode == 0  # SIGTERM stops the server cleanly


def test_a_link_that_does_not_hold_is_reported_not_hidden(capsys: pytest.CaptureFixture[str]) -> None:
    from robot.backends import ARM_BACKENDS
    from robot.link.server import LinkServer
    from robot.models import MODELS

    # a watchdog of one period (1 ms) and commands every 2 ms: the first gap halts the arm
    # (at 1 kHz a client that happens to stay on time for the whole test would hold)
    with LinkServer(MODELS["planar-3r"], ARM_BACKENDS.get("pybullet"), "tcp://127.0.0.1:*",
                    watchdog_periods=1) as server:
        server.start()
        code = main(["arm", "link-test", server.endpoint, "--duration", "2", "--rate", "500", "--mode", "realtime",
                     "--json"])
    figures = json.loads(capsys.readouterr().out)
    assert code == 1
    assert "watchdog" in figures["halted"] and figures["duration_s"] < 2.0
    # what was sent after the halt was refused as such, and counted as lost
    assert figures["applied"] > 0 and figures["sent"] - figures["applied"] == figures["rejected"]["halted"]
    assert figures["lost"] == figures["sent"] - figures["applied"]
