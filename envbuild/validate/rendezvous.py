"""Lots joining one group for the performance stage's inter-node all-reduce (``validate --fleet``).

torch's own rendezvous (c10d) keeps peers' state in a TCP store without authentication, and unpickles
what it reads: a stranger who reaches the port can run code.  So the lots first meet on envbuild's own
socket, each proving it holds the shared token (``--fleet-token`` or ``$ENVBUILD_FLEET_TOKEN``):

1. node 0 listens on ``HOST:PORT`` (only for the stage's duration) and sends each caller a random
   challenge;
2. the caller answers ``HMAC-SHA256(token, "client|challenge|rank")`` and a challenge of its own;
3. node 0 answers that with ``HMAC-SHA256(token, "server|challenge")``, so a caller never joins a
   stranger either;
4. when every rank has joined, node 0 tells each one the static ``tcp://HOST:PORT+1`` initialisation
   (torch's store, opened by node 0's rank process right after) and the world size.

Only bounded JSON lines cross this socket, never pickles; the collective itself moves only tensors.
NCCL and gloo then open connections of their own on ephemeral ports (the OS's ``ip_local_port_range``)
between every pair of lots: :func:`ports_to_open` names them all.  The token is never written to a
report, a log or an error.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import os
import secrets
import socket
import time
from dataclasses import dataclass
from typing import BinaryIO

from envbuild.errors import EnvbuildError, UsageError

TOKEN_ENV = "ENVBUILD_FLEET_TOKEN"
MAX_LINE = 4096
CONNECT_TRY_S = 2.0


class FleetError(EnvbuildError):
    """The lots could not form their group; the message names the address and the ports to open."""


@dataclass(frozen=True, kw_only=True)
class FleetSpec:
    host: str
    port: int
    nodes: int
    rank: int
    token: str  # never written anywhere

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def init_method(self) -> str:
        return f"tcp://{self.host}:{self.port + 1}"

    def __repr__(self) -> str:  # keep the token out of any traceback or log line
        return f"FleetSpec(address={self.address!r}, nodes={self.nodes}, rank={self.rank})"


def parse_fleet(address: str, nodes: int | None, rank: int | None, token: str | None) -> FleetSpec:
    """``--fleet HOST:PORT --nodes N --node-rank R`` and the token, checked; :class:`UsageError` else."""
    host, sep, port_text = address.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 1 <= int(port_text) <= 65534:
        raise UsageError(
            f"--fleet {address!r}: expected HOST:PORT with PORT between 1 and 65534 (PORT+1 is used too)"
        )
    if nodes is None or nodes < 2:
        raise UsageError("--fleet needs --nodes N with N >= 2 (the number of lots in the group)")
    if rank is None or not 0 <= rank < nodes:
        raise UsageError(f"--fleet needs --node-rank R with 0 <= R < {nodes} (0 is the lot that listens)")
    token = token or os.environ.get(TOKEN_ENV) or ""
    if len(token) < 16:
        raise UsageError(
            f"--fleet needs a shared token of at least 16 characters: --fleet-token or ${TOKEN_ENV} "
            "(the same on every lot; e.g. `python3 -c 'import secrets; print(secrets.token_hex(16))'`)"
        )
    return FleetSpec(host=host.strip("[]"), port=int(port_text), nodes=nodes, rank=rank, token=token)


def ports_to_open(spec: FleetSpec) -> str:
    """Every port the group needs, for the error and the docs."""
    low, high = _ephemeral_range()
    return (
        f"TCP {spec.port} (envbuild's handshake) and {spec.port + 1} (torch's store) on node 0 "
        f"({spec.host}), and the ephemeral range {low}-{high} between every pair of lots (gloo and NCCL "
        "connect there; choose their interface with GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME)"
    )


def public_address_warning(spec: FleetSpec) -> str | None:
    """A warning when node 0 listens on an address the internet may reach."""
    try:
        ip = ipaddress.ip_address(spec.host)
    except ValueError:
        return None  # a host name: the user's network decides
    if ip.is_private or ip.is_loopback or ip.is_link_local:
        return None
    return (
        f"--fleet listens on the public address {spec.host}: allow only the other lots, e.g. "
        f"`ufw allow from PEER_IP to any port {spec.port}:{spec.port + 1} proto tcp` for each lot"
    )


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            low, high = f.read().split()[:2]
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def _mac(token: str, *parts: object) -> str:
    message = "|".join(str(p) for p in parts).encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()


def _send(conn: socket.socket, data: dict[str, object]) -> None:
    conn.sendall(json.dumps(data).encode() + b"\n")


def _recv(reader: BinaryIO, conn: socket.socket, deadline: float) -> dict[str, object]:
    """One JSON line from ``reader`` (``conn``'s buffered reader: two messages sent back to back arrive
    in one segment, and the second stays buffered for the next call)."""
    conn.settimeout(max(0.1, min(5.0, deadline - time.monotonic())))
    line = reader.readline(MAX_LINE + 1)
    if not line.endswith(b"\n"):
        raise ConnectionError("an over-long message" if len(line) > MAX_LINE else "the connection closed")
    data = json.loads(line)
    if not isinstance(data, dict):
        raise ConnectionError("not a JSON object")
    return data


@dataclass(frozen=True)
class Group:
    init_method: str
    world: int
    rank: int
    peers: tuple[str, ...]  # node 0: the callers' addresses by rank; others: node 0's address


def serve(spec: FleetSpec, timeout_s: float) -> Group:
    """Node 0: admit ``nodes - 1`` callers holding the token, then send each the group's start."""
    deadline = time.monotonic() + timeout_s
    joined: dict[int, tuple[socket.socket, str]] = {}
    try:
        listener = socket.create_server((spec.host, spec.port), reuse_port=False)
    except OSError as exc:
        raise FleetError(f"--fleet: cannot listen on {spec.address}: {exc.strerror or exc}") from None
    try:
        while len(joined) < spec.nodes - 1:
            left = deadline - time.monotonic()
            if left <= 0:
                missing = sorted(set(range(1, spec.nodes)) - set(joined))
                raise FleetError(
                    f"--fleet: node(s) {', '.join(map(str, missing))} did not join {spec.address} within "
                    f"{timeout_s:g} s; open {ports_to_open(spec)}"
                )
            listener.settimeout(left)
            try:
                conn, peer = listener.accept()
            except TimeoutError:
                continue
            rank = _admit(conn, spec, deadline, joined)
            if rank is None:
                conn.close()
            else:
                joined[rank] = (conn, f"{peer[0]}:{peer[1]}")
        for conn, _ in joined.values():
            _send(conn, {"go": True, "init_method": spec.init_method, "world": spec.nodes})
        peers = tuple(addr for _, (_, addr) in sorted(joined.items()))
        return Group(spec.init_method, spec.nodes, 0, peers)
    finally:
        for conn, _ in joined.values():
            conn.close()
        listener.close()


