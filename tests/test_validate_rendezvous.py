"""``validate --fleet``'s handshake (envbuild/validate/rendezvous.py, fleet_serve.py, fleet_wire.py), for
real on loopback sockets: the lots, and the attacks of issue 36 (findings 2 and 3) beside them."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from envbuild.errors import UsageError
from envbuild.validate import fleet_serve
from envbuild.validate.fleet_serve import serve
from envbuild.validate.fleet_token import mac
from envbuild.validate.fleet_wire import peer_text
from envbuild.validate.rendezvous import (
    FleetError,
    FleetSpec,
    join,
    parse_fleet,
    public_address_warning,
)

TOKEN = "fleet-token-for-tests-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spec(port: int, rank: int, nodes: int = 2, token: str = TOKEN) -> FleetSpec:
    return parse_fleet(f"127.0.0.1:{port}", nodes, rank, token)


def in_thread(fn: Callable[..., Any], *args: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def run() -> None:
        start = time.monotonic()
        try:
            out["value"] = fn(*args)
        except Exception as exc:
            out["error"] = exc
        out["seconds"] = time.monotonic() - start

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    out["thread"] = thread
    return out


def finished(*runs: dict[str, Any], within: float = 30.0) -> None:
    for run in runs:
        run["thread"].join(within)
        assert not run["thread"].is_alive(), "still running"


def connect(port: int) -> socket.socket:
    """A caller on node 0's port, once node 0 listens (as an attacker polls it)."""
    for _ in range(100):
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port}")


def line(conn: socket.socket) -> dict[str, Any]:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(4096)
        assert chunk, "closed"
        data += chunk
    parsed = json.loads(data)
    assert isinstance(parsed, dict)
    return parsed


def test_three_lots_holding_the_token_form_one_group() -> None:
    port = free_port()
    server = in_thread(serve, spec(port, 0, 3), 10.0)
    clients = [in_thread(join, spec(port, r, 3), 10.0) for r in (2, 1)]
    finished(server, *clients)
    for t in (server, *clients):
        assert "error" not in t, t["error"]  # two messages back to back must not break a reader
    group = server["value"]
    assert group.world == 3 and group.rank == 0 and len(group.peers) == 2
    assert group.store == f"127.0.0.1:{port + 1}"  # torch's store, bound by node 0's rank after the start
    assert sorted(c["value"].rank for c in clients) == [1, 2]
    # every lot derives the same proofs from the run's nonce, and a new run draws a new nonce
    assert all(c["value"].proofs == group.proofs for c in clients) and len(group.proofs) == 3
    assert len(set(group.proofs)) == 3 and TOKEN not in repr(group)


def test_a_lot_without_the_token_is_refused_and_node_0_names_who_is_missing() -> None:
    port = free_port()
    server = in_thread(serve, spec(port, 0), 2.0)
    time.sleep(0.2)
    with pytest.raises(FleetError, match="refused this lot: wrong token"):
        join(spec(port, 1, token="not-the-token-0123456789xyz"), 5.0)
    finished(server)
    error = server["error"]
    assert isinstance(error, FleetError)
    assert f"node(s) 1 did not join 127.0.0.1:{port}" in str(error)
    assert f"TCP {port} (envbuild's handshake) and {port + 1} (torch's store)" in str(error)


def test_a_listener_without_the_token_is_not_joined() -> None:
    """A stranger answering on the port (it cannot prove the token) gets no start from this lot."""
    port = free_port()
    listener = socket.create_server(("127.0.0.1", port))

    def impostor() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.sendall(b'{"envbuild_fleet": 2, "challenge": "' + b"0" * 64 + b'"}\n')
            conn.recv(4096)
            conn.sendall(b'{"mac": "' + b"0" * 64 + b'"}\n')

    thread = threading.Thread(target=impostor)
    thread.start()
    with pytest.raises(FleetError, match="does not hold the fleet token: not joining it"):
        join(spec(port, 1), 5.0)
    thread.join(5)
    listener.close()


def test_an_unreachable_node_0_fails_in_time_naming_the_address_and_ports() -> None:
    port = free_port()  # nothing listens there
    start = time.monotonic()
    with pytest.raises(FleetError) as caught:
        join(spec(port, 1), 1.5)
    assert time.monotonic() - start < 4  # never hangs
    message = str(caught.value)
    assert f"cannot reach node 0 at 127.0.0.1:{port} within 1.5 s" in message
    assert "ephemeral range" in message and "GLOO_SOCKET_IFNAME" in message
    assert TOKEN not in message and TOKEN not in repr(spec(port, 1))


