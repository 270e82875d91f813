"""The extensions and memory decisions re-derive each verdict from the probe's raw numbers.

The facts here are hand-written to contradict the probe's own verdict (a "passed" part whose numbers
fail, an "allocated" device that holds fewer bytes than the lock needs), as a lying or broken probe
would report them; the decision must not pass them through.
"""

from __future__ import annotations

from dataclasses import replace

from validate_support import gpu_lock

from envbuild.validate.decide_work import GIB, decide_extensions, decide_memory_gpu, memory_need_bytes

LOCK = gpu_lock("cuda", ["h100"])
GPU_LOCK = replace(LOCK, gpu_memory_gib=10.0)


def part(**info: object) -> dict[str, object]:
    return {"name": "cpp_op", "status": "passed", "seconds": 1.0, **info}


def test_a_passed_part_whose_numbers_fail_is_a_failure() -> None:
    res = decide_extensions(LOCK, {"parts": [part(max_error=0.3, tolerance=1e-5)]})
    assert res.status == "failed"
    assert res.error == "cpp_op: max error 0.3 exceeds its tolerance 1e-05 (the probe reported it passed)"
    nan = decide_extensions(LOCK, {"parts": [part(max_error=float("nan"), tolerance=1e-5)]})
    assert nan.status == "failed"


def test_a_passed_part_without_numbers_is_a_failure_unless_import_only() -> None:
    bare = decide_extensions(LOCK, {"parts": [part()]})
    assert bare.status == "failed" and "without a max error and tolerance" in (bare.error or "")
    smoke = {"name": "import:foo", "status": "passed", "smoke": "import only (no numeric smoke test)"}
    assert decide_extensions(LOCK, {"parts": [smoke]}).status == "passed"


def test_parts_within_tolerance_pass() -> None:
    ok = decide_extensions(LOCK, {"parts": [part(max_error=0.0, tolerance=1e-5)]})
    assert ok.status == "passed"


def device(**info: object) -> dict[str, object]:
    need = memory_need_bytes(GPU_LOCK)
    base: dict[str, object] = {
        "index": 0,
        "need_bytes": need,
        "free_bytes": 80 * GIB,
        "total_bytes": 80 * GIB,
        "allocated": True,
        "allocated_bytes": need,
        "pattern": 0xA5,
        "readback": [0xA5, 0xA5, 0xA5],
        "readback_ok": True,
    }
    return {**base, **info}


def test_memory_passes_only_when_the_bytes_say_so() -> None:
    assert decide_memory_gpu(GPU_LOCK, {"devices": [device()]}).status == "passed"
    short = decide_memory_gpu(GPU_LOCK, {"devices": [device(allocated_bytes=GIB)]})
    assert short.status == "failed" and "fewer than the" in (short.error or "")
    garbage = decide_memory_gpu(GPU_LOCK, {"devices": [device(readback=[0xA5, 0, 0xA5])]})
    assert garbage.status == "failed" and "read back [165, 0, 165] where 165 was written" in (
        garbage.error or ""
    )
    unverified = decide_memory_gpu(GPU_LOCK, {"devices": [device(allocated_bytes=None)]})
    assert unverified.status == "failed"  # "allocated" alone, without the byte count, proves nothing


def test_memory_need_comes_from_the_lock_not_the_probe() -> None:
    # The probe was asked (or claims) to allocate less than the lock needs: still a failure.
    small = GIB
    res = decide_memory_gpu(GPU_LOCK, {"devices": [device(need_bytes=small, allocated_bytes=small)]})
    assert res.status == "failed"
    failed = decide_memory_gpu(
        GPU_LOCK, {"devices": [device(allocated=False, error="CUDA out of memory", free_bytes=2 * GIB)]}
    )
    assert failed.error == "device 0: cannot allocate 10.5 GiB (free 2.0 of 80.0 GiB): CUDA out of memory"
