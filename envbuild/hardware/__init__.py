"""The hardware under an environment, read from the vendor's own interfaces (issue 26).

Parsers turn a vendor tool's output into :class:`envbuild.models.hardware.HardwareFacts`:
:mod:`.nvidia_xml` (``nvidia-smi -q -x``), :mod:`.nvidia_table` (the plain ``nvidia-smi`` screen),
:mod:`.nvidia_query` (``nvidia-smi --query-gpu ... --format=csv``, the compute capability),
:mod:`.amd` (``amd-smi ... --json``, ``rocm-smi --json``).  :mod:`.captures` reads a capture file
and picks the parser from its content; :mod:`.live` asks the machine (NVML, amdsmi, or the tools).
:mod:`.tools` runs a vendor tool (the one runner: not found, timed out, failed, output), for
:mod:`.live` and the validator's :mod:`envbuild.validate.host`.
"""
