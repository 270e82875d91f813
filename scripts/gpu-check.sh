#!/usr/bin/env bash
# envbuild's GPU check: validate a real GPU machine against a rendered lock, in ONE call.
#
# Made for the device machine lent through the workplace's `device` tool (one NVIDIA H200, the
# workplace's own CUDA image: python3 = Python 3.12 with torch 2.11.0+cu130, Triton, nvcc 13.0; no
# Docker, no internet).  The validator runs there directly on the host, not in a container.
#
#   OUT set   (device run):  profile tests/gpu/h200-torch211.toml, interpreter `python3`.
#   OUT unset (dry run on a CPU host): profile tests/gpu/dryrun-cuda-host.toml (a CUDA lock without
#             torch, Python = the local interpreter), interpreter .venv/bin/python when present; the
#             accelerator stage then fails with the real "no GPU visible" diagnosis, and the script
#             still writes and verifies the report.  Results go to a temporary folder (printed).
#   Overrides: GPU_CHECK_PROFILE=path.toml, GPU_CHECK_PYTHON=interpreter, GPU_CHECK_BUDGET_S=seconds.
#
# Steps: 1. print the environment; 2. render the profile (`envbuild render --force`) and rewrite the
# lock's python_executable; 3. `envbuild validate --keep-going` with stage timeouts (the performance stage
# with a 45 s budget: matmul, bandwidths, an all-reduce, the hardware sampled under load), the whole run
# capped at GPU_CHECK_BUDGET_S (390 s), then `envbuild report verify` (--keep-going runs every stage
# whose facts are there: a package difference on a bare host no longer hides the GPU stages); 4. print a
# compact summary and copy report.json, report.md, junit.xml, the lock and the whole run folder
# (run.tar.gz, verifiable off the machine) to $OUT; 5. capture the hardware (nvidia-smi-q-x.xml and
# hardware.json: NVML facts and the rules' verdicts) for a fixture: at most 7 files, none in a
# sub-folder, so a log tee'd to $OUT fits the device tool's limit (8 files back, at most 2 folders down).
#
# The device run, from the repo root of a session that has the tool (wheels fetched first, see below):
#   run(command='set -o pipefail; bash scripts/gpu-check.sh 2>&1 | tee "$OUT/gpu-check.log"',
#       carry=[".whl"], timeout_s=540)
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

section() { printf '\n=== %s\n' "$*"; }

# envbuild run by the interpreter under test, with the wheel folder and the repo on its own sys.path.
LAUNCH_PREFIX='import sys
sys.path[:0] = [p for p in sys.argv[1].split(":") if p]
del sys.argv[1]
sys.argv[0] = "envbuild"'
LAUNCH_MAIN='from envbuild.cli import main
main()'
LAUNCH="$LAUNCH_PREFIX
$LAUNCH_MAIN"
envbuild() { "$PY" -c "$LAUNCH" "$SITE:$REPO" "$@"; }

# -- 1. the environment ------------------------------------------------------------------------------
section "environment ($([ "$DRY" = 1 ] && echo 'dry run, no OUT' || echo "OUT=$OUT"))"
date -u
uname -srm
grep -h '^PRETTY_NAME=' /etc/os-release 2>/dev/null || true
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi || true
  nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv || true
else
  echo "nvidia-smi: not on PATH"
