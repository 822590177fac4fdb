"""CURVE keys of the arm link and the address policy.

``create_keys(DIR)`` (``capture-trainer arm keys DIR``) writes two key pairs with
:func:`zmq.auth.create_certificates`, readable by the owner only (files 0600, folder
0700)::

    DIR/server.key          the server's public key      (the client needs it)
    DIR/server.key_secret   the server's key pair         (the server only)
    DIR/client.key          the client's public key       (the server authorises it)
    DIR/client.key_secret   the client's key pair         (the client only)

Copy the folder to both machines, or give each side only its files. Loading a secret
that group or others can read is refused, as ssh refuses such a key.

The address policy: an address is ``tcp://HOST:PORT`` (``HOST:PORT`` is completed with
``tcp://``; port ``*`` or 0 on a bind takes a free port). Binding or connecting to a
HOST that is not loopback (127.0.0.0/8, ::1, ``localhost``) without keys is refused:
only CURVE (encryption, server authentication, an allow-list of client keys) may cross
a network.
"""

from __future__ import annotations

import ipaddress
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from capture_trainer.errors import ArmError

SERVER_PUBLIC = "server.key"
SERVER_SECRET = "server.key_secret"
CLIENT_PUBLIC = "client.key"
CLIENT_SECRET = "client.key_secret"
KEY_FILES = (SERVER_PUBLIC, SERVER_SECRET, CLIENT_PUBLIC, CLIENT_SECRET)


@dataclass(frozen=True)
class ServerKeys:
    """What a CURVE server needs: its key pair and the client public keys it accepts
    (Z85 text, 40 bytes each)."""

    public: bytes
    secret: bytes
    authorised: frozenset[bytes]


@dataclass(frozen=True)
class ClientKeys:
    """What a CURVE client needs: its key pair and the server's public key (Z85)."""

    public: bytes
    secret: bytes
    server_public: bytes


def create_keys(directory: str | Path, force: bool = False) -> list[Path]:
    """Write a server and a client key pair into ``directory`` (created, mode 0700).

    Args:
        directory: the key folder.
        force: replace key files that exist (otherwise they are kept and this refuses).

    Returns:
        The four files written (mode 0600).

    Raises:
        ArmError: key files exist and ``force`` is false, or the folder cannot be made.
    """
    import zmq.auth

    folder = Path(directory).expanduser()
    existing = [name for name in KEY_FILES if (folder / name).exists()]
    if existing and not force:
        raise ArmError(f"{folder} already holds {', '.join(existing)}; pass --force to replace them")
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        old_umask = os.umask(0o077)  # the files are never readable by others, not even briefly
        try:
            for name in ("server", "client"):
                for suffix in (".key", ".key_secret"):
                    (folder / (name + suffix)).unlink(missing_ok=True)
                zmq.auth.create_certificates(str(folder), name)
        finally:
            os.umask(old_umask)
        paths = [folder / name for name in KEY_FILES]
        for path in paths:
            os.chmod(path, 0o600)
    except OSError as error:
        raise ArmError(f"cannot write keys to {folder}: {error.strerror or error}") from None
    return paths


def _load(path: Path, secret: bool) -> tuple[bytes, bytes | None]:
    import zmq.auth

    if not path.is_file():
        raise ArmError(f"key file {path} is missing (make keys with: capture-trainer arm keys {path.parent})")
    mode = stat.S_IMODE(path.stat().st_mode)
    if secret and mode & 0o077:
        raise ArmError(f"key file {path} is readable by others (mode {mode:04o}); chmod 600 {path}")
    try:
        public, private = zmq.auth.load_certificate(str(path))
    except (OSError, ValueError) as error:
        raise ArmError(f"key file {path} is not a ZeroMQ certificate: {error}") from None
    if secret and private is None:
        raise ArmError(f"key file {path} holds no secret key")
    return public, private


def load_server_keys(directory: str | Path) -> ServerKeys:
    """The server's pair and the authorised client key from a key folder."""
    folder = Path(directory).expanduser()
    public, secret = _load(folder / SERVER_SECRET, secret=True)
    client_public, _ = _load(folder / CLIENT_PUBLIC, secret=False)
    assert secret is not None  # _load refuses a secret file without a secret
    return ServerKeys(public, secret, frozenset({client_public}))


def load_client_keys(directory: str | Path) -> ClientKeys:
    """The client's pair and the server's public key from a key folder."""
    folder = Path(directory).expanduser()
    public, secret = _load(folder / CLIENT_SECRET, secret=True)
    server_public, _ = _load(folder / SERVER_PUBLIC, secret=False)
    assert secret is not None
    return ClientKeys(public, secret, server_public)


def ephemeral_keys() -> tuple[ServerKeys, ClientKeys]:
    """A fresh server and client key pair held in memory only (the private loopback
    server of a ``remote`` backend built without an address)."""
    import zmq

    server_public, server_secret = zmq.curve_keypair()
    client_public, client_secret = zmq.curve_keypair()
    return (ServerKeys(server_public, server_secret, frozenset({client_public})),
            ClientKeys(client_public, client_secret, server_public))


def normalise_address(address: str, binding: bool) -> tuple[str, str]:
    """``(endpoint, host)``: the ZeroMQ endpoint for ``address`` and its host.

    Raises:
        ArmError: not ``tcp://HOST:PORT`` or ``HOST:PORT``.
    """
    text = address.strip()
    if "://" in text:
        scheme, _, rest = text.partition("://")
        if scheme != "tcp":
            raise ArmError(f"arm link address {address!r}: only tcp://HOST:PORT is supported")
    else:
        rest = text
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port:
        raise ArmError(f"arm link address {address!r} must be HOST:PORT or tcp://HOST:PORT")
    if port in ("*", "0"):
        if not binding:
            raise ArmError(f"arm link address {address!r}: a client needs the server's port")
        port = "*"
    elif not port.isdigit() or not 0 < int(port) < 65536:
        raise ArmError(f"arm link address {address!r}: port must be 1-65535")
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if bare == "localhost":
        bare, host = "127.0.0.1", "127.0.0.1"
    return f"tcp://{host}:{port}", bare


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``; False for anything else (names too)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_address(address: str, have_keys: bool, binding: bool) -> tuple[str, str]:
    """:func:`normalise_address`, refusing a non-loopback host without keys (one line)."""
    endpoint, host = normalise_address(address, binding)
    if not have_keys and not is_loopback(host):
        verb = "bind to" if binding else "connect to"
        raise ArmError(f"refusing to {verb} non-loopback address {address!r} without keys "
                       f"(make them with: capture-trainer arm keys DIR, then pass --keys DIR)")
    return endpoint, host
