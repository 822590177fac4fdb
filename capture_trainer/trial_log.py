"""The trial log format: the one contract between `trials` (writer) and `analysis` (reader).

One Parquet file per trial, one row per servo tick. Columns carry their SI unit in the
name; vectors are split into ``_x``, ``_y``, ``_z`` columns (planar models record z = 0).
Positions, velocities and forces are in the **task frame** (the robot's inertial frame)
unless the name starts with ``dev_`` (the haptic device's frame).

The trial's metadata is one JSON object stored under the key ``capture_trainer`` of the
Parquet file's key-value metadata (see :data:`METADATA_KEYS`); its ``format_version`` is
the version of this contract the file was written with.

This module is the whole contract: the column names and units, the flags, the metadata
keys and their size bounds, the schema the writer builds (:class:`LogSchema`), how a file
is written (:func:`write_file`) and the one reader (:func:`read_trial_log`,
:func:`read_metadata`). ``trials.recorder`` writes through it and ``analysis`` reads
through it. pyarrow is imported only by the functions that need it.

How a file is written: the writer rewrites the whole file atomically (a temporary file,
then ``os.replace``) about twice a second, never appending to it, because Parquet writes
its footer (schema, row-group index, key-value metadata) only when a file is closed; a
file appended to row group by row group is unreadable until then, so a crash or a full
disk would lose every row. With atomic rewrites the path always holds the last complete
write: a crashed trial leaves a readable file marked ``complete: false``, and so does a
write that fails (its temporary file is removed, the previous file is untouched).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from capture_trainer.errors import TrialLogError

if TYPE_CHECKING:
    import pyarrow as pa

#: The version this package writes; it reads every version up to this one.
FORMAT_VERSION = 4
#: Version 2 added the contact columns (:data:`CONTACT_FORCE`, :data:`DEBRIS_ANGULAR_VELOCITY`),
#: the ``contact`` and ``captured`` flags and the outcome metadata; version-1 files lack them.
CONTACT_FORMAT_VERSION = 2
#: Version 3 added the post-capture columns (:data:`POST_CAPTURE_COLUMNS`: behaviour,
#: state, attractor, contact wrench and its limit) and the ``post_capture`` metadata;
#: version-1 and version-2 files lack them.
POST_CAPTURE_FORMAT_VERSION = 3
#: Version 4 added the master columns (:data:`MASTER_COLUMNS`: the hand's force on the
#: stylus and the master force the arm's side used); earlier files lack them.
MASTER_FORMAT_VERSION = 4
METADATA_KEY = b"capture_trainer"
AXES = ("x", "y", "z")


def vector_columns(stem: str, unit: str) -> tuple[str, str, str]:
    """Column names of a 3-vector signal, e.g. ``vector_columns("ee", "m")``."""
    return tuple(f"{stem}_{axis}_{unit}" for axis in AXES)  # type: ignore[return-value]


TIME = "t_s"
#: End-effector position and velocity measured on the plant [m], [m/s], task frame.
EE_POSITION = vector_columns("ee", "m")
EE_VELOCITY = vector_columns("ee_v", "m_s")
#: Debris (target) centre position and velocity [m], [m/s], task frame.
TARGET_POSITION = vector_columns("target", "m")
TARGET_VELOCITY = vector_columns("target_v", "m_s")
#: End-effector position and velocity commanded to the slave controller, task frame.
COMMAND_POSITION = vector_columns("cmd", "m")
COMMAND_VELOCITY = vector_columns("cmd_v", "m_s")
#: Stylus position and velocity [m], [m/s], device frame.
DEVICE_POSITION = vector_columns("dev", "m")
DEVICE_VELOCITY = vector_columns("dev_v", "m_s")
#: Guidance force as the law computed it [N], task frame (before any mapping or limit).
GUIDANCE_FORCE = vector_columns("guide_force", "n")
#: Calculated force (mapped to the device frame, before saturation) and actuated force
#: (what was sent to the device after every limit) [N], device frame.
DEVICE_FORCE_CALCULATED = vector_columns("dev_force_calc", "n")
DEVICE_FORCE_ACTUATED = vector_columns("dev_force_act", "n")
#: Reaction torque on the base about its centre of mass [N m], measured on the plant
#: (from the rate of change of the base's angular momentum), task frame.
BASE_TORQUE = vector_columns("base_torque", "n_m")
#: Base attitude as a rotation vector from its initial attitude [rad], task frame.
BASE_ATTITUDE = vector_columns("base_att", "rad")
#: Base angular velocity [rad/s], task frame.
BASE_ANGULAR_VELOCITY = vector_columns("base_w", "rad_s")
#: Smallest singular value of M (I - J+ J) divided by ||M|| (reaction singularity gauge).
SIGMA_RATIO = "sigma_ratio"
#: Contact force the capture tool exerts on the debris [N], task frame (zero without
#: contact and after the tool has closed: the closed tool's constraint is not a contact).
CONTACT_FORCE = vector_columns("contact_force", "n")
#: The debris' angular velocity [rad/s], task frame.
DEBRIS_ANGULAR_VELOCITY = vector_columns("debris_w", "rad_s")
#: Post-capture behaviours (version 3): the task state's index into metadata
#: ``post_capture.states`` and the behaviour kind's into ``post_capture.behaviours``, the
#: admittance controller's virtual attractor [m], the contact wrench of the fixtures on
#: the payload (force [N]; torque about the end effector [N m]), task frame, and the
#: running behaviour's wrench limit [N]. Outside a running task they hold
#: :data:`POST_CAPTURE_IDLE` (no NaN, so that identical trials compare equal).
STATE_INDEX = "state_index"
BEHAVIOUR_INDEX = "behaviour_index"
ATTRACTOR_POSITION = vector_columns("attractor", "m")
WRENCH_FORCE = vector_columns("wrench_force", "n")
WRENCH_TORQUE = vector_columns("wrench_torque", "n_m")
WRENCH_LIMIT = "wrench_limit_n"
POST_CAPTURE_COLUMNS = (STATE_INDEX, BEHAVIOUR_INDEX) + ATTRACTOR_POSITION + WRENCH_FORCE + WRENCH_TORQUE + (
    WRENCH_LIMIT,)
#: The post-capture columns outside a running task: no state (-1), no behaviour (-1),
#: attractor and wrench zero, no limit (inf).
POST_CAPTURE_IDLE = (-1.0, -1.0) + (0.0,) * 9 + (float("inf"),)
#: The master side (version 4): the hand's force on the stylus [N], task frame, on the
#: operator's side as it was sent (zeros when nothing measures it: the controller, a
#: device without a force sensor), and ``f_m`` [N], the master force along the press
#: axis that the arm's side used this tick in Yang & Konno's mixed command (the hand's,
#: as it arrived over the delayed link, or the scripted master's; 0 outside a ``mixed``
#: run).
HAND_FORCE = vector_columns("hand_force", "n")
MASTER_FORCE = "master_force_n"
MASTER_COLUMNS = HAND_FORCE + (MASTER_FORCE,)


def joint_position_column(index: int) -> str:
    """Joint angle column of joint ``index`` (0-based) [rad]."""
    return f"q{index}_rad"


def joint_velocity_column(index: int) -> str:
    """Joint rate column of joint ``index`` (0-based) [rad/s]."""
    return f"qd{index}_rad_s"


#: Boolean flags per tick.
FLAG_ENGAGED = "engaged"  # the person holds the engage button (force allowed)
FLAG_CLUTCH = "clutch"  # clutch (indexing) active: stylus decoupled from the arm
FLAG_SATURATED = "saturated"  # the actuated force differs from the calculated one
FLAG_FAULT = "fault"  # non-finite value caught, backend error, or latched fault
FLAG_WATCHDOG = "watchdog"  # the watchdog is ramping force down (stale loop or data)
FLAG_REPLAN = "replan"  # the guidance recomputed its capture path on this tick
FLAG_SINGULAR = "singular"  # the IK reported a (reaction) singularity on this tick
#: the IK clipped a joint position/velocity/acceleration limit, or the base-rate bound scaled the task
FLAG_LIMITED = "limited"
FLAG_CONTACT = "contact"  # the capture tool touches the debris' fixture (a contact carrying force)
FLAG_CAPTURED = "captured"  # the tool is closed: the debris is attached (post-capture phase, until it opens)
#: The flags of format version 1 (the first eight of :data:`FLAGS`).
FLAGS_V1 = (
    FLAG_ENGAGED,
    FLAG_CLUTCH,
    FLAG_SATURATED,
    FLAG_FAULT,
    FLAG_WATCHDOG,
    FLAG_REPLAN,
    FLAG_SINGULAR,
    FLAG_LIMITED,
)
FLAGS = FLAGS_V1 + (FLAG_CONTACT, FLAG_CAPTURED)


def float_columns(n_joints: int) -> tuple[str, ...]:
    """All float64 columns of a trial of a model with ``n_joints`` joints, in order."""
    return (
        (TIME,)
        + EE_POSITION
        + EE_VELOCITY
        + TARGET_POSITION
        + TARGET_VELOCITY
        + COMMAND_POSITION
        + COMMAND_VELOCITY
        + DEVICE_POSITION
        + DEVICE_VELOCITY
        + GUIDANCE_FORCE
        + DEVICE_FORCE_CALCULATED
        + DEVICE_FORCE_ACTUATED
        + BASE_TORQUE
        + BASE_ATTITUDE
        + BASE_ANGULAR_VELOCITY
        + (SIGMA_RATIO,)
        + tuple(joint_position_column(i) for i in range(n_joints))
        + tuple(joint_velocity_column(i) for i in range(n_joints))
        + CONTACT_FORCE
        + DEBRIS_ANGULAR_VELOCITY
        + POST_CAPTURE_COLUMNS
        + MASTER_COLUMNS
    )


#: Keys of the metadata JSON object (all required unless marked optional).
METADATA_KEYS = {
    "format_version": "int, FORMAT_VERSION",
    "package_version": "str, capture_trainer.__version__",
    "trial_id": "str, unique within a study (file stem)",
    "scenario": "str, scenario name",
    "scenario_config": "object, the full scenario as loaded (SI units)",
    "condition": "str, one of dg | ng | apf | as",
    "participant": "object: id (str), kind (novice|expert|passive|human|controller), params",
    "seed": "int",
    "repetition": "int, 0-based repetition index (optional, studies)",
    "gains": "object, the guidance law's parameters (k_p, k_d, m_kg, c_n_s_m, ...)",
    "model": "str, manipulator model name",
    "n_joints": "int",
    "dt_s": "float, servo period",
    "target_radius_m": "float",
    "capture_tolerance_m": "float: reached counts while distance - radius <= this",
    "post_capture_window_s": "float, 1.0 by default",
    "device": "object, the device spec read at start (max_force_n, ...)",
    "servo_timing": "object: period histogram, overruns, worst tick (optional)",
    "started_at": "str, local wall-clock time the trial was built (ISO 8601, optional)",
    "complete": "bool, false while the trial is being written, after a crash or a failed write",
    "end_reason": "str: time_limit | captured | contact_window_done | left_reach | task_done | aborted | fault | "
                  "write_failed (optional)",
    "outcome": "str (version 2): captured | contact_lost | pushed_away | missed | timeout | aborted",
    "outcome_at_s": "float (version 2): when it happened (capture, first contact or the end) [s]",
    "outcome_reason": "str (version 2): one line saying why",
    "first_contact": "object or null (version 2): t_s, point_m, normal, relative_velocity_m_s, "
                     "normal_speed_m_s, tangential_speed_m_s (tool minus debris at the contact point)",
    "capture": "object or null (version 2): t_s, relative_speed_m_s, gap_m, fixture_offset_m",
    "payload": "object or null (version 2): mass_kg, com_m, inertia_kg_m2 in the tool link's frame",
    "contact_model": "str (version 2): physics (the debris in the arm's PyBullet world) | physics_local (the "
                     "debris in a world of its own, kinematic probe: an arm over the link) | proximity (distance test)",
    "link_delay": "object or null (version 2): delay_s, jitter_s, loss, command_lost, state_lost of the "
                  "delayed link between the operator's side and the arm's side",
    "fixture_radius_m": "float (version 2): the debris' grapple fixture radius; target_radius_m adds "
                        "the tool tip's radius (the first touch)",
    "guidance_authority": "float or null (optional): the factor on the condition's guidance force "
                          "(guidance.schedule); null without guidance",
    "guidance_schedule": "object (optional, scheduled study trials): name, params, index k, assist a(k)",
    "compensator": "object or null (version 2): name (none | predictive | passivity), contact_feedback, "
                   "contact_force_scale, energy_j, min_energy_j, dissipated_j, passivity_active_ticks "
                   "(trials.compensators); null without delay and contact feedback",
    "post_capture": "object or null (version 3): the task run after the capture (trials.behaviours): task, "
                    "states, behaviours (the names the state_index / behaviour_index columns index), outcome "
                    "(succeeded | failed | aborted), reason, started_s, ended_s, results (one per behaviour run: "
                    "state, behaviour, result, reason, figures), release (the tool opened again: t_s, state, the "
                    "debris' centre_m, velocity_m_s, angular_velocity_rad_s, fixture_m, ee and base state, the "
                    "momentum-keeping correction; null or absent while it never did); null without a task",
    "tick_path": "object (optional): fused (bool: the servo tick ran as two compiled calls around the plant, "
                 "trials.fused), reason (what was fused, or why the tick ran stage by stage)",
    "base_rate_bound": "object (optional): bound_rad_s, ticks, first_s, last_s: the slave's base angular-rate "
                       "bound and the ticks on which it scaled the task (robot.slave; times null: never)",
    "write_error": "str, why writing the file failed (only after a failed write)",
    "rows": "int, rows in the file (written by the recorder)",
}

#: The outcome words of the metadata key ``outcome`` (version 2): exactly one per trial.
OUTCOMES: tuple[str, ...] = ("captured", "contact_lost", "pushed_away", "missed", "timeout", "aborted")

#: Metadata keys that version 2 added (a version-1 file lacks them).
METADATA_KEYS_ADDED_IN_V2 = frozenset({"outcome", "outcome_at_s", "outcome_reason", "first_contact", "capture",
                                       "payload", "contact_model", "fixture_radius_m", "link_delay",
                                       "guidance_authority", "guidance_schedule", "compensator"})

#: Metadata keys that version 3 added.
METADATA_KEYS_ADDED_IN_V3 = frozenset({"post_capture"})

#: Metadata keys that version 4 added (optional: a trial writes them when they apply).
METADATA_KEYS_ADDED_IN_V4 = frozenset({"tick_path", "base_rate_bound"})

#: Longest text (any string in the metadata, at any depth, keys included) [UTF-8 bytes].
#: The metadata is rewritten with every flush of a running trial, so it must stay small.
MAX_TEXT_BYTES = 4 * 1024
#: Largest metadata object, encoded as JSON [bytes]; a real trial's is about 4 KiB.
MAX_METADATA_BYTES = 64 * 1024
#: Deepest nesting of objects and lists in the metadata.
MAX_METADATA_DEPTH = 16
#: Rows per Parquet row group: the writer encodes one group at a time, so the memory a
#: write needs stays bounded however long the trial (about 4 MB of input a group for
#: the 7-joint arm's 90 columns). Each of a group's column chunks costs the zstd encoder
#: a fixed setup, so a write of 10,000 rows takes about 30 % less time in groups of 5000
#: than of 2000 (docs/benchmarks.md), for a file of the same size.
ROW_GROUP_ROWS = 5000


@dataclass(frozen=True)
class LogSchema:
    """The columns of one trial file: float64 signals, then boolean flags.

    Args:
        float_columns: float64 column names, in the writer's row-buffer order.
        flag_columns: boolean column names; flag ``i`` is bit ``i`` of the writer's
            integer of flag bits (at most 64).

    Raises:
        TrialLogError: a name repeats, is empty, or there are more than 64 flags.
    """

    float_columns: tuple[str, ...]
    flag_columns: tuple[str, ...] = FLAGS

    def __post_init__(self) -> None:
        object.__setattr__(self, "float_columns", tuple(self.float_columns))
        object.__setattr__(self, "flag_columns", tuple(self.flag_columns))
        names = self.names
        if len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
            raise TrialLogError(f"trial log columns must be unique, non-empty names, got {names}")
        if len(self.flag_columns) > 64:
            raise TrialLogError(f"at most 64 flag columns, got {len(self.flag_columns)}")

    @classmethod
    def for_model(cls, n_joints: int) -> LogSchema:
        """Every column of a trial of a model with ``n_joints`` joints (what analysis needs)."""
        return cls(float_columns(n_joints), FLAGS)

    @property
    def names(self) -> tuple[str, ...]:
        """All column names in file order."""
        return self.float_columns + self.flag_columns

    def flag_bit(self, name: str) -> int:
        """The bit of flag column ``name`` in an integer of flag bits."""
        return 1 << self.flag_columns.index(name)

    def arrow_schema(self, metadata_json: bytes) -> pa.Schema:
        """The Arrow schema of the file, with the encoded metadata (:func:`encode_metadata`)."""
        import pyarrow as pa

        fields = [pa.field(n, pa.float64()) for n in self.float_columns]
        fields += [pa.field(n, pa.bool_()) for n in self.flag_columns]
        return pa.schema(fields, metadata={METADATA_KEY: metadata_json})

    def table(self, columns: Sequence[pa.Array | pa.ChunkedArray], metadata_json: bytes) -> pa.Table:
        """A table of this schema from its columns (floats, then flags) and encoded metadata."""
        import pyarrow as pa

        return pa.Table.from_arrays(list(columns), schema=self.arrow_schema(metadata_json))

    def table_of_batches(self, batches: Sequence[pa.RecordBatch], metadata_json: bytes) -> pa.Table:
        """A table of this schema from record batches of its columns (their schema's
        metadata aside) and encoded metadata."""
        import pyarrow as pa

        return pa.Table.from_batches(list(batches), schema=self.arrow_schema(metadata_json))


def required_columns(n_joints: int, format_version: int = FORMAT_VERSION) -> tuple[str, ...]:
    """Every column the contract requires of a model with ``n_joints`` joints, in a file
    of ``format_version`` (version 1 had no contact columns and flags, versions 1 and 2
    no post-capture columns, versions 1 to 3 no master columns)."""
    names = LogSchema.for_model(n_joints).names
    added: set[str] = set()
    if format_version < MASTER_FORMAT_VERSION:
        added.update(MASTER_COLUMNS)
    if format_version < POST_CAPTURE_FORMAT_VERSION:
        added.update(POST_CAPTURE_COLUMNS)
    if format_version < CONTACT_FORMAT_VERSION:
        added.update(CONTACT_FORCE + DEBRIS_ANGULAR_VELOCITY + (FLAG_CONTACT, FLAG_CAPTURED))
    return tuple(name for name in names if name not in added)


def encode_metadata(metadata: Mapping[str, Any]) -> bytes:
    """Check the metadata's bounds and encode it as the file stores it (UTF-8 JSON).

    numpy arrays and scalars and paths are converted; NaN and infinities are kept (as
    JSON's ``NaN`` / ``Infinity`` extensions, which the reader accepts).

    Raises:
        TrialLogError: a text longer than :data:`MAX_TEXT_BYTES` (the message names the
            field, e.g. ``scenario_config.description``), nesting deeper than
            :data:`MAX_METADATA_DEPTH`, a value JSON cannot hold, or an encoded object
            larger than :data:`MAX_METADATA_BYTES`.
    """
    _check_text_bounds(metadata, "", 0)
    try:
        encoded = json.dumps(dict(metadata), default=_json_default).encode()
    except (TypeError, ValueError) as error:
        raise TrialLogError(f"trial metadata cannot be written as JSON: {error}") from None
    if len(encoded) > MAX_METADATA_BYTES:
        sizes = sorted(((len(json.dumps(v, default=_json_default)), k) for k, v in metadata.items()), reverse=True)
        largest = ", ".join(f"{key} ({size} bytes)" for size, key in sizes[:3])
        raise TrialLogError(
            f"trial metadata is {len(encoded)} bytes as JSON; at most {MAX_METADATA_BYTES} are "
            f"allowed (largest fields: {largest})"
        )
    return encoded


def clip_text(text: str, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """``text`` cut to at most ``max_bytes`` UTF-8 bytes (ending in "..." when cut), for
    texts the program writes itself (an error's repr as an end reason)."""
    encoded = text.encode("utf-8", "replace")
    if len(encoded) <= max_bytes:
        return text
    return encoded[: max_bytes - 3].decode("utf-8", "ignore") + "..."


def _check_text_bounds(value: Any, where: str, depth: int) -> None:
    if depth > MAX_METADATA_DEPTH:
        raise TrialLogError(f"trial metadata field {where!r} is nested deeper than {MAX_METADATA_DEPTH} levels")
    if isinstance(value, str):
        # A character is 1 to 4 UTF-8 bytes: encode only when the length alone cannot tell.
        size = len(value) if len(value) > MAX_TEXT_BYTES else len(value.encode("utf-8", "surrogatepass"))
        if size > MAX_TEXT_BYTES:
            raise TrialLogError(
                f"trial metadata field {where or '(top level)'!r} is {size} bytes long; "
                f"at most {MAX_TEXT_BYTES} bytes are allowed"
            )
    elif isinstance(value, Mapping):
        for key, item in value.items():
            name = f"{where}.{key}" if where else str(key)
            _check_text_bounds(str(key), name if len(name) <= 80 else name[:77] + "...", depth + 1)
            _check_text_bounds(item, name, depth + 1)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_text_bounds(item, f"{where}[{index}]", depth + 1)


def _json_default(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def decode_metadata(raw: bytes | None, where: str) -> dict[str, Any]:
    """The metadata object of a file (``raw``: its :data:`METADATA_KEY` value), version-checked.

    Raises:
        TrialLogError: no metadata, not a JSON object, or a format version this package
            cannot read.
    """
    if raw is None:
        raise TrialLogError(
            f"{where}: not a capture-trainer trial log (no {METADATA_KEY.decode()!r} key in the "
            "Parquet metadata)"
        )
    try:
        metadata = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TrialLogError(f"{where}: trial metadata is not valid JSON ({error})") from None
    if not isinstance(metadata, dict):
        raise TrialLogError(f"{where}: trial metadata must be a JSON object")
    if "format_version" not in metadata:
        raise TrialLogError(f"{where}: trial metadata has no format_version")
    check_format_version(metadata["format_version"], where)
    return metadata


def check_format_version(version: object, where: str) -> int:
    """``version`` if this package reads it.

    Raises:
        TrialLogError: not a positive integer, or newer than :data:`FORMAT_VERSION`.
    """
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise TrialLogError(f"{where}: unknown trial log format_version {version!r}")
    if version > FORMAT_VERSION:
        raise TrialLogError(
            f"{where}: trial log format_version {version} is newer than this capture-trainer "
            f"reads (up to {FORMAT_VERSION}); upgrade capture-trainer to read it"
        )
    return version


class TrialLog(NamedTuple):
    """A trial file as read: ``table, metadata = read_trial_log(path)``.

    Attributes:
        table: one row per servo tick; float64 signal columns and boolean flag columns.
        metadata: the metadata object (:data:`METADATA_KEYS`); ``complete`` is false, or
            missing, for a trial that crashed or whose writing failed.
    """

    table: pa.Table
    metadata: dict[str, Any]


def read_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The metadata of a trial file, without reading its rows.

    Raises:
        TrialLogError: not a readable Parquet file, not a trial log, or a format version
            this package cannot read.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as error:
        raise TrialLogError(f"{path}: not a readable Parquet file ({_one_line(error)})") from None
    return decode_metadata((schema.metadata or {}).get(METADATA_KEY), str(path))


def read_trial_log(path: str | os.PathLike[str]) -> TrialLog:
    """Read a trial file: its rows and its metadata (the one reader of the contract).

    An incomplete file (a trial that crashed, was aborted, or whose writing failed) reads
    like any other: it holds the rows of its last successful write and its metadata says
    ``complete: false``. Columns are not checked against :func:`required_columns` here:
    a consumer that needs a model's columns checks them (``analysis`` does).

    Raises:
        TrialLogError: not a readable Parquet file, not a trial log, or a format version
            newer than this package reads (one line naming the file).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    metadata = read_metadata(path)
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as error:
        raise TrialLogError(f"{path}: cannot read the trial's rows ({_one_line(error)})") from None
    return TrialLog(table, metadata)


def write_file(table: pa.Table, path: str | os.PathLike[str]) -> None:
    """Write a trial file atomically: a hidden temporary file beside it, then ``os.replace``.

    On failure the temporary file is removed and ``path`` keeps its previous content.

    Raises:
        OSError, pyarrow.ArrowException: the write failed (the caller reports it).
    """
    import pyarrow.parquet as pq

    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        pq.write_table(table, tmp, use_dictionary=False, compression="zstd", row_group_size=ROW_GROUP_ROWS)
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise


def _one_line(error: BaseException) -> str:
    """An error as one line: ``[Errno 28] No space left on device`` for OS errors."""
    if isinstance(error, OSError) and error.errno is not None:
        # pyarrow wraps the system's text ("Error writing bytes to file. Detail: ..."):
        # the errno alone says it the way Python's own OSError does.
        return f"[Errno {error.errno}] {os.strerror(error.errno)}"
    text = " ".join(str(error).split())
    return text or type(error).__name__


def describe_write_failure(path: str | os.PathLike[str], error: BaseException) -> str:
    """The one-line reason a write failed, e.g.
    ``writing runs/x.parquet failed: [Errno 28] No space left on device``."""
    return f"writing {path} failed: {_one_line(error)}"
