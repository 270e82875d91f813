"""Rules and choices about the image: Python provisioning, base image and flavor, glibc, apt list."""

from __future__ import annotations

from envbuild.catalog import OsEntry, load_catalog
from envbuild.errors import choices
from envbuild.findings import Findings
from envbuild.models import Plan
from envbuild.plan.context import Context, cite
from envbuild.plan.suggest import cuda_name, cuda_wheels_for
from envbuild.versions import version_choices, version_tuple


def python_provision(ctx: Context, out: Findings) -> str:
    os_, py = ctx.os, ctx.python
    if ctx.release is not None:
        rel = ctx.release
        src = cite((f"torch {rel.series}", rel))
        if py not in rel.python:
            valid = version_choices(v for v in rel.python if v in os_.pythons) or version_choices(rel.python)
            out.error(
                "E-PYTHON-NO-WHEEL",
                f"torch {ctx.patch.version if ctx.patch else rel.series} has no wheel for Python {py} "
                f"({ctx.setting('python.version')}); its wheels cover Python {rel.python[0]}-"
                f"{rel.python[-1]}: set python.version to one of {valid}",
                source=src,
            )
        elif py in rel.python_experimental:
            stable = [v for v in rel.python if v not in rel.python_experimental and v in os_.pythons]
            fix = f"; set python.version to {version_choices(stable)} for full support" if stable else ""
            out.warning(
                "W-PYTHON-EXPERIMENTAL",
                f"torch {rel.series} supports Python {py} only experimentally "
                f"({ctx.setting('python.version')}){fix}",
                source=src,
            )
    if py == os_.system_python:
        return "system"
    if py in os_.deadsnakes:
        return "deadsnakes"
    others = [o for o in ctx.catalog.oses if py in o.pythons]
    alt = f"; Python {py} is available on {', '.join(o.id for o in others)}" if others else ""
    out.error(
        "E-PYTHON-OS",
        f"{ctx.setting('python.version')} cannot be provisioned on {os_.name} ({_os_setting(ctx)}): it "
        f"offers {os_.system_python} (system)"
        + (f" and {', '.join(os_.deadsnakes)} (deadsnakes PPA)" if os_.deadsnakes else "")
        + f"; set python.version to one of {version_choices(os_.pythons)}{alt}",
        source=cite((os_.id, os_)),
    )
    return "system"


def _os_setting(ctx: Context) -> str:
    """``base.os = "ubuntu22.04" (inherited ...)``, or how the OS was chosen when base.os is absent."""
    if ctx.profile.sources.get("base.os", "default") == "default":
        return f"base.os not set, so {ctx.os.id}"
    return ctx.setting("base.os")


def _needed_image(ctx: Context, os_id: str) -> tuple[str, str, tuple[str, ...]] | None:
    """(what, image on ``os_id``, OSes the catalog has it for) of the toolkit image the plan prefers.

    None when the plan's base is the plain OS image whatever the OS (Blender on CUDA carries its own
    kernels)."""
    if ctx.backend == "cuda" and ctx.toolkit is not None and not ctx.profile.blender.version:
        tk = ctx.toolkit
        image = ctx.catalog.cuda_image(tk, "<flavor>", os_id)
        return f"{ctx.catalog.toolkits.image_repository} CUDA {tk.image_version}", image, tk.image_os
    if ctx.backend == "rocm" and ctx.rocm is not None:
        rv = ctx.rocm
        return f"rocm/dev ROCm {rv.version}", ctx.catalog.rocm_image(rv, os_id, complete=False), rv.image_os
    return None


def choose_os(ctx: Context, out: Findings) -> None:
    """``[base] os`` absent: when the default OS has no image for the plan's toolkit, use one that has.

    Absent means the loader recorded ``base.os`` as ``default`` (a profile or a parent it extends that
    sets ``os`` keeps it, and is refused as before when the image does not exist).  Among the OSes the
    image exists for, one that provisions ``python.version`` and has the glibc the torch wheels need
    comes first, then the newest in the catalog's order.
    """
    if ctx.profile.base.image or ctx.profile.sources.get("base.os") != "default":
        return
    needed = _needed_image(ctx, ctx.os.id)
    if needed is None or ctx.os.id in needed[2]:
        return
    candidates = [o for o in ctx.catalog.oses if o.id in needed[2]]
    if not candidates:
        return
    min_glibc = ctx.release.min_glibc if ctx.release is not None else "0"

    def fits(o: OsEntry) -> bool:
        return ctx.python in o.pythons and version_tuple(o.glibc) >= version_tuple(min_glibc)

    chosen = [o for o in candidates if fits(o)] or candidates
    pick = chosen[-1]
    what, _, oses = needed
    image = _needed_image(ctx, pick.id)
    assert image is not None
    row = ctx.toolkit if ctx.backend == "cuda" else ctx.rocm
    label = f"{'CUDA' if ctx.backend == 'cuda' else 'ROCm'} {row.version if row else ''}"
    out.info(
        "I-OS-DERIVED",
        f"base.os not set: using {pick.id}, because the default {ctx.os.id} has no {what} image; the "
        f"catalog has one for {', '.join(oses)} ({image[1]}). Set base.os to choose another",
        source=cite((label, row)),
    )
    ctx.os = pick


