"""The container stage's parsing and decisions, the one run-options rule, and ``--docker-arg``.

The cgroup trees here are hand-written by the tests (files laid out as the kernel and Docker show
them: cgroup v2 with a private namespace and with the host's, cgroup v1 as Docker mounts it); the
same code reads real ones in ``test_container_docker.py``.  The facts fed to ``decide_container``
are written by hand too, each case saying what it stands for.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from build_support import envbuild

from envbuild.boundary import parse_json, to_json
from envbuild.errors import UsageError
from envbuild.image.run import REFUSED_DOCKER_ARGS, apply_docker_args, device_options, parse_docker_args
from envbuild.models import Lock
from envbuild.runopts import host_group_ids, lock_run_options, run_command, run_options
from envbuild.validate.container import GIB, decide_container, shm_size_gib
from envbuild.validate.container_facts import cgroup_facts, needed_nodes, node_facts, parse_cpuset
from envbuild.validate.stages import STAGE_NAMES

LOCK_FILE = Path(__file__).parent / "data" / "bundles" / "tiny" / "envbuild.lock.json"
LOCK = parse_json(Lock, LOCK_FILE.read_text())


def lock(**update: Any) -> Lock:
    return replace(LOCK, **update)


def tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


# -- cgroup parsing (hand-written trees) -------------------------------------------------------------


def test_cgroup_v2_private_namespace(tmp_path: Path) -> None:
    """Docker on cgroup v2: /proc/self/cgroup is ``0::/`` and the mount is the container's cgroup."""
    root = tree(
        tmp_path,
        {
            "proc/self/cgroup": "0::/\n",
            "sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory pids\n",
            "sys/fs/cgroup/memory.max": "536870912\n",
            "sys/fs/cgroup/cpu.max": "50000 100000\n",
            "sys/fs/cgroup/cpuset.cpus.effective": "0-3,8\n",
        },
    )
    facts = cgroup_facts(root)
    assert facts["version"] == 2
    assert facts["memory_limit_bytes"] == 512 << 20
    assert facts["cpu_quota_cores"] == 0.5 and facts["cpuset_cpus"] == 5
    assert facts["files"]["/sys/fs/cgroup/memory.max"] == "536870912"


def test_cgroup_v2_unlimited_and_a_tighter_parent(tmp_path: Path) -> None:
    """The host's namespace (a systemd service): the leaf says ``max``; its parent slice holds 2 GiB
    and 1.5 CPUs, and the tightest limit on the way up is the one that applies."""
    root = tree(
        tmp_path,
        {
            "proc/self/cgroup": "0::/job.slice/run.service\n",
            "sys/fs/cgroup/cgroup.controllers": "cpu memory\n",
            "sys/fs/cgroup/job.slice/memory.max": str(2 * GIB),
            "sys/fs/cgroup/job.slice/cpu.max": "150000 100000",
            "sys/fs/cgroup/job.slice/run.service/memory.max": "max",
            "sys/fs/cgroup/job.slice/run.service/cpu.max": "max 100000",
        },
    )
    facts = cgroup_facts(root)
    assert facts["version"] == 2
    assert facts["memory_limit_bytes"] == 2 * GIB and facts["cpu_quota_cores"] == 1.5
    unlimited = tree(
        tmp_path / "u",
        {
            "proc/self/cgroup": "0::/\n",
            "sys/fs/cgroup/cgroup.controllers": "cpu memory\n",
            "sys/fs/cgroup/memory.max": "max\n",
            "sys/fs/cgroup/cpu.max": "max 100000\n",
        },
    )
    facts = cgroup_facts(unlimited)
    assert facts["memory_limit_bytes"] is None and facts["cpu_quota_cores"] is None


