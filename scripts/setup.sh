#!/usr/bin/env bash
# Installs tunefarm's Debian 12 build dependencies (idempotent) and builds it.
#   scripts/setup.sh            # what the farm needs + release build in ./build
#   scripts/setup.sh --tests    # also what only the tests need, and the tests
#   BUILD_DIR=out scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
TESTS=OFF
case "${1:-}" in
  --tests) TESTS=ON ;;
  "") ;;
  *) echo "usage: scripts/setup.sh [--tests]" >&2; exit 2 ;;
esac

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
  libjs-chart.js                  # charts of the dashboard and of compare reports, served at run time
)
# Only the tests (and the benchmarks) use these.
TEST_PACKAGES=(
  libgtest-dev libgmock-dev
  libbenchmark-dev
  clang libclang-rt-14-dev        # the fuzz target
  ansible ansible-lint
  prometheus                      # promtool: /metrics, alert rules and scrape config checked in CI
  chromium chromium-driver python3-selenium
  python3-jsonschema              # T4 exports validated against Kernel Tuner's published schema
  adduser                         # the Debian package's postinst (deb_package test installs it)
)
[[ $TESTS == ON ]] && PACKAGES+=("${TEST_PACKAGES[@]}")
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
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTUNEFARM_BUILD_TESTS=$TESTS
cmake --build "$BUILD_DIR" -j "$(nproc)"
