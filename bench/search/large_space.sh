#!/usr/bin/env bash
# A space of 10^4 configs, searched and exhausted on the same shapes: the
# exhaustive sweep (ground_truth.sh) first, then `tune --strategy auto` with
# a budget per key, each into a store of its own; both stores' rows as CSV
# for bench/search.md, which scores each key's searched winner by its
# figure in the exhaustive sweep. Run on a GPU host from the packed farm:
#
#   OUT=/tmp/ls BUDGET=500 bash bench/search/large_space.sh triton_matmul_persistent \
#     M=4096,N=4096,K=4096 M=1024,N=1024,K=16384 M=8192,N=2048,K=1024
set -u
OUT=${OUT:-/tmp/tunefarm-large}
BUDGET=${BUDGET:-500}
OP=$1; shift
. "$(dirname "$0")/packed_farm.sh" "$@"
mkdir -p "$OUT"
OUT="$OUT/exhaustive" timeout "${EXHAUSTIVE_SECONDS:-330}" bash "$(dirname "$0")/ground_truth.sh" "$OP" "$@"
rm -rf "$OUT/exhaustive/store" "$OUT/exhaustive/$OP.results.csv" "$OUT/exhaustive/$OP.tune.csv"
LOG=$OUT/search.log
rm -rf /tmp/tf-large-search /tmp/tf-large-search-b
/usr/bin/time -f "%e s wall" timeout "${SEARCH_SECONDS:-200}" "$TF" tune --ops-dir examples --op "$OP" --dtype f16 \
  "${shapes[@]}" --strategy auto --budget "$BUDGET" --store /tmp/tf-large-search --bundle /tmp/tf-large-search-b \
  --quiet > "$OUT/search.tune.txt" 2> "$LOG"
tail -3 "$LOG"
"$TF" results --store /tmp/tf-large-search --op "$OP" --format csv 2>> "$LOG" | gzip -9 > "$OUT/search.results.csv.gz"
"$TF" best --store /tmp/tf-large-search --op "$OP" --format csv > "$OUT/search.best.csv" 2>> "$LOG"
cut -d, -f4-9 "$OUT/search.best.csv" | tee -a "$LOG"
