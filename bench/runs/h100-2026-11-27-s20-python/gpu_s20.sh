#!/usr/bin/env bash
# Session 20 GPU run: the Hopper tests left from the last session, the Python
# launch cost beside torch, torch.compile and CUDA graphs, the harness's
# stream hold on small Triton kernels, tunefarm.autotune on a Triton kernel,
# and the C++ runner's precision on a small GEMM.
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
W=/tmp/w; rm -rf $W; mkdir -p $W
$T keys sign --out $W/k >/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> $L
python3 -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)" >> $L 2>&1
P=${PART:-1,2,3,4,5}
want() { case ",$P," in *",$1,"*) return 0 ;; esac; return 1; }
if want 1; then
echo "=== cuda_backend_test Hopper and baselines; launcher_test" >> $L
timeout 300 $A/tests/cuda_backend_test --gtest_filter='*Hopper*:*Baseline*' 2>&1 | grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) |Failure|Expected|Which|tests ran" >> $L
timeout 120 $A/tests/launcher_test 2>&1 | grep -E "^\[ *(OK|FAILED|PASSED|SKIPPED) |Failure|Expected|tests ran" >> $L
fi
if want 2; then
echo "=== python launch cost (gemm, M=128,N=4096,K=4096)" >> $L
timeout 200 $T tune --op gemm --dtype f16 --shape M=128,N=4096,K=4096 --strategy random --budget 30 --store $W/lb.db --bundle $W/lb --sign-key $W/k --quiet > $W/lb.log 2>&1 || tail -5 $W/lb.log >> $L
timeout 200 python3 $ROOT/bench/python_launch.py $W/lb.tfb $W/k.pub --op gemm --shape 128,4096,4096 --json $OUT/python_launch.json >> $L 2>&1
fi
if want 3; then
echo "=== harness precision, held vs unheld (triton_matmul, M=128,N=4096,K=4096)" >> $L
timeout 300 python3 $ROOT/bench/harness_precision.py --module $ROOT/examples/triton_matmul/matmul.py --configs 30 --json $OUT/harness_precision.json > $OUT/harness_precision.txt 2>&1
tail -24 $OUT/harness_precision.txt >> $L
fi
if want 4; then
echo "=== autotune decorator on a Triton matmul: first process tunes, a second reuses" >> $L
export TUNEFARM_AUTOTUNE_STORE=$W/autotune.db AUTOTUNE_BUDGET=60
timeout 300 python3 $ROOT/examples/python/autotune_triton.py --shape 512,4096,4096 --json $OUT/autotune_first.json >> $L 2>&1
timeout 120 python3 $ROOT/examples/python/autotune_triton.py --shape 512,4096,4096 --json $OUT/autotune_second.json >> $L 2>&1
$T results --store $W/autotune.db --op matmul --format json > $OUT/autotune_rows.json 2>>$L
python3 -c "import json; r=json.load(open('$OUT/autotune_rows.json')); print('autotune store rows:', len(r), 'winner', [x['config'] for x in r if x['winner']])" >> $L
fi
if want 5; then
echo "=== small-kernel sweeps: triton_matmul M=128 twice (winner stability), gemm M=128 (C++ runner)" >> $L
for run in 1 2; do
timeout 300 $T tune --ops-dir $ROOT/examples --op triton_matmul --dtype f16 --shape M=128,N=4096,K=4096 --strategy random --budget 60 --seed 5 --store $W/tm$run.db --unsigned --bundle $W/tm$run --quiet > $W/tm$run.log 2>&1
$T results --store $W/tm$run.db --format json > $OUT/triton_m128_run$run.json
done
timeout 200 $T tune --op gemm --dtype f16 --shape M=128,N=4096,K=4096 --strategy random --budget 60 --seed 5 --store $W/g128.db --unsigned --bundle $W/g128 --quiet > $W/g128.log 2>&1
$T results --store $W/g128.db --format json > $OUT/gemm_m128.json
python3 - $OUT >> $L <<'PY'
import json, statistics, sys
out = sys.argv[1]
def stats(name):
    rows = [r for r in json.load(open("%s/%s" % (out, name))) if r["status"].startswith("ok") and r["median_us"] > 0]
    cis = sorted(r["ci95_us"] / r["median_us"] for r in rows)
    refined = sorted(r["ci95_us"] / r["median_us"] for r in rows if r["refined"] or r["confirmed"])
    win = [r for r in rows if r["winner"]]
    print("%-22s rows %3d  median rel CI %.2f%%  p90 %.2f%%  refined/confirmed rows %d median %.2f%%  winner %s %.2f us" % (
        name, len(rows), 100 * statistics.median(cis), 100 * cis[int(0.9 * (len(cis) - 1))], len(refined),
        100 * statistics.median(refined) if refined else float("nan"), win[0]["config"] if win else None,
        win[0]["median_us"] if win else float("nan")))
    return {r["config"]: r["median_us"] for r in rows}, win[0] if win else None
a, wa = stats("triton_m128_run1.json")
b, wb = stats("triton_m128_run2.json")
stats("gemm_m128.json")
if wa and wb:
    print("winners: run1 %s, run2 %s; run1's winner in run2 %.2f us vs run2's %.2f us (%.2f%%)" % (
        wa["config"], wb["config"], b.get(wa["config"], float("nan")), wb["median_us"],
        100 * (b.get(wa["config"], float("nan")) / wb["median_us"] - 1)))
PY
fi
if want 6; then
echo "=== a searched Hopper GEMM key (model strategy, proposals off the coordinator's loop)" >> $L
/usr/bin/time -f "wall %e s" timeout 400 $T tune --op gemm_hopper --dtype f16 --shape M=32,N=4096,K=4096 --strategy model --budget 150 --seed 3 --store $W/gh.db --unsigned --bundle $W/gh --quiet > $W/gh.log 2>&1
grep -E "wall|sweep:|failures:|vs cublas|\*" $W/gh.log | head -8 >> $L
$T best --store $W/gh.db --format json > $OUT/gemm_hopper_m32_best.json
fi
echo "=== done" >> $L