def _other_variants(ctx: Context) -> str:
    """``, or accelerator.version = "12.6"`` when another variant of this torch has an image here."""
    if ctx.release is None or ctx.patch is None:
        return ""
    os_id = ctx.os.id
    if ctx.backend == "cuda":
        found = [
            cuda_name(w.variant)[5:]
            for w in cuda_wheels_for(ctx.release, ctx.patch.version)
            if (tk := ctx.catalog.cuda_toolkit(w.variant)) is not None and os_id in tk.image_os
        ]
    else:
        found = [
            w.variant.removeprefix("rocm")
            for w in ctx.release.rocm
            if (rv := ctx.catalog.rocm_version(w.variant)) is not None and os_id in rv.image_os
        ]
    if not found:
        return ""
    quoted = " or ".join(f'"{v}"' for v in found)
    return f", or accelerator.version = {quoted} (has an image for {os_id})"


def _compiles_why(ctx: Context) -> str:
    if ctx.patch is not None and ctx.profile.validate_.compile_extensions:
        return f"{ctx.setting('validate.compile_extensions')} builds a C++/CUDA extension on arrival"
    return "a requirement is built from source in the image (a VCS or sdist URL, or --no-binary)"


def _plain_os_cuda(ctx: Context, why: str, out: Findings) -> tuple[str, str]:
    """The plain OS image for a CUDA plan; the Dockerfile sets what NVIDIA's images set (container_env)."""
    env = ctx.catalog.toolkits.container_env
    tk = ctx.toolkit
    assert tk is not None
    caps = env.graphics_capabilities if ctx.profile.blender.version else env.capabilities
    out.info(
        "I-BASE-DERIVED",
        f"base image {ctx.os.image}, the plain OS image: {why}. The Dockerfile sets NVIDIA_REQUIRE_CUDA="
        f"{env.require_cuda(tk.version)} (the NVIDIA container toolkit refuses a driver too old for CUDA "
        f"{tk.version}), NVIDIA_VISIBLE_DEVICES=all and NVIDIA_DRIVER_CAPABILITIES={caps}",
        source=cite(("NVIDIA container toolkit", env), (f"CUDA {tk.version}", tk)),
    )
    return ctx.os.image, "os"


