"""The project's one exception hierarchy.

Exceptions are for bugs and broken input; expected outcomes (an IK step that hits a
limit, a trial that never reaches the target) are results, not exceptions.
"""

from __future__ import annotations


class CaptureTrainerError(Exception):
    """Base class of every error this project raises on purpose."""


class ScenarioError(CaptureTrainerError):
    """A scenario or protocol file is malformed or out of range.

    The message names the file, the field and what was expected.
    """


class DeviceError(CaptureTrainerError):
    """A haptic device backend is missing, failed to open, or faulted."""


class PhysicsError(CaptureTrainerError):
    """The simulated plant or the dynamics model was asked for something impossible."""


class ArmError(CaptureTrainerError):
    """An arm backend (simulated or real) faulted or went stale."""


class TrialError(CaptureTrainerError):
    """A trial or study could not be run or recorded."""


class AnalysisError(CaptureTrainerError):
    """A trial log could not be analysed (missing columns, wrong format)."""
