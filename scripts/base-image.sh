#!/usr/bin/env bash
# Make a local Debian 12 base image without a registry: debootstrap, then `docker import`.
# Idempotent: skips when the image already exists.  Usage: scripts/base-image.sh [NAME:TAG]
set -euo pipefail

image="${1:-envbuild/debian:12}"
suite="bookworm"

if ! docker info >/dev/null 2>&1; then
  echo "base-image: no Docker engine answers; run scripts/docker-engine.sh first" >&2
  exit 3
fi

if docker image inspect "$image" >/dev/null 2>&1; then
  echo "base-image: $image already exists"
  exit 0
fi

if ! command -v debootstrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  else
    echo "base-image: debootstrap is missing; install it (apt-get install debootstrap)" >&2
    exit 1
  fi
fi

if [ "$(id -u)" != 0 ]; then
  echo "base-image: debootstrap needs root; run: sudo $0 $image" >&2
  exit 1
fi

root="$(mktemp -d /tmp/envbuild-rootfs.XXXXXX)"
trap 'rm -rf "$root"' EXIT
echo "base-image: debootstrap --variant=minbase $suite (about 30 s)"
debootstrap --variant=minbase "$suite" "$root" >/tmp/envbuild-debootstrap.log 2>&1 || {
  echo "base-image: debootstrap failed; see /tmp/envbuild-debootstrap.log" >&2
  tail -n 20 /tmp/envbuild-debootstrap.log >&2
  exit 1
}
# Keep the image small and free of host state.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]' \
  - "$image" >/dev/null
# The image must at least run a shell and have apt (the rendered Dockerfiles rely on both).
docker run --rm "$image" bash -c 'command -v apt-get >/dev/null' || {
  echo "base-image: $image was imported but does not run bash/apt-get; removing it" >&2
  docker image rm "$image" >/dev/null 2>&1 || true
  exit 1
}
echo "base-image: created $image"
