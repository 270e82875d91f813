#!/usr/bin/env bash
# envbuild's GPU check: validate a real GPU machine against a rendered lock, in ONE call.
#
# Made for the device machine lent through the workplace's `device` tool (one NVIDIA H200, the
# workplace's own CUDA image: python3 = Python 3.12 with torch 2.11.0+cu130, Triton, nvcc 13.0; no
# Docker, no internet).  The validator runs there directly on the host, not in a container.
#
#   OUT set   (device run):  profile tests/gpu/h200-torch211.toml, interpreter `python3`.
#   OUT unset (dry run on a CPU host): profile tests/gpu/dryrun-cuda-host.toml (a CUDA lock for one
#             A100 80GB without torch, Python = the local interpreter), interpreter .venv/bin/python when
#             present, and NVML answered by the NVML stand-in (tests/nvml_stub, made by
#             tests/gpu/dryrun_nvml.py: the healthy A100-SXM4-80GB of tests/test_hardware_nvml.py, loaded
#             by the real nvidia-ml-py through LD_LIBRARY_PATH, its NVML version "stand-in ...").  The
#             accelerator and devices stages then pass on the stand-in's facts, the container stage
#             fails with the real "no /dev/nvidia* device nodes" diagnosis (exit 1), and the script still
#             writes and verifies the report.  Results go to a temporary folder (printed).
#   Overrides: GPU_CHECK_PROFILE=path.toml, GPU_CHECK_PYTHON=interpreter, GPU_CHECK_BUDGET_S=seconds
#             (the whole script's, 270 by default), GPU_CHECK_NVML_STUB=DIR (dry run: a folder holding
#             an already built stand-in libnvidia-ml.so.1; "none": no stand-in, no vendor tool answers),
#             GPU_CHECK_CONTEND=1 (a second process runs bf16 matrix products on every GPU for the whole
#             validation: a machine that delivers about half its speed, which the performance stage must
#             fail; the run is then expected to exit 1).
#
# Steps: 1. print the environment; 2. render the profile (`envbuild render --force`), build the probe ops
# once, as the image's builder stage does (nvcc for the ordered card's sm_90 only), and rewrite the lock's
# python_executable; 3. `envbuild validate --keep-going` with stage timeouts (the performance stage with a
# 30 s budget: matmul per dtype, bandwidths, the hardware sampled under load), then `envbuild report
# verify` (--keep-going runs every stage whose facts are there: a package difference on a bare host no
# longer hides the GPU stages); 4. print a compact summary and copy report.json, the lock and the whole
# run folder (run.tar.gz, verifiable off the machine; report.md and junit.xml are in it) to $OUT;
# 5. capture the hardware (tests/gpu/hardware_capture.py: nvidia-smi-q-x.xml, and hardware.json with
# NVML's facts, every raw value NVML returned for each call envbuild made, printed per device beside the
# parsed DeviceFacts, and the rules' verdicts) and torch (tests/gpu/torch_capture.py: torch.json, the probes' output and every
# device property) for fixtures: at most 7 files, none in a sub-folder, so a log tee'd to $OUT fits
# the device tool's limit (8 files back, at most 2 folders down).
#
# Time: under 5 minutes on one H200, install and compile included.  GPU_CHECK_BUDGET_S (270 s) counts from
# the script's start, and each step is capped by what is left of it less what the steps after it need
# (expected on one H200 / at most):
#   environment, wheels       ~20 s / 60 s each (torch's first CUDA init; pip --no-index)
#   render                     ~3 s / 60 s
#   probe ops                 ~70 s / 150 s, and never into the budget's last 115 s (the C++ op, then the
#                                     CUDA op with nvcc for sm_90 only; out of time: validate skips them)
#   validate                  ~90 s / until 35 s before the budget ends: SIGTERM (the report is still
#                                     written, exit 143), SIGKILL 10 s later; the performance stage
#                                     measures for 30 s (--perf-budget 30)
#   verify, summary, capture  ~10 s / the budget's last 25 s
# Expected about 195 s.  A step reached once the budget is spent still gets 5 s: at worst 270 s + 3 x 5 s
# for the steps after validate = 285 s, under 300 s.
#
# The device run, from the repo root of a session that has the tool (wheels fetched first, see below):
#   run(command='set -o pipefail; bash scripts/gpu-check.sh 2>&1 | tee "$OUT/gpu-check.log"',
#       carry=[".whl"], timeout_s=300)
# 300 s of command plus a minute or two to start a machine, twice: a rerun fits in the 15 minutes of
# device time a session has, even on a fresh machine (2 x (300 + 120) = 840 s).
#
# Exit status: the validator's (0 passed, 1 a stage failed, 143 the time budget ran out: the report is
# still written), or 1 when it passed but the report does not verify, or 2 when envbuild cannot run.
#
# envbuild's own dependencies: the device image has jinja2, rich and packaging, but not
# pydantic.  Carry them as wheels, as /work/.library/device/README.md says: here, in the repo root,
#   scripts/gpu-check.sh --fetch-wheels          # pip download into .whl/ (ignored by git)
# then name `.whl` in the run's `carry`.  This script installs .whl/*.whl with `pip --no-index` into
# a target folder and puts that folder on envbuild's own sys.path only (not PYTHONPATH), so the probes,
# which inherit the environment, still see the interpreter under test exactly as the machine has it.
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO" || exit 2

