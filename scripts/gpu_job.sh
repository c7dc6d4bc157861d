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

step gpu tests
LD_LIBRARY_PATH=$A/lib:/usr/local/cuda/lib64 $A/tests/cuda_backend_test 2>&1 | tail -14 | tee -a "$LOG"
LD_LIBRARY_PATH=$A/lib:/usr/local/cuda/lib64 $A/tests/device_fill_test 2>&1 | tail -8 | tee -a "$LOG"

step baselines
LD_LIBRARY_PATH=$A/lib:/usr/local/cuda/lib64 $A/tests/tunefarm_baselines 2>&1 | tee "$OUT/baselines.txt" | tail -12 | tee -a "$LOG"

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
tune gemm_cold   --op gemm      --dtype f16 --shape M=4096,N=4096,K=4096 --store /tmp/tf-a --cache-dir $CACHE --bundle /tmp/tf-a-b
tune gemm_warm   --op gemm      --dtype f16 --shape M=4096,N=4096,K=4096 --store /tmp/tf-b --cache-dir $CACHE --bundle /tmp/tf-b-b
tune sm90_cold   --op gemm_sm90 --dtype f16 --shape M=4096,N=4096,K=4096 --store /tmp/tf-c --cache-dir $CACHE --bundle /tmp/tf-c-b
tune sm90_warm   --op gemm_sm90 --dtype f16 --shape M=4096,N=4096,K=4096 --store /tmp/tf-d --cache-dir $CACHE --bundle /tmp/tf-d-b
# Best against cuBLAS at three sizes, three times for stability, with
# contenders timed again in 0.2 s steady-state windows.
# Run 1 traces the runner's phases (problem set-up included) to its own file.
for run in 1 2 3; do
  [ $run = 1 ] && export TUNEFARM_RUNNER_TRACE=1 || unset TUNEFARM_RUNNER_TRACE
  tune sizes_$run --op gemm_sm90 --dtype f16 --shape M=1024,N=1024,K=1024 --shape M=4096,N=4096,K=4096 \
       --shape M=8192,N=8192,K=8192 --refine-seconds 0.2 --store /tmp/tf-s$run --cache-dir $CACHE --bundle /tmp/tf-s$run-b
  "$TF" best --store /tmp/tf-s$run > "$OUT/best_sizes_$run.txt" 2>&1
  "$TF" results --store /tmp/tf-s$run --format csv > "$RAW/results_sizes_$run.csv" 2>&1
  # Every run starts from an idle GPU, as a nightly sweep does.
  [ $run != 3 ] && sleep 30
done
tune memory --op rmsnorm --dtype f16 --shape ROWS=16384,N=8192 --store /tmp/tf-m --cache-dir $CACHE --bundle /tmp/tf-m-b
"$TF" best --store /tmp/tf-m > "$OUT/best_memory.txt" 2>&1

step summary
{
  echo "winners (run 1):"; cat "$OUT/best_sizes_1.txt"
  echo "winners (run 2):"; cat "$OUT/best_sizes_2.txt"
  echo "winners (run 3):"; cat "$OUT/best_sizes_3.txt"
  echo "memory-bound:"; cat "$OUT/best_memory.txt"
  echo "problem set-up per shape (runner trace, run 1):"
  grep "(built)" "$RAW/sizes_1.txt" | sed -E 's/.*(M=[0-9]+,N=[0-9]+,K=[0-9]+).*problem ([0-9.]+) \(built\).*/  \1: \2 ms/'
  for pair in "1 2" "1 3" "2 3"; do
    set -- $pair
    echo "rerun stability (winner medians, run $1 vs run $2):"
    paste <(awk '/^[^ ]/{s=$3} /^  \*/{print s, $2, $3}' "$OUT/best_sizes_$1.txt") \
          <(awk '/^[^ ]/{s=$3} /^  \*/{print $2, $3}' "$OUT/best_sizes_$2.txt") |
      awk '{d=($5-$3)/$3*100; if (d<0) d=-d; printf "  %s: %s %.2f us | %s %.2f us | %.2f%%%s\n", $1, $2, $3, $4, $5, d, ($2==$4?" same config":"")}'
  done
  echo "winners' clocks (MHz) and throttle flags:"
  for run in 1 2 3; do
    python3 -c 'import csv,sys
for r in csv.DictReader(open(sys.argv[1])):
    if r["winner"] == "1": print("  run", sys.argv[2] + ":", r["shape"], r["sm_clock_mhz"], "MHz, throttled", r["throttled"])' \
      "$RAW/results_sizes_$run.csv" $run
  done
} | tee -a "$LOG"
tar czf "$OUT/raw.tgz" -C "$RAW" .