fi
if command -v nvcc >/dev/null 2>&1; then nvcc --version | tail -n 2; else echo "nvcc: not on PATH"; fi
echo "interpreter under test: $PY"
"$PY" - <<'EOF'
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
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
    "$REPO"/.whl/*.whl || { echo "gpu-check: installing .whl/*.whl failed" >&2; exit 2; }
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
envbuild render "$PROFILE" --force --out "$WORK/bundle" || { echo "gpu-check: render failed" >&2; exit 2; }
LOCK="$WORK/bundle/envbuild.lock.json"
# The validator's probe ops as the image's builder stage builds them (the bundle's envbuild-probe-ops.py,
# nvcc, the ordered card's arch only): validate then loads these, and compile_extensions compiles them
# here too.  No ops in the lock (the dry-run profile has no torch): nothing to build.
OPS_DIR=""
if [ -f "$WORK/bundle/envbuild-probe-ops.py" ]; then
  section "probe ops, built as in the builder stage"
  gpu_args=()
  if "$PY" -c 'import json,sys; sys.exit("cuda" not in json.load(open(sys.argv[1]))["probe_ops"])' "$LOCK"; then
    gpu_args=(--gpu cuda --require-gpu)
  fi
  archs="$("$PY" -c 'import json,sys; print(";".join(a[3:-1]+"."+a[-1] for a in json.load(open(sys.argv[1]))["required_archs"] if a.startswith("sm_")))' "$LOCK")"
  if TORCH_CUDA_ARCH_LIST="$archs" "$PY" "$WORK/bundle/envbuild-probe-ops.py" build "$WORK/probe-ops" "${gpu_args[@]}"; then
    OPS_DIR="$WORK/probe-ops"
  else
    echo "gpu-check: the probe ops did not build (validate compiles them instead)" >&2
  fi
fi
export OPS_DIR
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
with open(path, "w", encoding="utf-8") as fh:
    json.dump(lock, fh, indent=2, sort_keys=True)
    fh.write("\n")
print("lock:", path, "python_executable ->", lock["python_executable"])
EOF

# -- 3. validate, then verify the report -----------------------------------------------------------------
# Stage limits sized for one H200 (first CUDA init, nvcc + C++ compiles of the custom ops, a 105 GiB
# allocation); each validation is capped at GPU_CHECK_BUDGET_S (SIGTERM: the validator stops the probe
# and still writes the report, exit 143).
BUDGET="${GPU_CHECK_BUDGET_S:-390}"
mkdir -p "$WORK/workdir"  # --workdir: where the checkpoint stage writes (runs/envbuild-checkpoint)
TIMEOUTS=(--timeout interpreter=60 --timeout os=60 --timeout packages=90 --timeout accelerator=90
  --timeout devices=90 --timeout compute=120 --timeout extensions=240 --timeout memory=120
  --timeout checkpoint=90 --timeout performance=120 --perf-budget 45)

# validate LAUNCHER RUNS_DIR: run the validator, print the run folder on fd 3, return its exit code.
validate() {
  section "validate -> $2 (budget ${BUDGET}s)"
  timeout --preserve-status -k 30 "$BUDGET" "$PY" -c "$1" "$SITE:$REPO" validate --lock "$LOCK" \
    --python "$PY" --keep-going --out "$2" --workdir "$WORK/workdir" "${TIMEOUTS[@]}"
}
run_dir_of() { find "$1" -mindepth 1 -maxdepth 1 -type d -name '[0-9]*T*Z-*' 2>/dev/null | sort | tail -n 1; }
summary() {
  section "summary: $1 ${2:-}"
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
    print(f"accelerator: torch {acc.get('torch_version')} cuda {acc.get('torch_cuda')} "
          f"devices {acc.get('device_count', acc.get('gpu_count'))} driver {acc.get('driver')} "
          f"({acc.get('driver_source')}), min {acc.get('min_driver')}")
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
EOF
}

validate "$LAUNCH" "$WORK/runs"
CODE=$?
RUN_DIR="$(run_dir_of "$WORK/runs")"
if [ -z "$RUN_DIR" ] || [ ! -f "$RUN_DIR/report.json" ]; then
  echo "gpu-check: the validator wrote no report (exit $CODE)" >&2
  exit $((CODE == 0 ? 2 : CODE))
fi
section "report verify"
envbuild report verify "$RUN_DIR"
VERIFY=$?

# -- 4. summary and results --------------------------------------------------------------------------------
summary "$RUN_DIR"

for f in report.json report.md junit.xml; do
  [ -f "$RUN_DIR/$f" ] && cp "$RUN_DIR/$f" "$OUT/$f"
done

# -- 5. the hardware, for a fixture (issue 26) ---------------------------------------------------------
# nvidia-smi -q -x as the driver prints it (nvidia-smi-q-x.xml), and hardware.json: the facts NVML gives
# through nvidia-ml-py, those of the XML, and the rules' verdicts on each against the lock.  Commit both
# under tests/fixtures/smi/real/ as a real capture (with its SOURCES.md row).
section "hardware: nvidia-smi -q -x, NVML facts, the rules' verdicts"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -q -x >"$WORK/nvidia-smi-q-x.xml" 2>"$WORK/smi.err"; then
  cp "$WORK/nvidia-smi-q-x.xml" "$OUT/nvidia-smi-q-x.xml"
else
  echo "nvidia-smi -q -x: no answer $(head -c 300 "$WORK/smi.err" 2>/dev/null)"
  rm -f "$WORK/nvidia-smi-q-x.xml"
fi
"$PY" - "$SITE:$REPO" "$LOCK" "$WORK/nvidia-smi-q-x.xml" "$OUT/hardware.json" <<'EOF'
import json, sys
sys.path[:0] = [p for p in sys.argv[1].split(":") if p]
from pathlib import Path

from envbuild.boundary import to_data
from envbuild.errors import CaptureError
from envbuild.hardware.live import nvml_facts
from envbuild.hardware.nvidia_xml import parse_nvidia_xml
from envbuild.models.lock import read_lock
from envbuild.validate.hardware_stage import judge_live, own_pids

lock, xml = read_lock(Path(sys.argv[2])), Path(sys.argv[3])
nvml = nvml_facts()
try:
    smi = parse_nvidia_xml(xml.read_text(encoding="utf-8"), "nvidia-smi -q -x") if xml.is_file() else None
except CaptureError as exc:
    smi = None
    print("nvidia-smi -q -x:", exc)
out = {"nvml": to_data(nvml) if nvml else None, "nvidia_smi_q_x": to_data(smi) if smi else None}
for name, facts in (("nvml", nvml), ("nvidia_smi_q_x", smi)):
    hw = judge_live(lock, facts, pids=own_pids()) if lock.backend in ("cuda", "rocm") else None
    out[f"verdicts_{name}"] = hw.section() if hw else None
    if hw is None:
        continue
    print(f"{name}: source {hw.facts.source if hw.facts else 'none (no answer)'}")
    for v in hw.verdicts:
        print(f"  {v['rule']:<13} {v['verdict']:<9} {' '.join(v['codes'])} {'; '.join(v['why'])}")
    for f in hw.findings:
        print(f"  {f.severity}: {f.code}: {f.message}")
with open(sys.argv[4], "w", encoding="utf-8") as fh:
    json.dump(out, fh, indent=2, sort_keys=True)
    fh.write("\n")
print("hardware.json written")
EOF
cp "$LOCK" "$OUT/envbuild.lock.json"
tar -C "$(dirname "$RUN_DIR")" -czf "$OUT/run.tar.gz" "$(basename "$RUN_DIR")"
section "results"
echo "validator exit $CODE, report verify exit $VERIFY"
echo "gpu-check: results in $OUT (run folder in run.tar.gz: tar xzf, then envbuild report verify)"
ls -l "$OUT"
if [ "$VERIFY" -ne 0 ] && [ "$CODE" -eq 0 ]; then
  exit 1
fi
exit "$CODE"
