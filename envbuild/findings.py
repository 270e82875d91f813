"""Collect findings in order.  Codes are stable, registered in :data:`CODES`, and carry their
severity's letter (``E-`` error, ``W-`` warning, ``I-`` info).

In the base room: the plan's checks, the hardware rules (``envbuild/hardware/``, below the plan) and the
lock's resolution all report through :class:`Findings`, against the one catalogue of codes."""

from __future__ import annotations

from envbuild.models import Finding, Severity

_PREFIX: dict[Severity, str] = {"error": "E-", "warning": "W-", "info": "I-"}

CODES: dict[str, str] = {
    # errors: the plan cannot work as declared (check exits 1, render refuses without --force)
    "E-ABI-MISMATCH": "a compiled torch extension is built for another torch, CUDA/ROCm build or C++ ABI",
    "E-ARCH-MISSING": "the torch wheel has no kernels for a target arch (same-major cubin, +PTX, exact gfx)",
    "E-BASE-UNAVAILABLE": "no nvidia/cuda devel image (nvcc) or rocm/dev image for this toolkit on the OS",
    "E-BLENDER-BPY-MISSING": "blender.source = pypi: the Blender patch release has no bpy wheel",
    "E-BLENDER-BPY-PYTHON": "blender.source = pypi: python.version is not the CPython of the bpy wheels",
    "E-BLENDER-BPY-UNAVAILABLE": "blender.source = pypi: the Blender series publishes no Linux bpy wheel",
    "E-BLENDER-DEVICE": "a Blender device (CUDA/OPTIX/HIP/ONEAPI) cannot run on a target card",
    "E-BLENDER-HIP-UNSUPPORTED": "Blender ships no HIP kernels for the card (AMD Instinct)",
    "E-BLENDER-OPTIX-DRIVER": "the driver is older than Blender's OptiX minimum",
    "E-BLENDER-UNKNOWN": "the Blender series is not in the catalog",
    "E-APT-SNAPSHOT": "system.snapshot is before the snapshot service's first, or the OS has none",
    "E-COMPANION-INVALID": "a torch.packages entry is not a requirement",
    "E-COMPANION-MISMATCH": "a companion pin contradicts its (or torch's) Requires-Dist, or the backend",
    "E-COMPANION-UNAVAILABLE": "no release of the companion declares compatibility with this torch",
    "E-COMPANION-UNKNOWN": "a torch.packages entry is not a torch companion",
    "E-DRIVER-CARD": "the driver is older than the card needs (Blackwell: R570+)",
    "E-DRIVER-PTX": "a target runs only via PTX JIT, which needs a driver as new as the toolkit",
    "E-DRIVER-TOO-OLD": "the driver is below the CUDA major family's minor-version floor",
    "E-GLIBC": "the torch wheel's manylinux tag needs a newer glibc than the image",
    "E-HW-COUNT": "the machine (or capture) shows fewer devices than resources.gpus",
    "E-HW-ECC": "uncorrectable ECC errors, a pending page retirement, or a pending/failed row remap",
    "E-HW-FABRIC": "the NVLink fabric (NVSwitch system) is not completed: the fabric manager is down",
    "E-HW-IDENTITY": "the card received is not the card ordered (a lookalike, or a smaller card)",
    "E-HW-CLOCKS": "under load: a HW/thermal slowdown or power brake, or the SM clock below half its max",
    "E-HW-MEMORY": "a device holds less than the per-device need plus the runtime reserve",
    "E-HW-MIG": "MIG or an MI300X partition mode splits the card into smaller devices",
    "E-HOST-ARCH": "the card's host is not x86_64 (GB200: aarch64)",
    "E-LOTS-MAX": "the job needs more lots than the provider rents in one order (1 to 10)",
    "E-MEMORY-PER-CARD": "the per-device memory need reaches the device's usable memory (memory - reserve)",
    "E-PYTHON-NO-WHEEL": "the torch release has no wheel for the Python version",
    "E-PYTHON-OS": "the Python version cannot be provisioned on the OS",
    "E-REQ-CONFLICT": "requirements conflict with each other or with the torch-family pins",
    "E-OLD-RELEASE": "a named package is locked more than one series behind its newest installable release",
    "E-REQ-HASH": "a hash-locked requirement's hashes exclude the target's file",
    "E-SOURCE-NEEDS-TORCH": "only a source distribution exists and its build imports torch",
    "E-SOURCE-ONLY": "only a source distribution exists for the image's Python and platform",
    "E-SOURCE-NO-DEVEL-IMAGE": "a CUDA source build needs nvcc from the devel image (CUDA 11/12, or "
    'base.builder = "devel-image"); nvidia/cuda has none for the OS',
    "E-TOOLKIT-UNRESOLVED": "CUDA's compiler wheels (cuda-toolkit[nvcc,cccl]) do not resolve beside the "
    "locked set, or have no wheel for the image",
    "E-SOURCE-NO-TARGETS": "a CUDA/ROCm source build with no accelerator.targets to compile for",
    "E-SOURCE-NOT-RESOLVED": "a python.build_from_source name is not in the resolved environment",
    "E-ROCM-TOO-OLD": "the ROCm version is older than the card needs",
    "E-TOOLKIT-TOO-OLD": "the CUDA toolkit is older than the card needs",
    "E-TORCH-UNKNOWN": "the torch release is not in the catalog",
    "E-RESOLVED-TORCH": "torch.version differs from the torch the resolved set installs",
    "E-RESOLVED-CUDA": "accelerator.version differs from the CUDA build the resolved set installs",
    "E-RESOLVED-ROCM": "accelerator.version differs from the ROCm build the resolved set installs",
    "E-RESOLVED-BUILD": "the resolved torch is a build of another backend (CPU or the other vendor)",
    "E-VARIANT-NOT-SERVED": "the indexes asked do not serve the torch build the plan needs",
    "E-RESOLVED-UNSTABLE": "pinning the resolved torch moves the resolution to another torch",
    "E-VARIANT-UNAVAILABLE": "no wheel variant for the requested CUDA/ROCm version",
    "E-VENDOR-MISMATCH": "the backend does not match the card's vendor",
    "E-WHEEL-NAME": "a direct wheel URL's project differs from the requirement's name",
    "E-WHEEL-TAGS": "a direct wheel URL cannot install on the image's Python/platform",
    # warnings: works, with a cost or a risk worth knowing before ordering
    "W-NEWEST-SKIPPED": "a named package is locked behind its newest installable release: uv's reason",
    "W-SOURCE-HAS-WHEEL": "a python.build_from_source name has a wheel for the target (an unneeded build)",
    "W-ABI-KERNELS-SKIPPED": "a torch extension's C++ kernels are not built for this torch; only Python API",
    "W-ABI-NO-GPU": "a CPU-only build of a torch extension next to a GPU torch",
    "W-ARCH-PTX-JIT": "a target runs the wheel only by JIT-compiling its +PTX",
    "W-BASE-OS": "no toolkit resolved for a GPU backend; plain OS image used",
    "W-BLENDER-BPY-UNLISTED": "blender.source = pypi: a bpy release newer than the catalog knows",
    "W-BLENDER-PATCH": "blender.version names a series; its X.Y.0 release is downloaded",
    "W-BLENDER-PTX-JIT": "Blender CUDA runs on the card only via PTX JIT",
    "W-BLENDER-UNCONFIRMED": "the Blender series' kernel lists are not confirmed",
    "W-COMPANION-UNRECORDED": "a user's companion pin names a release envbuild has no metadata for",
    "W-DRIVER-MINOR-COMPAT": "the driver runs the toolkit only under minor-version compatibility",
    "W-GPU-UNUSED": "cpu backend on a GPU card: the card sits idle",
    "W-HW-CLOCKS": "HW slowdown, thermal slowdown or power brake active while the card is idle",
    "W-HW-COMPUTE-MODE": "compute mode Exclusive_Process or Prohibited",
    "W-HW-DRIVER": "the capture's driver differs from --driver; the capture's is used",
    "W-HW-ECC-CORRECTABLE": "correctable ECC errors since the driver loaded above a sourced threshold",
    "W-HW-IDENTITY": "the card received is another catalog card, with no less memory or compute",
    "W-HW-MEMORY-IN-USE": "memory in use with no process listed (other containers' processes are invisible)",
    "W-HW-NVLINK": "an NVLink link is down on a card that has links",
    "W-HW-PCIE-GEN": "the PCIe link runs below its maximum generation under load",
    "W-HW-PCIE-WIDTH": "the PCIe link runs narrower than its maximum width",
    "W-HW-POWER-LIMIT": "the power limit is below the card's default",
    "W-HW-PROCESSES": "other processes hold memory on the card",
    "W-MEMORY-NO-GPU": "a GPU memory need on a CPU-only target",
    "W-MEMORY-TIGHT": "the per-device need leaves less than 10% of the usable memory as headroom",
    "W-MULTI-LOT": "the job needs several lots; the program must distribute itself",
    "W-NO-TARGET": "a GPU backend without targets: card checks skipped",
    "W-NVIDIA-PIN": "a user pin of an nvidia-* runtime wheel next to a planned torch",
    "W-APT-SNAPSHOT-PARTIAL": "apt sources not in the snapshot stay live (a PPA, a vendor repository)",
    "W-OVERLAY-INVALID": "the catalog overlay file cannot be read; it is ignored (built-in catalog only)",
    "W-OVERLAY-STALE": "the catalog overlay is older than 30 days",
    "W-OVERLAY-UNCONFIRMED": "the torch release is known only from the catalog overlay; what is unconfirmed",
    "W-PYTHON-EXPERIMENTAL": "the Python version is experimental for the torch release",
    "W-ROCM-TOO-OLD": "the ROCm version may be older than the card needs (minimum unconfirmed)",
    "W-TOOLKIT-OLD": "the image's CUDA toolkit predates the card, but nothing in it uses the toolkit",
    "W-TORCH-INDEX": "a user option adds the PyTorch index of another variant than the plan's",
    "W-TORCH-LOCAL": "torch.version carries a local tag that envbuild ignores",
    "W-TORCH-UNCONFIRMED": "the torch release's wheels are not confirmed in a source",
    "W-TORCH-UNDECLARED": "a user requirement installs torch without a declared release",
    "W-TORCH-UNCATALOGED": "the torch an index serves or the resolved set installs is not in the catalog",
    "W-RESOLVED-GPU-BUILD": "a CPU plan resolves a CUDA/ROCm build of torch (gigabytes of GPU libraries)",
    "W-ARCH-UNKNOWN": "the catalog records no arch list for the resolved torch build",
    "W-DRIVER-PROVISIONAL": "torch is not declared: the driver floor holds only until resolution",
    "W-PLAN-NOT-REDERIVED": "a bundle without envbuild.inputs.json is locked with its plan as rendered",
    "W-TRITON-ARCH": "Triton in this torch release does not support the card's arch",
    "W-USER-INDEX-URL": "a user --index-url would replace the torch variant index",
    "W-VERSION-IGNORED": "accelerator.version is ignored for the cpu backend",
    # infos: what envbuild decided or what to order
    "I-ABI-WHEEL-URL": "a pinned release has no wheel on the index; where its own release wheels are",
    "I-ACCEL-PATCH": "accelerator.version names a patch; the wheel variant's own toolkit/ROCm image is used",
    "I-ARCH-COMPAT": "the card runs older same-major cubins",
    "I-BASE-DERIVED": "the base image chosen, and why: nothing heavier than the workload needs",
    "I-BUILDER-DERIVED": "the builder stage's devel image (a source build, the validator's GPU op), and why; "
    "the final stage keeps the base",
    "I-BUILDER-TOOLKIT-WHEELS": "CUDA 13: the builder stage installs nvcc from the package index "
    "(cuda-toolkit[nvcc,cccl], locked) into its own prefix, on the base image",
    "I-PROBE-OPS-CPU-ONLY": "no devel image for the OS where one is needed: only the validator's C++ probe "
    "op is built",
    "I-BASE-EXPLICIT": "base.image is used as given",
    "I-CARD-DEVICES": "a card presents as several devices (MI250X: 2 GCDs); gpus and memory count devices",
    "I-APT-SNAPSHOT": "apt reads the distribution's snapshot archive at the profile's instant",
    "I-COMPANION-DECLARED": "a companion goes with torch by declaration only (its metadata pins no torch)",
    "I-HW-LOTS": "a capture shows more devices in one machine than one lot of the order holds",
    "I-HW-UNJUDGED": "hardware rules the source (a plain nvidia-smi table, an idle card) could not judge",
    "I-DRIVER-IGNORED": "--driver does not apply to the backend",
    "I-DRIVER-UNKNOWN": "no --driver given: the minimum driver to order",
    "I-HASH-MODE": "a hash-locked input: the bundle installs in hash-checking mode once locked",
    "I-VERSION-INHERITED": "a parent (named) set an accelerator.version of another backend: derived instead",
    "I-LOT-IDLE": "the lots ordered hold more cards (devices) than the job uses: how many stay idle",
    "I-NOT-RESOLVED": "check judged the declared lines only; --resolve / lock resolve every distribution",
    "I-OVERLAY": "the catalog overlay in force: its path, date and age",
    "I-OS-DERIVED": "base.os not set and the default OS has no image for the toolkit: an OS that has one",
    "I-PIN-UNCONFIRMED": "a companion pin of an unconfirmed release has no metadata row behind it",
    "I-RESOLVED": "every distribution resolves for the image's target (check --resolve)",
    "I-REQ-SUPERSEDED": "a user requirement is replaced by an exact torch-family pin",
    "I-ROCM-HOST": "ROCm target: the host's amdgpu driver must support the image's ROCm (no NVIDIA advice)",
    "I-TORCH-DEFAULT": "kind pytorch without torch.version: the newest release the catalog has confirmed",
    "I-TORCH-PATCH": "a torch series resolved to its newest patch",
    "I-TORCH-DEFAULT-YIELDED": "the default torch does not install with the requirements: the resolver chose",
    "I-TORCH-SERVED": "an unconfirmed torch whose wheel the resolution locked (where it came from)",
    "I-VARIANT-DERIVED": "the CUDA/ROCm version was derived (no accelerator.version)",
    "I-VARIANT-RESOLVED": "the CUDA version follows the torch build the resolved set installs",
    "I-PLAN-RESOLVED": "what resolution changed in the plan (torch, CUDA, base image, driver)",
    "I-VARIANT-INDEX": "the CUDA version follows the default build the index serves",
    "I-INDEX-DEFAULT-BUILD": "torch pinned without a local tag: the index's default build is the one needed",
}


class Findings:
    def __init__(self) -> None:
        self._items: list[Finding] = []

    def add(self, severity: Severity, code: str, message: str, *, source: str | None = None) -> None:
        """Record a finding once.  ``message`` is for the user (what is wrong, what to write instead);
        ``source`` carries the citation (catalog row, metadata, URL): shown by ``--verbose`` and in
        ``--json``, never inside the message."""
        if code not in CODES or not code.startswith(_PREFIX[severity]):
            raise ValueError(f"finding code {code!r} is not registered for severity {severity}")
        finding = Finding(severity=severity, code=code, message=message, source=source or None)
        if finding not in self._items:
            self._items.append(finding)

    def error(self, code: str, message: str, *, source: str | None = None) -> None:
        self.add("error", code, message, source=source)

    def warning(self, code: str, message: str, *, source: str | None = None) -> None:
        self.add("warning", code, message, source=source)

    def info(self, code: str, message: str, *, source: str | None = None) -> None:
        self.add("info", code, message, source=source)

    def codes(self) -> list[str]:
        return [f.code for f in self._items]

    def result(self) -> tuple[Finding, ...]:
        order = {"error": 0, "warning": 1, "info": 2}
        return tuple(sorted(self._items, key=lambda f: order[f.severity]))
