"""Link figures, as libfranka's communication test: round trip, loss, rejections, rate.

:func:`run_link_test` opens a session on an arm server and, at ``rate_hz`` for
``duration_s``, sends commands that hold the arm still (the start pose, zero rates: safe
on a real arm) and times each round trip:

* ``lockstep``: command -> the state after one plant step (the server steps per command);
* ``realtime``: a ``ping`` sent beside each command -> its ``pong`` (the server answers at
  once, between its own periods); the states the server pushes are drained and their
  step numbers checked for gaps.

Loss is what was sent and never answered or never applied (from the server's counters,
read before and after), so a command lost on the way and a reply lost on the way back
both count.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from capture_trainer.errors import ArmError
from robot.link.client import LinkClient
from robot.link.keys import check_address, load_client_keys
from robot.link.protocol import MODES, REJECT_KINDS
from robot.models import get_model

SPIN_S = 2e-4  # the last part of each period is spun, not slept (sleep overshoots ~60 us)
MAX_LAG_PERIODS = 5  # late by more: the schedule restarts (a late tick is caught up below it)


@dataclass(frozen=True)
class LinkFigures:
    """What :func:`run_link_test` measured (times in microseconds, rates in Hz)."""

    address: str
    mode: str
    #: ``udp`` (the datagram stream, loopback) or ``zmq``: what carried the per-tick messages.
    transport: str
    model: str
    duration_s: float
    rate_hz: float
    sent: int
    answered: int
    applied: int
    lost: int
    loss_fraction: float
    achieved_rate_hz: float
    rtt_median_us: float
    rtt_p99_us: float
    rtt_max_us: float
    late_ticks: int
    state_gaps: int
    rejected: dict[str, int]
    halted: str

    @property
    def held(self) -> bool:
        """Nothing lost and the session never halted."""
        return self.lost == 0 and not self.halted

    def as_dict(self) -> dict[str, Any]:
        """The figures as one JSON-ready dict."""
        return asdict(self)


def run_link_test(address: str, keys_dir: str | Path | None = None, duration_s: float = 60.0,
                  rate_hz: float = 1000.0, mode: str = "realtime", reply_timeout_s: float = 0.1,
                  stream: bool = True) -> LinkFigures:
    """Measure the link to the arm server at ``address`` (see the module doc).

    A session the server halts (its watchdog: this client stalled) ends the test early;
    the figures say so in ``halted`` and cover the time before. On loopback the per-tick
    messages take the datagram stream when the server offers it (``stream=False``: ZeroMQ).

    Raises:
        ArmError: no server, a refused session, or bad arguments.
    """
    if mode not in MODES:
        raise ArmError(f"unknown arm link mode {mode!r}; known: {', '.join(MODES)}")
    if not (duration_s > 0.0 and rate_hz > 0.0):
        raise ArmError(f"duration and rate must be > 0, got {duration_s} s, {rate_hz} Hz")
    keys = None if keys_dir is None else load_client_keys(keys_dir)
    endpoint, _ = check_address(address, keys is not None, binding=False)
    client = LinkClient(endpoint, keys, stream=stream)
    try:
        before = client.query()
        model = get_model(before["model"])
        welcome = client.hello(mode, model, np.array(model.q0_rad), 1e-3, connect_timeout_s=5.0)
        transport = client.transport
        run = _Run(client, welcome, reply_timeout_s)
        wall = run.loop(mode, duration_s, 1.0 / rate_hz)
        after = client.bye(timeout_s=1.0) or client.query()
    finally:
        client.close()
    rtt = np.array(run.rtt_ns, dtype=float) / 1e3 if run.rtt_ns else np.full(1, np.nan)
    applied = after["applied"] - before["applied"]
    # a ping whose pong was not awaited because the session halted meanwhile is not a loss
    lost = max(run.sent - applied, run.sent - len(run.rtt_ns) - run.unawaited)
    return LinkFigures(
        address=endpoint, mode=mode, transport=transport, model=model.name, duration_s=wall, rate_hz=rate_hz, sent=run.sent,
        answered=len(run.rtt_ns), applied=applied, lost=lost, loss_fraction=lost / max(run.sent, 1),
        achieved_rate_hz=run.sent / wall, rtt_median_us=float(np.median(rtt)),
        rtt_p99_us=float(np.percentile(rtt, 99)), rtt_max_us=float(np.max(rtt)), late_ticks=run.late,
        state_gaps=run.gaps, rejected={k: after["rejected"][k] - before["rejected"][k] for k in REJECT_KINDS},
        halted=run.halted,
    )


class _Halted(Exception):
    """The server halted the session (ends the paced loop, not the test)."""


class _Run:
    """The paced loop's state."""

    def __init__(self, client: LinkClient, welcome: dict[str, Any], reply_timeout_s: float) -> None:
        self.client = client
        self.timeout = reply_timeout_s
        self.step: int = welcome["step"]
        self.hold = {"t_s": 0.0, "q_rad": welcome["q_rad"], "qd_rad_s": [0.0] * len(welcome["q_rad"]),
                     "qdd_rad_s2": [0.0] * len(welcome["q_rad"])}
        self.sent = 0
        self.rtt_ns: list[int] = []
        self.late = 0
        self.gaps = 0
        self.realtime = False
        self.halted = ""
        self.unawaited = 0  # a reply no longer waited for: the session halted meanwhile

    def loop(self, mode: str, duration_s: float, period_s: float) -> float:
        """Run the paced ticks; returns the wall time they took [s]."""
        self.realtime = mode == "realtime"
        tick = self._realtime if self.realtime else self._lockstep
        now = time.perf_counter
        start = now()
        deadline = start
        end = start + duration_s
        while deadline < end:
            try:
                tick()
            except _Halted as halt:
                self.halted = str(halt)
                break
            deadline += period_s
            behind = now() - deadline
            if behind > period_s:  # this tick ended more than a period late
                self.late += 1
                if behind > MAX_LAG_PERIODS * period_s:  # a stall: restart the schedule, no burst
                    deadline = now()
            while (left := deadline - now()) > 0.0:
                if left > SPIN_S:
                    time.sleep(left - SPIN_S)
        return now() - start

    def _command(self) -> int:
        self.hold["t_s"] = self.sent * 1e-3
        seq = self.client.send("command", {"state_seq": self.step, **self.hold})
        self.sent += 1
        return seq

    def _on_state(self, msg: dict[str, Any]) -> None:
        if msg["status"] in ("halting", "halted"):
            raise _Halted(msg["reason"] or msg["status"])
        if msg["step"] > self.step + 1 and self.realtime:
            self.gaps += msg["step"] - self.step - 1
        self.step = max(self.step, msg["step"])

    def _lockstep(self) -> None:
        t0 = time.perf_counter_ns()
        seq = self._command()
        deadline = time.perf_counter() + self.timeout
        while (msg := self.client.recv(deadline)) is not None:
            if msg["type"] == "state":
                self._on_state(msg)  # a late answer to an earlier command still tells the step
                if msg["cmd_seq"] == seq:
                    self.rtt_ns.append(time.perf_counter_ns() - t0)
                    return
            elif msg["type"] == "reject" and msg["ref_seq"] == seq:
                if msg["kind"] == "halted":
                    raise _Halted(msg["reason"])
                return

    def _realtime(self) -> None:
        while (msg := self.client.recv(0.0)) is not None:
            if msg["type"] == "state":
                self._on_state(msg)
        self._command()
        t0 = time.perf_counter_ns()
        seq = self.client.send("ping", {})
        deadline = time.perf_counter() + self.timeout
        while (msg := self.client.recv(deadline)) is not None:
            if msg["type"] == "pong" and msg["echo_seq"] == seq:
                self.rtt_ns.append(time.perf_counter_ns() - t0)
                return
            if msg["type"] == "state":
                try:
                    self._on_state(msg)
                except _Halted:
                    self.unawaited = 1
                    raise
