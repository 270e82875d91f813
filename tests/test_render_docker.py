"""What the Docker engine makes of the rendered ENV and LABEL quoting (classic builder).

Hostile-looking but valid values (``$HOME``, quotes, backslashes, spaces, ``#``) must reach the
image literally.  Needs the engine: marked ``docker``; fails (never skips) without one.
"""

from __future__ import annotations

import io
import tarfile
import uuid
from typing import Any

import pytest
from render_support import cuda_plan, profile

from envbuild.render import render_dockerfile

VALUES = {
    "PLAIN": "/workspace/.cache/hf",
    "DOLLAR": "$HOME and ${PATH} stay literal",
    "QUOTES": "say \"hi\" and 'bye'",
    "BACKSLASH": "C:\\path\\n not a newline \\",
    "HASH": "# not a comment",
    "UNICODE": "Grüße ✓",
}


def env_and_label_block(text: str) -> str:
    """The final stage's user ENV and LABEL instructions, exactly as rendered."""
    lines = text.splitlines()
    start = lines.index("# hadolint ignore=DL3064")
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("WORKDIR"))
    return "\n".join(lines[start:end]) + "\n"


@pytest.mark.docker
def test_env_and_labels_reach_the_image_literally(docker_client: Any) -> None:
    from conftest import BASE_IMAGE

    plan = cuda_plan(profile=profile(env=VALUES, description='Quote "this" $NOT expanded'))
    dockerfile = f"FROM {BASE_IMAGE}\n" + env_and_label_block(render_dockerfile(plan))
    tag = f"envbuild-test/render-quoting:{uuid.uuid4().hex[:12]}"
    docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, forcerm=True)
    try:
        config = docker_client.api.inspect_image(tag)["Config"]
        env = dict(item.split("=", 1) for item in config["Env"])
        for key, value in VALUES.items():
            assert env[key] == value, key
        labels = config["Labels"]
        assert labels["org.opencontainers.image.description"] == 'Quote "this" $NOT expanded'
        assert labels["org.envbuild.profile-sha256"] == plan.profile.sha256
    finally:
        docker_client.images.remove(tag, force=True)


@pytest.mark.docker
def test_base_image_default_resolves_without_build_arg(docker_client: Any) -> None:
    """The quoted ``ARG BASE_IMAGE="..."`` default must work when no --build-arg is given."""
    from conftest import BASE_IMAGE

    text = render_dockerfile(cuda_plan(base_image=BASE_IMAGE))
    arg_line = next(line for line in text.splitlines() if line.startswith("ARG BASE_IMAGE="))
    assert arg_line == f'ARG BASE_IMAGE="{BASE_IMAGE}"'
    dockerfile = f"{arg_line}\nFROM ${{BASE_IMAGE}}\nLABEL probe=1\n"
    tag = f"envbuild-test/render-arg:{uuid.uuid4().hex[:12]}"
    image, _ = docker_client.images.build(
        fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, forcerm=True
    )
    try:
        base = docker_client.images.get(BASE_IMAGE)
        assert image.attrs["RootFS"]["Layers"] == base.attrs["RootFS"]["Layers"]
    finally:
        docker_client.images.remove(tag, force=True)


