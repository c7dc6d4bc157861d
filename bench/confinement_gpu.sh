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
step "triton program op, confined"
rm -rf /tmp/tf-triton /tmp/tf-triton-b
/usr/bin/time -f "%e s wall" "$TF" tune --ops-dir examples --op triton_matmul --dtype f16 \
  --shape M=4096,N=4096,K=4096 --store /tmp/tf-triton --bundle /tmp/tf-triton-b > "$OUT/tune_triton.txt" 2>&1
grep -E "failures|valid|s wall|^tunefarm:|winner|\*" "$OUT/tune_triton.txt" | tail -8 | tee -a "$LOG"
"$TF" results --store /tmp/tf-triton --format csv 2>/dev/null | awk -F, 'NR>1{n++; if ($0 ~ /,ok|pass/) ok++} END{print "triton rows:", n, "ok-ish:", ok}' | tee -a "$LOG"
step done
