#!/usr/bin/env bash
# attnkit: installs what the build and the tests need and is missing (Debian 12 + npm), then nothing else.
# Idempotent and quiet when everything is there, so start/test/build scripts call it every time.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_pkg() { dpkg -s "$1" >/dev/null 2>&1; }
for pkg in cmake g++ clang make libsimde-dev googletest libgtest-dev libbenchmark-dev emscripten wabt chromium \
           g++-aarch64-linux-gnu qemu-user g++-mingw-w64-x86-64-posix wine64 node-typescript; do
  have_pkg "$pkg" || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]} (apt)"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# ORT's install script downloads from a host that is not reachable; its CPU binaries ship in the package.
if [ ! -d node_modules/onnxruntime-node ] || [ ! -d node_modules/onnx-proto ] || [ ! -d node_modules/playwright-core ]; then
  echo "setup: installing npm devDependencies"
  npm install --ignore-scripts --no-audit --no-fund --loglevel=error
fi
