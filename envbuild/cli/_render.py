"""Commands: placeholder until implemented."""

from envbuild.cli import cli  # noqa: F401
