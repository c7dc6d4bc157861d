#!/usr/bin/env bash
# Session 23 GPU runs (from a packed farm: scripts/pack.sh build .art/tunefarm --tests).
# PART picks:
#   1  where a Python launch's host time goes (parts.py), unpinned and pinned
#      to one core, REPS times each; the C++ bare launch at 64^3 and 2048^3
#   4  the C++ bare launch alone (as in 1)
#   5  pin_scan.py: the launch figures with the process pinned to each CPU in turn
#   6  python_launch.py pinned to the quietest CPU, then unpinned, REPS times
#   7  the launcher's GPU tests (launcher_test)
#   3  torchless.py: the floor of a Python launch without torch, then with it
#   2  tests/python/test_tunefarm.py where torch is installed, then
#      bench/python_launch.py, REPS times
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
D=$ROOT/bench/runs/h100-2026-11-27-s23
[ -f $W/k ] || $T keys sign --out $W/k >/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> $L
lscpu | grep -E "Model name|^CPU\(s\)|MHz|NUMA node" >> $L
P=${PART:-1}
want() { case ",$P," in *",$1,"*) return 0 ;; esac; return 1; }
[ -f $W/lb.tfb ] || timeout 200 $T tune --op gemm --dtype f16 --shape M=128,N=4096,K=4096 --devices 0 --strategy random --budget 30 --store $W/lb.db --bundle $W/lb --sign-key $W/k --quiet > $W/lb.log 2>&1 || tail -5 $W/lb.log >> $L
if want 1 || want 4; then
for n in 64 2048; do
echo "=== bench_launch_overhead --shape $n" >> $L
timeout 100 $A/tests/bench_launch_overhead --ops-dir $A/share/tunefarm/ops --shape $n --calls 10000 >> $L 2>&1
done
fi
if want 1; then
for i in $(seq ${REPS:-2}); do
echo "=== parts.py unpinned ($i)" >> $L
timeout 200 python3 $D/parts.py $W/lb.tfb $W/k.pub >> $L 2>&1
echo "=== parts.py pinned to cpu 2 ($i)" >> $L
timeout 200 taskset -c 2 python3 $D/parts.py $W/lb.tfb $W/k.pub >> $L 2>&1
done
fi
if want 3; then
for i in $(seq ${REPS:-2}); do
echo "=== torchless.py ($i)" >> $L
timeout 200 python3 $D/torchless.py $W/lb.tfb $W/k.pub >> $L 2>&1
done
fi
if want 7; then
echo "=== launcher_test" >> $L
timeout 120 $A/tests/launcher_test 2>&1 | grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) |Failure|Expected|Which|tests ran" >> $L
fi
if want 5; then
echo "=== pin_scan.py: the process pinned to each CPU in turn (64^3, us per call)" >> $L
nvidia-smi topo -m >> $L 2>&1
for cpu in $(seq 0 $(( $(nproc) - 1 ))); do
timeout 60 taskset -c $cpu python3 $D/pin_scan.py $W/lb.tfb $W/k.pub >> $L 2>&1
done
echo "--- unpinned, twice" >> $L
timeout 60 python3 $D/pin_scan.py $W/lb.tfb $W/k.pub >> $L 2>&1
timeout 60 python3 $D/pin_scan.py $W/lb.tfb $W/k.pub >> $L 2>&1
fi
if want 2; then
echo "=== test_tunefarm.py (python $(python3 -V 2>&1), torch importable)" >> $L
timeout 120 python3 $ROOT/tests/python/test_tunefarm.py 2>&1 | tail -3 >> $L
for i in $(seq ${REPS:-2}); do
echo "=== python_launch.py ($i)" >> $L
timeout 200 python3 $ROOT/bench/python_launch.py $W/lb.tfb $W/k.pub --op gemm --shape 128,4096,4096 --json $OUT/python_launch$i.json >> $L 2>&1
done
fi
if want 6; then
for i in $(seq ${REPS:-2}); do
echo "=== python_launch.py --pin quietest ($i)" >> $L
timeout 200 python3 $ROOT/bench/python_launch.py $W/lb.tfb $W/k.pub --op gemm --shape 128,4096,4096 --pin quietest --json $OUT/python_launch_pinned$i.json >> $L 2>&1
echo "=== python_launch.py ($i)" >> $L
timeout 200 python3 $ROOT/bench/python_launch.py $W/lb.tfb $W/k.pub --op gemm --shape 128,4096,4096 --json $OUT/python_launch$i.json >> $L 2>&1
done
fi
