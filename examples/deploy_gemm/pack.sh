#!/usr/bin/env bash
# Packs deploy_gemm and make_test_bundle with their non-system shared
# libraries (Cap'n Proto, libsodium), the way scripts/pack.sh packs tunefarm,
# for a GPU host that has the driver and NVRTC but not Debian's packages.
#
#   examples/deploy_gemm/pack.sh [BUILD_DIR] [OUT_DIR]
#   OUT_DIR/bin/deploy_gemm ...        # the wrappers set LD_LIBRARY_PATH
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${1:-build}
OUT=${2:-dist/examples}

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/libexec" "$OUT/lib"

system_lib() {  # the host's own, or its CUDA driver and toolkit (which must match)
  case "$(basename "$1")" in
    libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libstdc++.so*|libgcc_s.so*|\
    libcuda.so*|libnvrtc*.so*|linux-vdso*) return 0 ;;
  esac
  return 1
}

for prog in deploy_gemm make_test_bundle; do
  src="$BUILD_DIR/examples/deploy_gemm/$prog"
  install -m 0755 "$src" "$OUT/libexec/"
  strip --strip-unneeded "$OUT/libexec/$prog" 2>/dev/null || true
  ldd "$src" | awk '/=> \// { print $3 }' | while read -r lib; do
    system_lib "$lib" && continue
    [[ -e "$OUT/lib/$(basename "$lib")" ]] || install -m 0644 "$(readlink -f "$lib")" "$OUT/lib/$(basename "$lib")"
  done
  cat > "$OUT/bin/$prog" <<WRAP
#!/bin/sh
here=\$(cd "\$(dirname "\$0")/.." && pwd)
export LD_LIBRARY_PATH="\$here/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}:/usr/local/cuda/lib64"
exec "\$here/libexec/$prog" "\$@"
WRAP
  chmod 0755 "$OUT/bin/$prog"
done
du -sh "$OUT" | awk '{ print "pack: " $2 " " $1 }'
