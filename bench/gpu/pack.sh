#!/usr/bin/env bash
# Lays out what bench/gpu/run.sh needs on a GPU machine that has no Boost,
# yaml-cpp, spdlog or package registry: build-gpu/bin (stokerd, stoker,
# stoker-run), build-gpu/lib (the Debian shared libraries they link, glibc and
# libstdc++ excepted) and build-gpu/share/stoker/python (the helpers, where an
# installed stokerd looks for them). build-gpu/ is ignored by git; name it in
# the device tool's `carry`.
#   bench/gpu/pack.sh [BUILD_DIR]   (default build)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
out=build-gpu
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/share/stoker"
for b in stokerd stoker stoker-run; do cp "$build/bin/$b" "$out/bin/"; done
strip "$out"/bin/* 2>/dev/null || true
cp -r src/python "$out/share/stoker/python"
find "$out/share/stoker/python" -name '__pycache__' -prune -exec rm -rf {} +
# libarchive is loaded on first use (src/storage/libarchive.h), so ldd does
# not list it: its libraries come from ldd of the library itself.
arch=$(ldconfig -p | awk '/libarchive\.so\.13 / {print $NF; exit}')
for b in "$out"/bin/* $arch; do
  [ "$b" = "$arch" ] && echo "$arch"
  ldd "$b" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|ld-linux*|libpthread.so*|libdl.so*|librt.so*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
du -sh "$out"