def base_image(ctx: Context, out: Findings) -> tuple[str, str]:
    """(image, flavor): the smallest base that does the job, with an I-BASE-DERIVED saying why.

    CUDA: torch's wheels bring CUDA's and cuDNN's libraries (``nvidia-*`` / ``cuda-toolkit`` wheels),
    so ``nvidia/cuda:<X.Y.Z>-base-<os>`` (libcudart and NVIDIA_REQUIRE_CUDA); ``-devel-`` only when
    nvcc is needed (``ctx.compiles``); the plain OS image, with NVIDIA's variables set by the
    Dockerfile, for Blender (its own CUDA and OptiX kernels) and where nvidia/cuda has no image for
    the OS.  ROCm: ``rocm/dev`` for the vendor tools the validator reads (and the HIP runtime
    Blender loads), ``-complete`` for hipcc and ROCm's libraries when something is compiled."""
    explicit = ctx.profile.base.image
    if explicit:
        out.info(
            "I-BASE-EXPLICIT",
            f"base.image {explicit} is used as given; envbuild assumes it is {ctx.os.name} with apt, and "
            "does "
            "not check its CUDA/ROCm libraries",
        )
        return explicit, "explicit"
    os_id = ctx.os.id
    repository = ctx.catalog.toolkits.image_repository
    if ctx.backend == "cuda" and ctx.toolkit is not None:
        tk = ctx.toolkit
        src = cite((f"CUDA {tk.version}", tk), ctx.catalog.toolkits.image_source)
        if ctx.compiles:
            if os_id not in tk.image_os:
                out.error(
                    "E-BASE-UNAVAILABLE",
                    f"nvcc is needed ({_compiles_why(ctx)}), and {repository} has no CUDA "
                    f"{tk.image_version} devel image for {os_id} ({_os_setting(ctx)}; the image exists for "
                    f"{', '.join(tk.image_os)}); set base.os to one of {choices(tk.image_os)} or "
                    f"base.image{_other_variants(ctx)}",
                    source=src,
                )
            image = ctx.catalog.cuda_image(tk, "devel", os_id)
            out.info(
                "I-BASE-DERIVED",
                f"base image {image}: nvcc is needed ({_compiles_why(ctx)}), and only the devel flavor "
                "has it",
                source=src,
            )
            return image, "cuda-devel"
        if ctx.profile.blender.version:
            return _plain_os_cuda(
                ctx,
                "Blender carries its own CUDA and OptiX kernels and needs only the driver, which the NVIDIA "
                "container toolkit mounts",
                out,
            )
        if os_id not in tk.image_os:
            return _plain_os_cuda(
                ctx,
                f"{repository} publishes no CUDA {tk.image_version} image for {os_id} ({_os_setting(ctx)}; "
                f"it has one for {', '.join(tk.image_os)})",
                out,
            )
        image = ctx.catalog.cuda_image(tk, "base", os_id)
        what = (
            "torch's CUDA wheels bring CUDA's and cuDNN's libraries as nvidia-* wheels, so a runtime or "
            "cudnn image would only duplicate them"
            if ctx.patch is not None or ctx.uncataloged
            else "nothing in the plan needs more of CUDA (set base.image for a toolkit image)"
        )
        out.info(
            "I-BASE-DERIVED",
            f"base image {image}, the base flavor (libcudart, and NVIDIA_REQUIRE_CUDA, so the NVIDIA "
            f"container toolkit refuses a driver too old for CUDA {tk.version}): {what}",
            source=src,
        )
        return image, "cuda-base"
    if ctx.backend == "rocm" and ctx.rocm is not None:
        rv = ctx.rocm
        rocm_src = cite(
            (f"ROCm {rv.version}", rv),
            (f"{ctx.catalog.toolkits.rocm_image.repository}", ctx.catalog.toolkits.rocm_image),
        )
        if os_id not in rv.image_os:
            out.error(
                "E-BASE-UNAVAILABLE",
                f"no ROCm {rv.version} dev image for {os_id} ({_os_setting(ctx)}; the image exists for "
                f"{', '.join(rv.image_os)}); set base.os to one of {choices(rv.image_os)} or "
                f"base.image{_other_variants(ctx)}",
                source=rocm_src,
            )
        image = ctx.catalog.rocm_image(rv, os_id, complete=ctx.compiles)
        tools = ctx.catalog.toolkits.rocm_tools
        if ctx.compiles:
            why = (
                f"hipcc and ROCm's libraries are needed ({_compiles_why(ctx)}), and the -complete image "
                "has them"
            )
        else:
            needs = [f"{' and '.join(tools.tools)}, which `envbuild validate` compares torch's devices with"]
            if ctx.profile.blender.version:
                needs.insert(0, "the HIP runtime Blender's HIP backend loads")
            wheels = "; torch's ROCm wheels bundle ROCm's libraries" if ctx.patch is not None else ""
            why = (
                f"the ROCm dev image, for {' and for '.join(needs)} (AMD's repository, which ships them, "
                f"is not a package index envbuild installs from){wheels}"
            )
        out.info(
            "I-BASE-DERIVED",
            f"base image {image}: {why}",
            source=cite(rocm_src, ("validator's AMD tools", tools)),
        )
        return image, "rocm-complete" if ctx.compiles else "rocm-dev"
    if ctx.backend != "cpu":
        out.warning(
            "W-BASE-OS",
            f"no {ctx.backend} toolkit could be resolved: falling back to the plain OS image {ctx.os.image}",
        )
    return ctx.os.image, "os"


def nvidia_env(plan: Plan) -> tuple[tuple[str, str], ...]:
    """The NVIDIA container toolkit's variables the final image sets, ``()`` unless the backend is CUDA:
    the devices and the driver capabilities (graphics too for Blender: OptiX), and, on a plain OS base
    (NVIDIA's images set it themselves), NVIDIA_REQUIRE_CUDA for the plan's CUDA version."""
    if plan.backend != "cuda":
        return ()
    env = load_catalog().toolkits.container_env
    caps = env.graphics_capabilities if plan.blender_version else env.capabilities
    pairs = [("NVIDIA_VISIBLE_DEVICES", "all"), ("NVIDIA_DRIVER_CAPABILITIES", caps)]
    if plan.base_flavor == "os" and plan.accelerator_version:
        pairs.insert(0, ("NVIDIA_REQUIRE_CUDA", env.require_cuda(plan.accelerator_version)))
    return tuple(pairs)


