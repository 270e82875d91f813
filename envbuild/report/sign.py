"""Sign a report's manifest with the renter's own SSH key, and check the signature: OpenSSH's
``ssh-keygen -Y sign`` / ``-Y verify`` (SSHSIG), run as a subprocess; nothing here does cryptography.

``MANIFEST.sha256`` proves integrity in transit only: whoever writes the report folder (the provider's
machine included) can recompute it.  A signature made *after the report was copied off*, with a key
that never was on the provider's machine, says the renter saw these bytes; a key on the provider's
machine proves nothing.

- ``envbuild report sign RUN --key KEY`` signs ``RUN/MANIFEST.sha256`` with the namespace
  :data:`NAMESPACE`; the signature is ``RUN/MANIFEST.sha256.sig`` (:data:`SIGNATURE`), beside the
  manifest and outside its list (the manifest covers the files, the signature covers the manifest).
- ``envbuild report verify RUN --allowed-signers FILE`` checks the files against the manifest, then the
  signature against the identities of an OpenSSH allowed-signers file (``ssh-keygen(1)``, "ALLOWED
  SIGNERS"), and names the identity that signed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from envbuild.errors import EXIT_ENGINE, EnvbuildError, ReportError, UsageError
from envbuild.report.folder import MANIFEST, SIGNATURE, atomic_write_bytes
from envbuild.report.verify import verify_report

NAMESPACE = "envbuild-report"
TIMEOUT_S = 60

_GOOD = re.compile(r'^Good "[^"]*" signature for (?P<who>.+) with (?P<key>\S+) key (?P<fp>\S+)\s*$', re.M)


class SigningUnavailable(EnvbuildError):
    """``ssh-keygen`` is not installed, or too old for ``-Y``: an environment problem (exit 3)."""

    exit_code = EXIT_ENGINE
    code = "E-SSH-KEYGEN"


@dataclass(frozen=True)
class SignatureCheck:
    ok: bool
    signer: str | None  # the allowed-signers identity that verified, when ok
    key: str | None  # "ED25519 SHA256:..." of the key, when ok
    message: str  # one line: who signed, or why the signature does not verify


def ssh_keygen() -> str:
    found = shutil.which("ssh-keygen")
    if found is None:
        raise SigningUnavailable(
            "ssh-keygen not found on PATH: signing needs OpenSSH's ssh-keygen (8.2 or later; "
            "Debian/Ubuntu: apt-get install openssh-client)"
        )
    return found


def _run(args: list[str], data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            [ssh_keygen(), *args],
            input=data,
            capture_output=True,
            timeout=TIMEOUT_S,
            check=False,
            env={**os.environ, "LC_ALL": "C"},
        )
    except subprocess.TimeoutExpired:
        raise SigningUnavailable(
            f"ssh-keygen {' '.join(args[:2])} did not finish in {TIMEOUT_S} s (waiting for a passphrase "
            "with no terminal? load the key into ssh-agent and pass its .pub)"
        ) from None
    except OSError as exc:
        raise SigningUnavailable(f"cannot run ssh-keygen: {exc.strerror or exc}") from None


def _said(proc: subprocess.CompletedProcess[bytes]) -> str:
    text = (proc.stderr or b"").decode("utf-8", "replace").strip() or (proc.stdout or b"").decode(
        "utf-8", "replace"
    ).strip()
    return " ".join(text.splitlines()[-2:]) or f"exit status {proc.returncode}"


def _old_openssh(proc: subprocess.CompletedProcess[bytes]) -> bool:
    said = (proc.stderr or b"").decode("utf-8", "replace")
    return "illegal option" in said or "unknown option" in said.lower()


def sign_report(directory: Path, key: Path) -> Path:
    """Sign ``directory``'s manifest with ``key`` (a private key file, or a public key whose private half
    is in ssh-agent); write :data:`SIGNATURE` beside it (replacing an older one) and return its path."""
    if not directory.is_dir():
        raise UsageError(f"{directory}: not a report directory")
    if not key.is_file():
        raise UsageError(f"--key {key}: no such key file")
    ssh_keygen()  # exit 3 before anything else when there is none
    problems = verify_report(directory)
    if problems:
        raise ReportError(
            f"{directory}: not signed, it does not match its manifest ({'; '.join(problems[:3])}"
            f"{'; ...' if len(problems) > 3 else ''})"
        )
    manifest = (directory / MANIFEST).read_bytes()
    proc = _run(["-Y", "sign", "-f", str(key), "-n", NAMESPACE], manifest)
    if _old_openssh(proc):
        raise SigningUnavailable(
            f"this ssh-keygen cannot sign (-Y needs OpenSSH 8.2 or later): {_said(proc)}"
        )
    if proc.returncode != 0 or b"BEGIN SSH SIGNATURE" not in proc.stdout:
        raise UsageError(f"ssh-keygen could not sign with {key}: {_said(proc)}")
    path = directory / SIGNATURE
    atomic_write_bytes(path, proc.stdout)
    return path


def _principals(signature: Path, allowed: Path) -> list[str]:
    proc = _run(["-Y", "find-principals", "-s", str(signature), "-f", str(allowed)])
    if _old_openssh(proc):
        raise SigningUnavailable(
            f"this ssh-keygen cannot verify (-Y needs OpenSSH 8.2 or later): {_said(proc)}"
        )
    if proc.returncode != 0:
        return []
    return [line.strip() for line in proc.stdout.decode("utf-8", "replace").splitlines() if line.strip()]


def check_signature(directory: Path, allowed_signers: Path) -> SignatureCheck:
    """Verify :data:`SIGNATURE` over the manifest against ``allowed_signers``; the identity is the one
    the allowed-signers file gives the key that signed (``ssh-keygen -Y find-principals``)."""
    if not allowed_signers.is_file():
        raise UsageError(f"--allowed-signers {allowed_signers}: no such file")
    ssh_keygen()
    signature, manifest = directory / SIGNATURE, directory / MANIFEST
    if not signature.is_file():
        return SignatureCheck(False, None, None, f"not signed: {SIGNATURE} is missing")
    if not manifest.is_file():
        return SignatureCheck(
            False, None, None, f"nothing to check the signature against: {MANIFEST} is missing"
        )
    principals = _principals(signature, allowed_signers)
    if not principals:
        return SignatureCheck(
            False,
            None,
            None,
            f"signed by a key that {allowed_signers} does not list (for namespace {NAMESPACE}), "
            "or the signature is damaged",
        )
    data = manifest.read_bytes()
    said = ""
    for who in principals:
        proc = _run(
            ["-Y", "verify", "-f", str(allowed_signers), "-I", who, "-n", NAMESPACE, "-s", str(signature)],
            data,
        )
        text = (proc.stdout + proc.stderr).decode("utf-8", "replace")
        good = _GOOD.search(text)
        if proc.returncode == 0 and good:
            key = f"{good['key']} {good['fp']}"
            return SignatureCheck(True, who, key, f"signed by {who} ({key}), namespace {NAMESPACE}")
        said = _said(proc)
    return SignatureCheck(
        False,
        None,
        None,
        f"the signature does not verify: {MANIFEST} changed since it was signed, or it was signed for "
        f"another namespace ({', '.join(principals)}: {said})",
    )
