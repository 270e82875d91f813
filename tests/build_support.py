"""Helpers shared by the build and end-to-end tests: the CLI in a subprocess, uuid-tagged images
removed afterwards, and a real self-signed CA made by openssl."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import secrets
import subprocess
import tarfile
import tempfile
import uuid
import zipfile
from collections.abc import Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cli_support
from cli_support import environ


def envbuild(
    *args: str | Path, timeout: int = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The CLI runner (:func:`cli_support.envbuild`) with a build's timeout; ``env`` is added to this
    process's environment (:func:`cli_support.environ`)."""
    return cli_support.envbuild(*args, env=environ(**(env or {})), timeout=timeout)


@dataclass(frozen=True)
class Built:
    """An image built by a test fixture: its tag and the bundle it was built from (which holds the
    build's log, ``build-<slug>.log``, and record)."""

    tag: str
    bundle: Path


@dataclass(frozen=True)
class Rebuilt:
    """``envbuild rebuild --verify --json`` of a copy of a bundle (the image it made is gone): its exit
    status and output, the rebuilt image's id, and the build log it wrote in the copy."""

    proc: subprocess.CompletedProcess[str]
    image_id: str
    log: str


def ok(*args: str | Path) -> subprocess.CompletedProcess[str]:
    proc = envbuild(*args)
    assert proc.returncode == 0, (
        f"envbuild {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr}"
    )
    return proc


def only_run(out: Path) -> tuple[Path, dict[str, Any]]:
    runs = sorted(p for p in out.iterdir() if p.is_dir())
    assert len(runs) == 1, runs
    return runs[0], json.loads((runs[0] / "report.json").read_text())


@contextmanager
def temporary_tag(client: Any, name: str) -> Iterator[str]:
    """A unique image tag, removed (with its image) when the block ends."""
    tag = f"envbuild-test/{name}:{uuid.uuid4().hex[:12]}"
    try:
        yield tag
    finally:
        with suppress(Exception):  # the image may never have been built
            client.images.remove(tag, force=True)


def make_ca(folder: Path, stem: str = "corp-ca") -> tuple[Path, Path]:
    """A self-signed CA valid for two days: (``folder/stem.pem``, ``folder/stem.key``)."""
    cert, key = folder / f"{stem}.pem", folder / f"{stem}.key"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"),
            *("-subj", "/CN=test CA", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@contextmanager
def small_tmpfs(where: Path, size_kib: int) -> Iterator[Path]:
    """A real, small filesystem mounted at ``where`` (a tmpfs of ``size_kib`` KiB), unmounted afterwards.

    Needs root (CI runs the tests as root); failing to mount fails the test rather than skipping it.
    """
    import pytest

    where.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kib}k,mode=0755", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs at {where} (root needed): {proc.stderr.strip()}", pytrace=False)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def fill_up(folder: Path, name: str = "filler") -> Path:
    """Write ``folder/name`` until the filesystem says ENOSPC; the file stays (the disk stays full)."""
    import errno

    path = folder / name
    block = b"\0" * 4096
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while True:
            try:
                os.write(fd, block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
        # the last partial page too: a filesystem that rounds down can still take a few bytes
        with suppress(OSError):
            while os.write(fd, b"\0"):
                pass
    finally:
        os.close(fd)
    return path


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative POSIX path -> bytes): a whole-tree snapshot to compare."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


