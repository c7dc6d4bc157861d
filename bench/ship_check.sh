#!/usr/bin/env bash
# From `tune` to a launched kernel on one GPU host (bench/gpu_h100.md,
# "Twelfth session"): tunes gemm_sm90 f16 on six shapes, signs the bundle with
# a fresh default key, launches the tuned kernels from Python on torch tensors
# (six tuned shapes and one untuned), checked against torch and timed beside
# the bundle's medians, then once from C++ (deploy_gemm).
#
#   bench/ship_check.sh ART_DIR OUT_DIR      # ART_DIR: scripts/pack.sh BUILD ART --tests
set -uo pipefail
art=$1 out=$2
export LD_LIBRARY_PATH=$art/lib:/usr/local/cuda/lib64 TUNEFARM_SIGN_KEY=$out/farm.key
mkdir -p "$out"
shapes=(M=4096,N=4096,K=4096 M=2048,N=2048,K=2048 M=1024,N=1024,K=1024 M=128,N=4096,K=4096
        M=64,N=8192,K=2048 M=1024,N=16384,K=1024)
args=()
for s in "${shapes[@]}"; do args+=(--shape "$s"); done
/usr/bin/time -f "tune wall %e s" "$art/bin/tunefarm" tune --op gemm_sm90 --dtype f16 "${args[@]}" \
  --ops-dir "$art/share/tunefarm/ops" --store "$out/db" --bundle "$out/gemm_sm90" > "$out/tune.txt" 2> "$out/tune.err"
echo "tune rc=$?"; grep -E "^tune wall|signed with|created the signing" "$out/tune.err"
"$art/bin/tunefarm" bundle show "$out/gemm_sm90.tfb" | head -4
ls -l "$out/gemm_sm90.tfb" | awk '{print "bundle bytes", $5}'
PYTHONPATH=$art/python python3 "$art/share/tunefarm/examples/python/gemm_torch.py" "$out/gemm_sm90.tfb" \
  "$out/farm.key.pub" --json "$out/python.json"
echo "python rc=$?"
"$art/tests/deploy_gemm" --bundle "$out/gemm_sm90.tfb" --key "$out/farm.key.pub" --M 4096 --N 4096 --K 4096
echo "deploy_gemm rc=$?"
