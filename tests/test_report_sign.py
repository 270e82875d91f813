"""``envbuild report verify`` says what it proves, and ``report sign`` adds what it cannot (issue 24
item 6): the manifest is integrity in transit, not authenticity; a signature with the renter's own SSH
key (the real ``ssh-keygen -Y sign`` / ``-Y verify``, namespace ``envbuild-report``) is.

Every key is a throwaway ed25519 key generated in tmp_path; the report is a real validator run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
from cli_support import envbuild
from validate_support import cpu_lock

from envbuild.boundary import to_json
from envbuild.digest import sha256_file
from envbuild.report.verify import verify_report
from envbuild.validate import run_validation

REPO = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((REPO / "docs" / "output.schema.json").read_text(encoding="utf-8"))
SSH_KEYGEN = shutil.which("ssh-keygen")
NAMESPACE = "envbuild-report"
SIGNATURE = "MANIFEST.sha256.sig"
pytestmark = pytest.mark.skipif(SSH_KEYGEN is None, reason="needs OpenSSH's ssh-keygen")  # installed here


def _key(directory: Path, name: str) -> tuple[Path, str]:
    """A fresh ed25519 key pair without passphrase: the private key's path and the public key line."""
    key = directory / name
    subprocess.run([str(SSH_KEYGEN), "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True)
    return key, key.with_suffix(".pub").read_text(encoding="utf-8").strip()


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("signed")
    lock_file = tmp / "lock.json"
    lock_file.write_text(to_json(cpu_lock(tmp)), encoding="utf-8")
    _, run_dir = run_validation(lock_file, out=tmp / "runs", stages=["interpreter", "os"], workdir=tmp)
    return run_dir


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The renter's key, an allowed-signers file that lists only it, and somebody else's key."""
    renter, public = _key(tmp_path, "renter")
    other, _ = _key(tmp_path, "provider")
    allowed = tmp_path / "allowed_signers"
    kind, blob, _ = public.split(" ", 2)
    allowed.write_text(f'renter@example.org namespaces="{NAMESPACE}" {kind} {blob}\n', encoding="utf-8")
    return renter, allowed, other


def _copy(report: Path, tmp_path: Path) -> Path:
    """The report as copied off the provider's machine."""
    dest = tmp_path / "copied" / report.name
    shutil.copytree(report, dest)
    return dest


def test_verify_says_integrity_not_authenticity(report: Path) -> None:
    proc = envbuild("report", "verify", str(report))
    assert proc.returncode == 0 and "intact" in proc.stdout
    assert "integrity in transit, not authenticity" in proc.stdout
    assert "envbuild report sign" in proc.stdout
    data = json.loads(envbuild("report", "verify", str(report), "--json").stdout)
    jsonschema.validate(data, SCHEMA)
    assert (
        data["ok"] and data["integrity"] is True and data["signature"] == {"checked": False, "present": False}
    )
    assert "not authenticity" in data["note"]
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    assert "integrity in transit, not authenticity" in readme
    assert "envbuild report sign" in readme and "proves nothing" in readme


def test_a_good_signature_names_the_signer(
    report: Path, keys: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    renter, allowed, _ = keys
    copied = _copy(report, tmp_path)
    proc = envbuild("report", "sign", str(copied), "--key", str(renter))
    assert proc.returncode == 0, proc.stderr
    sig = copied / SIGNATURE
    assert sig.read_text(encoding="ascii").startswith("-----BEGIN SSH SIGNATURE-----")
    assert SIGNATURE not in (copied / "MANIFEST.sha256").read_text(encoding="utf-8")  # outside the list
    assert verify_report(copied) == []  # ... and not an extra file

    proc = envbuild("report", "verify", str(copied), "--allowed-signers", str(allowed))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "intact" in proc.stdout and "signed by renter@example.org (ED25519 SHA256:" in proc.stdout
    data = json.loads(
        envbuild("report", "verify", str(copied), "--allowed-signers", str(allowed), "--json").stdout
    )
    jsonschema.validate(data, SCHEMA)
    assert data["ok"] and data["signature"]["ok"] and data["signature"]["signer"] == "renter@example.org"

    # ssh-keygen itself agrees: the signature is an ordinary SSHSIG over the manifest
    verify = [str(SSH_KEYGEN), "-Y", "verify", "-f", str(allowed), "-I", "renter@example.org"]
    with open(copied / "MANIFEST.sha256", "rb") as manifest:
        check = subprocess.run(
            [*verify, "-n", NAMESPACE, "-s", str(sig)],
            stdin=manifest,
            capture_output=True,
            check=False,
        )
    assert check.returncode == 0, check.stderr

    unchecked = envbuild("report", "verify", str(copied))
    assert unchecked.returncode == 0 and f"{SIGNATURE} is present but was not checked" in unchecked.stdout


def test_an_edited_report_with_a_recomputed_manifest_is_intact_but_not_signed(
    report: Path, keys: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    renter, allowed, _ = keys
    copied = _copy(report, tmp_path)
    from envbuild.report.sign import sign_report

    sign_report(copied, renter)
    data = json.loads((copied / "report.json").read_text(encoding="utf-8"))
    data["ok"] = True
    data["stages"][0]["facts"]["version"] = "3.99.0"  # the edit the issue describes ...
    (copied / "report.json").write_text(json.dumps(data), encoding="utf-8")
    manifest = copied / "MANIFEST.sha256"
    names = [line.split("  ", 1)[1] for line in manifest.read_text(encoding="utf-8").splitlines()]
    manifest.write_text("".join(f"{sha256_file(copied / n)}  {n}\n" for n in names), encoding="utf-8")
    assert verify_report(copied) == []  # ... with the manifest recomputed: integrity still "passes"

    plain = envbuild("report", "verify", str(copied))
    assert plain.returncode == 0 and "not authenticity" in plain.stdout
    proc = envbuild("report", "verify", str(copied), "--allowed-signers", str(allowed))
    assert proc.returncode == 1
    assert "intact" in proc.stdout
    assert "error: E-REPORT-SIGNATURE: the signature does not verify" in proc.stdout
    out = json.loads(
        envbuild("report", "verify", str(copied), "--allowed-signers", str(allowed), "--json").stdout
    )
    jsonschema.validate(out, SCHEMA)
    assert out["ok"] is False and out["integrity"] is True and out["signature"]["ok"] is False
    assert [f["code"] for f in out["findings"]] == ["E-REPORT-SIGNATURE"]


def test_a_signature_by_another_key_fails(
    report: Path, keys: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    _, allowed, other = keys
    copied = _copy(report, tmp_path)
    assert envbuild("report", "sign", str(copied), "--key", str(other)).returncode == 0
    proc = envbuild("report", "verify", str(copied), "--allowed-signers", str(allowed))
    assert proc.returncode == 1 and "does not list" in proc.stdout
    from envbuild.report.sign import check_signature

    result = check_signature(copied, allowed)
    assert not result.ok and result.signer is None


def test_missing_signature_tampered_copy_and_no_ssh_keygen(
    report: Path, keys: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    renter, allowed, _ = keys
    copied = _copy(report, tmp_path)
    proc = envbuild("report", "verify", str(copied), "--allowed-signers", str(allowed))
    assert proc.returncode == 1 and f"not signed: {SIGNATURE} is missing" in proc.stdout

    (copied / "env.txt").write_text("changed\n", encoding="utf-8")  # a damaged copy is never signed
    proc = envbuild("report", "sign", str(copied), "--key", str(renter))
    assert proc.returncode == 1 and "changed: env.txt" in proc.stderr and not (copied / SIGNATURE).exists()

    bad = envbuild("report", "sign", str(copied), "--key", str(tmp_path / "nokey"), "--json")
    assert bad.returncode == 2 and json.loads(bad.stdout)["findings"][0]["code"] == "E-USAGE"

    empty = tmp_path / "empty-path"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty)}  # no ssh-keygen anywhere on PATH
    fresh = _copy(report, tmp_path / "again")
    proc = envbuild("report", "sign", str(fresh), "--key", str(renter), env=env)
    assert proc.returncode == 3 and "ssh-keygen not found" in proc.stderr
    proc = envbuild("report", "verify", str(fresh), "--allowed-signers", str(allowed), "--json", env=env)
    assert proc.returncode == 3 and json.loads(proc.stdout)["findings"][0]["code"] == "E-SSH-KEYGEN"