def check_glibc(ctx: Context, out: Findings) -> None:
    if ctx.release is None:
        return
    need = ctx.release.min_glibc
    if version_tuple(ctx.os.glibc) < version_tuple(need):
        out.error(
            "E-GLIBC",
            f"torch {ctx.release.series} Linux wheels need glibc >= {need} "
            f"(manylinux_2_{need.split('.')[1]}); "
            f"{ctx.os.name} ({_os_setting(ctx)}) has {ctx.os.glibc}; set base.os to one of "
            + choices(o.id for o in ctx.catalog.oses if version_tuple(o.glibc) >= version_tuple(need)),
            source=cite((f"torch {ctx.release.series}", ctx.release), (ctx.os.id, ctx.os)),
        )


def apt_packages(ctx: Context, provision: str, *, vcs: bool) -> tuple[str, ...]:
    py = ctx.python
    pkgs = {"ca-certificates"}
    if provision == "deadsnakes":
        pkgs |= {f"python{py}", f"python{py}-venv"}
        dev = f"python{py}-dev"
    else:
        pkgs |= {"python3", "python3-venv"}
        dev = "python3-dev"
    if ctx.compiles:
        pkgs |= {"g++", dev}
        if ctx.patch is not None:
            pkgs.add("ninja-build")
    elif ctx.profile.validate_.torch_compile:  # Inductor's C++ (CPU) and Triton's launcher (GPU) compile
        pkgs |= {"g++", dev}
    if vcs:
        pkgs.add("git")
    if ctx.profile.blender.version:
        pkgs |= set(ctx.catalog.blender.runtime_apt)
    pkgs |= set(ctx.profile.system.apt)
    return tuple(sorted(pkgs))


APT_SNAPSHOT_MIRROR = "${APT_SNAPSHOT_MIRROR}"  # the build argument the Dockerfile's sources name


def apt_snapshot(
    ctx: Context, out: Findings, flavor: str, provision: str
) -> tuple[tuple[str, ...], str | None]:
    """``[system] snapshot``: the apt sources lines that read the distribution's snapshot archive at
    that instant (the archive's URL left as ``${APT_SNAPSHOT_MIRROR}``, a build argument defaulting to
    the service's URL, returned second), with a finding saying so; ``((), None)`` without a snapshot or
    when it cannot be served.

    The snapshot covers the distribution's own archive (release, updates and security pockets).  Other
    sources the image reads stay live and are named: the deadsnakes PPA, and the CUDA or ROCm
    repository that NVIDIA's and AMD's images configure."""
    snapshot = ctx.profile.system.snapshot
    if snapshot is None:
        return (), None
    service = ctx.catalog.apt_snapshot(ctx.os.release_id)
    setting = ctx.setting("system.snapshot")
    if service is None:
        out.error(
            "E-APT-SNAPSHOT",
            f"{setting}: envbuild knows no snapshot archive for {ctx.os.name}; remove system.snapshot or "
            "set base.os to one of "
            + choices(o.id for o in ctx.catalog.oses if ctx.catalog.apt_snapshot(o.release_id)),
        )
        return (), None
    if snapshot < service.since:
        out.error(
            "E-APT-SNAPSHOT",
            f"{setting}: {service.url} has no snapshot before {service.since}; set system.snapshot to "
            f"{service.since} or later",
            source=cite((f"{ctx.os.release_id} snapshots", service)),
        )
        return (), None
    lines = service.lines(ctx.os.codename, snapshot, APT_SNAPSHOT_MIRROR)
    out.info(
        "I-APT-SNAPSHOT",
        f"apt reads {ctx.os.name}'s archive as it was at {snapshot} ({service.url}; build with "
        "--build-arg APT_SNAPSHOT_MIRROR=URL for a mirror of it)",
        source=cite((f"{ctx.os.release_id} snapshots", service)),
    )
    live = []
    if provision == "deadsnakes":
        live.append("the deadsnakes PPA (Python " + ctx.python + ")")
    if flavor.startswith("cuda"):
        live.append("NVIDIA's CUDA repository configured in the CUDA base image")
    elif flavor.startswith("rocm"):
        live.append("AMD's ROCm repositories configured in the ROCm base image")
    elif flavor == "explicit":
        live.append(f"any repository the image {ctx.profile.base.image} configures itself")
    if live:
        out.warning(
            "W-APT-SNAPSHOT-PARTIAL",
            f"{setting} pins {ctx.os.name}'s own archive only; " + " and ".join(live) + " stay live, so "
            "packages from them can change between builds (pin them in system.apt as name=VERSION, or "
            "envbuild render --apt-from a build record)",
        )
    return lines, service.url
