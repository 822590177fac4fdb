"""Small shared pieces every package may use: the version and the error hierarchy.

The six packages of the design (guidance, haptics, robot, scenarios, trials, analysis)
depend on this module and on nothing else of ours beyond their documented arrows.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("capture-trainer")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"
