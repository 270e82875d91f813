"""Payloads: envbuild's files that a bundle carries and another interpreter runs, outside envbuild.

Each is one standard-library-only script, copied into the bundle byte for byte and run in the image's
build stages, where envbuild is not installed:

- :mod:`.built_key` (``envbuild-source-build.py``): the builder stage's cache of wheels built from source.

The validator's probe ops (``envbuild-probe-ops.py``) are a payload too, but stay with the probes
(``envbuild/validate/probes/_probe_ops.py``): the probe processes import them as a sibling file.
"""
