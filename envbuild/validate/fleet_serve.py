"""Node 0's side of ``validate --fleet``'s handshake (:func:`serve`; the other lots call
:func:`envbuild.validate.rendezvous.join`).

- The listener accepts in the caller's thread; each caller is handled in a thread of its own, so that
  an idle or slow caller never holds up a lot that holds the token.  At most :data:`MAX_PENDING`
  callers are handled at once, and :data:`MAX_PER_HOST` from one address; others are closed at once
  (a lot retries).
- A caller has :data:`HANDSHAKE_S` (and never past node 0's own deadline) for its whole exchange, and
  whatever its bytes raise refuses it: the listener keeps listening.
- An admitted lot waits, quiet, on its connection.  One that closed it before the start is dropped and
  may join again (a lot retries until its timeout); a second lot claiming a rank held by a live
  connection from another address is refused.
- The start goes out once every rank has joined; node 0 names a lot as its peer only once that lot has
  confirmed the start, and tells every lot ``start`` or ``abort``.
"""

from __future__ import annotations

import contextlib
import hmac
import secrets
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass

from envbuild.validate.fleet_token import is_hex, mac, proofs
from envbuild.validate.fleet_wire import Lines, WireError, alive, send
from envbuild.validate.rendezvous import (
    PROTOCOL,
    READY_S,
    FleetError,
    FleetSpec,
    Group,
    listen,
    ports_to_open,
)

HANDSHAKE_S = 10.0  # a caller's whole exchange, from its connection to its admission
MAX_PENDING = 64
MAX_PER_HOST = 4
POLL_S = 0.25  # how often the accepting loop looks whether every rank has joined
ABORT_S = 1.0  # telling the admitted lots that node 0 gave up


@dataclass
class Joined:
    conn: socket.socket
    lines: Lines
    address: str  # "ip:port"
    host: str
    ours: str  # the challenge node 0 sent this lot
    theirs: str  # the lot's own challenge


