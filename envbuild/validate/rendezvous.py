"""Lots joining one group for the performance stage's inter-node all-reduce (``validate --fleet``).

torch's own rendezvous (c10d) keeps peers' state in a TCP store without authentication, and unpickles
what it reads: a stranger who reaches the port can run code.  So the lots first meet on envbuild's own
socket, each proving it holds the shared token (``--fleet-token`` or ``$ENVBUILD_FLEET_TOKEN``,
:mod:`envbuild.validate.fleet_token`):

1. node 0 listens on ``HOST:PORT`` (only for the stage's duration) and sends each caller a random
   challenge;
2. the caller answers ``HMAC(token, "client|challenge|rank")`` and a challenge of its own;
3. node 0 answers that with ``HMAC(token, "server|challenge")``, so a caller never joins a stranger;
4. when every rank has joined, node 0 draws the run's nonce and sends each lot the start: torch's store
   at ``HOST:PORT+1``, the world size and the nonce, with a MAC over them and that lot's challenge;
5. each lot confirms (``ready``, a MAC over node 0's challenge, the nonce and its rank), and only when
   every lot has confirmed does node 0 send ``start`` (else ``abort``, with the reason) and name the
   lots as its peers.

Node 0 handles callers concurrently (a thread each, at most :data:`MAX_PENDING`, and
:data:`MAX_PER_HOST` from one address), each with :data:`HANDSHAKE_S` for its whole exchange; whatever a
caller's bytes raise refuses that caller and node 0 keeps listening.  A lot retries until its timeout.

Then node 0's rank process binds torch's store to ``HOST:PORT+1`` itself (that address only, not every
interface) and every rank proves the token over the group before anything is measured: an all-gather of
``HMAC(token, "proof|nonce|rank")`` (:func:`fleet_token.proofs`; the nonce never goes into the store,
whose keys any client can list).  A rank that cannot prove it is named, and nothing is measured.

Only bounded JSON lines cross envbuild's socket, never pickles; the collective moves only tensors.  NCCL
and gloo then open connections of their own on ephemeral ports between every pair of lots
(:func:`ports_to_open`); that traffic is neither authenticated nor encrypted (:data:`TRANSPORT_NOTE`).
The token is never written to a report, a log or an error.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import socket
import time
from dataclasses import dataclass, field

from envbuild.errors import EnvbuildError, UsageError
from envbuild.validate.fleet_token import TOKEN_ENV, is_hex, mac, proofs, take_token
from envbuild.validate.fleet_wire import Lines, WireError, peer_text, send

__all__ = ["TOKEN_ENV", "FleetError", "FleetSpec", "Group", "join", "parse_fleet"]

PROTOCOL = 2
CONNECT_TRY_S = 2.0
RETRY_S = 0.5
READY_S = 10.0  # admitted lots confirm the start, and hear node 0's answer, within this
TRANSPORT_NOTE = (
    "gloo and NCCL traffic between the lots is neither authenticated nor encrypted, as with every "
    "torch.distributed job: run --fleet on the provider's private network or through a tunnel "
    "(WireGuard, SSH)"
)


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
    def store(self) -> str:
        """torch's store: bound by node 0's rank process to this address only."""
        return f"{self.host}:{self.port + 1}"

    def __repr__(self) -> str:  # keep the token out of any traceback or log line
        return f"FleetSpec(address={self.address!r}, nodes={self.nodes}, rank={self.rank})"


def parse_fleet(address: str, nodes: int | None, rank: int | None, token: str | None) -> FleetSpec:
    """``--fleet HOST:PORT --nodes N --node-rank R`` and the token, checked; :class:`UsageError` else.
    ``$ENVBUILD_FLEET_TOKEN`` leaves envbuild's environment here (:func:`fleet_token.take_token`)."""
    host, sep, port_text = address.rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 1 <= int(port_text) <= 65534:
        raise UsageError(
            f"--fleet {address!r}: expected HOST:PORT with PORT between 1 and 65534 (PORT+1 is used too)"
        )
    if nodes is None or nodes < 2:
        raise UsageError("--fleet needs --nodes N with N >= 2 (the number of lots in the group)")
    if rank is None or not 0 <= rank < nodes:
        raise UsageError(f"--fleet needs --node-rank R with 0 <= R < {nodes} (0 is the lot that listens)")
    secret = take_token(token)
    return FleetSpec(host=host.strip("[]"), port=int(port_text), nodes=nodes, rank=rank, token=secret)


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
        f"`ufw allow from PEER_IP to any port {spec.port}:{spec.port + 1} proto tcp` for each lot; "
        + TRANSPORT_NOTE
    )


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            low, high = f.read().split()[:2]
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


