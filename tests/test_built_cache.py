"""The built-wheels cache cannot vouch for itself (issue 36, finding 4).

``built-wheels/`` is a folder anyone with write access (a shared disk, a restored CI cache) can fill. An
attacker put a wheel of another distribution there, with a ``.pth`` file, beside a key record whose key
was copied from a real one and whose ``wheel_sha256`` is that wheel's own hash: ``payloads/built_key.py
reuse`` took it ("has the same key, not built again") and the Dockerfile's ``pip install built/*.whl`` ran
the ``.pth``. Now the builder checks that a kept wheel is the locked sdist's distribution and version, and
``envbuild build`` puts a kept wheel into the build context only when the build record of the build that
made it (``BUNDLE/build-<tag>.record.json``, outside the folder) names its sha256.

The builder's side runs ``envbuild/payloads/built_key.py`` as the builder stage runs it (a subprocess, real
files); the host's side calls :func:`verify_built` and :func:`write_context` on a bundle's folders.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from build_support import minimal_wheel
from validate_support import cpu_lock

from envbuild.boundary import to_json
from envbuild.errors import BuildError
from envbuild.image.built_cache import verify_built
from envbuild.image.context import write_context
from envbuild.models import Lock
from envbuild.models.lock import LockedDistribution, LockedFile
from envbuild.payloads.built_key import FORMAT, RECORD_SUFFIX

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "envbuild" / "payloads" / "built_key.py"
SDIST = "ab" * 32
REAL = "eb_addop-1.0-cp311-cp311-linux_x86_64.whl"
EVIL = "evil_pkg-6.6.6-py3-none-any.whl"


def run_builder(action: str, tmp_path: Path, built: Path, *more: str) -> str:
    """``envbuild-source-build.py ACTION`` for eb-addop 1.0 (its sdist's sha256: SDIST); its stdout."""
    source = tmp_path / "requirements-source.txt"
    source.write_text(f"--require-hashes\n\neb-addop==1.0 \\\n    --hash=sha256:{SDIST}\n")
    args = [sys.executable, str(SCRIPT), action, "--built", str(built), "--source", str(source)]
    args += ["--todo", str(tmp_path / "todo.txt"), *more]
    proc = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ), check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture
def honest(tmp_path: Path) -> Path:
    """built-wheels/ as a build of eb-addop left it: the wheel and the key record ``record`` wrote."""
    folder = tmp_path / "bundle" / "built-wheels"
    folder.mkdir(parents=True)
    minimal_wheel(folder / REAL, "eb-addop", "1.0")
    run_builder("record", tmp_path, folder)
    return folder


def plant_evil(folder: Path) -> str:
    """The attack: another distribution's wheel (a .pth runs at every start), beside a key record with
    the real key copied and the evil wheel's own sha256.  Returns that sha256."""
    digest = minimal_wheel(folder / EVIL, "evil-pkg", "6.6.6", {"evil.pth": "import os; os.system('id')\n"})
    real = json.loads((folder / f"{REAL}{RECORD_SUFFIX}").read_text())
    record = {"format": FORMAT, "wheel": EVIL, "wheel_sha256": digest, "key": real["key"]}
    (folder / f"{EVIL}{RECORD_SUFFIX}").write_text(json.dumps(record))
    return digest


def test_the_builder_does_not_reuse_another_distributions_wheel_with_a_copied_key(
    honest: Path, tmp_path: Path
) -> None:
    """Before: "cached eb-addop==1.0: evil_pkg-6.6.6-...whl has the same key, not built again"."""
    (honest / REAL).unlink()  # only the attacker's wheel is left with the key
    plant_evil(honest)
    out = run_builder("reuse", tmp_path, tmp_path / "built", "--cache", str(honest))
    assert (
        f"{honest / EVIL} has the key of eb-addop==1.0, but its file name says evil-pkg==6.6.6, not " in out
    )
    assert "building eb-addop==1.0: no cached wheel with its key" in out
    assert "not built again" not in out and not (tmp_path / "built" / EVIL).exists()
    assert (tmp_path / "todo.txt").read_text().endswith(f"eb-addop==1.0 --hash=sha256:{SDIST}\n")


def test_the_builder_checks_the_wheels_metadata_too(honest: Path, tmp_path: Path) -> None:
    """A wheel named as eb-addop whose METADATA is another distribution's is not reused either."""
    minimal_wheel(honest / REAL, "evil-pkg", "6.6.6")
    real = json.loads((honest / f"{REAL}{RECORD_SUFFIX}").read_text())
    real["wheel_sha256"] = hashlib.sha256((honest / REAL).read_bytes()).hexdigest()
    (honest / f"{REAL}{RECORD_SUFFIX}").write_text(json.dumps(real))
    out = run_builder("reuse", tmp_path, tmp_path / "built", "--cache", str(honest))
    assert "but its METADATA says evil-pkg==6.6.6, not eb-addop==1.0: not used" in out
    assert not (tmp_path / "built" / REAL).exists()


