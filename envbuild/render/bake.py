"""``render --bake``: the bundle as a ``docker-bake.hcl`` for users with BuildKit (docker buildx).

Every value that comes from the profile is written as an HCL string literal: JSON escapes, plus
``$${`` and ``%%{`` so that nothing in it is read as an interpolation or a template directive.
"""

from __future__ import annotations

import json
import re

from envbuild import __version__
from envbuild.models import CheckResult
from envbuild.render.quote import check_plain
from envbuild.render.readme import suggested_tag
from envbuild.render.view import SOURCE_DATE_EPOCH
from envbuild.templating import render_template

_NAME = re.compile(r"[^a-z0-9_-]+")


def hcl_str(value: str) -> str:
    """``value`` as an HCL quoted string (no interpolation, no directive)."""
    return json.dumps(value).replace("${", "$${").replace("%{", "%%{")


def bake_target_name(result: CheckResult) -> str:
    """A bake target name: the profile and its cards, lower-case letters, digits, - and _ only."""
    plan = result.plan
    parts = [plan.profile.name, *(c.id for c in plan.targets)]
    return _NAME.sub("-", "-".join(parts).lower()).strip("-") or "bundle"


def render_bake(result: CheckResult, command: str) -> str:
    plan = result.plan
    return render_template(
        "bake/docker-bake.hcl.j2",
        envbuild_version=__version__,
        command=check_plain(command, "command"),
        tag=hcl_str(suggested_tag(result)),
        base_image=hcl_str(plan.base_image),
        source_date_epoch=SOURCE_DATE_EPOCH,
        target=hcl_str(bake_target_name(result)),
        cards=hcl_str(",".join(c.id for c in plan.targets) or "cpu"),
        platform=hcl_str("linux/amd64"),  # envbuild renders x86_64 images (aarch64 hosts are refused)
    )
