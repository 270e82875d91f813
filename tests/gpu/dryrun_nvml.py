"""The NVML stand-in of scripts/gpu-check.sh's dry run (OUT unset).

    python tests/gpu/dryrun_nvml.py FOLDER STATE

Makes ``FOLDER/libnvidia-ml.so.1`` (tests/nvml_stub/nvml_stub.c built by tests/nvml_stand_in.py with
gcc against nvml.h from the nvidia-nvml-dev wheel of the test extra), unless FOLDER already holds one
(the test passes the library its run built once), and writes to STATE the stub's state for the healthy
A100 of tests/test_hardware_nvml.py (``STATES["healthy"]``: the real capture a100-sxm4-v12.xml, MIG
disabled, 12 NVLink links up).  The script then runs with ``LD_LIBRARY_PATH`` on FOLDER and
``NVML_STUB_STATE`` on STATE, so that the real nvidia-ml-py of envbuild, in the validator and in the
script's hardware capture alike, loads the stand-in as it loads a driver's library.  The stand-in's
NVML version reads "stand-in ...": its facts cannot pass for a real machine's.
"""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(TESTS), str(TESTS.parent)]

from nvml_stand_in import LIBRARY, build, state_from_capture  # noqa: E402
from test_hardware_nvml import STATES  # noqa: E402

STATE = "healthy"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    folder, state_file = Path(argv[0]), Path(argv[1])
    library = folder / LIBRARY
    made = "given"
    if not library.is_file():
        build(folder)
        made = "built"
    state = STATES[STATE]
    values = state_from_capture(state.xml(), dict(state.stub))
    state_file.write_text("".join(f"{k}={v}\n" for k, v in values.items()), encoding="utf-8")
    print(f"NVML stand-in: {library} ({made}), state {STATE!r} from {state.capture} -> {state_file}")
    print(f"  answering as {values['0.name']}, driver {values['driver']}, NVML 'stand-in {values['nvml']}'")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
