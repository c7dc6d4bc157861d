#!/usr/bin/env bash
# On a GPU host, from the packed farm (scripts/pack.sh build .art/tunefarm
# --tests, plus nvrtc_compile_test and program_op_test copied into its
# tests/): the confinement of compiles and programs, the cubin checks and
# publish's recompile, on the real toolkit and device. Logs under $OUT.
set -u
A=${ART:-.art/tunefarm}
TF=$A/bin/tunefarm
OUT=${OUT:-/tmp/tunefarm-confine}
mkdir -p "$OUT"
export TUNEFARM_BINARY=$(cd "$A" && pwd)/libexec/tunefarm
export LD_LIBRARY_PATH=$A/lib:/usr/local/cuda/lib64
# Test data paths are compiled in as the build tree's; point that path here.
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
LOG=$OUT/job.log
: > "$LOG"
step() { echo "=== $* ($(date +%T))" | tee -a "$LOG"; }

step host
{ uname -r; id; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import ctypes; l = ctypes.CDLL(None); print("landlock abi", l.syscall(444, None, 0, 1))'; } 2>&1 | tee -a "$LOG"
for t in cuda_backend_test nvrtc_compile_test program_op_test launcher_test device_fill_test; do
  step "$t"
  $A/tests/$t > "$OUT/$t.txt" 2>&1
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran|FAILED  \]" "$OUT/$t.txt" | tee -a "$LOG"
done
step "tune gemm (README): cubins recompiled by publish"
rm -rf /tmp/tf-readme /tmp/tf-readme-b
/usr/bin/time -f "%e s wall" "$TF" tune --ops-dir "$A/share/tunefarm/ops" --op gemm --dtype f16 \
  --shape M=4096,N=4096,K=4096 --store /tmp/tf-readme --bundle /tmp/tf-readme-b > "$OUT/tune_gemm.txt" 2>&1
grep -E "publish:|s wall|^tunefarm:|bundle" "$OUT/tune_gemm.txt" | tail -8 | tee -a "$LOG"
"$TF" bundle show /tmp/tf-readme-b.tfb 2>&1 | grep -iE "kernel|cubin" | head -5 | tee -a "$LOG"
# The Triton op in the default box (Landlock + the unix-only socket filter)
# and in a namespace of its own (--program-namespace); BUDGET configs each.
for box in default namespace; do
  step "triton program op, confined ($box box)"
  flag=; [ $box = namespace ] && flag=--program-namespace
  rm -rf /tmp/tf-triton-$box /tmp/tf-triton-$box-b
  /usr/bin/time -f "%e s wall" "$TF" tune --ops-dir examples --op triton_matmul --dtype f16 $flag \
    --shape M=4096,N=4096,K=4096 --budget ${BUDGET:-40} --store /tmp/tf-triton-$box --bundle /tmp/tf-triton-$box-b \
    > "$OUT/tune_triton_$box.txt" 2>&1
  grep -aE "failures|valid|s wall|^tunefarm:|winner|^sweep:|\*" "$OUT/tune_triton_$box.txt" | cut -c1-240 | tail -10 | tee -a "$LOG"
done
step done
