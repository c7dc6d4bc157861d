#!/usr/bin/env bash
# Builds tunefarm from scratch and runs every test (GPU tests skip cleanly
# where there is no device). This is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
export BUILD_DIR=${BUILD_DIR:-build}
scripts/setup.sh --tests
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" --timeout 600
