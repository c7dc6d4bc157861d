#!/usr/bin/env bash
# Session 21 GPU runs on a 4x H100 host (from a packed farm:
# scripts/pack.sh build .art/tunefarm --tests). PART picks:
#   1  the Hopper GEMM tests, then the six shapes of the GEMM issue searched
#      with the default strategy (budget 500, confirm top 3) beside cuBLASLt
#   2  winner stability: the shipped gemm five times on 4 GPUs and once on 1
#      (bench/search/stability.sh), the README's first command on one H100
#   3  the Python launch cost (bench/python_launch.py)
#   4  the decode shape M=32 searched again (budget 200) with STAGES 10 and 12
#   5  a 708-config subspace of gemm_hopper (gemm_hopper_subspace.op.toml):
#      exhaustive on the six shapes, then the model-guided search with 70
#      evaluations per shape on the same space, winners side by side
set -u
ROOT=$PWD
A=$ROOT/.art/tunefarm
export TUNEFARM_BINARY=$A/libexec/tunefarm
export LD_LIBRARY_PATH=$A/lib:/usr/local/cuda/lib64
export PYTHONPATH=$ROOT/python
export TUNEFARM_LIB=$A/lib/libtunefarm_c.so TUNEFARM_FARM_LIB=$A/lib/libtunefarm_farm.so
[ -e /work/main ] || { mkdir -p /work && ln -s "$ROOT" /work/main; }
L=$OUT/log.txt
T=$A/bin/tunefarm
W=/tmp/w; mkdir -p $W
[ -f $W/k ] || $T keys sign --out $W/k >/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> $L
P=${PART:-1}
want() { case ",$P," in *",$1,"*) return 0 ;; esac; return 1; }
if want 1; then
echo "=== cuda_backend_test Hopper" >> $L
timeout 150 $A/tests/cuda_backend_test --gtest_filter='*Hopper*' 2>&1 | grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) |Failure|Expected|Which|tests ran" >> $L
SHAPES="--shape M=32,N=4096,K=4096 --shape M=256,N=6144,K=4096 --shape M=1024,N=4096,K=14336 --shape M=2048,N=28672,K=4096 --shape M=4096,N=4096,K=4096 --shape M=16384,N=1024,K=1024"
echo "=== tune gemm_hopper f16, default strategy, budget 500 per shape, confirm top 3 ($(date -u +%T))" >> $L
rm -rf $W/h.db
timeout 380 $T tune --op gemm_hopper --ops-dir $A/share/tunefarm/ops --dtype f16 $SHAPES --budget 500 --confirm-top 3 \
  --store $W/h.db --unsigned --bundle $W/h --quiet > $OUT/hopper_tune.log 2>&1
echo "tune rc=$? ($(date -u +%T))" >> $L
grep -E "^h100|searched:|vs cublaslt|^  \* |^sweep:|^compile:|^failures" $OUT/hopper_tune.log | cut -c1-260 | head -40 >> $L
$T best --store $W/h.db --format csv > $OUT/hopper_best.csv 2>&1
$T results --store $W/h.db --op gemm_hopper --format csv | gzip -9 > $OUT/hopper_results.csv.gz
fi
if want 2; then
echo "=== stability: gemm, 5 runs on all GPUs, 1 on device 0 ($(date -u +%T))" >> $L
OUT=$OUT/stability RUNS=5 ART=$A timeout 420 bash $ROOT/bench/search/stability.sh gemm \
  M=4096,N=4096,K=4096 M=2048,N=2048,K=8192 M=8192,N=1024,K=2048 M=1024,N=1024,K=1024 M=512,N=4096,K=4096 >> $L 2>&1
echo "=== README's first command on one H100 (device 0) ($(date -u +%T))" >> $L
(cd $W && rm -rf readme && mkdir readme && cd readme && timeout 150 $T tune --ops-dir $A/share/tunefarm/ops --dtype f16 --shape M=4096,N=4096,K=4096 --devices 0 --quiet > $OUT/readme.log 2>&1; echo "readme rc=$?" >> $L; $T best --store tunefarm.db --format csv > $OUT/readme_best.csv 2>&1)
grep -E "^tune:|^h100|searched:|vs cublaslt|^  \* |^sweep:|^compile:|^failures|bundle:" $OUT/readme.log | cut -c1-260 | head -20 >> $L
fi
if want 3; then
echo "=== python launch cost (gemm, M=128,N=4096,K=4096)" >> $L
python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)" >> $L 2>&1
timeout 200 $T tune --op gemm --dtype f16 --shape M=128,N=4096,K=4096 --strategy random --budget 30 --store $W/lb.db --bundle $W/lb --sign-key $W/k --quiet > $W/lb.log 2>&1 || tail -5 $W/lb.log >> $L
for i in 1 2; do
timeout 200 python3 $ROOT/bench/python_launch.py $W/lb.tfb $W/k.pub --op gemm --shape 128,4096,4096 --json $OUT/python_launch$i.json >> $L 2>&1
done
fi
if want 4; then
echo "=== decode shape, model search budget 200, confirm top 3 ($(date -u +%T))" >> $L
rm -rf $W/d.db
timeout 200 $T tune --op gemm_hopper --ops-dir $A/share/tunefarm/ops --dtype f16 --shape M=32,N=4096,K=4096 --strategy model --budget 200 --confirm-top 3 \
  --store $W/d.db --unsigned --bundle $W/d --quiet > $OUT/decode_tune.log 2>&1
echo "tune rc=$?" >> $L
grep -E "searched:|vs cublaslt|^  \* " $OUT/decode_tune.log | cut -c1-260 >> $L
$T results --store $W/d.db --op gemm_hopper --format csv | gzip -9 > $OUT/decode_results.csv.gz
fi
if want 5; then
SUB=$W/subops; rm -rf $SUB; mkdir -p $SUB; cp -r $A/share/tunefarm/ops/gemm_hopper $SUB/
cp $ROOT/bench/runs/h100x4-2026-11-27-s21/gemm_hopper_subspace.op.toml $SUB/gemm_hopper/op.toml
SHAPES="--shape M=32,N=4096,K=4096 --shape M=256,N=6144,K=4096 --shape M=1024,N=4096,K=14336 --shape M=2048,N=28672,K=4096 --shape M=4096,N=4096,K=4096 --shape M=16384,N=1024,K=1024"
for how in "exhaustive:--strategy exhaustive" "model:--strategy model --budget 70 --seed 1"; do
name=${how%%:*}; flags=${how#*:}
echo "=== subspace $name ($(date -u +%T))" >> $L
rm -rf $W/sub_$name.db
timeout 420 $T tune --op gemm_hopper --ops-dir $SUB --dtype f16 $SHAPES $flags --store $W/sub_$name.db --unsigned --bundle $W/sub_$name --quiet > $OUT/sub_$name.log 2>&1
echo "tune rc=$? ($(date -u +%T))" >> $L
grep -E "searched:|exhaust|vs cublaslt|^sweep:" $OUT/sub_$name.log | cut -c1-200 >> $L
$T best --store $W/sub_$name.db --format csv > $OUT/sub_${name}_best.csv 2>&1
$T results --store $W/sub_$name.db --format csv | gzip -9 > $OUT/sub_${name}_results.csv.gz
done
fi