WHEELS=(pydantic pydantic-core annotated-types typing-inspection typing-extensions defusedxml nvidia-ml-py)

if [ "${1:-}" = "--fetch-wheels" ]; then
  # Here (a host with PyPI): the wheels the device image lacks, at the versions of the local .venv,
  # for CPython 3.12 on x86-64 Linux (the device README's pip download recipe).
  py="${GPU_CHECK_HOST_PYTHON:-$REPO/.venv/bin/python}"
  mkdir -p .whl
  for name in "${WHEELS[@]}"; do
    version="$("$py" -c 'import sys, importlib.metadata as m; print(m.version(sys.argv[1]))' "$name")" || exit 2
    "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "$name==$version" || exit 2
  done
  ls -l .whl
  exit 0
fi

START=$SECONDS
BUDGET="${GPU_CHECK_BUDGET_S:-270}"
POST_S=25  # the report verify, summary and hardware capture after validate
# within CAP [RESERVE]: the seconds a step may take: CAP, or what is left of the budget less RESERVE (what
# the steps after it need, POST_S by default) when that is less; at least 5.
within() {
  local left=$((BUDGET - (SECONDS - START) - ${2:-$POST_S}))
  [ "$left" -lt "$1" ] || left=$1
  [ "$left" -ge 5 ] || left=5
  echo "$left"
}

DRY=0
if [ -z "${OUT:-}" ]; then
  DRY=1
  OUT="$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-out.XXXXXX")"
fi
WORK="$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-work.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT  # the run folder is kept, whole, in $OUT/run.tar.gz
SITE="$WORK/site"

if [ -n "${GPU_CHECK_PYTHON:-}" ]; then
  PY="$GPU_CHECK_PYTHON"
elif [ "$DRY" = 1 ] && [ -x "$REPO/.venv/bin/python" ]; then
  PY="$REPO/.venv/bin/python"
else
  PY=python3
fi
PY="$(command -v "$PY")" || { echo "gpu-check: no interpreter $PY" >&2; exit 2; }
# Absolute (probes such as the checkpoint run in another folder), links kept (a venv's bin/python).
PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")"

section() { printf '\n=== %s (at %ss)\n' "$*" $((SECONDS - START)); }

# The dry run's NVML: the stand-in, so that the devices stage and the hardware capture read a healthy
# A100 through the real nvidia-ml-py (never on the device run: there NVML is the driver's).
NVML_NOTE="the driver's libnvidia-ml.so.1"
if [ "$DRY" = 1 ] && [ "${GPU_CHECK_NVML_STUB:-}" != none ]; then
  section "NVML stand-in (dry run)"
  NVML_DIR="${GPU_CHECK_NVML_STUB:-$WORK/nvml-stand-in}"
  timeout 120 "$PY" "$REPO/tests/gpu/dryrun_nvml.py" "$NVML_DIR" "$WORK/nvml-state" || {
    echo "gpu-check: the NVML stand-in could not be made (it needs gcc, and the test extra in $PY:" \
      "pytest, defusedxml, nvidia-nvml-dev; GPU_CHECK_NVML_STUB=none runs the dry run without it)" >&2
    exit 2
  }
  NVML_DIR="$(cd "$NVML_DIR" && pwd)" || exit 2
  export LD_LIBRARY_PATH="$NVML_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" NVML_STUB_STATE="$WORK/nvml-state"
  NVML_NOTE="the NVML stand-in in $NVML_DIR (no GPU behind it)"
elif [ "$DRY" = 1 ]; then
  NVML_NOTE="this host's libnvidia-ml.so.1, if any (GPU_CHECK_NVML_STUB=none: no stand-in)"
