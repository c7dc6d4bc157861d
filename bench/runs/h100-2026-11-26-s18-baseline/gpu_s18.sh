#!/usr/bin/env bash
# Session 18 GPU check: categorical params and the cuBLASLt baseline.
set -u
A=.art/tunefarm
export TUNEFARM_BINARY=$PWD/$A/libexec/tunefarm
export LD_LIBRARY_PATH=$A/lib:/usr/local/cuda/lib64
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
L=$OUT/log.txt
T=$A/bin/tunefarm
W=/tmp/w; rm -rf $W; mkdir -p $W
$T keys sign --out $W/k >/dev/null
nvidia-smi --query-gpu=name,driver_version --format=csv >> $L
ls /usr/local/cuda/lib64/libcublasLt* >> $L 2>&1
if [ "${PART:-1}" = 1 ]; then
echo "=== cuda_backend_test" >> $L
timeout 300 $A/tests/cuda_backend_test 2>&1 | grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) |baseline |Failure|error|Expected|Which|Actual|tests ran" >> $L
echo "=== nvrtc_compile_test" >> $L
timeout 120 $A/tests/nvrtc_compile_test 2>&1 | tail -3 >> $L
echo "=== tune scheduled (categorical) on the GPU" >> $L
timeout 120 $T tune --op scheduled --ops-dir tests/data/ops --dtype f16 --shape N=16777216 --store $W/db1 --bundle $W/b1 --sign-key $W/k 2>&1 | grep -v " info \| warning " | tail -22 >> $L
G=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
$T bundle lookup $W/b1.tfb --op scheduled --dtype f16 --gpu h100-80gb-hbm3 --shape N=16777216 --key $W/k.pub >> $L 2>&1
$T bundle show $W/b1.tfb >> $L 2>&1
fi
if [ "${PART:-1}" = 2 ]; then
echo "=== tune gemm 4096^3 with the cuBLASLt baseline" >> $L
timeout 200 $T tune --op gemm --ops-dir ops --dtype f16 --shape M=4096,N=4096,K=4096 --store $W/db2 2>&1 | grep -v " info \| warning " | grep -A6 "gemm/f16" >> $L
echo "=== tune gemm_sm90 on the issue's shapes with the baseline" >> $L
timeout 250 $T tune --op gemm_sm90 --ops-dir ops --dtype f16 --shape M=4096,N=4096,K=4096 --shape M=32,N=4096,K=4096 --shape M=1024,N=4096,K=14336 --store $W/db3 2>&1 | grep -v " info \| warning " | grep -A4 "gemm_sm90/f16" >> $L
$T best --store $W/db3 --format csv > $OUT/sm90_best.csv 2>&1
$T best --store $W/db2 --format csv > $OUT/gemm_best.csv 2>&1
fi
if [ "${PART:-1}" = 3 ]; then
echo "=== cuda_backend_test: baseline paths" >> $L
timeout 120 $A/tests/cuda_backend_test --gtest_filter='*Baseline*' 2>&1 | grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) |baseline |Failure|Expected|Which" >> $L
echo "=== tune triton_matmul (program op) beside torch.matmul" >> $L
timeout 400 $T tune --ops-dir examples --op triton_matmul --dtype f16 --shape M=4096,N=4096,K=4096 --shape M=128,N=4096,K=4096 \
  --strategy random --budget 24 --store $W/db4 2>&1 | grep -v " info \| warning " | grep -B1 -A4 "triton_matmul/f16" >> $L
$T best --store $W/db4 --format csv > $OUT/triton_best.csv 2>&1
fi
