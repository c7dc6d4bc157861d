#!/usr/bin/env bash
# Session 19 GPU run: the gemm_hopper family checked, then searched on the
# issue's six shapes beside cuBLASLt.
set -u
A=.art/tunefarm
export TUNEFARM_BINARY=$PWD/$A/libexec/tunefarm
export LD_LIBRARY_PATH=$A/lib:/usr/local/cuda/lib64
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
L=$OUT/log.txt
T=$A/bin/tunefarm
W=/tmp/w; mkdir -p $W
nvidia-smi --query-gpu=name,driver_version --format=csv >> $L
if [ "${PART:-1}" = 1 ]; then
  echo "=== cuda_backend_test: the Hopper family and the shipped GEMMs" >> $L
  timeout 240 $A/tests/cuda_backend_test --gtest_filter='*Hopper*:*ShippedGemms*' > $OUT/part1.log 2>&1
  rc=$?
  grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) |Failure|Expected|Which|Actual|tests ran|failed|wrong" $OUT/part1.log | head -60 >> $L
  echo "part1 rc=$rc" >> $L
  [ $rc = 0 ] || exit 0
fi
SHAPES="--shape M=32,N=4096,K=4096 --shape M=256,N=6144,K=4096 --shape M=1024,N=4096,K=14336 --shape M=2048,N=28672,K=4096 --shape M=4096,N=4096,K=4096 --shape M=16384,N=1024,K=1024"
echo "=== tune gemm_hopper f16, default strategy, budget ${BUDGET:-500} per shape" >> $L
date >> $L
timeout ${TUNE_S:-400} $T tune --op gemm_hopper --ops-dir $A/share/tunefarm/ops --dtype f16 $SHAPES --budget ${BUDGET:-500} \
  --store $W/db --unsigned --quiet > $OUT/tune.log 2>&1
echo "tune rc=$?" >> $L
date >> $L
grep -v " info \| debug " $OUT/tune.log | tail -60 >> $L
$T best --store $W/db --format csv > $OUT/hopper_best.csv 2>&1
$T results --store $W/db --op gemm_hopper --format csv > $OUT/hopper_results.csv 2>&1
ls -la $OUT >> $L
