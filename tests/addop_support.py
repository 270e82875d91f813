"""``eb-addop`` 1.0, an sdist WRITTEN BY HAND for the tests (not recorded): its ``setup.py`` imports
``torch.utils.cpp_extension`` and builds a small C++ op; PKG-INFO 2.2 with a ``pyproject.toml``, so the
resolver reads its dependencies without building it.  Its package runs its op once on import, so an
import that succeeds has run the compiled code.  Used by tests/test_source_build.py (the lock's side)
and by the shared pytorch-cpu image (tests/conftest.py), which builds it from source in its builder stage.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from index_support import make_sdist, setuptools_pyproject

REPO = Path(__file__).resolve().parent.parent

SETUP_PY = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(
    name="eb-addop",
    version="1.0",
    packages=["eb_addop"],
    ext_modules=[CppExtension("eb_addop._C", ["csrc/addop.cpp"])],
    cmdclass={"build_ext": BuildExtension},
)
"""
PYPROJECT = setuptools_pyproject("eb-addop", "1.0", ["torch"])
ADDOP_CPP = """\
#include <torch/extension.h>

torch::Tensor add_one(torch::Tensor x) { return x + 1; }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("add_one", &add_one, "x + 1"); }
"""
INIT_PY = """\
import torch

from eb_addop import _C

__version__ = "1.0"


def add_one(x):
    return _C.add_one(x)


# Run the compiled op once on import: an import that succeeds has run it.
assert add_one(torch.zeros(3)).tolist() == [1.0, 1.0, 1.0]
"""


def make_addop(folder: Path, cpp: str = ADDOP_CPP) -> Path:
    return make_sdist(
        folder,
        "eb-addop",
        "1.0",
        setup_py=SETUP_PY,
        pyproject=PYPROJECT,
        requires=["torch"],
        files={"csrc/addop.cpp": cpp, "eb_addop/__init__.py": INIT_PY, "MANIFEST.in": "graft csrc\n"},
        metadata_version="2.2",
    )


def write_profile(
    folder: Path, build_from_source: list[str], *, name: str = "addop", probe_ops: bool = False
) -> Path:
    """A profile extending pytorch-cpu with ``eb-addop==1.0``, with its pilot app (whose checks it
    inherits) copied beside it; the validator's probe ops only with ``probe_ops`` (a lock-only test
    needs none)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copytree(REPO / "profiles" / "apps" / "pilot", folder / "pilot")
    path = folder / "profile.toml"
    path.write_text(
        f'name = "{name}"\nkind = "pytorch"\nextends = "pytorch-cpu"\n'
        f'[python]\npackages = ["eb-addop==1.0"]\nbuild_from_source = {json.dumps(build_from_source)}\n'
        f'[validate]\nextensions = ["eb_addop"]\nprobe_ops = {str(probe_ops).lower()}\n'
        '[app]\nsource = "pilot"\n',
        encoding="utf-8",
    )
    return path