# A throwaway self-signed CA (its private key was discarded): only its presence in the trust store matters.
TEST_CA = """\
-----BEGIN CERTIFICATE-----
MIIDGTCCAgGgAwIBAgIUBRdS3RdY/OSwYEuO7+QtWBguqYAwDQYJKoZIhvcNAQEL
BQAwGzEZMBcGA1UEAwwQZW52YnVpbGQgdGVzdCBDQTAgFw0yNjExMjkxNzAxMTNa
GA8yMTI2MTEwNTE3MDExM1owGzEZMBcGA1UEAwwQZW52YnVpbGQgdGVzdCBDQTCC
ASIwDQYJKoZIhvcNAQEBBQADggEPADCCAQoCggEBAMDsua6BsEXyGrAixseKltqj
PO/s5aiNx7+AKKd/k/Ee6m9Rr+esZ0eJNajKWa4fpJxdVlhwG8eczwCuACjS1+oV
iQX15gQzdTTkku4QkW1cPWNIpklRLuke/iuxJ5ocPxocxO7hYssuNfXg/KxcCcmk
yx94RPjqEohiHGjYJJOTyUXq+ohYsKC3tqobV7D8rtTbvGmIc8NcjP7r9cchBm7t
nxIA/dxrxzbcCuR6qK2G3kTsdNc5+mkb7v6sGB+IjZvb+5mETRIk2QZJt1A5ib1o
jFzKV1I1vAOCp/InjdPD6UsFsDoFagFqXuMUrbw/FhbnUvB+BLOyI5Y6v8l7KesC
AwEAAaNTMFEwHQYDVR0OBBYEFLLtY7v8T29gmJ61ZUg/8ODHY7lHMB8GA1UdIwQY
MBaAFLLtY7v8T29gmJ61ZUg/8ODHY7lHMA8GA1UdEwEB/wQFMAMBAf8wDQYJKoZI
hvcNAQELBQADggEBAAjL0CRC1/XGOQylzrap2Wiln4vGOGdlZ/iLqVWsNbp672wv
4rTK8TfqOom5wHwD5Jgnblfpc/5JEfcCO/6upHPKneA+36//WjPYXC5W4yJ6V5+K
imgLnT6RFINAhf9AKG8sjDUbBdsjM+RCpFOFhcGmtZiWcekyVDELBwkJ328iomyf
JZG3ZKh+VdcCwNDl6q9j84gYzzye6j0aGuxvGv3o+1QM2C8HwR5X14sA+keO+26C
Q/DqOe9FjcVhWBjzzK2iKoJdKDFyqzLY7ayQ1m3PA3hqITR55Sh1rUEtdns9lnQ7
UFD78XhmeTyzqWS+9FrqC5teMACZlXlksgsVRwc=
-----END CERTIFICATE-----
"""


@pytest.mark.docker
def test_extra_ca_certificates_are_trusted_in_the_image(docker_client: Any) -> None:
    """certs/*.crt lands in the system bundle that PIP_CERT points at in the final stage's OS setup only
    when FINAL_CA=envbuild-ca (``envbuild build --keep-ca-cert``); by default the final image has none."""
    from conftest import BASE_IMAGE

    plan = cuda_plan(
        os="debian12", base_image=BASE_IMAGE, python_version="3.11", apt=("ca-certificates",), backend="cpu"
    )
    lines = render_dockerfile(plan).splitlines()
    first = lines.index("FROM ${BASE_IMAGE} AS envbuild-ca")  # the CA-selection stages, then the final one
    end = next(i for i in range(first, len(lines)) if lines[i].startswith("COPY --from=builder"))
    args = [line for line in lines if line.startswith(("ARG BASE_IMAGE=", "ARG FINAL_CA="))]
    dockerfile = "\n".join([*args, *lines[first:end]]) + "\n"
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, data in (("Dockerfile", dockerfile.encode()), ("certs/test-ca.crt", TEST_CA.encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    marker = TEST_CA.splitlines()[1]
    script = (
        f'test "$PIP_CERT" = /etc/ssl/certs/ca-certificates.crt && grep -c -- "{marker}" "$PIP_CERT" || true'
    )
    for buildargs, expected in (({"FINAL_CA": "envbuild-ca"}, "1"), ({}, "0")):
        context.seek(0)
        tag = f"envbuild-test/render-certs:{uuid.uuid4().hex[:12]}"
        docker_client.images.build(
            fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True, buildargs=buildargs
        )
        try:
            out = docker_client.containers.run(tag, ["bash", "-c", script], remove=True)
            assert out.decode().strip() == expected, buildargs
        finally:
            docker_client.images.remove(tag, force=True)
