# mypy: disable-error-code="import-not-found,no-untyped-call"
"""Probe: the distribution, its version, glibc and the kernel, as seen by the interpreter under test."""

from __future__ import annotations

import platform

from _probe_common import emit, read_args

read_args()
raw = ""
for candidate in ("/etc/os-release", "/usr/lib/os-release"):
    try:
        with open(candidate, encoding="utf-8") as fh:
            raw = fh.read()
        break
    except OSError:
        continue
fields: dict[str, str] = {}
for line in raw.splitlines():
    if "=" in line and not line.lstrip().startswith("#"):
        key, _, value = line.partition("=")
        fields[key.strip()] = value.strip().strip("\"'")
libc, libc_version = platform.libc_ver()
emit(
    {
        "id": fields.get("ID"),
        "version_id": fields.get("VERSION_ID"),
        "pretty_name": fields.get("PRETTY_NAME"),
        "libc": libc,
        "libc_version": libc_version,
        "kernel": platform.release(),
        "machine": platform.machine(),
        "os_release": raw,
    }
)
