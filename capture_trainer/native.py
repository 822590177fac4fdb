"""Compile the project's small C libraries with the system C compiler, cached by source hash.

Three libraries are built this way, each from one C file shipped in the package: the
OpenHaptics backend's servo callback (``haptics/native/hd_servo.c``, see
``haptics._hd_servo``), the libHD test double (``haptics/libhd-double``) and the fused
tick's PyBullet plant step (``robot/native/pb_plant.c``, see ``robot.pybullet_native``).
No binary is committed; a library is rebuilt only when its source changes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from capture_trainer.errors import CaptureTrainerError, DeviceError


def build_library(source: Path, out_dir: str | Path | None = None, soname: str | None = None,
                  error: type[CaptureTrainerError] = DeviceError) -> Path:
    """Compile ``source`` into ``out_dir/<soname or lib<stem>.so>`` and return its path.

    The result is cached by the source's hash: an up-to-date library is reused, and a
    concurrent build never exposes a half-written file.

    Args:
        source: the C file.
        out_dir: where to put the library (default: a per-user cache under the temp dir).
        soname: the file and ``DT_SONAME`` name (default ``lib<stem>.so``).
        error: the error raised (the caller's domain: a device's, the plant's).

    Raises:
        error: no C compiler, or the compilation failed (with its output).
    """
    name = soname or f"lib{source.stem}.so"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    if out_dir is None:
        out_dir = Path(tempfile.gettempdir()) / f"capture-trainer-native-{os.getuid()}" / f"{source.stem}-{digest}"
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    target = out / name
    stamp = out / f"{name}.sha256"
    if target.is_file() and stamp.is_file() and stamp.read_text() == digest:
        return target
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        raise error(f"no C compiler (cc) found to build {source.name}; install one (e.g. gcc)")
    partial = out / f"{name}.{os.getpid()}.tmp"
    cmd = [compiler, "-shared", "-fPIC", "-O2", "-Wall", "-pthread", f"-Wl,-soname,{name}",
           "-o", str(partial), str(source), "-lm"]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise error(f"building {source.name} failed ({' '.join(cmd)}):\n{result.stderr}")
    partial.replace(target)  # atomic: concurrent builders never load a half-written file
    stamp.write_text(digest)
    return target