def _admit(
    conn: socket.socket, spec: FleetSpec, deadline: float, joined: dict[int, tuple[socket.socket, str]]
) -> int | None:
    """The caller's rank when it proved the token (and took a free rank), else None."""
    challenge = secrets.token_hex(32)
    try:
        _send(conn, {"envbuild_fleet": 1, "challenge": challenge})
        answer = _recv(conn.makefile("rb"), conn, min(deadline, time.monotonic() + 5.0))
        rank, mac, theirs = answer.get("rank"), answer.get("mac"), answer.get("challenge")
        if not (isinstance(rank, int) and isinstance(mac, str) and isinstance(theirs, str)):
            return None
        if not hmac.compare_digest(mac, _mac(spec.token, "client", challenge, rank)):
            _send(conn, {"refused": "wrong token"})
            return None
        if not 0 < rank < spec.nodes or rank in joined:
            _send(conn, {"refused": f"rank {rank} is not free (1..{spec.nodes - 1}, each once)"})
            return None
        _send(conn, {"mac": _mac(spec.token, "server", theirs)})
        return rank
    except (OSError, ConnectionError, ValueError):
        return None


def join(spec: FleetSpec, timeout_s: float) -> Group:
    """A node other than 0: reach node 0 (retrying until it listens), prove the token, check node 0
    proves it too, and wait for the group's start."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            conn = socket.create_connection((spec.host, spec.port), timeout=CONNECT_TRY_S)
        except OSError as exc:
            last = exc.strerror or str(exc)
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
            continue
        with conn, conn.makefile("rb") as reader:
            try:
                hello = _recv(reader, conn, deadline)
                challenge = hello.get("challenge")
                if hello.get("envbuild_fleet") != 1 or not isinstance(challenge, str):
                    raise FleetError(f"--fleet: {spec.address} is not an envbuild fleet rendezvous")
                mine = secrets.token_hex(32)
                _send(
                    conn,
                    {
                        "rank": spec.rank,
                        "mac": _mac(spec.token, "client", challenge, spec.rank),
                        "challenge": mine,
                    },
                )
                reply = _recv(reader, conn, deadline)
                if "refused" in reply:
                    raise FleetError(
                        f"--fleet: node 0 at {spec.address} refused this lot: {reply['refused']}"
                    )
                mac = reply.get("mac")
                if not isinstance(mac, str) or not hmac.compare_digest(mac, _mac(spec.token, "server", mine)):
                    raise FleetError(f"--fleet: {spec.address} does not hold the fleet token: not joining it")
                go = _recv(reader, conn, deadline)
            except (OSError, ConnectionError, ValueError) as exc:
                raise FleetError(
                    f"--fleet: the handshake with {spec.address} failed ({exc}); open {ports_to_open(spec)}"
                ) from None
        init, world = go.get("init_method"), go.get("world")
        if go.get("go") is not True or init != spec.init_method or world != spec.nodes:
            raise FleetError(f"--fleet: node 0 at {spec.address} sent an unexpected start: {go}")
        return Group(spec.init_method, spec.nodes, spec.rank, (spec.address,))
    raise FleetError(
        f"--fleet: cannot reach node 0 at {spec.address} within {timeout_s:g} s ({last}); "
        f"open {ports_to_open(spec)}"
    )
