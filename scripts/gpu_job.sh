#!/usr/bin/env bash
# The GPU machine's whole job in one run, from the packed farm
# (scripts/pack.sh build .art/tunefarm --tests): GPU tests, baselines, sweep
# throughput cold and warm, best configs against cuBLAS and copy bandwidth,
# and a repeat for stability. Writes logs under $OUT and a summary last.
set -u
A=${ART:-.art/tunefarm}
TF=$A/bin/tunefarm
OPS=$A/share/tunefarm/ops
OUT=${OUT:-/tmp/tunefarm-gpu-job}
mkdir -p "$OUT"
export TUNEFARM_BINARY=$A/libexec/tunefarm
# Test data paths are compiled in as the build tree's; point that path here.
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
LOG=$OUT/job.log
RAW=/tmp/tunefarm-gpu-job-raw   # every run's full output, packed into $OUT/raw.tgz at the end
rm -rf "$RAW"; mkdir -p "$RAW"
: > "$LOG"
step() { echo "=== $* ($(date +%T))" | tee -a "$LOG"; }

step device
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee -a "$LOG"

# SKIP=tests,baselines,throughput,sm90 leaves those steps out.
skip() { case ",${SKIP:-}," in *",$1,"*) return 0 ;; esac; return 1; }

skip tests || {
  step gpu tests
  LD_LIBRARY_PATH=$A/lib:/usr/local/cuda/lib64 $A/tests/cuda_backend_test 2>&1 | tail -14 | tee -a "$LOG"
  LD_LIBRARY_PATH=$A/lib:/usr/local/cuda/lib64 $A/tests/device_fill_test 2>&1 | tail -8 | tee -a "$LOG"
}
skip baselines || {
  step baselines
  LD_LIBRARY_PATH=$A/lib:/usr/local/cuda/lib64 $A/tests/tunefarm_baselines 2>&1 | tee "$OUT/baselines.txt" | tail -12 | tee -a "$LOG"
}

tune() {  # name, args...
  local name=$1; shift
  step "tune $name: $*"
  nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader | sed 's/^/gpu before: /' | tee -a "$LOG"
  /usr/bin/time -f "%e s wall" "$TF" tune --ops-dir "$OPS" --quiet "$@" > "$RAW/$name.txt" 2>&1
  grep -E "^(sweep|compile|busy):|s wall|tunefarm:" "$RAW/$name.txt" | tee -a "$LOG"
}
CACHE=/tmp/tunefarm-cubins
rm -rf "$CACHE" /tmp/tf-*
# Throughput: each op's whole space at 4096^3 fp16, cold then warm cubin cache.
skip throughput || {
  tune gemm_cold   --op gemm      --dtype f16 --shape M=4096,N=4096,K=4096 --store /tmp/tf-a --cache-dir $CACHE --bundle /tmp/tf-a-b
  tune gemm_warm   --op gemm      --dtype f16 --shape M=4096,N=4096,K=4096 --store /tmp/tf-b --cache-dir $CACHE --bundle /tmp/tf-b-b
}
skip throughput || skip sm90 || {
  tune sm90_cold   --op gemm_sm90 --dtype f16 --shape M=4096,N=4096,K=4096 --store /tmp/tf-c --cache-dir $CACHE --bundle /tmp/tf-c-b
  tune sm90_warm   --op gemm_sm90 --dtype f16 --shape M=4096,N=4096,K=4096 --store /tmp/tf-d --cache-dir $CACHE --bundle /tmp/tf-d-b
}
# Best against cuBLAS at three sizes, STABILITY_RUNS times (3) for stability. Each
# variant is a set of timing flags; STABILITY names them, space-separated
# label=flags with commas for spaces. Run 1 of the first traces the
# runner's phases (problem set-up included).
STABILITY=${STABILITY:-auto=--refine-seconds,0.2,--confirm-top,8,--confirm-seconds,12,--confirm-timing,auto}
variants=()
RUNS=$(seq 1 ${STABILITY_RUNS:-3})
# Every timing's window median, clock and wall time (runner trace), and the
# device's temperature, power and clock every 250 ms: what moves a figure
# from run to run.
export TUNEFARM_RUNNER_TRACE=1
nvidia-smi --query-gpu=timestamp,temperature.gpu,power.draw,clocks.sm --format=csv,noheader -lms 250 \
  > "$RAW/gpu_trace.csv" 2>&1 &
SMI_TRACE=$!
for v in $STABILITY; do
  label=${v%%=*}; flags=${v#*=}; flags=${flags//,/ }
  variants+=("$label")
  for run in $RUNS; do
    # Every run starts from an idle GPU, as a nightly sweep does: a warm
    # GPU times the same kernel a percent or two slower.
    sleep ${STABILITY_IDLE:-30}
    tune ${label}_$run --op gemm_sm90 --dtype f16 --shape M=1024,N=1024,K=1024 --shape M=4096,N=4096,K=4096 \
         --shape M=8192,N=8192,K=8192 $flags --store /tmp/tf-$label-$run --cache-dir $CACHE --bundle /tmp/tf-$label-$run-b
    "$TF" best --store /tmp/tf-$label-$run > "$RAW/best_${label}_$run.txt" 2>&1
    "$TF" results --store /tmp/tf-$label-$run --format csv > "$RAW/results_${label}_$run.csv" 2>&1
  done
done
unset TUNEFARM_RUNNER_TRACE
kill $SMI_TRACE 2>/dev/null || true
tune memory --op rmsnorm --dtype f16 --shape ROWS=16384,N=8192 --store /tmp/tf-m --cache-dir $CACHE --bundle /tmp/tf-m-b
"$TF" best --store /tmp/tf-m > "$OUT/best_memory.txt" 2>&1

step summary
{
  echo "memory-bound:"; cat "$OUT/best_memory.txt"
  echo "problem set-up per shape (runner trace, run 1):"
  grep "(built)" "$RAW/${variants[0]}_1.txt" | sed -E 's/.*(M=[0-9]+,N=[0-9]+,K=[0-9]+).*problem ([0-9.]+) \(built\).*/  \1: \2 ms/'
  for label in "${variants[@]}"; do
    for run in $RUNS; do echo "winners ($label, run $run):"; cat "$RAW/best_${label}_$run.txt"; done
    for pair in $(for i in $RUNS; do for j in $RUNS; do [ $i -lt $j ] && echo $i,$j; done; done); do
      set -- ${pair/,/ }
      echo "rerun stability ($label, winner medians, run $1 vs run $2):"
      paste <(awk '/^[^ ]/{s=$3} /^  \*/{print s, $2, $3}' "$RAW/best_${label}_$1.txt") \
            <(awk '/^[^ ]/{s=$3} /^  \*/{print $2, $3}' "$RAW/best_${label}_$2.txt") |
        awk '{d=($5-$3)/$3*100; if (d<0) d=-d; printf "  %s: %s %.2f us | %s %.2f us | %.2f%%%s\n", $1, $2, $3, $4, $5, d, ($2==$4?" same config":"")}'
    done
    echo "winners' clocks (MHz), throttle flags and samples ($label):"
    for run in $RUNS; do
      python3 -c 'import csv,sys
for r in csv.DictReader(open(sys.argv[1])):
    if r["winner"] == "1": print("  run", sys.argv[2] + ":", r["shape"], r["sm_clock_mhz"], "MHz, throttled", r["throttled"], "samples", r["samples"], "confirmed", r.get("confirmed", "-"))' \
        "$RAW/results_${label}_$run.csv" $run
    done
  done
} | tee -a "$LOG"
tar czf "$OUT/raw.tgz" -C "$RAW" .
