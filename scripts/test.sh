#!/usr/bin/env bash
# Builds tunefarm from scratch and runs every test (GPU tests skip cleanly
# where there is no device). This is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
export BUILD_DIR=${BUILD_DIR:-build}
scripts/setup.sh --tests
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" --timeout 600
# Where the CUDA toolkit is installed, the programs are built once more
# without it: what a host without the toolkit builds must build too.
if [[ -f /usr/local/cuda/include/nvrtc.h ]]; then
  cmake -S . -B "$BUILD_DIR-nocuda" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTUNEFARM_BUILD_TESTS=OFF -DTUNEFARM_CUDA=OFF \
    -DCMAKE_CXX_FLAGS=-Werror >/dev/null
  cmake --build "$BUILD_DIR-nocuda" -j "$(nproc)" --target tunefarm
  "$BUILD_DIR-nocuda/cli/tunefarm" tune --backend sim --op gemm --dtype f16 --shape M=256,N=256,K=256 \
    --store "$BUILD_DIR-nocuda/tune.db" --bundle "$BUILD_DIR-nocuda/tune" --unsigned >/dev/null
  echo "test: the programs build and tune (sim) without the CUDA toolkit"
fi