class PrivateEngine:
    """A second, private dockerd for one test: its own network namespace (``unshare --net``), data root,
    exec root, pid file, socket and cgroup parent under a short /tmp folder, no bridge and no iptables
    rules.  The shared engine of the test
    session is never touched; this one may be killed (:meth:`kill`) and started again (:meth:`start`) on
    the same data root.  :meth:`close` stops it and removes every trace: containerd shims and container
    processes it left (found by its exec root), mounts under its folder, its cgroups, the folder."""

    def __init__(self) -> None:
        import tempfile

        self.root = Path(tempfile.mkdtemp(prefix="eb-dockerd-", dir="/tmp"))
        self.socket = self.root / "docker.sock"
        self.host = f"unix://{self.socket}"
        self.cgroup = f"/{self.root.name}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> None:
        import shutil
        import time

        import pytest

        dockerd = shutil.which("dockerd")
        if dockerd is None:
            pytest.fail("no dockerd on PATH: scripts/docker-engine.sh installs docker.io", pytrace=False)
        log = (self.root / "dockerd.log").open("ab")
        self.proc = subprocess.Popen(
            [
                # A network namespace of its own: a dockerd started with --bridge=none deletes the
                # interface docker0, which in the host's namespace is the shared engine's bridge.
                *("unshare", "--net", "--"),
                dockerd,
                *("--data-root", str(self.root / "data"), "--exec-root", str(self.root / "exec")),
                *("--pidfile", str(self.root / "dockerd.pid"), "--host", self.host),
                *("--bridge=none", "--iptables=false", "--ip-masq=false", "--cgroup-parent", self.cgroup),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                pytest.fail(
                    f"the private dockerd exited {self.proc.returncode}:\n{self.log_tail()}", pytrace=False
                )
            try:
                self.client(timeout=5).ping()
                return
            except Exception:
                if time.monotonic() > deadline:
                    pytest.fail(f"the private dockerd did not answer:\n{self.log_tail()}", pytrace=False)
                time.sleep(0.2)

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = (self.root / "dockerd.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def client(self, timeout: int = 120) -> Any:
        import docker

        return docker.DockerClient(base_url=self.host, timeout=timeout)

    def load_from(self, shared: Any, image: str) -> None:
        """Copy ``image`` from the shared engine (``docker save | docker load``, through the SDK)."""
        data = shared.images.get(image).save(named=True)
        with closing(self.client(timeout=600)) as private:
            private.images.load(b"".join(data))

    def kill(self) -> None:
        """SIGKILL the dockerd (an engine that stops, as a crash or the OOM killer stops it)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def _leftovers(self) -> list[int]:
        """Processes of this engine: containerd shims on its exec root and every descendant of them."""
        marker = str(self.root / "exec").encode()
        parents: dict[int, int] = {}
        roots: list[int] = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
                stat = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            parents[int(name)] = int(stat[stat.rfind(b")") + 2 :].split()[1])
            if marker in cmdline:
                roots.append(int(name))
        tree, pending = set(), list(roots)
        while pending:
            pid = pending.pop()
            if pid not in tree:
                tree.add(pid)
                pending.extend(child for child, parent in parents.items() if parent == pid)
        return sorted(tree)

    def reap_leftovers(self) -> None:
        """Kill the engine's leftovers and wait until they are gone from /proc (a zombie containerd
        still "runs" for a dockerd started on the same exec root, which then waits for it in vain)."""
        import signal
        import time

        killed: set[int] = set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pids = self._leftovers()
            for pid in pids:
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            killed.update(pids)
            if not pids and not any(Path(f"/proc/{pid}").exists() for pid in killed):
                break
            time.sleep(0.1)
        (self.root / "exec" / "containerd" / "containerd.pid").unlink(missing_ok=True)

    def close(self) -> None:
        import shutil

        self.kill()
        self.reap_leftovers()
        mounts = [
            line.split()[1]
            for line in Path("/proc/mounts").read_text().splitlines()
            if line.split()[1].startswith(str(self.root))
        ]
        for mount in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
        cgroups = [*Path("/sys/fs/cgroup").glob(f"*{self.cgroup}"), Path(f"/sys/fs/cgroup{self.cgroup}")]
        for controller in (c for c in cgroups if c.is_dir()):
            for folder in sorted(controller.rglob("*"), key=lambda p: len(p.parts), reverse=True):
                if folder.is_dir():
                    with suppress(OSError):
                        folder.rmdir()
            with suppress(OSError):
                controller.rmdir()
        shutil.rmtree(self.root, ignore_errors=True)


SIX_SHA256 = (
    "4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274"  # six-1.17.0-py2.py3-none-any.whl
)
SIX_URL = (
    "https://files.pythonhosted.org/packages/b7/ce/149a00dd41f10bc29e5921b496af8b574d8413afcd5e30dfa0ed46c2cc5e/"
    "six-1.17.0-py2.py3-none-any.whl"
)


def lock_by_hand(bundle: Path) -> Path:
    """Mark the tiny test bundle (tests/data/bundles/tiny, one requirement: six==1.17.0) as locked, as
    `envbuild lock` against PyPI writes it (its file, URL and sha256 copied from PyPI's simple page), so
    build tests get past the refusal of an unlocked bundle without a resolver or a network."""
    import json

    path = bundle / "envbuild.lock.json"
    lock = json.loads(path.read_text(encoding="utf-8"))
    lock["resolved"] = True
    lock["resolution"] = {
        "resolver": "uv 0.13.9",
        "envbuild_version": lock["envbuild_version"],
        "python_version": lock["python_version"],
        "implementation": "cp",
        "platform": "x86_64-manylinux_2_36",
        "wheel_tags": ["manylinux_2_36_x86_64"],
        "index_urls": ["https://pypi.org/simple"],
    }
    lock["distributions"] = [
        {
            "name": "six",
            "version": "1.17.0",
            "files": [
                {
                    "filename": "six-1.17.0-py2.py3-none-any.whl",
                    "url": SIX_URL,
                    "sha256": SIX_SHA256,
                    "size": 11050,
                }
            ],
            "declared_by": ["requirements-rebuild.txt:2"],
            "index": "https://pypi.org/simple",
        }
    ]
    path.write_text(json.dumps(lock, indent=2) + "\n", encoding="utf-8")
    (bundle / "requirements-rebuild.txt").write_text(
        f"--require-hashes\n--only-binary :all:\n\nsix==1.17.0 \\\n    --hash=sha256:{SIX_SHA256}\n",
        encoding="utf-8",
    )
    return bundle


def committed_images(log: str) -> list[str]:
    """The images a build committed itself (steps not taken from the cache, FROM's image excluded),
    newest first, read from its log."""
    ids: list[str] = []
    mine = False
    for line in log.splitlines():
        text = line.strip()
        if step := re.match(r"Step \d+/\d+ : (\S+)", text):
            mine = step.group(1).upper() != "FROM"
        elif text == "---> Using cache":
            mine = False
        elif (m := re.fullmatch(r"---> ([0-9a-f]{12})", text)) and mine:
            ids.append(m.group(1))
    return ids[::-1]


def build_step(log: str, marker: str) -> tuple[str, bool]:
    """The text of the first build step whose instruction holds ``marker`` (from its ``Step N/M`` line to
    the next), and whether the engine took it from its cache."""
    parts = re.split(r"(?m)^(?=Step \d+/\d+ : )", log)
    step = next((p for p in parts if p.startswith("Step ") and marker in p.splitlines()[0]), None)
    assert step is not None, f"no build step's instruction holds {marker!r}"
    return step, "---> Using cache" in step


def minimal_wheel(path: Path, name: str, version: str, extra: dict[str, str] | None = None) -> str:
    """A wheel file at ``path`` whose ``.dist-info/METADATA`` says ``name`` ``version``; its sha256."""
    info = f"{name.replace('-', '_')}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        archive.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: false\n")
        for member, text in (extra or {}).items():
            archive.writestr(member, text)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def planted_env() -> dict[str, str]:
    """Secrets in the environment of ``build`` and ``validate``, random so nothing matches by chance."""
    token = secrets.token_hex(20)
    return {
        "HF_TOKEN": f"hf_{token}",
        "OPENAI_API_KEY": f"sk-proj-{token}",
        "GITHUB_PAT": f"ghp_{token}",
        "ENVBUILD_TEST_DB_URL": f"https://builder:{token[:12]}pw@db.example/x",
    }


@contextmanager
def saved_image(client: Any, tag: str) -> Iterator[tarfile.TarFile]:
    """The ``docker save`` archive of ``tag``, spooled to a temporary file, opened as a tar."""
    with tempfile.TemporaryFile() as saved:
        for chunk in client.images.get(tag).save(chunk_size=1 << 20):
            saved.write(chunk)
        saved.seek(0)
        with tarfile.open(fileobj=saved) as outer:
            yield outer


def needles_in_image(client: Any, tag: str, needles: list[str]) -> list[str]:
    """Where any of ``needles`` occurs: every file of every layer of ``docker save``, every other blob
    (image config: env, labels, history) and every ``docker history --no-trunc`` entry."""
    wanted = [n.encode() for n in needles]
    found: list[str] = []
    for entry in client.api.history(tag):
        created_by = str(entry.get("CreatedBy", "")).encode()
        found += [f"history {entry.get('Id')}: {n.decode()}" for n in wanted if n in created_by]
    with saved_image(client, tag) as outer:
        for member in outer:
            if not member.isfile():
                continue
            handle = outer.extractfile(member)
            assert handle is not None
            data = handle.read()
            try:
                with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as layer:
                    for inner in layer:
                        if not inner.isfile():
                            continue
                        body = layer.extractfile(inner)
                        content = body.read() if body is not None else b""
                        found += [f"{member.name}: {inner.name}" for n in wanted if n in content]
            except tarfile.ReadError:
                found += [f"{member.name}" for n in wanted if n in data]  # config, manifest
    return found


def assert_installed_offline(install: str, client: Any, tag: str) -> None:
    """The venv of image ``tag`` was installed offline from the wheelhouse, with --no-deps (a locked
    file): the image says so in /opt/venv/envbuild-installed-from, written by the install step itself, so
    a layer from the cache says it too; a step that ran says it in its log as well (``install``)."""
    said = client.containers.run(tag, ["cat", "/opt/venv/envbuild-installed-from"], remove=True).decode()
    assert said == "wheelhouse: offline, pip --no-index --find-links /tmp/envbuild/wheelhouse --no-deps\n", (
        said
    )
    if "Using cache" not in install:
        assert "Looking in links: /tmp/envbuild/wheelhouse" in install, install
