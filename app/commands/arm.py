"""`capture-trainer arm ...`: the real-arm link (docs/arm-link.md).

``arm serve`` runs the PyBullet arm behind the link (hardware-in-the-loop: a person on
the device here, the arm in another process or on another machine); ``arm keys`` makes
the CURVE keys; ``arm link-test`` measures the link; ``arm status`` asks a server what it
is doing and what it has rejected.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from types import FrameType

log = logging.getLogger(__name__)


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Register ``arm serve``, ``arm keys``, ``arm link-test`` and ``arm status``."""
    from robot.link.protocol import MODES
    from robot.link.server import DEFAULT_BIND, LOCKSTEP_TIMEOUT_S, SPIN_US, WATCHDOG_PERIODS
    from robot.models import MODELS

    parser = subparsers.add_parser("arm", help="the real-arm link: serve an arm, make keys, measure the link")
    commands = parser.add_subparsers(dest="arm_command", metavar="ARM_COMMAND", required=True)

    serve = commands.add_parser("serve", help="run the PyBullet arm behind the link (1 kHz real time or lock-step)")
    serve.add_argument("--model", choices=MODELS.names(), required=True)
    serve.add_argument("--bind", default=DEFAULT_BIND, metavar="ADDR",
                       help=f"tcp://HOST:PORT to listen on (default {DEFAULT_BIND}; port * picks a free one)")
    serve.add_argument("--keys", metavar="DIR", help="CURVE key folder (required off loopback)")
    serve.add_argument("--watchdog-periods", type=int, default=WATCHDOG_PERIODS,
                       help=f"real time: periods without a command that halt the arm "
                            f"(default {WATCHDOG_PERIODS}: 20 ms at 1 kHz)")
    serve.add_argument("--lockstep-timeout", type=float, default=LOCKSTEP_TIMEOUT_S, metavar="S",
                       help=f"lock-step: silence that halts the session (default {LOCKSTEP_TIMEOUT_S:g} s)")
    serve.add_argument("--rt-priority", type=int, metavar="N",
                       help="run under SCHED_FIFO at priority N (1-99; needs root or an rtprio limit)")
    serve.add_argument("--spin-us", type=float, metavar="US",
                       help=f"lock-step: busy-poll this long around each expected command, 1/4 before and 3/4 "
                            f"after (default {SPIN_US:g}: always sleep; for a server with a core of its own; "
                            f"not with --rt-priority)")
    serve.add_argument("--no-stream", action="store_true",
                       help="offer no datagram stream on loopback: every message over ZeroMQ")
    serve.set_defaults(handler=_serve)

    keys = commands.add_parser("keys", help="make a server and a client CURVE key pair (owner-only files)")
    keys.add_argument("dir", metavar="DIR")
    keys.add_argument("--force", action="store_true", help="replace existing keys")
    keys.set_defaults(handler=_keys)

    test = commands.add_parser("link-test", help="round trip, loss, rejections and command rate of a link "
                                                 "(exit 1 if a command was lost or the session halted)")
    test.add_argument("address", metavar="ADDR", help="HOST:PORT of an arm server")
    test.add_argument("--keys", metavar="DIR", help="CURVE key folder (required off loopback)")
    test.add_argument("--duration", type=float, default=60.0, metavar="S", help="seconds (default 60)")
    test.add_argument("--rate", type=float, default=1000.0, metavar="HZ", help="commands per second (default 1000)")
    test.add_argument("--mode", choices=MODES, default="realtime",
                      help="realtime (default: the arm on its own 1 kHz clock, as a real arm; ping -> pong) "
                           "or lockstep (command -> the state after one simulated step)")
    test.add_argument("--rt-priority", type=int, metavar="N",
                      help="run under SCHED_FIFO at priority N (1-99; needs root or an rtprio limit)")
    test.add_argument("--no-stream", action="store_true",
                      help="keep the per-tick messages on ZeroMQ even on loopback (no datagram stream)")
    test.add_argument("--json", action="store_true", help="print one JSON object")
    test.set_defaults(handler=_link_test)

    status = commands.add_parser("status", help="what an arm server is doing, and what it has rejected")
    status.add_argument("address", metavar="ADDR", help="HOST:PORT of an arm server")
    status.add_argument("--keys", metavar="DIR", help="CURVE key folder (required off loopback)")
    status.add_argument("--json", action="store_true", help="print one JSON object")
    status.set_defaults(handler=_status)


def _serve(args: argparse.Namespace) -> int:
    from capture_trainer.errors import ArmError
    from robot.backends import ARM_BACKENDS
    from robot.link.keys import load_server_keys
    from robot.link.server import SPIN_US, LinkServer, set_realtime_priority, spin_window
    from robot.models import get_model

    keys = None if args.keys is None else load_server_keys(args.keys)
    spin_us = args.spin_us
    if args.rt_priority is not None:
        if spin_us:
            raise ArmError("--spin-us cannot be combined with --rt-priority (a spinning FIFO thread starves "
                           "the others); give one of them")
        spin_us = 0.0
        set_realtime_priority(args.rt_priority)
    server = LinkServer(get_model(args.model), ARM_BACKENDS.get("pybullet"), args.bind, keys,
                        watchdog_periods=args.watchdog_periods, lockstep_timeout_s=args.lockstep_timeout,
                        spin=spin_window(SPIN_US if spin_us is None else spin_us), stream=not args.no_stream)

    def stop(signum: int, frame: FrameType | None) -> None:
        server.stop()

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        security = f"CURVE keys from {args.keys}" if keys is not None else "no keys (loopback only)"
        stream = "" if server.stream_address is None else f" datagram stream udp port {server.stream_address[1]}"
        print(f"listening {server.endpoint} {args.model} {security}{stream}", flush=True)
        server.serve()
    except KeyboardInterrupt:
        log.info("arm server interrupted")
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.close()
    return 0


def _keys(args: argparse.Namespace) -> int:
    from robot.link.keys import create_keys

    for path in create_keys(args.dir, force=args.force):
        print(path)
    return 0


def _link_test(args: argparse.Namespace) -> int:
    from robot.link.linktest import run_link_test
    from robot.link.server import set_realtime_priority

    if args.rt_priority is not None:
        set_realtime_priority(args.rt_priority)
    figures = run_link_test(args.address, args.keys, duration_s=args.duration, rate_hz=args.rate, mode=args.mode,
                            stream=not args.no_stream)
    summary = figures.as_dict()
    if args.json:
        print(json.dumps(summary))
    else:
        for key, value in summary.items():
            print(f"{key:18s} {value}")
    return 0 if figures.held else 1


def _status(args: argparse.Namespace) -> int:
    from robot.link.client import LinkClient
    from robot.link.keys import check_address, load_client_keys

    keys = None if args.keys is None else load_client_keys(args.keys)
    endpoint, _ = check_address(args.address, keys is not None, binding=False)
    client = LinkClient(endpoint, keys)
    try:
        report = client.query()
    finally:
        client.close()
    body = {key: value for key, value in report.items() if key not in ("v", "type", "session", "seq", "t_ns")}
    if args.json:
        print(json.dumps(body))
    else:
        for key, value in body.items():
            print(f"{key:20s} {value}")
    sys.stdout.flush()
    return 0
