"""The capture as an explicit event, and the one word each trial ends with.

:class:`CaptureMonitor` runs once per tick after the plant step, on the scene's reading
(:class:`robot.debris.DebrisReading`) and the measured end effector. It tracks contact
episodes (a rising edge of the contact), records the first contact, decides the capture,
and at the end the outcome. Definitions (task frame, SI; ``p`` the fixture centre, ``ee``
the end-effector point, ``v_rel = ṗ − ėe``):

* **First contact**: the first tick the scene reports contact. The impact velocity at the
  contact point is the tool's velocity minus the debris' velocity at that point
  (``ṗ + ω × (c − p)``), split into the closing speed along the contact normal and the
  tangential slip. (The tool is a sphere centred on the end-effector point; its own
  rotation adds at most ``|ω_link| r_tip``, under 1 mm/s here, and is left out.) The
  paper's impact velocity (``|v_rel|`` at the first reach) is kept by the analysis under
  its own name.
* **Soft contact**: a contact episode whose closing speed at its start is at most
  ``capture_speed_m_s``. A hit above the threshold can never become a capture: the tool
  may only close after a soft contact.
* **Capture**: during a soft contact episode, for ``hold_s`` without a break: the
  fixture centre inside the tool's envelope (``|p − ee| ≤ envelope_radius_m``), the
  relative speed ``|v_rel| ≤ capture_speed_m_s`` and the tool touching or within
  ``hold_gap_m`` of the fixture's surface. Then the tool closes (the scene joins the
  debris to the end effector) and the post-capture phase begins.

Outcomes (exactly one per trial, ``capture_trainer.trial_log.OUTCOMES``): ``captured``; ``pushed_away`` (touched, not captured, and when the trial ended
the debris was moving away from the tool faster than ``capture_speed_m_s``, out of
contact); ``contact_lost`` (touched, not held, not pushed away); ``missed`` (never
touched and the debris left the arm's reach); ``timeout`` (never touched, still within
reach at the time limit); ``aborted`` (a fault, a failed write or a user stop).

When a trial ends (``end_on_capture``): ``window_s`` after the capture (the post-capture
window is recorded whole), ``window_s`` after the first contact without a capture (one
attempt per trial: the second after contact is what is scored), at once when the debris
has left the reach without a contact, or at the time limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from capture_trainer import trial_log
from robot.debris import DebrisReading, Payload

OUTCOMES: tuple[str, ...] = trial_log.OUTCOMES


@dataclass(frozen=True)
class CaptureRules:
    """When a capture counts and when a trial is over.

    Attributes:
        envelope_radius_m: the tool's capture envelope about the end-effector point [m].
        capture_speed_m_s: largest relative speed (and closing speed at the start of the
            contact) of a capture [m/s].
        hold_s: how long the capture conditions must hold before the tool closes [s].
        hold_gap_m: largest surface gap that still counts as touching during the hold [m].
        window_s: how long the trial goes on after the capture or, without one, after
            the first contact [s] (``inf``: to the time limit).
        reach_m: the arm's reach from ``shoulder_m`` [m] (``inf``: never "left the reach").
        shoulder_m: (3,) the first joint at the start [m].
    """

    envelope_radius_m: float
    capture_speed_m_s: float
    hold_s: float
    hold_gap_m: float
    window_s: float
    reach_m: float = math.inf
    shoulder_m: tuple[float, float, float] = (0.0, 0.0, 0.0)


class CaptureMonitor:
    """The capture state machine of one trial (approach -> contact -> captured).

    Attributes:
        first_contact_s: time of the first contact [s] (NaN before).
        captured_at_s: time the tool closed [s] (NaN before).
        outcome, outcome_at_s, outcome_reason: set by :meth:`finish`.
    """

    def __init__(self, rules: CaptureRules) -> None:
        self.rules = rules
        self.first_contact_s = math.nan
        self.first_contact: dict[str, Any] = {}
        self.captured_at_s = math.nan
        self.capture: dict[str, Any] = {}
        self.outcome = ""
        self.outcome_at_s = math.nan
        self.outcome_reason = ""
        self.n_contacts = 0
        self.longest_hold_s = 0.0
        self.last_contact_end_s = math.nan
        self._was_in_contact = False
        self._episode_soft = False
        self._hold_since_s = math.nan
        self._left_reach = False
        self._shoulder_list = [float(v) for v in rules.shoulder_m]
        self._reach2 = rules.reach_m ** 2
        #: when the tool last opened again [s] (NaN: never); a new capture then needs a
        #: new soft contact episode and its hold
        self.released_at_s = math.nan
        self.n_captures = 0
        self._open = False

    @property
    def touched(self) -> bool:
        """A contact has happened."""
        return self.first_contact_s == self.first_contact_s

    @property
    def captured(self) -> bool:
        """The tool has closed."""
        return self.captured_at_s == self.captured_at_s

    @property
    def closed(self) -> bool:
        """The tool is closed on the debris (captured, not opened since): :meth:`update`
        has nothing to do."""
        return self.captured_at_s == self.captured_at_s and not self._open

    @property
    def untouched(self) -> bool:
        """Nothing has touched the debris and no contact is open: :meth:`update` on a tick
        without contact only tests whether the debris left the reach (:meth:`apart`)."""
        return self.first_contact_s != self.first_contact_s and not self._was_in_contact

    @property
    def parted(self) -> bool:
        """A contact has happened, none is open and the tool is not closed: :meth:`update`
        on a tick without contact and with the tool beyond :attr:`CaptureRules.hold_gap_m`
        only ends any hold (:meth:`apart`)."""
        return self.first_contact_s == self.first_contact_s and not self._was_in_contact and not self.closed

    @property
    def leaving_test(self) -> tuple[tuple[float, float, float], float]:
        """The shoulder [m] and the reach squared [m²] of the test whether the untouched
        debris left the reach (:meth:`_leaving_reach`)."""
        s = self._shoulder_list
        return (s[0], s[1], s[2]), self._reach2

    def apart(self, left_reach: bool) -> None:
        """:meth:`update` on a tick without contact while :attr:`untouched`, given its
        leaving test's answer (computed elsewhere in the same operations: the fused tick's
        compiled call), or while :attr:`parted` with the tool beyond the hold gap (the
        answer unused: the hold ends). It never closes the tool."""
        self._was_in_contact = False
        if self.first_contact_s != self.first_contact_s:
            self._left_reach = left_reach
        else:
            self._hold_since_s = math.nan

    def update(self, t_s: float, r: DebrisReading, ee_m: NDArray[np.float64], ee_v_m_s: NDArray[np.float64]) -> bool:
        """One tick after the plant step; True on the tick the tool must close."""
        if self.closed:
            return False
        rules = self.rules
        if r.in_contact and not self._was_in_contact:
            self._begin_contact(t_s, r, ee_v_m_s)
        elif self._was_in_contact and not r.in_contact:
            self.last_contact_end_s = t_s
        self._was_in_contact = r.in_contact
        if not self.touched:
            self._left_reach = self._leaving_reach(r)
            return False
        # plain floats (cheaper per tick than numpy scalars; the same operations)
        px, py, pz = r.point_velocity_m_s.tolist()
        ex, ey, ez = ee_v_m_s.tolist()
        rx, ry, rz = px - ex, py - ey, pz - ez
        cx, cy, cz = r.point_m.tolist()
        mx, my, mz = ee_m.tolist()
        dx, dy, dz = cx - mx, cy - my, cz - mz
        inside = dx * dx + dy * dy + dz * dz <= rules.envelope_radius_m ** 2
        speed = math.sqrt(rx ** 2 + ry ** 2 + rz ** 2)
        held = (self._episode_soft and inside and speed <= rules.capture_speed_m_s
                and (r.in_contact or r.gap_m <= rules.hold_gap_m))
        if not held:
            self._hold_since_s = math.nan
            return False
        if self._hold_since_s != self._hold_since_s:
            self._hold_since_s = t_s
        held_for = t_s - self._hold_since_s
        self.longest_hold_s = max(self.longest_hold_s, held_for)
        if held_for + 1e-9 < rules.hold_s:
            return False
        self.n_captures += 1
        self._open = False
        if not self.captured:  # the first capture is the trial's
            self.captured_at_s = t_s
            self.capture = {"t_s": t_s, "relative_speed_m_s": speed, "gap_m": r.gap_m,
                            "fixture_offset_m": [dx, dy, dz]}
        return True

    def released(self, t_s: float) -> None:
        """The tool has opened at ``t_s`` [s]: the debris is free. The tool closes again
        only if the capture rules fire again: a new contact episode, soft when it begins,
        then the hold (the contact the tool had as it opened does not count)."""
        self.released_at_s = t_s
        self._open = True
        self._episode_soft = False
        self._hold_since_s = math.nan
        self._was_in_contact = True  # whatever touches now is the old episode's end

    def _begin_contact(self, t_s: float, r: DebrisReading, ee_v_m_s: NDArray[np.float64]) -> None:
        """A new contact episode: its closing speed decides whether it is soft."""
        self.n_contacts += 1
        lever = r.contact_point_m - r.point_m
        debris_v = r.point_velocity_m_s + np.cross(r.angular_velocity_rad_s, lever)
        impact = ee_v_m_s - debris_v
        normal = r.contact_normal
        closing = float(impact @ normal)
        tangential = float(np.linalg.norm(impact - closing * normal))
        self._episode_soft = closing <= self.rules.capture_speed_m_s
        if self.touched:
            return
        self.first_contact_s = t_s
        self.first_contact = {
            "t_s": t_s,
            "point_m": r.contact_point_m.tolist(),
            "normal": normal.tolist(),
            "relative_velocity_m_s": impact.tolist(),
            "normal_speed_m_s": closing,
            "tangential_speed_m_s": tangential,
        }

    def _leaving_reach(self, r: DebrisReading) -> bool:
        """The untouched debris is beyond the arm's reach and moving away from it."""
        px, py, pz = r.point_m.tolist()  # plain floats: cheaper per tick than numpy scalars
        vx, vy, vz = r.point_velocity_m_s.tolist()
        s = self._shoulder_list
        ox, oy, oz = px - s[0], py - s[1], pz - s[2]
        return ox * ox + oy * oy + oz * oz > self._reach2 and ox * vx + oy * vy + oz * vz > 0.0

    @property
    def window_end_s(self) -> float:
        """When the window after the capture, or else after the first contact, ends [s]
        (infinity before any contact): from then on :meth:`over`."""
        if self.captured:
            return self.captured_at_s + self.rules.window_s
        if self.touched:
            return self.first_contact_s + self.rules.window_s
        return math.inf

    def over(self, t_s: float) -> bool:
        """The trial has nothing more to show (see the module docstring)."""
        if self.touched or self.captured:
            return t_s >= self.window_end_s
        return self._left_reach and self.rules.window_s < math.inf

    def finish(self, t_s: float, r: DebrisReading, ee_m: NDArray[np.float64], ee_v_m_s: NDArray[np.float64],
               aborted_reason: str | None = None) -> str:
        """Decide the outcome at the end of the trial (once); returns it."""
        if self.outcome:
            return self.outcome
        self.outcome_at_s = t_s
        speed = self.rules.capture_speed_m_s
        if aborted_reason is not None:
            self.outcome, self.outcome_reason = "aborted", aborted_reason
        elif self.captured:
            self.outcome = "captured"
            self.outcome_at_s = self.captured_at_s
            self.outcome_reason = (f"tool closed at {self.captured_at_s:.3f} s after a {self.rules.hold_s:.3f} s "
                                   f"hold at {self.capture['relative_speed_m_s']:.3f} m/s")
        elif self.touched:
            offset = r.point_m - ee_m
            distance = float(np.linalg.norm(offset))
            away = float((r.point_velocity_m_s - ee_v_m_s) @ offset) / distance if distance > 0.0 else 0.0
            if not r.in_contact and away > speed:
                self.outcome = "pushed_away"
                self.outcome_reason = (f"contact at {self.first_contact_s:.3f} s "
                                       f"({self.first_contact['normal_speed_m_s']:.3f} m/s closing); the debris "
                                       f"leaves the tool at {away:.3f} m/s (> {speed:.3f} m/s)")
            else:
                self.outcome = "contact_lost"
                self.outcome_reason = (f"contact at {self.first_contact_s:.3f} s "
                                       f"({self.first_contact['normal_speed_m_s']:.3f} m/s closing), "
                                       f"{self.n_contacts} contact(s), longest hold {self.longest_hold_s:.3f} s "
                                       f"of {self.rules.hold_s:.3f} s")
            self.outcome_at_s = self.first_contact_s
        elif self._left_reach:
            self.outcome, self.outcome_reason = "missed", f"no contact; the debris left the reach by {t_s:.3f} s"
        else:
            self.outcome, self.outcome_reason = "timeout", f"no contact by the time limit ({t_s:.3f} s)"
        return self.outcome

    def metadata(self) -> dict[str, Any]:
        """The trial log's metadata entries (``outcome``, ``first_contact``, ``capture``, ...)."""
        return {
            "outcome": self.outcome,
            "outcome_at_s": self.outcome_at_s,
            "outcome_reason": self.outcome_reason,
            "first_contact": self.first_contact or None,
            "capture": self.capture or None,
            "n_contact_episodes": self.n_contacts,
            "n_captures": self.n_captures,
            "released_at_s": None if math.isnan(self.released_at_s) else self.released_at_s,
            "capture_rules": {"envelope_radius_m": self.rules.envelope_radius_m,
                              "capture_speed_m_s": self.rules.capture_speed_m_s, "hold_s": self.rules.hold_s,
                              "hold_gap_m": self.rules.hold_gap_m},
        }


def payload_metadata(payload: Payload) -> dict[str, Any]:
    """The payload the slave carries after the capture (link frame), for the log."""
    return {"mass_kg": payload.mass_kg, "com_m": payload.com_m.tolist(),
            "inertia_kg_m2": payload.inertia_kg_m2.tolist()}
