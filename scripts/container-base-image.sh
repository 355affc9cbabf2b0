#!/bin/bash
# Makes the base image the container tests and examples build on, offline
# from a Debian mirror (no registry needed): Debian bookworm minbase with
# python3, pip, numpy and PyTorch (CPU), imported into podman's store as
#   localhost/stoker-base:bookworm      (or the name given as $1)
# Does nothing when the image is already there. Needs root (mmdebstrap,
# podman) and the packages podman, runc and mmdebstrap (scripts/install-deps.sh --test).
set -euo pipefail
image=${1:-localhost/stoker-base:bookworm}
if podman image exists "$image"; then
  echo "$image: already in podman's store"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
mmdebstrap --quiet --variant=minbase --include=python3,python3-pip,python3-numpy,python3-torch \
  bookworm "$tmp/rootfs.tar"
podman import --quiet "$tmp/rootfs.tar" "$image" >/dev/null
echo "$image: made in $(( $(date +%s) - start )) s"
