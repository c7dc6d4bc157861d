#!/usr/bin/env bash
# Session 19 GPU run 5: the README's first command on one H100, as written
# (no --op), then the bundle it wrote launched through the C API's Python face.
set -u
R=$PWD
A=$R/.art/tunefarm
export TUNEFARM_BINARY=$A/libexec/tunefarm
export LD_LIBRARY_PATH=$A/lib:/usr/local/cuda/lib64
[ -e /work/main ] || { mkdir -p /work && ln -s "$R" /work/main; }
L=$OUT/log.txt
nvidia-smi --query-gpu=name,driver_version --format=csv >> $L
mkdir -p /tmp/readme && cd /tmp/readme
echo "=== tunefarm tune --dtype f16 --shape M=4096,N=4096,K=4096" >> $L
date >> $L
timeout 400 $A/bin/tunefarm tune --ops-dir $A/share/tunefarm/ops --dtype f16 --shape M=4096,N=4096,K=4096 --quiet > $OUT/readme.log 2>&1
echo "readme rc=$?" >> $L
date >> $L
grep -E "^tune:|^h100|searched:|vs cublaslt|^  \* |^sweep:|^compile:|^failures|bundle:|key" $OUT/readme.log | cut -c1-260 | head -20 >> $L
$A/bin/tunefarm best --store tunefarm.db --format csv > $OUT/readme_best.csv 2>&1
$A/bin/tunefarm bundle show bundles/tune-gemm_hopper.tfb 2>&1 | head -30 >> $L
