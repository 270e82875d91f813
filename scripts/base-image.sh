#!/usr/bin/env bash
# Make a local base image without a registry: debootstrap, then `docker import`.
# Idempotent: skips when the image already exists.  Usage: scripts/base-image.sh [NAME:TAG] [SUITE]
#   scripts/base-image.sh                              envbuild/debian:12 from Debian bookworm (the default)
#   scripts/base-image.sh envbuild/ubuntu:22.04 jammy  Ubuntu 22.04 (its python3 is 3.10) from Ubuntu's archive
set -euo pipefail

image="${1:-envbuild/debian:12}"
suite="${2:-bookworm}"

# Ubuntu's archive keyring, for debootstrap to check jammy's Release signature.  Debian's apt here has no
# ubuntu-keyring package, so the package itself comes from Ubuntu's archive, checked against this sha256:
# computed 2026-12-03 from
# http://archive.ubuntu.com/ubuntu/pool/main/u/ubuntu-keyring/ubuntu-keyring_2021.03.26_all.deb (20856
# bytes), equal to the SHA256 line of jammy/main/binary-amd64/Packages for it; the keyring inside holds
# the Ubuntu Archive Automatic Signing Keys 790BC7277767219C42C86F933B4FE6ACC0B21F32 (2012) and
# F6ECB3762474EDA9D21B7022871920D1991BC93C (2018).
ubuntu_archive="http://archive.ubuntu.com/ubuntu"
ubuntu_keyring_deb="ubuntu-keyring_2021.03.26_all.deb"
ubuntu_keyring_sha256="0d0e7ed6b112f5d03eabf3c7eb01ebdacf9c57714b279e90495cfc58c8c4520f"

case "$suite" in
  bookworm) mirror="" ;;  # debootstrap's default Debian mirror
  jammy) mirror="$ubuntu_archive" ;;
  *)
    echo "base-image: unknown suite $suite (known: bookworm, jammy)" >&2
    exit 2
    ;;
esac

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
    flock /tmp/envbuild-apt.lock apt-get update -qq  # scripts/test.sh runs these scripts side by side
    DEBIAN_FRONTEND=noninteractive flock /tmp/envbuild-apt.lock apt-get install -y -qq debootstrap >/dev/null
  else
    echo "base-image: debootstrap is missing; install it (apt-get install debootstrap)" >&2
    exit 1
  fi
fi

if [ "$(id -u)" != 0 ]; then
  echo "base-image: debootstrap needs root; run: sudo $0 $image $suite" >&2
  exit 1
fi

work="$(mktemp -d /tmp/envbuild-rootfs.XXXXXX)"
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"
mkdir "$root"
options=(--variant=minbase)
if [ "$suite" = jammy ]; then
  # Never --no-check-gpg: the keyring comes from a package whose bytes are pinned above.
  curl -fsS --retry 3 -o "$work/$ubuntu_keyring_deb" "$ubuntu_archive/pool/main/u/ubuntu-keyring/$ubuntu_keyring_deb" || {
    echo "base-image: cannot download $ubuntu_archive/pool/main/u/ubuntu-keyring/$ubuntu_keyring_deb" >&2
    exit 1
  }
  echo "$ubuntu_keyring_sha256  $work/$ubuntu_keyring_deb" | sha256sum --check --quiet - || {
    echo "base-image: $ubuntu_keyring_deb does not have the pinned sha256 $ubuntu_keyring_sha256" >&2
    exit 1
  }
  dpkg-deb -x "$work/$ubuntu_keyring_deb" "$work/keyring"
  options+=(--keyring="$work/keyring/usr/share/keyrings/ubuntu-archive-keyring.gpg")
fi

log="/tmp/envbuild-debootstrap-$suite.log"
echo "base-image: debootstrap --variant=minbase $suite ${mirror:-(default mirror)} (about 30 s for bookworm, 2 min for jammy)"
started=$SECONDS
debootstrap "${options[@]}" "$suite" "$root" ${mirror:+"$mirror"} >"$log" 2>&1 || {
  echo "base-image: debootstrap failed; see $log" >&2
  tail -n 20 "$log" >&2
  exit 1
}
echo "base-image: debootstrap took $((SECONDS - started)) s"
if [ "$suite" = jammy ]; then
  # minbase writes only "jammy main"; the real ubuntu:22.04 image has every component, plus the updates,
  # backports and security pockets: apt in a build must find the same packages (and versions) there.
  cat >"$root/etc/apt/sources.list" <<SOURCES
deb $ubuntu_archive/ jammy main restricted universe multiverse
deb $ubuntu_archive/ jammy-updates main restricted universe multiverse
deb $ubuntu_archive/ jammy-backports main restricted universe multiverse
deb http://security.ubuntu.com/ubuntu/ jammy-security main restricted universe multiverse
SOURCES
fi
# Keep the image small and free of host state.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar -C "$root" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]' \
  - "$image" >/dev/null
# The image must at least run a shell and have apt (the rendered Dockerfiles rely on both), and be the
# release it was made from.
docker run --rm "$image" bash -c ". /etc/os-release && [ \"\$VERSION_CODENAME\" = $suite ] && command -v apt-get >/dev/null" || {
  echo "base-image: $image was imported but does not run bash/apt-get as $suite; removing it" >&2
  docker image rm "$image" >/dev/null 2>&1 || true
  exit 1
}
echo "base-image: created $image"
