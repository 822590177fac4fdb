"""`capture-trainer devices`: every backend listed, probed, with a reason."""

from __future__ import annotations

import json
import subprocess
import sys

from haptics.backends import BACKENDS


def _devices(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "devices", *args],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )


def test_devices_without_libhd_says_what_to_install(subprocess_env) -> None:
    result = _devices(subprocess_env(DISPLAY="", WAYLAND_DISPLAY=""), "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)["backends"]}
    assert tuple(rows) == BACKENDS.names()
    assert rows["openhaptics"]["available"] is False
    assert "OpenHaptics" in rows["openhaptics"]["reason"] and "Touch" in rows["openhaptics"]["reason"]
    assert rows["mouse"]["available"] is False and "display" in rows["mouse"]["reason"]
    assert all(row["reason"] for row in rows.values())


def test_devices_with_the_double_finds_the_touch(subprocess_env, libhd_double) -> None:
    result = _devices(subprocess_env(CAPTURE_TRAINER_LIBHD=str(libhd_double)))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for name in BACKENDS.names():
        assert any(line.startswith(name) for line in lines), result.stdout
    (openhaptics,) = [line for line in lines if line.startswith("openhaptics")]
    assert "unavailable" not in openhaptics and "available" in openhaptics
    assert "3D Systems Touch" in result.stdout


def test_devices_with_libhd_but_no_device(subprocess_env, libhd_double) -> None:
    env = subprocess_env(CAPTURE_TRAINER_LIBHD=str(libhd_double), LIBHD_DOUBLE_NO_DEVICE="1")
    result = _devices(env, "--json")
    rows = {row["name"]: row for row in json.loads(result.stdout)["backends"]}
    assert rows["openhaptics"]["available"] is False
    assert "HD_DEVICE_FAULT" in rows["openhaptics"]["reason"]
