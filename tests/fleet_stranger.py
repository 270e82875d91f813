"""A process without the fleet token that tries to take rank RANK in a ``validate --fleet`` group (issue 36,
finding 1): it polls node 0's store port (HOST:PORT+1) and, as soon as something listens there, joins
as a rank would, then all-reduces.  Run by tests/test_fleet_stranger.py beside two real lots.

    python fleet_stranger.py HOST PORT RANK WORLD UNTIL_UNIX MODE

MODE ``tcp``: static ``tcp://HOST:PORT`` initialisation, as the lots joined before issue 36; ``store``:
a ``TCPStore`` client and ``init_process_group(store=...)``, then an all-gather of 32 random bytes,
as the lots join now.  Prints ``STRANGER ...`` lines: where the store listened (from /proc/net/tcp*),
how far it got, and ``STRANGER all_reduce done`` if it measured with the group.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from datetime import timedelta

LISTEN = "0A"


def listening(port: int) -> list[str]:
    """The local addresses listening on ``port`` (IPv4 and IPv6), as /proc/net/tcp* shows them."""
    found = []
    for name, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            with open(name, encoding="ascii") as table:
                rows = table.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            address, port_hex = cols[1].split(":")
            if cols[3] == LISTEN and int(port_hex, 16) == port:
                raw = bytes.fromhex(address)
                if width == 8:
                    found.append(socket.inet_ntop(socket.AF_INET, raw[::-1]))
                else:
                    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
                    found.append(socket.inet_ntop(socket.AF_INET6, words))
    return found


def main() -> None:
    host, port, rank, world, until, mode = sys.argv[1:7]
    import torch
    import torch.distributed as dist

    print("STRANGER ready", flush=True)
    store = None
    while True:  # poll: one short connection each time (torch's own client backs off for seconds)
        try:
            socket.create_connection((host, int(port)), timeout=0.5).close()
            print("STRANGER listening on", ",".join(listening(int(port))), flush=True)
            if mode == "store":
                store = dist.TCPStore(host, int(port), int(world), False, timedelta(seconds=10))
            break
        except Exception as exc:
            if time.time() > float(until):
                print("STRANGER found no store:", exc, flush=True)
                return
            time.sleep(0.05)
    timeout = timedelta(seconds=10)
    if store is None:
        init = f"tcp://{host}:{port}"
        dist.init_process_group(
            "gloo", init_method=init, rank=int(rank), world_size=int(world), timeout=timeout
        )
    else:
        dist.init_process_group("gloo", store=store, rank=int(rank), world_size=int(world), timeout=timeout)
    print("STRANGER in the group", flush=True)
    if mode == "store":  # what a rank sends first now: 32 bytes it cannot know
        mine = torch.tensor(list(os.urandom(32)), dtype=torch.uint8)
        dist.all_gather([torch.zeros_like(mine) for _ in range(int(world))], mine)
        print("STRANGER gathered", flush=True)
    dist.barrier()
    x = torch.full((1 << 18,), float(int(rank) + 1))
    dist.all_reduce(x)
    print("STRANGER all_reduce done", float(x[0]), flush=True)


if __name__ == "__main__":
    main()
