#!/usr/bin/env bash
# Exhaustive sweeps that make the search's ground truth: every legal config
# of an op on three shapes, on this host's GPUs, into one store, exported as
# CSV for `tunefarm search replay` (tests/data/search/). Run on a GPU host
# from the packed farm (scripts/pack.sh build .art/tunefarm):
#
#   OUT=/tmp/gt bash bench/search/ground_truth.sh triton_matmul \
#     M=4096,N=4096,K=4096 M=1024,N=1024,K=16384 M=8192,N=2048,K=1024
#
# OPS_DIR names the folder of op folders (default examples; the shipped ops
# are under $ART/share/tunefarm/ops); TUNE_ARGS adds `tune` options.
set -u
OUT=${OUT:-/tmp/tunefarm-gt}
OP=$1; shift
. "$(dirname "$0")/packed_farm.sh" "$@"
mkdir -p "$OUT"
LOG=$OUT/$OP.log
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; } > "$LOG" 2>&1
/usr/bin/time -f "%e s wall" "$TF" tune --ops-dir "${OPS_DIR:-examples}" --op "$OP" --dtype f16 "${shapes[@]}" \
  --strategy exhaustive ${TUNE_ARGS:-} --store "$OUT/store" --bundle "$OUT/$OP" --quiet --format csv > "$OUT/$OP.tune.csv" 2>> "$LOG"
tail -5 "$LOG"
"$TF" results --store "$OUT/store" --op "$OP" --format csv > "$OUT/$OP.results.csv" 2>> "$LOG"
gzip -9 -k "$OUT/$OP.results.csv"
wc -l "$OUT/$OP.results.csv" | tee -a "$LOG"
"$TF" best --store "$OUT/store" --op "$OP" 2>&1 | tail -8 | tee -a "$LOG"