class Server:
    """The lots admitted so far, and the callers being handled."""

    def __init__(self, spec: FleetSpec, deadline: float) -> None:
        self.spec = spec
        self.deadline = deadline
        self.lock = threading.Lock()
        self.joined: dict[int, Joined] = {}
        self.pending: set[socket.socket] = set()
        self.per_host: Counter[str] = Counter()
        self.closed = False  # the group is complete, or node 0 gave up: no more admissions

    # ---- admitting ------------------------------------------------------------------------------------

    def gather(self, listener: socket.socket) -> dict[int, Joined] | None:
        """Accept callers until every rank has joined with a live connection (the lots, by rank), or
        None at the deadline."""
        while (members := self._complete()) is None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                with self.lock:
                    self.closed = True
                return None
            listener.settimeout(min(left, POLL_S))
            try:
                conn, peer = listener.accept()
            except TimeoutError:
                continue
            except OSError:  # out of descriptors, a connection reset while queued: keep listening
                time.sleep(min(POLL_S, max(0.0, left)))
                continue
            self._handle(conn, str(peer[0]), f"{peer[0]}:{peer[1]}")
        return members

    def _complete(self) -> dict[int, Joined] | None:
        """The lots by rank once every rank has joined and is still connected; then no more admissions
        (decided under the lock, so a caller being admitted now cannot slip in after)."""
        with self.lock:
            for rank, lot in list(self.joined.items()):
                if not alive(lot.conn):
                    lot.conn.close()
                    del self.joined[rank]
            if len(self.joined) < self.spec.nodes - 1:
                return None
            self.closed = True
            return dict(sorted(self.joined.items()))

    def _handle(self, conn: socket.socket, host: str, address: str) -> None:
        with self.lock:
            if len(self.pending) >= MAX_PENDING or self.per_host[host] >= MAX_PER_HOST:
                conn.close()
                return
            self.pending.add(conn)
            self.per_host[host] += 1
        threading.Thread(target=self._caller, args=(conn, host, address), daemon=True).start()

    def _caller(self, conn: socket.socket, host: str, address: str) -> None:
        admitted = False
        try:
            admitted = self._admit(conn, host, address)
        except Exception:  # whatever a caller's bytes raise refuses that caller; node 0 keeps listening
            admitted = False
        finally:
            with self.lock:
                self.pending.discard(conn)
                self.per_host[host] -= 1
            if not admitted:
                conn.close()

    def _admit(self, conn: socket.socket, host: str, address: str) -> bool:
        """Whether the caller proved the token and took a free rank (then it is in :attr:`joined`)."""
        deadline = min(self.deadline, time.monotonic() + HANDSHAKE_S)
        lines = Lines(conn)
        ours = secrets.token_hex(32)
        try:
            send(conn, {"envbuild_fleet": PROTOCOL, "challenge": ours}, deadline)
            answer = lines.read(deadline)
        except WireError:
            return False
        rank, their_mac, theirs = answer.get("rank"), answer.get("mac"), answer.get("challenge")
        if type(rank) is not int or not is_hex(their_mac) or not is_hex(theirs):
            return _refuse(conn, "not an answer of envbuild's fleet handshake", deadline)
        if not hmac.compare_digest(str(their_mac), mac(self.spec.token, "client", ours, rank)):
            return _refuse(conn, "wrong token", deadline)
        if not 0 < rank < self.spec.nodes:
            return _refuse(conn, f"rank {rank} is not one of 1..{self.spec.nodes - 1}", deadline)
        lot = Joined(conn, lines, address, host, ours, str(theirs))
        refusal = None
        with self.lock:  # decided under the lock, said outside it (a send may wait on the caller)
            held = self.joined.get(rank)
            if self.closed:
                refusal = "the group has started without this lot"
            elif held is not None and held.host != host and alive(held.conn):
                refusal = f"rank {rank} has already joined from {held.address}"
            else:
                if held is not None:  # the same lot again (it retried), or its old connection is gone
                    held.conn.close()
                self.joined[rank] = lot
        if refusal is not None:
            return _refuse(conn, refusal, deadline)
        try:
            send(conn, {"mac": mac(self.spec.token, "server", theirs)}, deadline)
        except WireError:
            with self.lock:
                if self.joined.get(rank) is lot:
                    del self.joined[rank]
            return False
        return True

    def missing(self) -> list[int]:
        with self.lock:
            return sorted(set(range(1, self.spec.nodes)) - set(self.joined))

    # ---- starting -------------------------------------------------------------------------------------

    def start(self, members: dict[int, Joined]) -> Group:
        """Send every lot the start, collect each lot's confirmation, then ``start`` (or ``abort``)."""
        spec = self.spec
        self._close_pending()
        nonce = secrets.token_hex(16)
        confirm = time.monotonic() + READY_S
        unconfirmed: list[int] = []
        for rank, lot in members.items():
            go_mac = mac(spec.token, "go", lot.theirs, nonce, spec.store, spec.nodes)
            message = {"go": True, "store": spec.store, "world": spec.nodes, "nonce": nonce, "mac": go_mac}
            try:
                send(lot.conn, message, confirm)
            except WireError:
                unconfirmed.append(rank)
        for rank, lot in members.items():
            if rank in unconfirmed:
                continue
            try:
                ready = lot.lines.read(confirm).get("ready")
            except WireError:
                ready = None
            if not is_hex(ready) or not hmac.compare_digest(
                str(ready), mac(spec.token, "ready", lot.ours, nonce, rank)
            ):
                unconfirmed.append(rank)
        if unconfirmed:
            named = ", ".join(f"{r} ({members[r].address})" for r in sorted(unconfirmed))
            self.abort(f"lot(s) {named} did not confirm the start")
            raise FleetError(
                f"--fleet: lot(s) {named} joined {spec.address} but did not confirm the start within "
                f"{READY_S:g} s; no group was formed"
            )
        for rank, lot in members.items():
            try:
                send(lot.conn, {"start": mac(spec.token, "start", lot.theirs, nonce)}, confirm)
            except WireError:
                unconfirmed.append(rank)
        if unconfirmed:
            raise FleetError(f"--fleet: lot(s) {unconfirmed} left before the start; no group was formed")
        return Group(
            spec.store,
            spec.nodes,
            0,
            tuple(lot.address for lot in members.values()),
            proofs(spec.token, nonce, spec.nodes),
            ", ".join(f"rank {r} ({lot.address})" for r, lot in members.items()),
        )

    def abort(self, reason: str) -> None:
        """Tell every admitted lot that node 0 gave up, and why (best effort: a lot also times out)."""
        with self.lock:
            self.closed = True
            lots = list(self.joined.values())
        until = time.monotonic() + ABORT_S
        for lot in lots:
            with contextlib.suppress(WireError):
                send(lot.conn, {"abort": reason}, until)

    def _close_pending(self) -> None:
        with self.lock:
            self.closed = True
            pending = list(self.pending)
        for conn in pending:  # its thread's next read fails, and it ends
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._close_pending()
        with self.lock:
            lots = list(self.joined.values())
        for lot in lots:
            lot.conn.close()


def _refuse(conn: socket.socket, reason: str, deadline: float) -> bool:
    with contextlib.suppress(WireError):
        send(conn, {"refused": reason}, deadline)
    return False


def serve(spec: FleetSpec, timeout_s: float) -> Group:
    """Node 0: admit ``nodes - 1`` lots holding the token, send each the start, and return once every one
    has confirmed it (:class:`Server` holds the listener's side; the other lots
    :func:`envbuild.validate.rendezvous.join`)."""
    deadline = time.monotonic() + timeout_s
    try:
        listener = listen(spec.host, spec.port)
    except OSError as exc:
        raise FleetError(f"--fleet: cannot listen on {spec.address}: {exc.strerror or exc}") from None
    server = Server(spec, deadline)
    try:
        members = server.gather(listener)
        listener.close()
        if members is None:
            missing = server.missing()
            named = ", ".join(map(str, missing))
            reason = f"node(s) {named} did not join {spec.address} within {timeout_s:g} s"
            server.abort(reason)
            raise FleetError(f"--fleet: {reason}; open {ports_to_open(spec)}")
        return server.start(members)
    finally:
        listener.close()
        server.close()
