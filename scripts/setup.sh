#!/usr/bin/env bash
# Installs tunefarm's Debian 12 build dependencies (idempotent) and builds it.
#   scripts/setup.sh            # deps + release build in ./build
#   BUILD_DIR=out scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libzmq3-dev cppzmq-dev
  capnproto libcapnp-dev
  librocksdb-dev
  zlib1g-dev                      # gzip ground truth read by `search replay`
  libxgboost-dev                  # the model-guided search's gradient-boosted model
  libboost-dev
  libsodium-dev
  libmuparser-dev
  libtomlplusplus-dev
  libcli11-dev
  nlohmann-json3-dev
  libspdlog-dev
  libsystemd-dev
  libgtest-dev libgmock-dev
  libbenchmark-dev
  clang libclang-rt-14-dev
  libjs-chart.js
  ansible ansible-lint
  prometheus                      # promtool: /metrics, alert rules and scrape config checked in CI
  chromium chromium-driver python3-selenium
  adduser                         # the Debian package's postinst (deb_package test installs it)
)
missing=()
for p in "${PACKAGES[@]}"; do
  [[ "$p" == \#* ]] && continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [[ -x /usr/local/cuda/bin/nvcc || -f /usr/local/cuda/include/nvrtc.h ]]; then
  echo "setup: CUDA toolkit at /usr/local/cuda: building the CUDA backend"
else
  echo "setup: no CUDA toolkit at /usr/local/cuda: building the sim backend only"
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$BUILD_DIR" -j "$(nproc)"