elif [ -n "${GPU_CHECK_NVML_STUB:-}" ]; then
  echo "gpu-check: GPU_CHECK_NVML_STUB is for the dry run only: ignored (OUT is set)"
fi

# envbuild run by the interpreter under test, with the wheel folder and the repo on its own sys.path.
LAUNCH_PREFIX='import sys
sys.path[:0] = [p for p in sys.argv[1].split(":") if p]
del sys.argv[1]
sys.argv[0] = "envbuild"'
LAUNCH_MAIN='from envbuild.cli import main
main()'
LAUNCH="$LAUNCH_PREFIX
$LAUNCH_MAIN"
# envbuild_within CAP RESERVE ARGS...: envbuild ARGS, stopped after `within CAP RESERVE` seconds.
envbuild_within() {
  local cap
  cap="$(within "$1" "$2")"
  shift 2
  timeout "$cap" "$PY" -c "$LAUNCH" "$SITE:$REPO" "$@"
}

# -- 1. the environment ------------------------------------------------------------------------------
section "environment ($([ "$DRY" = 1 ] && echo 'dry run, no OUT' || echo "OUT=$OUT"))"
date -u
uname -srm
grep -h '^PRETTY_NAME=' /etc/os-release 2>/dev/null || true
echo "NVML: $NVML_NOTE"
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 30 nvidia-smi || true
  timeout 30 nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv || true
else
  echo "nvidia-smi: not on PATH"
fi
if command -v nvcc >/dev/null 2>&1; then timeout 30 nvcc --version | tail -n 2; else echo "nvcc: not on PATH"; fi
echo "interpreter under test: $PY"
timeout "$(within 60)" "$PY" - <<'EOF'
import sys
print("python", sys.version.split()[0], "prefix", sys.prefix)
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda, "hip", getattr(torch.version, "hip", None))
    print("torch arch list", " ".join(torch.cuda.get_arch_list()) or "(none)")
    n = torch.cuda.device_count()
    print("torch devices", n)
    for i in range(n):
        p = torch.cuda.get_device_properties(i)
        print(f"  cuda:{i} {p.name} sm_{p.major}{p.minor} {p.total_memory / 2**30:.1f} GiB")
except Exception as exc:
    print("torch:", type(exc).__name__, exc)
try:
    import triton
    print("triton", triton.__version__)
except Exception as exc:
    print("triton:", type(exc).__name__, exc)
EOF

# -- envbuild's dependencies ---------------------------------------------------------------------------
deps_ok() {
  "$PY" -c 'import sys; sys.path[:0] = sys.argv[1].split(":")
import defusedxml, jinja2, packaging, pydantic, rich' "$SITE:$REPO" 2>/dev/null
}
if ! deps_ok && [ -d "$REPO/.whl" ] && compgen -G "$REPO/.whl/*.whl" >/dev/null; then
  section "installing carried wheels from .whl/ into $SITE (--no-index)"
  timeout "$(within 60)" "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" "$REPO"/.whl/*.whl || { echo "gpu-check: installing .whl/*.whl failed" >&2; exit 2; }
fi
if ! deps_ok; then
  cat >&2 <<EOF
gpu-check: envbuild's dependencies (defusedxml, jinja2, packaging, pydantic, rich) are not importable by $PY.
Carry them as wheels: on a host with PyPI, in the repo root, run
    scripts/gpu-check.sh --fetch-wheels     # downloads ${WHEELS[*]} into .whl/
and name ".whl" in the device run's carry; this script installs them with pip --no-index.
EOF
  exit 2
fi

# -- 2. the lock for this machine ----------------------------------------------------------------------
if [ -n "${GPU_CHECK_PROFILE:-}" ]; then
  PROFILE="$GPU_CHECK_PROFILE"
elif [ "$DRY" = 1 ]; then
  # The dry-run profile declares the local interpreter's version, so that the interpreter and packages
  # stages pass and the accelerator stage runs.
  PROFILE="$WORK/dryrun-cuda-host.toml"
  pyver="$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  sed "s/^version = \"3.11\" .*/version = \"$pyver\"/" tests/gpu/dryrun-cuda-host.toml >"$PROFILE"
else
  PROFILE=tests/gpu/h200-torch211.toml
fi
section "render $PROFILE"
envbuild_within 60 "$POST_S" render "$PROFILE" --force --out "$WORK/bundle" ||
  { echo "gpu-check: render failed" >&2; exit 2; }