# ---- finding 2: one message before authentication must not kill node 0 ------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        # hmac.compare_digest raises TypeError on non-ASCII str
        json.dumps({"rank": 1, "mac": "é" * 64, "challenge": "0" * 64}, ensure_ascii=False).encode(),
        b"[" * 2000,  # json.loads: RecursionError
        b'{"rank": 1, "mac": "\xff\xfe", "challenge": 1}',  # not UTF-8
        b'{"rank": true, "mac": null, "challenge": []}',
        b"x" * 5000,  # over the 4 KiB line cap
        b"",  # an empty line
    ],
    ids=["non-ascii-mac", "nesting", "bad-utf8", "wrong-types", "over-long", "empty"],
)
def test_a_hostile_reply_refuses_that_caller_and_node_0_keeps_listening(reply: bytes) -> None:
    port = free_port()
    server = in_thread(serve, spec(port, 0), 15.0)
    with connect(port) as hostile:
        assert "challenge" in line(hostile)
        hostile.sendall(reply + b"\n")
        hostile.settimeout(5)
        try:
            answer = hostile.recv(4096)  # a refusal, or the connection closed
        except OSError:
            answer = b""
        assert not answer or b"refused" in answer
    lot = in_thread(join, spec(port, 1), 15.0)
    finished(server, lot)
    assert "error" not in lot, lot.get("error")
    assert "error" not in server, server.get("error")
    assert len(server["value"].peers) == 1


def test_a_replayed_answer_is_refused() -> None:
    """An answer recorded from a lot's handshake (its MAC covers node 0's challenge of that
    connection) is worth nothing on another connection."""
    port = free_port()
    server = in_thread(serve, spec(port, 0), 6.0)
    with connect(port) as first:
        challenge = line(first)["challenge"]
        recorded = {"rank": 1, "mac": mac(TOKEN, "client", challenge, 1), "challenge": "1" * 64}
    with connect(port) as replay:
        line(replay)
        replay.sendall(json.dumps(recorded).encode() + b"\n")
        assert line(replay) == {"refused": "wrong token"}
    lot = in_thread(join, spec(port, 1), 10.0)
    finished(server, lot)
    assert "error" not in lot and "error" not in server


# ---- finding 3: stalls, and lots that start apart --------------------------------------------------


def test_an_idle_caller_does_not_hold_up_a_lot() -> None:
    """Before: node 0 read the idle caller for 5 s, the lot's own read of node 0's hello gave up after
    5 s, and it never tried again."""
    port = free_port()
    server = in_thread(serve, spec(port, 0), 12.0)
    with connect(port):  # says nothing
        time.sleep(0.3)
        lot = in_thread(join, spec(port, 1), 12.0)
        finished(server, lot)
    assert "error" not in lot, lot.get("error")
    assert lot["seconds"] < 3 and server["seconds"] < 4


def _drip(port: int, stop: threading.Event, every: float) -> None:
    with connect(port) as conn:
        line(conn)
        for byte in b'{"rank": 1, "mac": "' + b"0" * 200:
            if stop.wait(every):
                return
            try:
                conn.sendall(bytes([byte]))
            except OSError:
                return


def test_a_slow_drip_caller_is_cut_at_node_0s_deadline() -> None:
    """One byte every 2 s (under the old per-read limit): node 0 must still give up at its own deadline;
    before, it stayed in serve for as long as the bytes came."""
    port = free_port()
    stop = threading.Event()
    server = in_thread(serve, spec(port, 0), 4.0)
    dripper = threading.Thread(target=_drip, args=(port, stop, 2.0), daemon=True)
    dripper.start()
    try:
        finished(server, within=20)
    finally:
        stop.set()
    assert isinstance(server.get("error"), FleetError), server
    assert server["seconds"] < 6.5, server["seconds"]
    assert "node(s) 1 did not join" in str(server["error"])


def test_a_slow_drip_caller_does_not_hold_up_a_lot() -> None:
    port = free_port()
    stop = threading.Event()
    server = in_thread(serve, spec(port, 0), 12.0)
    dripper = threading.Thread(target=_drip, args=(port, stop, 1.0), daemon=True)
    dripper.start()
    time.sleep(0.5)
    lot = in_thread(join, spec(port, 1), 12.0)
    try:
        finished(server, lot)
    finally:
        stop.set()
    assert "error" not in lot, lot.get("error")
    assert lot["seconds"] < 5 and server["seconds"] < 6


def _authenticate(port: int, rank: int) -> tuple[socket.socket, str, str]:
    """A lot's first steps done by hand: connected, the token proved, admitted."""
    conn = connect(port)
    challenge = line(conn)["challenge"]
    mine = "2" * 64
    conn.sendall(
        json.dumps({"rank": rank, "mac": mac(TOKEN, "client", challenge, rank), "challenge": mine}).encode()
        + b"\n"
    )
    assert line(conn) == {"mac": mac(TOKEN, "server", mine)}
    return conn, challenge, mine


