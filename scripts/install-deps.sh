#!/usr/bin/env bash
# Installs what Stoker needs to build and run trainers (and with --test, to
# run the tests), from Debian's archive.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git
  libboost-dev nlohmann-json3-dev libyaml-cpp-dev libsqlite3-dev sqlite3 libcli11-dev
  libspdlog-dev libarchive-dev libssl-dev libeigen3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-torch python3-numpy procps
  dpkg-dev file
)
# --test: what only the tests need (prometheus: promtool checks /metrics and
# tests/e2e/test_prometheus.py runs the server scraping stokerd; a headless
# Chromium drives the web console in tests/e2e/test_console.py).
# podman with runc and mmdebstrap: tests/e2e/test_containers.py runs jobs
# in real containers built on an image made offline
# (scripts/container-base-image.sh); docker-registry and busybox-static:
# tests/e2e/test_image_pulls.py pulls a small image from a real registry.
# nodejs and npm, unless the machine has them (its own node is kept):
# tests/e2e/test_node_clients.py runs the official Node client of Vertex AI,
# installed below from npm as tests/node/package-lock.json pins it.
if [ "${1:-}" = "--test" ]; then
  packages+=(prometheus chromium chromium-driver python3-selenium podman runc mmdebstrap
    docker-registry busybox-static)
  command -v node >/dev/null || packages+=(nodejs)
  command -v npm >/dev/null || packages+=(npm)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  echo "Installing: ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ "${1:-}" = "--test" ]; then
  # npm ci again only when the lockfile or node changed since the last one
  # (the stamp is inside node_modules, which npm ci replaces whole).
  node_dir="$(cd "$(dirname "$0")/.." && pwd)/tests/node"
  stamp="$node_dir/node_modules/.stoker-npm-ci"
  want="$(sha256sum <"$node_dir/package-lock.json" | cut -d' ' -f1) node $(node --version)"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "npm ci in tests/node"
    npm ci --prefix "$node_dir" --ignore-scripts --no-audit --no-fund
    echo "$want" >"$stamp"
  fi
fi
