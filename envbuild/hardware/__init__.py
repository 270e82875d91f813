"""The hardware under an environment, read from the vendor's own interfaces (issue 26).

Parsers turn a vendor tool's output into :class:`envbuild.models.hardware.HardwareFacts`:
:mod:`.nvidia_xml` (``nvidia-smi -q -x``), :mod:`.nvidia_table` (the plain ``nvidia-smi`` screen),
:mod:`.amd` (``amd-smi ... --json``, ``rocm-smi --json``).  :mod:`.captures` reads a capture file
and picks the parser from its content; :mod:`.live` asks the machine (NVML, amdsmi, or the tools).
"""