@dataclass(frozen=True)
class Group:
    store: str  # torch's store, HOST:PORT+1
    world: int
    rank: int
    peers: tuple[str, ...]  # node 0: the lots that confirmed the start, by rank; others: node 0's address
    proofs: tuple[str, ...] = field(repr=False)  # what each rank all-gathers (fleet_token.proofs)
    admitted: str = ""  # node 0: "rank 1 (ADDRESS), ..."; others: "node 0 (ADDRESS)"


def listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, reuse_port=False)


def join(spec: FleetSpec, timeout_s: float) -> Group:
    """A node other than 0: reach node 0 (retrying until it listens, or until a broken exchange can be
    tried again), prove the token, check node 0 proves it too, and wait for the group's start."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    admitted = False
    while (left := deadline - time.monotonic()) > 0:
        try:
            conn = socket.create_connection((spec.host, spec.port), timeout=min(CONNECT_TRY_S, left))
        except OSError as exc:
            last = exc.strerror or str(exc)
        else:
            with conn:
                state: dict[str, bool] = {}
                try:
                    return _exchange(spec, conn, deadline, state)
                except WireError as exc:
                    last = f"the handshake broke off: {exc}"
                admitted = admitted or state.get("admitted", False)
        time.sleep(min(RETRY_S, max(0.0, deadline - time.monotonic())))
    if admitted:
        raise FleetError(
            f"--fleet: node 0 at {spec.address} admitted this lot, but the group did not start within "
            f"{timeout_s:g} s ({last}): start all {spec.nodes} lots within the stage's timeout"
        )
    raise FleetError(
        f"--fleet: cannot reach node 0 at {spec.address} within {timeout_s:g} s ({last}); "
        f"open {ports_to_open(spec)}"
    )


def _exchange(spec: FleetSpec, conn: socket.socket, deadline: float, state: dict[str, bool]) -> Group:
    """One try; :class:`WireError` when it broke off (tried again), :class:`FleetError` when it is final."""
    lines = Lines(conn)
    hello = lines.read(deadline)
    challenge = hello.get("challenge")
    if hello.get("envbuild_fleet") != PROTOCOL or not is_hex(challenge):
        raise FleetError(
            f"--fleet: {spec.address} is not an envbuild fleet rendezvous of this version "
            f"(protocol {PROTOCOL}): {peer_text(hello)}"
        )
    mine = secrets.token_hex(32)
    answer = {"rank": spec.rank, "mac": mac(spec.token, "client", challenge, spec.rank), "challenge": mine}
    send(conn, answer, deadline)
    reply = lines.read(deadline)
    if "refused" in reply:
        raise FleetError(f"--fleet: node 0 at {spec.address} refused this lot: {peer_text(reply['refused'])}")
    if not _verified(reply.get("mac"), mac(spec.token, "server", mine)):
        raise FleetError(f"--fleet: {spec.address} does not hold the fleet token: not joining it")
    state["admitted"] = True
    go = lines.read(deadline)  # node 0 sends it once every lot has joined
    nonce = go.get("nonce")
    if "abort" in go:
        raise FleetError(f"--fleet: node 0 at {spec.address} gave up: {peer_text(go['abort'])}")
    expected = mac(spec.token, "go", mine, nonce, spec.store, spec.nodes)
    if go.get("go") is not True or go.get("store") != spec.store or go.get("world") != spec.nodes:
        raise FleetError(f"--fleet: node 0 at {spec.address} sent an unexpected start: {peer_text(go)}")
    if not is_hex(nonce, 32) or not _verified(go.get("mac"), expected):
        raise FleetError(f"--fleet: the start from {spec.address} does not carry the fleet token's MAC")
    confirm = time.monotonic() + 2 * READY_S
    send(conn, {"ready": mac(spec.token, "ready", challenge, nonce, spec.rank)}, confirm)
    start = lines.read(confirm)
    if "abort" in start:
        raise FleetError(f"--fleet: node 0 at {spec.address} gave up: {peer_text(start['abort'])}")
    if not _verified(start.get("start"), mac(spec.token, "start", mine, nonce)):
        raise FleetError(f"--fleet: node 0 at {spec.address} sent an unexpected start: {peer_text(start)}")
    return Group(
        spec.store,
        spec.nodes,
        spec.rank,
        (spec.address,),
        proofs(spec.token, str(nonce), spec.nodes),
        f"node 0 ({spec.address})",
    )


def _verified(value: object, expected: str) -> bool:
    """``value`` is a MAC (64 hex digits) equal to ``expected``; anything else is False, never an error."""
    return is_hex(value) and hmac.compare_digest(str(value), expected)
