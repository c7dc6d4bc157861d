#!/usr/bin/env bash
# Session 22 GPU runs on a 4x H100 host (from a packed farm:
# scripts/pack.sh build .art/tunefarm --tests). PART picks:
#   1  the Hopper GEMM and planted-fault tests, the launcher's GPU tests
#   5  gemm_hopper_skinny.op.toml exhaustive on the two skinny shapes (the
#      K sub-tile study: pack with ksub.patch applied to ops/gemm_hopper)
#   2  the six shapes of the GEMM issue searched with the default strategy
#      (budget 500, confirm top 3) beside cuBLASLt, the shipped space
#   3  the Python launch cost (bench/python_launch.py), on device 0, REPS times (2)
#   4  gemm_hopper_decode3.op.toml (the decode winner and two neighbours) at
#      M=32, N=4096 and K from 1024 to 16384 beside cuBLASLt: fixed cost
#      against streaming rate
set -u
ROOT=$PWD
A=$ROOT/.art/tunefarm
export TUNEFARM_BINARY=$A/libexec/tunefarm
export LD_LIBRARY_PATH=$A/lib:/usr/local/cuda/lib64
export PYTHONPATH=$ROOT/python
export TUNEFARM_LIB=$A/lib/libtunefarm_c.so TUNEFARM_FARM_LIB=$A/lib/libtunefarm_farm.so
L=$OUT/log.txt
T=$A/bin/tunefarm
W=/tmp/w; mkdir -p $W
[ -f $W/k ] || $T keys sign --out $W/k >/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> $L
P=${PART:-1}
want() { case ",$P," in *",$1,"*) return 0 ;; esac; return 1; }
if want 1; then
echo "=== cuda_backend_test Hopper" >> $L
timeout 150 $A/tests/cuda_backend_test --gtest_filter='*Hopper*:*Planted*' 2>&1 | grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) |Failure|Expected|Which|tests ran" >> $L
timeout 150 $A/tests/launcher_test 2>&1 | grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) |Failure|Expected|Which|tests ran" >> $L
fi
if want 5; then
SUB=$W/skinny; rm -rf $SUB; mkdir -p $SUB; cp -r $A/share/tunefarm/ops/gemm_hopper $SUB/
cp $ROOT/bench/runs/h100x4-2026-11-27-s22/gemm_hopper_skinny.op.toml $SUB/gemm_hopper/op.toml
echo "=== skinny subspace exhaustive ($(date -u +%T))" >> $L
rm -rf $W/skinny.db
timeout 300 $T tune --op gemm_hopper --ops-dir $SUB --dtype f16 --shape M=32,N=4096,K=4096 --shape M=256,N=6144,K=4096 \
  --strategy exhaustive --store $W/skinny.db --unsigned --bundle $W/skinny --quiet > $OUT/skinny_tune.log 2>&1
echo "tune rc=$? ($(date -u +%T))" >> $L
grep -E "exhaust|searched:|vs cublaslt|^  \* |^sweep:|^failures" $OUT/skinny_tune.log | cut -c1-260 >> $L
$T results --store $W/skinny.db --format csv | gzip -9 > $OUT/skinny_results.csv.gz
fi
if want 2; then
SHAPES="--shape M=32,N=4096,K=4096 --shape M=256,N=6144,K=4096 --shape M=1024,N=4096,K=14336 --shape M=2048,N=28672,K=4096 --shape M=4096,N=4096,K=4096 --shape M=16384,N=1024,K=1024"
echo "=== tune gemm_hopper f16, default strategy, budget 500 per shape, confirm top 3 ($(date -u +%T))" >> $L
rm -rf $W/h.db
timeout 420 $T tune --op gemm_hopper --ops-dir $A/share/tunefarm/ops --dtype f16 $SHAPES --budget 500 --confirm-top 3 \
  --store $W/h.db --unsigned --bundle $W/h --quiet > $OUT/hopper_tune.log 2>&1
echo "tune rc=$? ($(date -u +%T))" >> $L
grep -E "^h100|searched:|vs cublaslt|^  \* |^sweep:|^compile:|^failures" $OUT/hopper_tune.log | cut -c1-260 | head -40 >> $L
$T best --store $W/h.db --format csv > $OUT/hopper_best.csv 2>&1
$T results --store $W/h.db --op gemm_hopper --format csv | gzip -9 > $OUT/hopper_results.csv.gz
fi
if want 3; then
echo "=== python launch cost (gemm, M=128,N=4096,K=4096), device 0" >> $L
python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)" >> $L 2>&1
[ -x $A/tests/bench_launch_overhead ] && CUDA_VISIBLE_DEVICES=0 timeout 120 $A/tests/bench_launch_overhead --ops-dir $A/share/tunefarm/ops >> $L 2>&1
timeout 200 $T tune --op gemm --dtype f16 --shape M=128,N=4096,K=4096 --devices 0 --strategy random --budget 30 --store $W/lb.db --bundle $W/lb --sign-key $W/k --quiet > $W/lb.log 2>&1 || tail -5 $W/lb.log >> $L
for i in $(seq ${REPS:-2}); do
CUDA_VISIBLE_DEVICES=0 timeout 200 python3 $ROOT/bench/python_launch.py $W/lb.tfb $W/k.pub --op gemm --shape 128,4096,4096 --json $OUT/python_launch$i.json >> $L 2>&1
done
fi
if want 4; then
SUB=$W/decode3; rm -rf $SUB; mkdir -p $SUB; cp -r $A/share/tunefarm/ops/gemm_hopper $SUB/
cp $ROOT/bench/runs/h100x4-2026-11-27-s22/gemm_hopper_decode3.op.toml $SUB/gemm_hopper/op.toml
echo "=== decode K scaling ($(date -u +%T))" >> $L
rm -rf $W/k3.db
timeout 300 $T tune --op gemm_hopper --ops-dir $SUB --dtype f16 --shape M=32,N=4096,K=1024 --shape M=32,N=4096,K=2048 \
  --shape M=32,N=4096,K=4096 --shape M=32,N=4096,K=8192 --shape M=32,N=4096,K=16384 --shape M=32,N=8192,K=4096 \
  --strategy exhaustive --confirm-top 3 --store $W/k3.db --unsigned --bundle $W/k3 --quiet > $OUT/decode3_tune.log 2>&1
echo "tune rc=$? ($(date -u +%T))" >> $L
grep -E "^h100|vs cublaslt|^  \* |^sweep:|^failures" $OUT/decode3_tune.log | cut -c1-260 >> $L
$T results --store $W/k3.db --format csv | gzip -9 > $OUT/decode3_results.csv.gz
fi
