"""Extra CA certificates for networks that intercept TLS (``envbuild build --ca-cert``).

Each file is read, every PEM certificate block in it is parsed by OpenSSL (through :mod:`ssl`), and
only the certificate blocks are kept: a file that also holds a private key (or anything else the
secret policy, :mod:`envbuild.secrets`, recognises) is refused, so a key can never reach an image.
The certificates travel in the build context's ``certs/`` folder only; they are never written into
the bundle on disk.  The builder stages trust them for apt and pip; the final image leaves them out
unless ``envbuild build --keep-ca-cert`` asks to keep them (``templates/dockerfiles/Dockerfile.j2``).
"""

from __future__ import annotations

import hashlib
import re
import ssl
from dataclasses import dataclass
from pathlib import Path

from envbuild.errors import UsageError
from envbuild.secrets import content_reason

MAX_CERT_FILE_BYTES = 1 << 20
_BLOCK_RE = re.compile(r"-----BEGIN CERTIFICATE-----\r?\n[A-Za-z0-9+/=\r\n]+?-----END CERTIFICATE-----")


@dataclass(frozen=True)
class CaCert:
    source: Path
    name: str  # file name inside certs/, ends in .crt (update-ca-certificates needs that)
    pem: bytes  # only the certificate blocks, normalised line endings
    count: int  # certificates in the file


def load_ca_cert(path: Path) -> CaCert:
    """Read and validate one PEM file; raise :class:`UsageError` naming the file and the problem."""
    where = f"--ca-cert {path}"
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{where}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_CERT_FILE_BYTES:
        raise UsageError(f"{where}: larger than {MAX_CERT_FILE_BYTES} bytes; not a CA certificate file")
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise UsageError(
            f"{where}: not a PEM file (not ASCII text; convert DER with `openssl x509 -inform der`)"
        ) from None
    found = content_reason(raw)  # the secret policy: a private key (any PEM kind), a token
    if found:
        raise UsageError(f"{where}: contains {found}; pass only the public CA certificate(s), never a key")
    blocks = _BLOCK_RE.findall(text)
    if not blocks:
        raise UsageError(f"{where}: no PEM certificate found (expected -----BEGIN CERTIFICATE----- blocks)")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    for index, block in enumerate(blocks):
        try:
            der = ssl.PEM_cert_to_DER_cert(block.replace("\r\n", "\n"))
            context.load_verify_locations(cadata=der)
        except (ValueError, ssl.SSLError) as exc:
            raise UsageError(
                f"{where}: certificate #{index + 1} is not a valid X.509 certificate ({exc})"
            ) from None
    pem = ("\n".join(b.replace("\r\n", "\n") for b in blocks) + "\n").encode("ascii")
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", path.stem).strip("-")[:40] or "ca"
    digest = hashlib.sha256(pem).hexdigest()[:12]
    return CaCert(source=path, name=f"envbuild-{stem}-{digest}.crt", pem=pem, count=len(blocks))


def load_ca_certs(paths: list[Path] | tuple[Path, ...]) -> tuple[CaCert, ...]:
    certs = [load_ca_cert(p) for p in paths]
    seen: dict[str, CaCert] = {}
    for cert in certs:
        seen.setdefault(cert.name, cert)  # the same file twice adds it once
    return tuple(seen[name] for name in sorted(seen))
