"""envbuild: render, build and validate containerised GPU environments.

The pipeline, one module (or small package) per stage:

    profile (load) -> plan (resolve + check) -> render (bundle) -> build (image) -> validate (machine)

Every stage is a plain function usable without the CLI; ``envbuild.cli`` only parses arguments,
calls the stages, prints, and maps errors to exit codes.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
