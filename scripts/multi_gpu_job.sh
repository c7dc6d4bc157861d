#!/usr/bin/env bash
# Sweep speed-up with the number of GPUs on one host: one worker, one runner
# process per GPU, the gemm space over three or four shapes and one or two
# dtypes. Cold first (fills the
# cubin cache), then warm on GPU 0 alone and warm on every GPU.
set -u
A=${ART:-.art/tunefarm}
TF=$A/bin/tunefarm
OUT=${OUT:-/tmp/tunefarm-multi-gpu}
mkdir -p "$OUT"
LOG=$OUT/multi_gpu.log
: > "$LOG"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,temperature.gpu --format=csv | tee -a "$LOG"
N=$(nvidia-smi -L | wc -l)
ALL=$(seq -s, 0 $((N - 1)))
SHAPES3="M=1024,N=1024,K=1024 M=4096,N=4096,K=4096 M=8192,N=8192,K=8192"
run() {  # name devices [dtypes] [shapes]
  echo "=== $1: devices $2, dtypes ${3:-f16}, shapes ${4:-$SHAPES3} ($(date +%T))" | tee -a "$LOG"
  "$TF" tune --ops-dir "$A/share/tunefarm/ops" --quiet --op gemm --dtype ${3:-f16} --shape ${4:-$SHAPES3} \
    --configs-per-unit 4 --devices "$2" --cache-dir /tmp/tf-cubins \
    --store "/tmp/tf-$1" --bundle "/tmp/tf-$1-bundle" > "$OUT/$1.txt" 2>&1
  grep -E "^(sweep|compile|busy):|tunefarm:" "$OUT/$1.txt" | tee -a "$LOG"
  echo "failed checks: $(grep -cE " (wrong_result|nan|crash|timeout):" "$OUT/$1.txt")" | tee -a "$LOG"
  # Runner trace: time spent building problems (inputs + reference), all devices.
  sed -nE 's/.*problem ([0-9.]+) \(built\).*/\1/p' "$OUT/$1.txt" |
    awk '{s += $1; n++} END { printf "problem set-up: %d built, %.2f s in all\n", n, s / 1000 }' | tee -a "$LOG"
}
export TUNEFARM_RUNNER_TRACE=1
rm -rf /tmp/tf-*
run cold_all "$ALL" "f16 bf16"
# REPEAT=n runs every pair n times (r1, r2, ...).
SHAPES4="M=1024,N=1024,K=1024 M=2048,N=2048,K=2048 M=4096,N=4096,K=4096 M=8192,N=8192,K=8192"
pairs=()
for r in $(seq 1 ${REPEAT:-1}); do
  run warm_1gpu_r$r 0
  run warm_all_r$r "$ALL"
  # Twice the work (both dtypes): what a nightly sweep of the op runs.
  run warm_1gpu_2dt_r$r 0 "f16 bf16"
  run warm_all_2dt_r$r "$ALL" "f16 bf16"
  # A nightly-sized sweep: both dtypes, four square sizes.
  run warm_1gpu_nightly_r$r 0 "f16 bf16" "$SHAPES4"
  run warm_all_nightly_r$r "$ALL" "f16 bf16" "$SHAPES4"
  pairs+=("warm_1gpu_r$r warm_all_r$r" "warm_1gpu_2dt_r$r warm_all_2dt_r$r" "warm_1gpu_nightly_r$r warm_all_nightly_r$r")
done
echo "speed-up (warm, wall of 1 GPU / wall of all):" | tee -a "$LOG"
for p in "${pairs[@]}"; do
  set -- $p
  a=$(sed -nE 's/^sweep: .* in ([0-9.]+) s .*/\1/p' "$OUT/$1.txt"); b=$(sed -nE 's/^sweep: .* in ([0-9.]+) s .*/\1/p' "$OUT/$2.txt")
  awk -v a="$a" -v b="$b" -v n="$1 / $2" 'BEGIN { printf "  %s: %.2f s / %.2f s = %.2fx\n", n, a, b, a / b }' | tee -a "$LOG"
done
# The coordinator at scale on this host's CPUs (simulated workers, no GPU).
# SCALE_ARGS: the runs' arguments, separated by ';'. Units of 3 s offer about
# 68k rows/s from 1,000 workers, units of 6 s about 34k.
IFS=';' read -ra scale_runs <<< "${SCALE_ARGS:---workers 1000;--workers 1000 --sweeps 4 --unit-seconds 3}"
[ -n "${SKIP_SCALE:-}" ] || for args in "${scale_runs[@]}"; do
  echo "=== bench_scale $args ($(nproc) cores, $(date +%T))" | tee -a "$LOG"
  timeout 150 "$A/bin/bench_scale" --op-dir "$A/share/tunefarm/bench/ops/synthetic" --keep $args 2>&1 |
    tail -25 >> "$LOG"
done
# The coordinators' own output (errors at exit would show here).
for d in $(ls -d /tmp/tunefarm-scale-* 2>/dev/null); do echo "--- $d/coordinator.log"; tail -5 "$d/coordinator.log"; done >> "$LOG"
# Each run's full output in one archive (the job may bring back few files).
tar czf "$OUT/runs.tgz" -C "$OUT" $(cd "$OUT" && ls *.txt) && rm -f "$OUT"/*.txt
