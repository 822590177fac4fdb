"""The trial log format: the one contract between `trials` (writer) and `analysis` (reader).

One Parquet file per trial, one row per servo tick. Columns carry their SI unit in the
name; vectors are split into ``_x``, ``_y``, ``_z`` columns (planar models record z = 0).
Positions, velocities and forces are in the **task frame** (the robot's inertial frame)
unless the name starts with ``dev_`` (the haptic device's frame).

The trial's metadata is one JSON object stored under the key ``capture_trainer`` of the
Parquet file's key-value metadata (see :data:`METADATA_KEYS`).
"""

from __future__ import annotations

FORMAT_VERSION = 1
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
FLAG_LIMITED = "limited"  # the IK clipped a joint position/velocity/acceleration limit
FLAGS = (
    FLAG_ENGAGED,
    FLAG_CLUTCH,
    FLAG_SATURATED,
    FLAG_FAULT,
    FLAG_WATCHDOG,
    FLAG_REPLAN,
    FLAG_SINGULAR,
    FLAG_LIMITED,
)


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
    "complete": "bool, false while the trial is being written or after a crash",
    "end_reason": "str: time_limit | captured | aborted | fault (optional)",
}
