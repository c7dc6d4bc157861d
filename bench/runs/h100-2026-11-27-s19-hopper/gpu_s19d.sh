#!/usr/bin/env bash
# Session 19 GPU run 4: tests, the six shapes searched with a confirm pass,
# and the README's first command on one H100.
set -u
A=.art/tunefarm
export TUNEFARM_BINARY=$PWD/$A/libexec/tunefarm
export LD_LIBRARY_PATH=$A/lib:/usr/local/cuda/lib64
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
L=$OUT/log.txt
T=$A/bin/tunefarm
W=/tmp/w; mkdir -p $W
nvidia-smi --query-gpu=name,driver_version --format=csv >> $L
echo "=== cuda_backend_test (Hopper family, shipped GEMMs, repository ops)" >> $L
timeout 120 $A/tests/cuda_backend_test --gtest_filter="*Hopper*" > $OUT/part1.log 2>&1
echo "rc=$?" >> $L
grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) |Failure|configs compiled|default " $OUT/part1.log | cut -c1-300 | head -40 >> $L
SHAPES="--shape M=32,N=4096,K=4096 --shape M=256,N=6144,K=4096 --shape M=1024,N=4096,K=14336 --shape M=2048,N=28672,K=4096 --shape M=4096,N=4096,K=4096 --shape M=16384,N=1024,K=1024"
echo "=== tune gemm_hopper f16, default strategy, budget 500 per shape, confirm top 3" >> $L
date >> $L
timeout 330 $T tune --op gemm_hopper --ops-dir $A/share/tunefarm/ops --dtype f16 $SHAPES --budget 500 --confirm-top 3 \
  --store $W/db --unsigned --quiet > $OUT/tune.log 2>&1
echo "tune rc=$?" >> $L
date >> $L
grep -E "^h100|searched:|vs cublaslt|^  \* |^sweep:|^compile:|^failures" $OUT/tune.log | cut -c1-260 | head -40 >> $L
$T best --store $W/db --format csv > $OUT/hopper_best.csv 2>&1
$T results --store $W/db --op gemm_hopper --format csv > $OUT/hopper_results.csv 2>&1