def test_cgroup_v1_as_docker_mounts_it(tmp_path: Path) -> None:
    """cgroup v1: /proc/self/cgroup names the host's path, the mounts show the container's own
    folder; "no limit" is 9223372036854771712; memory.stat's hierarchical limit counts too."""
    own = "/docker/0123abcd"
    root = tree(
        tmp_path,
        {
            "proc/self/cgroup": (
                f"12:memory:{own}\n11:cpu,cpuacct:{own}\n10:cpuset:{own}\n1:name=systemd:{own}\n"
            ),
            "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
            "sys/fs/cgroup/memory/memory.stat": "cache 0\nhierarchical_memory_limit 1073741824\n",
            "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "200000\n",
            "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
            "sys/fs/cgroup/cpuset/cpuset.cpus": "0-1\n",
        },
    )
    facts = cgroup_facts(root)
    assert facts["version"] == 1
    assert facts["memory_limit_bytes"] == GIB and facts["cpu_quota_cores"] == 2.0
    assert facts["cpuset_cpus"] == 2
    no_quota = tree(
        tmp_path / "n",
        {
            "proc/self/cgroup": f"4:memory:{own}\n3:cpu:{own}\n",
            "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
            "sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n",
            "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n",
        },
    )
    facts = cgroup_facts(no_quota)
    assert facts["version"] == 1 and facts["memory_limit_bytes"] is None and facts["cpu_quota_cores"] is None


def test_no_cgroup_filesystem(tmp_path: Path) -> None:
    facts = cgroup_facts(tmp_path)
    assert facts["version"] is None and facts["memory_limit_bytes"] is None and facts["files"] == {}


def test_parse_cpuset() -> None:
    assert parse_cpuset("0-3,8,10-11") == 7
    assert parse_cpuset("5") == 1
    assert parse_cpuset("") == 0


def test_needed_nodes_per_backend(tmp_path: Path) -> None:
    tree(tmp_path, {"dev/nvidia0": "", "dev/nvidia10": "", "dev/nvidia2": "", "dev/nvidia-modeset": ""})
    tree(tmp_path, {"dev/dri/renderD129": "", "dev/dri/renderD128": "", "dev/dri/card0": ""})
    assert needed_nodes("cuda", tmp_path) == [
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia0",
        "/dev/nvidia2",
        "/dev/nvidia10",
    ]
    assert needed_nodes("rocm", tmp_path) == ["/dev/kfd", "/dev/dri/renderD128", "/dev/dri/renderD129"]
    assert needed_nodes("cpu", tmp_path) == []


def test_node_facts_on_real_nodes(tmp_path: Path) -> None:
    null = node_facts("/dev/null")
    assert null["exists"] and null["char_device"] and null["open"] == "ok" and null["mode"] == "0666"
    missing = node_facts("/dev/kfd", tmp_path)
    assert missing == {"path": "/dev/kfd", "exists": False, "error": "ENOENT"}


# -- decisions (facts written by hand) ----------------------------------------------------------------

GOOD: dict[str, Any] = {
    "uid": 10001,
    "gid": 10001,
    "groups": [10001],
    "shm_bytes": 8 * GIB,
    "nodes": [],
    "rlimits": {
        "memlock": {"soft": None, "hard": None},
        "nofile": {"soft": 1048576, "hard": 1048576},
        "stack": {"soft": 67108864, "hard": 67108864},
    },
    "cgroup": {"version": 2, "memory_limit_bytes": None, "cpu_quota_cores": None, "cpuset_cpus": 16},
    "affinity_cpus": 16,
}


def facts(**update: Any) -> dict[str, Any]:
    return {**GOOD, **update}


def test_a_good_container_passes() -> None:
    res = decide_container(LOCK, GOOD)
    assert res.status == "passed" and res.facts["warnings"] == [] and res.hint is None


