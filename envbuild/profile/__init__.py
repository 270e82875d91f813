"""Profiles: TOML files that declare an environment, loaded into a frozen :class:`~envbuild.models.Profile`.

``load_profile(ref)`` takes a built-in name (``pytorch``) or a path to a ``.toml`` file.  It reads the
profile and its ``extends`` chain, checks each file *whole* (every problem is collected, with its file
and key path, and raised together as one :class:`~envbuild.errors.ProfileError`), merges the layers
(semantics in :mod:`envbuild.profile.merge`; an unknown target or ``torch.version`` joins the problems
raised, see :mod:`envbuild.profile.places`), parses ``python.packages`` and the requirement files
(:mod:`envbuild.profile.requirements`), and records provenance and a sha256 over every byte read.

Paths and references:

* ``extends`` is a built-in name, or a path (containing ``/`` or ending in ``.toml``) relative to the
  extending file.  Like every other path in a profile it must stay inside the folder of the file that
  declares it: relative, no ``..``, no ``~``, no symlink out.  Cycles (including a file extending
  itself) are an error naming the chain; chains are limited to 16 files.
* Relative paths (``python.requirements``, ``app.source``, ``extends``) resolve against the file that
  declares them.  ``Profile.python.requirements`` lists them rebased onto the profile's folder (so a
  parent's ``reqs.txt`` in ``shared/`` reads ``shared/reqs.txt``; ``builtin:...`` when a user profile
  inherits one from a built-in), deduplicated by file.  Built-ins live in
  :func:`envbuild.resources.profiles_dir`, and their relative files resolve there; ``Profile.folder``
  is ``None`` for them.  An inherited ``app.source`` is rebased onto the profile's folder when it lies
  inside it, else the profile must declare its own.
* ``checks[].expect_files``, ``checks[].expect_json`` files and ``validate.checkpoint_dir`` are relative
  to the container's work directory; they get the same syntax checks but are not looked up here.
* ``Profile.sha256`` hashes, in first-read order, each file's machine-independent label
  (``builtin:custom/requirements.txt`` or a path relative to the profile's folder), its length and its
  bytes: the profile, its parents, requirement files, ``-r`` includes and ``-c`` constraint files.
  The ``[app]`` folder is not part of it.
* ``Profile.sources`` maps each leaf key path (``python.version``, ``env.HF_HOME``, ``checks.pilot``) to
  ``default``, ``profile:<file>`` or ``extends:<file>`` (``<file>`` being ``builtin:<name>`` or the
  path relative to the profile's folder).
"""

from __future__ import annotations

from envbuild.profile.loader import builtin_names, load_profile


def describe_builtins() -> list[tuple[str, str, str]]:
    """``(name, kind, description)`` for every built-in profile, sorted by name."""
    out: list[tuple[str, str, str]] = []
    for name in builtin_names():
        profile = load_profile(name)
        out.append((name, profile.kind, profile.description))
    return out


__all__ = ["builtin_names", "describe_builtins", "load_profile"]
