"""``validate --fleet``'s handshake (envbuild/validate/rendezvous.py), for real on loopback sockets."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest

from envbuild.errors import UsageError
from envbuild.validate.rendezvous import (
    FleetError,
    FleetSpec,
    join,
    parse_fleet,
    public_address_warning,
    serve,
)

TOKEN = "fleet-token-for-tests-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spec(port: int, rank: int, nodes: int = 2, token: str = TOKEN) -> FleetSpec:
    return parse_fleet(f"127.0.0.1:{port}", nodes, rank, token)


def in_thread(fn: Any, *args: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn(*args)
        except Exception as exc:
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    out["thread"] = thread
    return out


def test_three_lots_holding_the_token_form_one_group() -> None:
    port = free_port()
    server = in_thread(serve, spec(port, 0, 3), 10.0)
    clients = [in_thread(join, spec(port, r, 3), 10.0) for r in (2, 1)]
    for t in (server, *clients):
        t["thread"].join(15)
        assert "error" not in t, t["error"]  # two messages back to back must not break a reader
    group = server["value"]
    assert group.world == 3 and group.rank == 0 and len(group.peers) == 2
    assert group.init_method == f"tcp://127.0.0.1:{port + 1}"  # torch's store, opened after the handshake
    assert sorted(c["value"].rank for c in clients) == [1, 2]


def test_a_lot_without_the_token_is_refused_and_node_0_names_who_is_missing() -> None:
    port = free_port()
    server = in_thread(serve, spec(port, 0), 2.0)
    time.sleep(0.2)
    with pytest.raises(FleetError, match="refused this lot: wrong token"):
        join(spec(port, 1, token="not-the-token-0123456789"), 5.0)
    server["thread"].join(10)
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
            conn.sendall(b'{"envbuild_fleet": 1, "challenge": "00"}\n')
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


@pytest.mark.parametrize(
    ("address", "nodes", "rank", "token", "message"),
    [
        ("host", 2, 0, TOKEN, "expected HOST:PORT"),
        ("10.0.0.1:65535", 2, 0, TOKEN, "PORT between 1 and 65534"),
        ("10.0.0.1:29500", 1, 0, TOKEN, "--nodes N with N >= 2"),
        ("10.0.0.1:29500", 2, 2, TOKEN, "--node-rank R with 0 <= R < 2"),
        ("10.0.0.1:29500", 2, 1, "short", "at least 16 characters"),
    ],
)
def test_bad_fleet_options_are_usage_errors(
    address: str, nodes: int, rank: int, token: str, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        parse_fleet(address, nodes, rank, token)


def test_a_public_listening_address_gets_the_firewall_rule() -> None:
    assert public_address_warning(parse_fleet("10.1.2.3:29500", 2, 0, TOKEN)) is None
    warning = public_address_warning(parse_fleet("8.8.8.8:29500", 2, 0, TOKEN))
    assert warning is not None and "port 29500:29501 proto tcp" in warning
