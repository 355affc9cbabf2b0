#!/usr/bin/env bash
# The cost of a container's user namespace (docs/decisions/0039): `podman run`
# of IMAGE with `true`, as the account on the host's map (`--user`) and as
# the image's root mapped to the account (`--uidmap 0:UID:1`), interleaved
# N times each; prints each run's milliseconds. Root, podman, an image.
# Usage: bench/containers/userns.sh [IMAGE] [N] [UID]
set -euo pipefail
image=${1:-localhost/stoker-base:bookworm}
n=${2:-10}
uid=${3:-65534}
limits=(--ulimit nofile=1024:1024 --ulimit nproc=4096:4096)
for _ in $(seq "$n"); do
  for mode in host-map namespace; do
    if [ "$mode" = namespace ]; then
      flags=(--uidmap "0:$uid:1" --gidmap "0:$uid:1" --user 0:0)
    else
      flags=(--user "$uid:$uid")
    fi
    start=$(date +%s%N)
    podman run --rm "${limits[@]}" "${flags[@]}" --entrypoint true -- "$image"
    echo "$mode $((($(date +%s%N) - start) / 1000000))"
  done
done | awk '{ms[$1] = ms[$1] " " $2} END {for (m in ms) print m ":" ms[m]}'
