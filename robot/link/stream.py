"""The datagram stream of the arm link: the per-tick messages over UDP on loopback.

Over ZeroMQ every message crosses ZeroMQ's I/O thread on both sides (four thread
wake-ups per round trip); on a VM where waking a thread is expensive that is most of a
loopback round trip. So when client and server are on one host, the per-tick messages
(:data:`~robot.link.protocol.STREAM_CLIENT_TYPES` one way,
:data:`~robot.link.protocol.STREAM_SERVER_TYPES` the other) travel as UDP datagrams
between two sockets bound to the loopback address, while the session itself (``hello``,
``stream``, ``status``, ``bye`` and their answers) stays on the ZeroMQ connection, as
libfranka keeps TCP for control and UDP for its 1 kHz loop.

A datagram holds one message, the same msgpack map as over ZeroMQ (the same schema,
checked by the same validator). Both sides bind their UDP sockets to the loopback
address, the server accepts datagrams only from the port the client named over the
session's ZeroMQ connection, and the client's socket is connected to the server's port
(the kernel drops anything else). When the server has CURVE keys, each datagram also
starts with a tag: keyed BLAKE2b of the message (RFC 7693's MAC mode, a :data:`TAG_BYTES`
byte digest) under the session's stream key, 32 random bytes the server draws for each session and hands
to the client in ``stream_open`` over the CURVE-encrypted connection; so only the
session's client can make a datagram the server accepts, and the other way round.
Without keys there is no tag (the key is empty): any local user may open a session on
such a server anyway, as over plaintext ZeroMQ.

The stream exists only on loopback: a server whose address is not loopback has no UDP
socket, and a client asks for the stream only when its server's address is loopback.
"""

from __future__ import annotations

import hashlib
import hmac
import socket

#: Bytes of the keyed-BLAKE2b tag in front of each datagram (128 bits). BLAKE2b's keyed
#: mode is a MAC by design (RFC 7693), and at 10 µs right after a sleep on the 2-vCPU VM
#: it costs half of HMAC-SHA256's 26 µs; a round trip makes four.
TAG_BYTES = 16


def _tag(key: bytes, message: bytes) -> bytes:
    """The datagram tag of ``message`` under ``key``: keyed BLAKE2b, :data:`TAG_BYTES` bytes."""
    return hashlib.blake2b(message, key=key, digest_size=TAG_BYTES).digest()
#: Bytes read per datagram: more than the largest message, so an oversized one is seen as such.
RECV_BYTES = 65536


def seal(key: bytes, message: bytes) -> bytes:
    """The datagram carrying ``message``: its tag under ``key``, then the message (the
    message alone for an empty key)."""
    if not key:
        return message
    return _tag(key, message) + message


def unseal(key: bytes, datagram: bytes) -> bytes | None:
    """The message of a datagram whose tag is right under ``key`` (any datagram for an
    empty key); None otherwise."""
    if not key:
        return datagram
    if len(datagram) <= TAG_BYTES:
        return None
    message = datagram[TAG_BYTES:]
    if not hmac.compare_digest(_tag(key, message), datagram[:TAG_BYTES]):
        return None
    return message


def datagram_socket(host: str) -> socket.socket:
    """A non-blocking UDP socket bound to ``host`` (a loopback address) on a free port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        sock.bind((host, 0))
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock
