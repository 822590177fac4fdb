"""Build the libHD test double (``haptics/libhd-double/libhd_double.c``, package data).

The double is a small C library emulating the subset of OpenHaptics' HD API this
project (and pyOpenHaptics) calls, with a 1 kHz scheduler thread and a scripted stylus.
The test suite and ``capture-trainer bench device-loop`` build it with the system C
compiler; no binary is committed. The source lives in the source tree under ``tests/``;
an installed package without the tree finds it through ``CAPTURE_TRAINER_LIBHD_SRC``.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from capture_trainer.errors import DeviceError

#: Environment variable naming the double's C source when not in the source tree.
SOURCE_ENV = "CAPTURE_TRAINER_LIBHD_SRC"


def double_source() -> Path:
    """Path of the double's C source.

    Raises:
        DeviceError: neither the package nor ``CAPTURE_TRAINER_LIBHD_SRC`` has it.
    """
    override = os.environ.get(SOURCE_ENV, "").strip()
    candidates = [Path(override)] if override else []
    candidates.append(Path(__file__).resolve().parent / "libhd-double" / "libhd_double.c")
    for path in candidates:
        if path.is_file():
            return path
    raise DeviceError(
        f"the libHD test double's source is not here ({candidates[-1]}): a broken install? "
        f"Reinstall, or set {SOURCE_ENV}=/path/to/libhd_double.c"
    )


def build_double(out_dir: str | Path | None = None) -> Path:
    """Compile the double into ``out_dir/libHD.so`` (soname ``libHD.so``) and return it.

    The result is cached by the source's hash: an up-to-date library is reused.

    Args:
        out_dir: where to put ``libHD.so`` (default: a per-user cache under the temp dir).

    Raises:
        DeviceError: no C compiler, or the compilation failed (with its output).
    """
    source = double_source()
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    if out_dir is None:
        out_dir = Path(tempfile.gettempdir()) / f"capture-trainer-libhd-{os.getuid()}" / digest
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    target = out / "libHD.so"
    stamp = out / "libHD.so.sha256"
    if target.is_file() and stamp.is_file() and stamp.read_text() == digest:
        return target
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        raise DeviceError("no C compiler (cc) found to build the libHD test double")
    partial = out / f"libHD.so.{os.getpid()}.tmp"
    cmd = [compiler, "-shared", "-fPIC", "-O2", "-pthread", "-Wl,-soname,libHD.so",
           "-o", str(partial), str(source), "-lm"]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise DeviceError(f"building the libHD test double failed ({' '.join(cmd)}):\n{result.stderr}")
    partial.replace(target)  # atomic: concurrent builders never load a half-written file
    stamp.write_text(digest)
    return target


class HddStats(ctypes.Structure):
    """The double's ``HddStats`` (``hdd_stats``): what reached its "motors"."""

    _fields_ = [
        ("ticks", ctypes.c_long),
        ("late_ticks", ctypes.c_long),
        ("callback_calls", ctypes.c_long),
        ("force_commits", ctypes.c_long),
        ("nonfinite_forces", ctypes.c_long),
        ("over_limit_sent", ctypes.c_long),
        ("max_sent_norm_n", ctypes.c_double),
        ("max_commanded_norm_n", ctypes.c_double),
        ("force_output_enabled", ctypes.c_int),
        ("clamping_enabled", ctypes.c_int),
        ("wake_late_ticks", ctypes.c_long),
        ("max_wake_late_s", ctypes.c_double),
        ("realtime", ctypes.c_int),
    ]


def double_stats(lib: ctypes.CDLL) -> dict[str, float] | None:
    """The double's counters as a dict, or None when ``lib`` is not the double."""
    if not hasattr(lib, "hdd_stats"):
        return None
    stats = HddStats()
    lib.hdd_stats(ctypes.byref(stats))
    return {name: getattr(stats, name) for name, _ in HddStats._fields_}