def test_docker_default_shm_fails_naming_the_flags() -> None:
    res = decide_container(LOCK, facts(shm_bytes=64 << 20))  # Docker's default
    assert res.status == "failed"
    assert "/dev/shm holds 64 MiB, under 1 GiB" in (res.error or "")
    assert "--ipc=host" in (res.error or "") and res.hint and "--ipc=host" in res.hint
    sized = decide_container(lock(memory_gib=64.0), facts(shm_bytes=64 << 20))
    assert "--shm-size 32g" in (sized.error or "") and sized.hint and "--shm-size 32g" in sized.hint
    assert decide_container(LOCK, facts(shm_bytes=GIB)).status == "passed"  # the threshold itself
    assert "not mounted" in (decide_container(LOCK, facts(shm_bytes=None)).error or "")


def test_memory_limit_against_the_declared_need() -> None:
    need = lock(memory_gib=16.0)
    low = facts(cgroup={**GOOD["cgroup"], "memory_limit_bytes": 8 * GIB})
    res = decide_container(need, low)
    assert res.status == "failed"
    assert "memory limit is 8 GiB (cgroup v2), under the lock's resources.memory_gib = 16 GiB" in (
        res.error or ""
    )
    assert res.hint and "--memory 16g" in res.hint
    assert decide_container(need, facts(cgroup={**GOOD["cgroup"], "memory_limit_bytes": 16 * GIB})).ok
    # nothing declared: a limit under /dev/shm is a warning (tmpfs pages are charged to the cgroup)
    res = decide_container(LOCK, facts(cgroup={**GOOD["cgroup"], "memory_limit_bytes": 4 * GIB}))
    assert res.status == "passed" and "(4 GiB) is below /dev/shm (8 GiB)" in res.facts["warnings"][0]


def test_cpus_against_the_declared_need() -> None:
    need = lock(cpus=4.0)
    res = decide_container(need, facts(cgroup={**GOOD["cgroup"], "cpu_quota_cores": 2.0}))
    assert res.status == "failed" and "may use 2 CPU(s) (its cgroup quota (--cpus))" in (res.error or "")
    assert res.hint and "--cpus 4" in res.hint
    pinned = decide_container(need, facts(affinity_cpus=2))
    assert pinned.status == "failed" and pinned.hint and "--cpuset-cpus" in pinned.hint
    assert decide_container(need, GOOD).ok


def test_amd_nodes_the_user_cannot_open() -> None:
    """As on a host whose render group is 110: the node exists, mode 0660, group 110, and uid 10001
    is not in it (what test_container_docker makes for real with a host node)."""
    rocm = lock(backend="rocm")
    nodes = [
        {"path": "/dev/kfd", "exists": True, "char_device": True, "mode": "0660", "uid": 0, "gid": 110,
         "open": "refused", "errno": "EACCES", "error": "EACCES: Permission denied"},
        {"path": "/dev/dri/renderD128", "exists": True, "char_device": True, "mode": "0666", "uid": 0,
         "gid": 0, "open": "refused", "errno": "EPERM", "error": "EPERM: Operation not permitted"},
    ]  # fmt: skip
    res = decide_container(rocm, facts(nodes=nodes))
    assert res.status == "failed"
    assert "/dev/kfd (mode 0660, owner 0:110) cannot be opened for reading and writing by uid 10001" in (
        res.error or ""
    )
    assert res.hint and "--group-add 110" in res.hint and "--device /dev/dri/renderD128" in res.hint
    missing = decide_container(rocm, facts(nodes=[{"path": "/dev/kfd", "exists": False}]))
    assert "/dev/kfd is missing" in (missing.error or "") and "--device /dev/kfd --device /dev/dri" in (
        missing.error or ""
    )
    assert "0 render node(s)" in (missing.error or "")


