#!/usr/bin/env bash
# Do winners hold from run to run? The same sweep RUNS times on every GPU of
# this host and once on device 0 alone, each into a store of its own; each
# run's published winners (`best`, the tie rule) go to $OUT/best.<run>.csv
# and every row to $OUT/results.<run>.csv.gz, for bench/search.md. Run on a
# GPU host from the packed farm (scripts/pack.sh build .art/tunefarm):
#
#   OUT=/tmp/st RUNS=5 bash bench/search/stability.sh gemm \
#     M=4096,N=4096,K=4096 M=2048,N=2048,K=8192 M=8192,N=1024,K=2048 M=1024,N=1024,K=1024
set -u
OUT=${OUT:-/tmp/tunefarm-stability}
RUNS=${RUNS:-5}
OP=$1; shift
. "$(dirname "$0")/packed_farm.sh" "$@"
mkdir -p "$OUT"
LOG=$OUT/stability.log
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$LOG" 2>&1
ndev=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
all=$(seq -s, 0 $((ndev - 1)))
run() {  # name devices
  local db=/tmp/tf-stability-$1
  rm -rf "$db" "$db-b"
  echo "== run $1 on devices $2 ($(date +%T))" >> "$LOG"
  /usr/bin/time -f "%e s wall" "$TF" tune --ops-dir "$A/share/tunefarm/ops" --op "$OP" --dtype f16 \
    "${shapes[@]}" --devices "$2" --confirm-top 4 --confirm-seconds 1 --store "$db" --bundle "$db-b" \
    --quiet --format csv > /dev/null 2>> "$LOG"
  "$TF" best --store "$db" --format csv > "$OUT/best.$1.csv" 2>> "$LOG"
  "$TF" results --store "$db" --format csv 2>> "$LOG" | gzip -9 > "$OUT/results.$1.csv.gz"
}
for i in $(seq 1 "$RUNS"); do run "all$i" "$all"; done
run one 0
# The winners side by side: shape, then each run's winning config id and figure.
python3 - "$OUT" "$RUNS" <<'PY' | tee -a "$LOG"
import csv, sys
out, runs = sys.argv[1], int(sys.argv[2])
names = [f"all{i}" for i in range(1, runs + 1)] + ["one"]
win = {}
for n in names:
    for r in csv.DictReader(open(f"{out}/best.{n}.csv")):
        win.setdefault(r["shape"], {})[n] = (r["config_id"][:8], float(r["median_us"]))
for shape, w in win.items():
    ids = {v[0] for v in w.values()}
    print(shape, "same" if len(ids) == 1 else f"{len(ids)} winners",
          " ".join(f"{n}={w[n][0]}:{w[n][1]:.1f}" for n in names if n in w))
PY
