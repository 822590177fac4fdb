"""The real-arm link: the ArmBackend seam carried over ZeroMQ to an arm in another
process or on another machine (on one host, the per-tick messages as UDP datagrams).

Modules (each imports pyzmq or msgpack only when it needs them):

* :mod:`robot.link.protocol`: the messages (msgpack maps with a version, a session id,
  a sequence number and a monotonic timestamp), their schema and the one validator.
* :mod:`robot.link.keys`: CURVE key files and the address policy (loopback unless keys).
* :mod:`robot.link.stream`: the datagram stream on loopback (UDP sockets, the tag).
* :mod:`robot.link.server`: :class:`~robot.link.server.LinkServer`, an arm controller
  behind the link (the PyBullet plant for hardware-in-the-loop), with its watchdog.
* :mod:`robot.link.arrivals`: when a periodic client's next command is due (the
  server's busy-poll window).
* :mod:`robot.link.client`: :class:`~robot.link.client.RemoteArm`, the ``remote`` arm
  backend, and :class:`~robot.link.client.LinkClient` beneath it.
* :mod:`robot.link.linktest`: the link figures (round trip, loss, rejections, rate).

The protocol, for someone implementing the server side on a real arm, is in
``docs/arm-link.md``.
"""