LOCK="$WORK/bundle/envbuild.lock.json"
# The validator's probe ops as the image's builder stage builds them (the bundle's envbuild-probe-ops.py,
# nvcc, the ordered card's arch only): validate then loads these and compiles nothing (the profile leaves
# compile_extensions off), so each op is compiled once per run.  No ops in the lock (the dry-run profile
# has no torch): nothing to build.  Never into the budget's last 115 s, which validate needs: a build that
# runs out of time leaves the ops out of the lock (validate would only spend that time again compiling
# them); a build that fails otherwise leaves validate to compile them, as it does outside an image.
OPS_DIR=""
OPS_DROPPED=""
if [ -f "$WORK/bundle/envbuild-probe-ops.py" ]; then
  ops_limit="$(within 150 $((POST_S + 90)))"
  section "probe ops, built as in the builder stage (at most ${ops_limit}s)"
  gpu_args=()
  if "$PY" -c 'import json,sys; sys.exit("cuda" not in json.load(open(sys.argv[1]))["probe_ops"])' "$LOCK"; then
    gpu_args=(--gpu cuda --require-gpu)
  fi
  archs="$("$PY" -c 'import json,sys; print(";".join(a[3:-1]+"."+a[-1] for a in json.load(open(sys.argv[1]))["required_archs"] if a.startswith("sm_")))' "$LOCK")"
  TORCH_CUDA_ARCH_LIST="$archs" timeout "$ops_limit" \
    "$PY" "$WORK/bundle/envbuild-probe-ops.py" build "$WORK/probe-ops" "${gpu_args[@]}"
  ops_code=$?
  if [ "$ops_code" = 0 ]; then
    OPS_DIR="$WORK/probe-ops"
  elif [ "$ops_code" = 124 ]; then
    OPS_DROPPED="their build ran out of its ${ops_limit}s"
    echo "gpu-check: the probe ops did not build in ${ops_limit}s: validate skips them" >&2
  else
    echo "gpu-check: the probe ops did not build (exit $ops_code): validate compiles them instead" >&2
  fi
fi
export OPS_DIR OPS_DROPPED
# The lock names the image's interpreter (/opt/venv/bin/python), which does not exist on a bare host:
# point python_executable at the interpreter under test (nothing else changes), so that the
# interpreter stage compares the lock with the environment actually validated here.
"$PY" - "$LOCK" <<'EOF' || exit 2
import json, os, sys
path = sys.argv[1]
with open(path, encoding="utf-8") as fh:
    lock = json.load(fh)
# The path as the environment names it (its prefix's bin/), not a link to it from elsewhere on PATH:
# the interpreter stage compares the parent of bin/ with sys.prefix.
named = os.path.join(sys.prefix, "bin", os.path.basename(sys.executable))
lock["python_executable"] = named if os.path.isfile(named) else sys.executable
if os.environ.get("OPS_DIR"):
    lock["probe_ops_dir"] = os.environ["OPS_DIR"]  # the ops built above, as the image would hold them
if os.environ.get("OPS_DROPPED"):
    lock["probe_ops"] = []
    print("lock: probe_ops -> [] (" + os.environ["OPS_DROPPED"] + ")")
with open(path, "w", encoding="utf-8") as fh:
    json.dump(lock, fh, indent=2, sort_keys=True)
    fh.write("\n")
print("lock:", path, "python_executable ->", lock["python_executable"])
EOF

# -- 3. validate, then verify the report -----------------------------------------------------------------
# Stage limits sized for one H200 with the probe ops already built (first CUDA init, loading the ops and
# a Triton kernel's JIT, a 100 GiB allocation, 30 s of performance figures); the extensions stage keeps
# room to compile the ops should their build above have failed.  The validation as a whole gets SIGTERM
# POST_S + 10 s before the budget ends (the validator stops the probe and still writes the report, exit
# 143), and SIGKILL 10 s later.
mkdir -p "$WORK/workdir"  # --workdir: where the checkpoint stage writes (runs/envbuild-checkpoint)
TIMEOUTS=(--timeout interpreter=30 --timeout os=30 --timeout packages=60 --timeout accelerator=60
  --timeout devices=45 --timeout compute=60 --timeout extensions=120 --timeout memory=60
  --timeout checkpoint=60 --timeout performance=60 --perf-budget 30)

