#!/usr/bin/env bash
# The size of a bundle with kernels for a realistic sweep (bench/gpu_h100.md):
# gemm, gemm_sm90 and rmsnorm, f16 and bf16, ten shapes each, tuned on this
# host's GPU into one store, then published with and without cubins.
#
#   bench/bundle_size.sh ART_DIR OUT_DIR     # ART_DIR: scripts/pack.sh output
set -uo pipefail
art=$1 out=$2
export LD_LIBRARY_PATH=$art/lib:/usr/local/cuda/lib64 TUNEFARM_SIGN_KEY=$out/farm.key
mkdir -p "$out"
tf=$art/bin/tunefarm ops=$art/share/tunefarm/ops
mnk=(512,512,512 1024,1024,1024 2048,2048,2048 4096,4096,4096 8192,8192,1024 128,4096,4096
     64,8192,2048 1024,16384,1024 4096,1024,4096 2048,8192,512)
rn=(1024,1024 4096,1024 8192,2048 16384,4096 2048,8192 32768,512 512,16384 8192,8192 1024,4096 65536,1024)
tune() {  # $1 = op, rest = --shape arguments
  local op=$1; shift
  /usr/bin/time -f "$op tune wall %e s" "$tf" tune --op "$op" --dtype f16 --dtype bf16 "$@" --ops-dir "$ops" \
    --store "$out/db" --bundle "$out/$op" > "$out/$op.txt" 2> "$out/$op.err"
  echo "$op rc=$?"; grep "tune wall" "$out/$op.err"
}
args=(); for s in "${mnk[@]}"; do IFS=, read -r m n k <<< "$s"; args+=(--shape "M=$m,N=$n,K=$k"); done
tune gemm "${args[@]}"
tune gemm_sm90 "${args[@]}"
args=(); for s in "${rn[@]}"; do IFS=, read -r r n <<< "$s"; args+=(--shape "ROWS=$r,N=$n"); done
tune rmsnorm "${args[@]}"
"$tf" publish --store "$out/db" --out "$out/all" 2> "$out/publish.err"
"$tf" publish --store "$out/db" --out "$out/all-config-only" --no-kernels 2>> "$out/publish.err"
cat "$out/publish.err"
"$tf" bundle show "$out/all.tfb" | head -3
ls -l "$out/all.tfb" "$out/all-config-only.tfb" | awk '{print $5, $9}'
