"""Reach the Docker engine through the docker SDK; say how to start one when none answers.

``docker`` is imported lazily so that ``envbuild check``/``render`` never pay for it.
"""

from __future__ import annotations

import os
from typing import Any

from envbuild.errors import EngineUnavailable

HOW_TO_START = (
    "start a Docker engine, then retry:\n"
    "  - on Debian/Ubuntu as root: scripts/docker-engine.sh (installs docker.io and starts dockerd)\n"
    "  - or by hand: sudo dockerd &   (or: sudo systemctl start docker)\n"
    "  - or point DOCKER_HOST at a reachable engine"
)

# Generous: a build step installing torch can stream nothing for minutes.
API_TIMEOUT_S = 3600


def _where() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def engine_address() -> str:
    """Where the engine is looked for (``DOCKER_HOST``, else the default socket), for messages."""
    return _where()


PING_TIMEOUT_S = 10


def engine_answers(api: Any, timeout: int = PING_TIMEOUT_S) -> bool:
    """Whether the engine behind ``api`` (a ``docker.APIClient``) still answers a ping within ``timeout``.

    Used after a build stream broke off, to tell an engine that went away from a build that failed."""
    saved = getattr(api, "timeout", None)
    try:
        api.timeout = timeout  # the SDK applies the client's timeout to each request
        return bool(api.ping())
    except Exception:  # requests/urllib3/docker errors alike: no answer
        return False
    finally:
        if saved is not None:
            api.timeout = saved


def api_client(timeout: int = API_TIMEOUT_S) -> Any:
    """Return a connected low-level ``docker.APIClient`` or raise :class:`EngineUnavailable`."""
    return docker_client(timeout).api


def docker_client(timeout: int = API_TIMEOUT_S) -> Any:
    """Return a connected high-level ``docker.DockerClient`` or raise :class:`EngineUnavailable`."""
    import docker
    from docker.errors import DockerException

    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except (DockerException, OSError) as exc:
        raise EngineUnavailable(
            f"cannot reach the Docker engine at {_where()} ({_short(exc)});\n{HOW_TO_START}"
        ) from None
    return client


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    return first[:200]
