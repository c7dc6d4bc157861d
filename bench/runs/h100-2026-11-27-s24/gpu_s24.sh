#!/usr/bin/env bash
# Session 24 GPU runs (from a packed farm: scripts/pack.sh build .art/tunefarm --tests).
# PART picks:
#   4  bench_launch_overhead at 64^3 and 2048^3 (the launcher replaying graphs, kernels only, bare calls)
#   7  the launcher's GPU tests (launcher_test)
#   8  graph_floor.py: a buffer-bound launch beside cuGraphLaunch called from Python, REPS times
#   2  tests/python/test_tunefarm.py where torch is installed, then bench/python_launch.py, REPS times
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
D=$ROOT/bench/runs/h100-2026-11-27-s24
[ -f $W/k ] || $T keys sign --out $W/k >/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> $L
P=${PART:-4,7,2}
want() { case ",$P," in *",$1,"*) return 0 ;; esac; return 1; }
[ -f $W/lb.tfb ] || timeout 200 $T tune --op gemm --dtype f16 --shape M=128,N=4096,K=4096 --devices 0 --strategy random --budget 30 --store $W/lb.db --bundle $W/lb --sign-key $W/k --quiet > $W/lb.log 2>&1 || tail -5 $W/lb.log >> $L
if want 4; then
for n in 64 2048; do
echo "=== bench_launch_overhead --shape $n" >> $L
timeout 100 $A/tests/bench_launch_overhead --ops-dir $A/share/tunefarm/ops --shape $n --calls 10000 >> $L 2>&1
done
fi
if want 7; then
echo "=== launcher_test" >> $L
timeout 120 $A/tests/launcher_test 2>&1 | grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) |Failure|Expected|Which|tests ran|error" >> $L
fi
if want 8; then
for i in $(seq ${REPS:-2}); do
echo "=== graph_floor.py ($i)" >> $L
timeout 120 python3 $D/graph_floor.py $W/lb.tfb $W/k.pub >> $L 2>&1
done
fi
if want 2; then
echo "=== test_tunefarm.py (python $(python3 -V 2>&1), torch importable)" >> $L
timeout 120 python3 $ROOT/tests/python/test_tunefarm.py 2>&1 | tail -3 >> $L
for i in $(seq ${REPS:-2}); do
echo "=== python_launch.py ($i)" >> $L
timeout 200 python3 $ROOT/bench/python_launch.py $W/lb.tfb $W/k.pub --op gemm --shape 128,4096,4096 --json $OUT/python_launch$i.json >> $L 2>&1
done
fi