# validate LAUNCHER RUNS_DIR: run the validator, return its exit code.
validate() {
  local limit
  limit="$(within 100000 $((POST_S + 10)))"  # SIGKILL by the budget less POST_S
  section "validate -> $2 (SIGTERM after ${limit}s, of a ${BUDGET}s budget)"
  timeout --preserve-status -k 10 "$limit" "$PY" -c "$1" "$SITE:$REPO" validate --lock "$LOCK" \
    --python "$PY" --keep-going --out "$2" --workdir "$WORK/workdir" "${TIMEOUTS[@]}"
}
run_dir_of() { find "$1" -mindepth 1 -maxdepth 1 -type d -name '[0-9]*T*Z-*' 2>/dev/null | sort | tail -n 1; }
summary() {
  section "summary: $1"
  "$PY" - "$1/report.json" <<'EOF'
import json, sys

report = json.load(open(sys.argv[1], encoding="utf-8"))
print(f"run {report['run_id']}: {'PASSED' if report['ok'] else 'FAILED'} in {report['duration_s']:.1f}s")
for s in report["stages"]:
    print(f"  {s['stage']:<12} {s['status']:<9} {s['duration_s']:7.2f}s  {s.get('error') or ''}")
    if s.get("hint") and s["status"] != "passed":
        print(f"  {'':<12} hint: {s['hint']}")
    if s["status"] == "skipped":
        print(f"  {'':<12} reason: {s.get('facts', {}).get('reason')}")
st = {s["stage"]: s.get("facts", {}) for s in report["stages"]}
acc = st.get("accelerator", {})
if acc:
    print(f"accelerator: torch {acc.get('torch_version', acc.get('torch'))} cuda {acc.get('torch_cuda')} "
          f"devices {acc.get('device_count', acc.get('gpu_count'))} driver {acc.get('driver')} "
          f"({acc.get('driver_source')}), lock's minimum {report['lock']['content'].get('min_driver')}")
dev = st.get("devices", {})
for d in dev.get("devices", []):
    print(f"device {d.get('index')}: {d.get('name')} {d.get('arch')} {d.get('memory_gib')} GiB "
          f"{d.get('sms')} SMs, kernels: {d.get('covered_by')}, target {d.get('target')}")
if "arch_list" in dev:
    print(f"arch list: {' '.join(dev.get('arch_list', []))}; smi: {dev.get('smi_agreement')}")
for c in st.get("compute", {}).get("checks", []):
    err = c.get("rel_error")
    print(f"matmul {c.get('device')} {c.get('dtype')}: rel error "
          f"{'%.3g' % err if isinstance(err, float) else err} (tol {c.get('tolerance')}) "
          f"{c.get('gflops')} GFLOP/s ok={c.get('ok')}" + (f" error={c['error']}" if c.get("error") else ""))
for p in st.get("extensions", {}).get("parts", []):
    print(f"extension {p.get('name')}: {p.get('status')} {p.get('seconds', '')}s "
          f"max_error={p.get('max_error')} {p.get('error') or p.get('reason') or ''}")
for d in st.get("memory", {}).get("devices", []):
    gib = lambda k: round(float(d.get(k) or 0) / 2**30, 1)  # noqa: E731
    print(f"memory device {d.get('index')}: need {gib('need_bytes')} GiB, free {gib('free_bytes')} of "
          f"{gib('total_bytes')} GiB, allocated={d.get('allocated')} readback_ok={d.get('readback_ok')}")
ck = st.get("checkpoint", {})
if ck.get("device"):
    print(f"checkpoint {ck.get('device')}: {ck.get('size_bytes')} bytes, resumed from step "
          f"{ck.get('resumed_from_step')}/{ck.get('steps')}, bitwise_equal={ck.get('bitwise_equal')} "
          f"max_abs_diff={ck.get('max_abs_diff')}")
perf = st.get("performance", {})
for f in perf.get("figures", []):
    print(f"performance {f.get('figure')} {f.get('where')}: {f.get('measured')} {f.get('unit')} "
          f"(datasheet {f.get('datasheet')}, at least {f.get('expected_at_least')}) ok={f.get('ok')}")
for s in (perf.get("collectives") or {}).get("sizes", [])[-3:]:
    print(f"all-reduce {s.get('bytes')} B: algbw {s.get('algbw_gbs')} busbw {s.get('busbw_gbs')} GB/s")
if perf.get("under_load"):
    print(f"under load: {json.dumps(perf['under_load'].get('devices'))}")
if report.get("first_failure"):
    print(f"first failure: {report['first_failure']['stage']}: {report['first_failure']['error']}")
hw = report.get("hardware") or {}
prov = (hw.get("facts") or {}).get("provenance") or {}
print(f"hardware in the report: source {hw.get('source')}, NVML version {prov.get('nvml_version')!r}, "
      f"binding {prov.get('binding')!r}, library {prov.get('library')!r}")
EOF
}

