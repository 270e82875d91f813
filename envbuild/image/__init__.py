"""Build stage: fill a wheelhouse, build a bundle into an image, validate inside the image.

Public API (plain functions; the CLI in ``envbuild/cli/_build.py`` only wraps them):

- :func:`fetch` (``envbuild fetch``): wheels for the image's platform and Python, plus envbuild's
  own wheel and dependencies in ``BUNDLE/tools`` for the validator's venv.
- :func:`build_image` (``envbuild build``): deterministic context, classic builder, live progress,
  log beside the bundle, :class:`envbuild.errors.BuildError` naming the failing step.
- :func:`validate_image` (``envbuild validate --image``): the validator in a container, report copied out.

``docker`` is imported only when an engine is actually used.
"""

from __future__ import annotations

from envbuild.image.build import BuildResult, build_image
from envbuild.image.fetch import FetchResult, fetch
from envbuild.image.run import ImageRun, validate_image

__all__ = ["BuildResult", "FetchResult", "ImageRun", "build_image", "fetch", "validate_image"]