def test_the_builder_reuses_the_honest_wheel(honest: Path, tmp_path: Path) -> None:
    out = run_builder("reuse", tmp_path, tmp_path / "built", "--cache", str(honest))
    assert out.startswith(f"envbuild-source-build: cached eb-addop==1.0: {REAL} has the same key")
    assert (tmp_path / "built" / REAL).read_bytes() == (honest / REAL).read_bytes()


# ---- the host: envbuild build's check of built-wheels/ against the build records --------------------


def source_lock(tmp_path: Path) -> Lock:
    """A lock whose eb-addop 1.0 is built from its sdist (role "source", sha256 SDIST)."""
    addop = LockedDistribution(
        name="eb-addop",
        version="1.0",
        files=(LockedFile(filename="eb_addop-1.0.tar.gz", url="", sha256=SDIST),),
        role="source",
    )
    lock = cpu_lock(tmp_path)
    return dataclasses.replace(lock, distributions=(*lock.distributions, addop))


def write_build_record(bundle: Path, tag: str, wheels: dict[str, str]) -> None:
    """What ``envbuild build`` records of a source build (only the part read here)."""
    rows = [{"file": name, "sha256": sha} for name, sha in sorted(wheels.items())]
    body = {"format": 1, "outputs": {"built_wheels": rows}, "manifest": []}
    (bundle / f"build-{tag}.record.json").write_text(json.dumps(body))


def context_names(bundle: Path, **kwargs: object) -> set[str]:
    out = io.BytesIO()
    write_context(bundle, out, **kwargs)  # type: ignore[arg-type]
    out.seek(0)
    with tarfile.open(fileobj=out) as archive:
        return {m.name for m in archive.getmembers() if m.name.startswith("built-wheels/")}


def render_files(bundle: Path, lock: Lock) -> None:
    """The files write_context requires beside built-wheels/."""
    (bundle / "Dockerfile").write_text("FROM scratch\n")
    (bundle / "requirements-rebuild.txt").write_text("# test\n")
    (bundle / "envbuild.lock.json").write_text(to_json(lock))


def test_the_host_refuses_another_distributions_wheel_with_a_copied_key(honest: Path, tmp_path: Path) -> None:
    """Before: verify_built checked only the record beside the wheel, which the attacker wrote."""
    digest = plant_evil(honest)
    write_build_record(honest.parent, "a", {EVIL: digest})  # even a record naming it does not make it so
    with pytest.raises(BuildError) as caught:
        verify_built(source_lock(tmp_path), honest.parent)
    message = str(caught.value)
    assert (
        f"{honest / EVIL}: its key record {EVIL}{RECORD_SUFFIX} names the sdist of eb-addop==1.0" in message
    )
    assert (
        "its file name says evil-pkg==6.6.6, not eb-addop==1.0" in message and "nothing was built" in message
    )


def test_a_kept_wheel_whose_sha256_differs_from_the_build_record_is_refused(
    honest: Path, tmp_path: Path
) -> None:
    """The wheel and its key record rewritten together (same name and version, a .pth added): the build
    record of the build that made the wheel names other bytes.  Before: accepted."""
    made = hashlib.sha256((honest / REAL).read_bytes()).hexdigest()
    write_build_record(honest.parent, "a", {REAL: made})
    swapped = minimal_wheel(honest / REAL, "eb-addop", "1.0", {"evil.pth": "import os\n"})
    record = json.loads((honest / f"{REAL}{RECORD_SUFFIX}").read_text())
    (honest / f"{REAL}{RECORD_SUFFIX}").write_text(json.dumps({**record, "wheel_sha256": swapped}))
    with pytest.raises(BuildError, match=rf"sha256 {swapped}, but the build record .* says {made} "):
        verify_built(source_lock(tmp_path), honest.parent)


def test_the_honest_wheel_goes_into_the_context_and_an_unvouched_one_does_not(
    honest: Path, tmp_path: Path
) -> None:
    bundle = honest.parent
    lock = source_lock(tmp_path)
    render_files(bundle, lock)
    unvouched = verify_built(lock, bundle)  # no build record yet (--no-record, a restored cache)
    assert unvouched.usable == 0 and unvouched.sha256 == {}
    assert unvouched.left_out == (f"built-wheels/{REAL}", f"built-wheels/{REAL}{RECORD_SUFFIX}")
    assert "no build record in" in unvouched.notes[0] and "not used (compiled again)" in unvouched.notes[0]
    assert context_names(bundle, leave_out=frozenset(unvouched.left_out)) == set()
    made = hashlib.sha256((honest / REAL).read_bytes()).hexdigest()
    write_build_record(bundle, "a", {REAL: made})
    vouched = verify_built(lock, bundle)
    assert vouched.usable == 1 and vouched.left_out == () and vouched.sha256 == {f"built-wheels/{REAL}": made}
    assert context_names(bundle, expect_sha256=vouched.sha256) == {
        f"built-wheels/{REAL}",
        f"built-wheels/{REAL}{RECORD_SUFFIX}",
    }
    # swapped between the check and the context: refused as it goes in
    minimal_wheel(honest / REAL, "eb-addop", "1.0", {"evil.pth": "import os\n"})
    with pytest.raises(BuildError, match="changed meanwhile; nothing was built"):
        context_names(bundle, expect_sha256=vouched.sha256)