CONTENDER=""
if [ "${GPU_CHECK_CONTEND:-0}" = 1 ] && [ "$DRY" = 1 ]; then
  echo "gpu-check: GPU_CHECK_CONTEND is for a device run only (no GPU in a dry run): ignored"
elif [ "${GPU_CHECK_CONTEND:-0}" = 1 ]; then
  section "contention: a second process's bf16 matrix products on every GPU, for the whole validation"
  "$PY" - <<'EOF' &
import time
import torch

deadline = time.monotonic() + 600  # killed after validate; never outlives a forgotten run by long
mats = [torch.randn(8192, 8192, device=f"cuda:{i}", dtype=torch.bfloat16) for i in range(torch.cuda.device_count())]
print(f"contender: {len(mats)} GPU(s) busy", flush=True)
while time.monotonic() < deadline:
    for m in mats:
        m @ m
EOF
  CONTENDER=$!
  sleep 15  # its CUDA context and first products before the validator starts
fi
validate "$LAUNCH" "$WORK/runs"
CODE=$?
if [ -n "$CONTENDER" ]; then
  kill "$CONTENDER" 2>/dev/null
  wait "$CONTENDER" 2>/dev/null
fi
RUN_DIR="$(run_dir_of "$WORK/runs")"
if [ -z "$RUN_DIR" ] || [ ! -f "$RUN_DIR/report.json" ]; then
  echo "gpu-check: the validator wrote no report (exit $CODE)" >&2
  exit $((CODE == 0 ? 2 : CODE))
fi
section "report verify"
envbuild_within 30 0 report verify "$RUN_DIR"
VERIFY=$?

# -- 4. summary and results --------------------------------------------------------------------------------
summary "$RUN_DIR"

# report.md and junit.xml stay in run.tar.gz: the device tool brings back at most 8 files.
cp "$RUN_DIR/report.json" "$OUT/report.json"

# -- 5. the hardware, for a fixture (issue 26) ---------------------------------------------------------
# nvidia-smi -q -x as the driver prints it (nvidia-smi-q-x.xml), and hardware.json: the facts NVML gives
# through nvidia-ml-py, those of the XML, and the rules' verdicts on each against the lock.  Commit both
# under tests/fixtures/smi/real/ as a real capture (with its SOURCES.md row).
section "hardware: nvidia-smi -q -x, NVML's raw values beside the parsed facts, the rules' verdicts"
if command -v nvidia-smi >/dev/null 2>&1 &&
  timeout "$(within 30 0)" nvidia-smi -q -x >"$WORK/nvidia-smi-q-x.xml" 2>"$WORK/smi.err"; then
  cp "$WORK/nvidia-smi-q-x.xml" "$OUT/nvidia-smi-q-x.xml"
else
  echo "nvidia-smi -q -x: no answer $(head -c 300 "$WORK/smi.err" 2>/dev/null)"
  rm -f "$WORK/nvidia-smi-q-x.xml"
fi
timeout "$(within 60 0)" "$PY" "$REPO/tests/gpu/hardware_capture.py" "$SITE:$REPO" "$LOCK" \
  "$WORK/nvidia-smi-q-x.xml" "$OUT/hardware.json" || echo "gpu-check: the hardware capture failed"
section "torch: the validator's probes as they print, every device property (torch.json)"
timeout "$(within 60 0)" "$PY" "$REPO/tests/gpu/torch_capture.py" "$SITE:$REPO" "$PY" "$OUT/torch.json" ||
  echo "gpu-check: the torch capture failed"
cp "$LOCK" "$OUT/envbuild.lock.json"
tar -C "$(dirname "$RUN_DIR")" -czf "$OUT/run.tar.gz" "$(basename "$RUN_DIR")"
section "results"
echo "validator exit $CODE, report verify exit $VERIFY; $((SECONDS - START))s of the ${BUDGET}s budget"
echo "gpu-check: results in $OUT (run folder in run.tar.gz: tar xzf, then envbuild report verify)"
ls -l "$OUT"
if [ "$VERIFY" -ne 0 ] && [ "$CODE" -eq 0 ]; then
  exit 1
fi
exit "$CODE"
