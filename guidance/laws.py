"""One import for the servo tick: every guidance law, the state they read, the registry."""

from __future__ import annotations

from guidance.dynamic import CapturePath, DynamicGuidance
from guidance.fixtures import JointLimitProximity, ReachLimit, WorkspaceWalls
from guidance.law import GuidanceLaw, NoGuidance, Scaled, Sum
from guidance.potential import ObstacleField, PotentialField, SphereObstacle
from guidance.registry import LAWS, GuidanceConfigError, make_law
from guidance.state import GuidanceState

__all__ = [
    "CapturePath",
    "DynamicGuidance",
    "GuidanceConfigError",
    "GuidanceLaw",
    "GuidanceState",
    "JointLimitProximity",
    "LAWS",
    "NoGuidance",
    "ObstacleField",
    "PotentialField",
    "ReachLimit",
    "Scaled",
    "SphereObstacle",
    "Sum",
    "WorkspaceWalls",
    "make_law",
]