def test_nvidia_nodes_and_count() -> None:
    cuda = lock(backend="cuda", gpus=2)
    ok = {"exists": True, "char_device": True, "mode": "0666", "uid": 0, "gid": 0, "open": "ok"}
    one = [{"path": p, **ok} for p in ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia0")]
    res = decide_container(cuda, facts(nodes=one))
    assert res.status == "failed"
    assert "1 NVIDIA GPU node(s) /dev/nvidiaN in the container, but the lock's job uses 2" in (
        res.error or ""
    )
    assert res.hint and "--gpus all" in res.hint
    two = [*one, {"path": "/dev/nvidia1", **ok}]
    assert decide_container(cuda, facts(nodes=two)).ok


def test_limits_are_warnings_naming_the_flag() -> None:
    limited = facts(
        rlimits={
            "memlock": {"soft": 8 << 20, "hard": 8 << 20},
            "nofile": {"soft": 20000, "hard": 20000},
            "stack": {"soft": 8 << 20, "hard": None},
        }
    )
    cpu = decide_container(lock(torch_version="2.13.0"), limited)
    assert cpu.status == "passed" and len(cpu.facts["warnings"]) == 1  # memlock matters for GPUs only
    assert "--ulimit nofile=1048576" in cpu.facts["warnings"][0]
    # the nofile limit is a torch.multiprocessing need: a lock without torch gets no warning for it
    assert decide_container(LOCK, limited).facts["warnings"] == []
    gpu = decide_container(lock(backend="rocm"), {**limited, "nodes": []})
    assert any("--ulimit memlock=-1" in w for w in gpu.facts["warnings"])


def test_the_stage_is_early_in_the_ladder() -> None:
    assert STAGE_NAMES.index("container") < STAGE_NAMES.index("packages")


# -- the one run-options rule ------------------------------------------------------------------------


def test_run_options_per_backend() -> None:
    assert run_options("cpu").cli_args() == ["--ipc=host"]
    assert run_options("cpu", memory_gib=3).cli_args() == ["--shm-size", "2g"]
    assert shm_size_gib(0.5) == 1 and shm_size_gib(None) is None
    cuda = run_options("cuda").cli_args()
    assert cuda == ["--gpus", "all", "--ipc=host", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864"]
    assert run_options("cuda", gpus=2).cli_args()[:2] == ["--gpus", "2"]
    rocm = run_options("rocm", memory_gib=64).cli_args()
    assert rocm[:8] == [
        "--device",
        "/dev/kfd",
        "--device",
        "/dev/dri",
        "--group-add",
        '"$(stat -c %g /dev/kfd)"',
        "--group-add",
        '"$(stat -c %g /dev/dri/renderD128)"',
    ]
    assert "--shm-size" in rocm and "32g" in rocm
    assert run_options("rocm", group_ids=("44", "110")).group_add == ("44", "110")
    assert run_options("cuda", gpus=0).cli_args() == ["--ipc=host"]  # --gpus none
    flags = " ".join(f for f, _ in run_options("rocm", memory_gib=8).reasons())
    assert "--privileged" not in flags and "seccomp" not in flags


def test_create_kwargs_match_the_cli_args() -> None:
    kwargs = run_options("rocm", memory_gib=8, group_ids=("110",)).create_kwargs()
    assert kwargs["devices"] == ["/dev/kfd:/dev/kfd:rwm", "/dev/dri:/dev/dri:rwm"]
    assert kwargs["group_add"] == ["110"] and kwargs["shm_size"] == "4g" and "ipc_mode" not in kwargs
    assert [(u.name, u.soft, u.hard) for u in kwargs["ulimits"]] == [
        ("memlock", -1, -1),
        ("stack", 67108864, 67108864),
    ]
    cuda = run_options("cuda").create_kwargs()
    assert cuda["ipc_mode"] == "host" and cuda["device_requests"][0]["Count"] == -1
    assert device_options(lock(backend="rocm"), None, ("110",)) == {
        "devices": ["/dev/kfd:/dev/kfd:rwm", "/dev/dri:/dev/dri:rwm"],
        "group_add": ["110"],
    }


def test_host_group_ids_read_the_nodes(tmp_path: Path) -> None:
    """Files stand in for the host's nodes (only their group matters): the render nodes' group
    first seen once."""
    tree(tmp_path, {"kfd": "", "dri/renderD128": "", "dri/renderD129": ""})
    os.chown(tmp_path / "kfd", 0, 110)
    os.chown(tmp_path / "dri" / "renderD128", 0, 44)
    os.chown(tmp_path / "dri" / "renderD129", 0, 44)
    assert host_group_ids(tmp_path) == ("110", "44")
    assert host_group_ids(tmp_path / "none") == ()


def test_readme_run_lines_come_from_the_one_function(tmp_path: Path) -> None:
    profile = tmp_path / "p.toml"
    profile.write_text(
        'name = "p"\nkind = "pytorch"\nextends = "pytorch"\n\n[accelerator]\nbackend = "rocm"\n'
        'targets = ["mi300x"]\n\n[resources]\nmemory_gib = 64\n'
    )
    out = tmp_path / "bundle"
    proc = envbuild("render", profile, "--out", out, "--force")
    assert proc.returncode == 0, proc.stderr
    written = parse_json(Lock, (out / "envbuild.lock.json").read_text())
    assert written.memory_gib == 64.0
    text = (out / "README.md").read_text()
    tag = text.split("envbuild build . --tag ", 1)[1].split()[0]
    assert run_command(written, tag, sep=" \\\n  ") in text
    assert '--group-add "$(stat -c %g /dev/kfd)"' in text and "--shm-size 32g" in text
    assert lock_run_options(written).cli_args() == run_options("rocm", memory_gib=64).cli_args()


# -- --docker-arg -------------------------------------------------------------------------------------


def test_docker_args_forms() -> None:
    assert parse_docker_args(["--shm-size=2g", "--memory 8g", "--ulimit", "memlock=-1", "-e", "A=1"]) == [
        ("--shm-size", "2g"),
        ("--memory", "8g"),
        ("--ulimit", "memlock=-1"),
        ("--env", "A=1"),
    ]


@pytest.mark.parametrize(
    ("arg", "flag"),
    [
        ("--user=0", "--user"),
        ("-u 0", "--user"),
        ("--entrypoint=/bin/sh", "--entrypoint"),
        ("--privileged", "--privileged"),
        ("--rm", "--rm"),
        ("-it", "-it"),
        ("--network=host", "--network"),
        ("--gpus=all", "--gpus"),
    ],
)
def test_docker_args_refused(arg: str, flag: str) -> None:
    with pytest.raises(UsageError, match="is not allowed") as info:
        parse_docker_args([arg])
    assert flag in str(info.value)


def test_docker_args_unknown_or_incomplete() -> None:
    with pytest.raises(UsageError, match="accepted: --cap-add"):
        parse_docker_args(["--oom-kill-disable"])
    with pytest.raises(UsageError, match="needs a value"):
        parse_docker_args(["--memory"])
    with pytest.raises(UsageError, match="not a size"):
        apply_docker_args({}, [("--memory", "lots")])
    assert set(REFUSED_DOCKER_ARGS) >= {"--user", "--entrypoint", "--privileged"}


def test_docker_args_replace_what_they_override() -> None:
    base = run_options("cuda").create_kwargs()
    out = apply_docker_args(base, parse_docker_args(["--shm-size=64m", "--ulimit=memlock=65536:65536"]))
    assert "ipc_mode" not in out and out["shm_size"] == 64 << 20
    assert [(u.name, u.soft) for u in out["ulimits"]] == [("stack", 67108864), ("memlock", 65536)]
    out = apply_docker_args(
        run_options("cpu", memory_gib=4).create_kwargs(),
        parse_docker_args(["--ipc=host", "--memory=1g", "--cpus=1.5", "--group-add=44", "--device=/dev/x"]),
    )
    assert out["ipc_mode"] == "host" and "shm_size" not in out
    assert out["mem_limit"] == GIB and out["nano_cpus"] == 1_500_000_000
    assert out["group_add"] == ["44"] and out["devices"] == ["/dev/x"]


def test_cli_refuses_before_the_engine(tmp_path: Path) -> None:
    proc = envbuild("validate", "--image", "envbuild-test/none:1", "--docker-arg=--user=0")
    assert proc.returncode == 2 and "--user is not allowed" in proc.stderr and "Traceback" not in proc.stderr
    proc = envbuild("validate", "--docker-arg=--shm-size=2g")
    assert proc.returncode == 2 and "--docker-arg needs --image" in proc.stderr


# -- validate --image's container options, for backends this machine cannot run ----------------------


class _FakeContainer:
    """Stands in for docker-py's Container (written by hand: no GPU engine here): serves the lock from
    the image, an empty log stream, exit 0 and a run folder with one report file."""

    def __init__(self, lock_json: bytes) -> None:
        self.lock_json = lock_json

    def get_archive(self, path: str) -> tuple[list[bytes], dict[str, Any]]:
        import io
        import tarfile

        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            name, data = (
                ("envbuild.lock.json", self.lock_json)
                if path.endswith(".json")
                else ("envbuild-runs/run-1/report.json", b"{}")
            )
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        return [buffer.getvalue()], {}

    def start(self) -> None:
        return None

    def logs(self, **_: Any) -> list[bytes]:
        return []

    def wait(self, timeout: int) -> dict[str, int]:
        return {"StatusCode": 0}

    def remove(self, force: bool) -> None:
        return None


class _FakeClient:
    def __init__(self, lock: Lock) -> None:
        self.created: list[dict[str, Any]] = []
        self.lock_json = to_json(lock).encode()
        self.containers = self

    def create(self, tag: str, **kwargs: Any) -> _FakeContainer:
        self.created.append(kwargs)
        return _FakeContainer(self.lock_json)

    def info(self) -> dict[str, Any]:
        """The engine of a rented NVIDIA machine: the NVIDIA runtime registered (image/gpu_host.py)."""
        return {"Runtimes": {"runc": {}, "nvidia": {"path": "nvidia-container-runtime"}}}


@pytest.mark.parametrize("backend", ["cuda", "rocm"])
def test_validate_image_creates_the_container_from_the_one_rule(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envbuild.image import run

    monkeypatch.setattr(run, "host_group_ids", lambda: ("110", "44"))  # this host's nodes, as read
    client = _FakeClient(lock(backend=backend, memory_gib=16.0))
    lines: list[str] = []
    result = run.validate_image(
        "envbuild-test/x:1",
        out=tmp_path / "runs",
        docker_args=["--memory=32g", "--ulimit=memlock=65536"],
        echo=lines.append,
        client=client,
    )
    assert result.exit_code == 0 and [p.name for p in result.run_dirs] == ["run-1"]
    kwargs = client.created[-1]  # the first create read the lock
    expected = lock_run_options(lock(backend=backend, memory_gib=16.0), None, ("110", "44"))
    want = expected.create_kwargs()
    assert kwargs["shm_size"] == want["shm_size"] == "8g" and "ipc_mode" not in kwargs
    assert kwargs["mem_limit"] == 32 << 30
    assert [(u.name, u.soft) for u in kwargs["ulimits"]] == [("stack", 67108864), ("memlock", 65536)]
    if backend == "cuda":
        assert kwargs["device_requests"] == want["device_requests"] and "devices" not in kwargs
    else:
        assert kwargs["devices"] == ["/dev/kfd:/dev/kfd:rwm", "/dev/dri:/dev/dri:rwm"]
        assert kwargs["group_add"] == ["110", "44"] and "device_requests" not in kwargs
    shown = " ".join(expected.cli_args())
    assert lines[0] == (
        f"envbuild: validating envbuild-test/x:1 as `docker run {shown} --memory=32g "
        "--ulimit=memlock=65536 envbuild-test/x:1`"
    )