def test_a_lot_that_leaves_before_the_start_is_no_peer() -> None:
    """Before: node 0 named a lot as its peer as soon as it had joined, gone or not."""
    port = free_port()
    server = in_thread(serve, spec(port, 0, 3), 2.5)
    conn, _, _ = _authenticate(port, 2)
    conn.close()  # the lot is gone before the group starts
    lot = in_thread(join, spec(port, 1, 3), 10.0)
    finished(server, lot)
    assert isinstance(server.get("error"), FleetError), server
    assert "node(s) 2 did not join" in str(server["error"])
    # the lot that stayed hears why, at once, instead of waiting out its own timeout
    assert isinstance(lot.get("error"), FleetError)
    assert "gave up: node(s) 2 did not join" in str(lot["error"]) and lot["seconds"] < 6


def test_a_lot_that_does_not_confirm_the_start_fails_node_0_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fleet_serve, "READY_S", 1.0)
    port = free_port()
    server = in_thread(serve, spec(port, 0, 3), 10.0)
    conn, _, _ = _authenticate(port, 2)
    lot = in_thread(join, spec(port, 1, 3), 10.0)
    with conn:
        go = line(conn)  # the start, which this lot never confirms
        assert go["go"] is True and go["world"] == 3 and go["store"] == f"127.0.0.1:{port + 1}"
        finished(server, lot)
    assert isinstance(server.get("error"), FleetError), server
    assert "lot(s) 2 (127.0.0.1:" in str(server["error"]) and "did not confirm the start" in str(
        server["error"]
    )
    assert "gave up: lot(s) 2" in str(lot.get("error"))


def test_a_second_lot_claiming_a_held_rank_from_another_address_is_refused() -> None:
    port = free_port()
    server = in_thread(serve, spec(port, 0, 3), 2.0)
    held, _, _ = _authenticate(port, 1)
    with held, socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.2", 0)) as other:
        challenge = line(other)["challenge"]
        other.sendall(
            json.dumps({"rank": 1, "mac": mac(TOKEN, "client", challenge, 1), "challenge": "3" * 64}).encode()
            + b"\n"
        )
        refused = line(other)["refused"]
        assert refused.startswith("rank 1 has already joined from 127.0.0.1:")
        finished(server)


@pytest.mark.slow
def test_three_lots_started_6_s_apart_all_join() -> None:
    """Before: rank 1 gave up after 5 s waiting for the start, and node 0 still reported OK with rank 1
    among its peers."""
    port = free_port()
    server = in_thread(serve, spec(port, 0, 3), 20.0)
    time.sleep(0.2)
    first = in_thread(join, spec(port, 1, 3), 20.0)
    time.sleep(6.0)
    second = in_thread(join, spec(port, 2, 3), 20.0)
    finished(server, first, second)
    for run in (server, first, second):
        assert "error" not in run, run.get("error")
    assert len(server["value"].peers) == 2
    assert first["value"].proofs == second["value"].proofs == server["value"].proofs


# ---- a peer's words --------------------------------------------------------------------------------


def test_a_fake_node_0s_refusal_reaches_the_error_with_its_control_characters_visible() -> None:
    port = free_port()
    listener = socket.create_server(("127.0.0.1", port))

    def fake() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.sendall(b'{"envbuild_fleet": 2, "challenge": "' + b"0" * 64 + b'"}\n')
            conn.recv(4096)
            conn.sendall(b'{"refused": "\\u001b[2J\\u001b]0;owned\\u0007<script>"}\n')

    thread = threading.Thread(target=fake)
    thread.start()
    with pytest.raises(FleetError) as caught:
        join(spec(port, 1), 5.0)
    thread.join(5)
    listener.close()
    message = str(caught.value)
    assert "\x1b" not in message and "\x07" not in message
    assert "refused this lot: \\x1b[2J\\x1b]0;owned\\x07<script>" in message


def test_peer_text_is_bounded_and_shows_control_characters() -> None:
    assert peer_text("a\x1bb\r\nc\u2028") == "a\\x1bb\\x0d\\x0ac\\u2028"  # envbuild.untrusted.terminal
    assert len(peer_text("x" * 5000)) == 303
    assert peer_text({"k": "\x1b"}) == '{"k": "\\u001b"}'


@pytest.mark.parametrize(
    ("address", "nodes", "rank", "message"),
    [
        ("host", 2, 0, "expected HOST:PORT"),
        ("10.0.0.1:65535", 2, 0, "PORT between 1 and 65534"),
        ("10.0.0.1:29500", 1, 0, "--nodes N with N >= 2"),
        ("10.0.0.1:29500", 2, 2, "--node-rank R with 0 <= R < 2"),
    ],
)
def test_bad_fleet_options_are_usage_errors(address: str, nodes: int, rank: int, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_fleet(address, nodes, rank, TOKEN)


def test_a_public_listening_address_gets_the_firewall_rule() -> None:
    assert public_address_warning(parse_fleet("10.1.2.3:29500", 2, 0, TOKEN)) is None
    warning = public_address_warning(parse_fleet("8.8.8.8:29500", 2, 0, TOKEN))
    assert warning is not None and "port 29500:29501 proto tcp" in warning
    assert "neither authenticated nor encrypted" in warning
