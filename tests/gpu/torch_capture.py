"""scripts/gpu-check.sh's torch capture: what the validator's probes print on the machine, for a fixture.

    python tests/gpu/torch_capture.py SYS_PATH PYTHON TORCH_JSON

SYS_PATH: folders put first on sys.path (the carried wheels, the repo), ``:``-separated.  The
``accelerator``, ``devices`` and ``packages`` probes run in PYTHON (the interpreter under test) exactly as
the validator runs them (``envbuild.validate.probe.run_probe``), and their output is written to
TORCH_JSON in the shape of tests/fixtures/torch/*.json (``accelerator`` and ``devices``), with the
torch family's part of the packages probe (``installed`` and ``builds``) and every public attribute of
``torch.cuda.get_device_properties(i)`` as torch gives it (``device_properties``: what the devices probe
reads from, ``gcnArchName`` included).  Committed as a recorded fixture under tests/fixtures/torch/.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path[:0] = [p for p in sys.argv[1].split(":") if p] if len(sys.argv) > 1 else []

from envbuild.validate.probe import run_probe  # noqa: E402

TORCH_FAMILY = ("torch", "torchvision", "torchaudio", "triton")
PROPERTIES = """
import json, torch
out = []
for i in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(i)
    row = {}
    for name in sorted(a for a in dir(p) if not a.startswith("_")):
        value = getattr(p, name)
        row[name] = value if isinstance(value, (bool, int, float, str)) or value is None else str(value)
    out.append(row)
print(json.dumps(out))
"""


def main(argv: list[str]) -> int:
    python, target = argv[2], Path(argv[3])
    captured: dict[str, object] = {
        "_source": (
            f"recorded by scripts/gpu-check.sh (tests/gpu/torch_capture.py) on "
            f"{datetime.now(timezone.utc):%Y-%m-%d}: the validator's probes as they printed (of the packages "
            "probe, the torch family's part only)"
        )
    }
    for name in ("accelerator", "devices", "packages"):
        result = run_probe(python, name, {}, 120)
        if result.outcome != "ok":
            print(f"torch capture: probe {name}: {result.outcome}: {result.reason}", file=sys.stderr)
            captured[name] = {"outcome": result.outcome, "reason": result.reason}
            continue
        data = result.data
        if name == "packages":  # the torch family only: the rest is the report's
            data = {
                "installed": {k: v for k, v in data.get("installed", {}).items() if k in TORCH_FAMILY},
                "builds": data.get("builds", {}),
            }
        captured[name] = data
    props = subprocess.run(
        [python, "-c", PROPERTIES], capture_output=True, text=True, timeout=120, check=False
    )
    if props.returncode == 0:
        captured["device_properties"] = json.loads(props.stdout)
    else:
        captured["device_properties"] = {"error": props.stderr[-2000:]}
    target.write_text(json.dumps(captured, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in captured.items() if k != "packages"}, indent=1)[:6000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
