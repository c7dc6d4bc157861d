#!/usr/bin/env bash
# Packs a relocatable tunefarm: the binary, its non-system shared libraries,
# the shipped ops, the scale benchmark (when built) and (with --tests) the GPU
# test programs, into one folder that runs on a host with no build tools or
# package registry.
#
#   scripts/pack.sh [BUILD_DIR] [OUT_DIR] [--tests]
#   OUT_DIR/bin/tunefarm tune ...      # the wrappers set LD_LIBRARY_PATH
#   OUT_DIR/bin/bench_scale --workers 1000   # bench/scale.md; finds bin/tunefarm
#
# Left out on purpose: libc/libstdc++ and friends (the host's, newer, serve),
# libcuda (the host's driver) and libnvrtc (the host's CUDA toolkit, which must
# match its driver).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
OUT=${2:-dist/tunefarm}
WITH_TESTS=${3:-}

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/libexec" "$OUT/lib" "$OUT/share/tunefarm"

system_lib() {
  case "$(basename "$1")" in
    libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libstdc++.so*|libgcc_s.so*|\
    libcuda.so*|libnvrtc*.so*|libnvidia-ml.so*|libcublas*.so*|libcudart.so*|linux-vdso*) return 0 ;;
  esac
  return 1
}

copy_program() {  # $1 = program, $2 = destination folder
  install -m 0755 "$1" "$2/"
  strip --strip-unneeded "$2/$(basename "$1")" 2>/dev/null || true
  ldd "$1" | awk '/=> \// { print $3 }' | while read -r lib; do
    system_lib "$lib" && continue
    [[ -e "$OUT/lib/$(basename "$lib")" ]] || install -m 0644 "$(readlink -f "$lib")" "$OUT/lib/$(basename "$lib")"
  done
}

wrap_program() {  # $1 = program in libexec: bin/$1 runs it with the shipped libraries
  cat > "$OUT/bin/$1" <<WRAP
#!/bin/sh
# Runs $1 with the libraries shipped beside it.
here=\$(cd "\$(dirname "\$0")/.." && pwd)
export LD_LIBRARY_PATH="\$here/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}:/usr/local/cuda/lib64"
exec "\$here/libexec/$1" "\$@"
WRAP
  chmod 0755 "$OUT/bin/$1"
}

copy_program "$BUILD_DIR/cli/tunefarm" "$OUT/libexec"
wrap_program tunefarm
# The C APIs and the Python package over them (PYTHONPATH=OUT_DIR/python; the
# libraries find their dependencies beside them through their $ORIGIN run path).
if [[ -e "$BUILD_DIR/libtune/libtunefarm_c.so" ]]; then
  copy_program "$BUILD_DIR/libtune/libtunefarm_c.so" "$OUT/lib"
  chmod 0644 "$OUT/lib/libtunefarm_c.so"
  # The farm's C API (Python's tunefarm.Farm and tunefarm.autotune).
  if [[ -e "$BUILD_DIR/client/libtunefarm_farm.so" ]]; then
    copy_program "$BUILD_DIR/client/libtunefarm_farm.so" "$OUT/lib"
    chmod 0644 "$OUT/lib/libtunefarm_farm.so"
  fi
  mkdir -p "$OUT/python" && cp -r python/tunefarm "$OUT/python/" && rm -rf "$OUT/python/tunefarm/__pycache__"
  mkdir -p "$OUT/share/tunefarm/examples" && cp -r examples/. "$OUT/share/tunefarm/examples/"
fi
cp -r ops "$OUT/share/tunefarm/ops"
# Chart.js for reports and the dashboard (base/html.h kPackedChartJs): the
# hosts the artifact goes to may not have Debian's libjs-chart.js.
if [[ -f /usr/share/javascript/chart.js/chart.min.js ]]; then
  mkdir -p "$OUT/share/tunefarm/js"
  install -m 0644 /usr/share/javascript/chart.js/chart.min.js "$OUT/share/tunefarm/js/chart.min.js"
fi
if [[ -x "$BUILD_DIR/bench/bench_scale" ]]; then
  copy_program "$BUILD_DIR/bench/bench_scale" "$OUT/libexec"
  wrap_program bench_scale
  mkdir -p "$OUT/share/tunefarm/bench/ops"
  cp -r tests/data/ops/synthetic "$OUT/share/tunefarm/bench/ops/synthetic"
fi
mkdir -p "$OUT/share/tunefarm/sweeps" && cp -r sweeps/. "$OUT/share/tunefarm/sweeps/" 2>/dev/null || true

if [[ "$WITH_TESTS" == "--tests" ]]; then
  mkdir -p "$OUT/tests"
  for t in "$BUILD_DIR"/tests/cuda_backend_test "$BUILD_DIR"/tests/device_fill_test "$BUILD_DIR"/tests/launcher_test \
           "$BUILD_DIR"/bench/tunefarm_baselines "$BUILD_DIR"/bench/bench_launch_overhead \
           "$BUILD_DIR"/examples/deploy_gemm/deploy_gemm; do
    [[ -x "$t" ]] && copy_program "$t" "$OUT/tests"
  done
  cp -r tests/gpu/data "$OUT/tests/gpu-data"
fi
du -sh "$OUT" | awk '{ print "pack: " $2 " " $1 }'
