#!/usr/bin/env bash
# The Triton matmul of examples/triton_matmul tuned two ways on this host's
# GPU, each from a cold Triton cache: through the farm (tunefarm tune: the
# harness, its compile pool, the farm's timing) and by @triton.autotune over
# exactly the configs the farm measured. Prints the wall times, their ratio,
# both winners and how the two winners compare when timed together.
#
#   bench/triton_autotune.sh ARTIFACT OUT_DIR [M,N,K] [DTYPE]
#
# ARTIFACT is a packed tunefarm (scripts/pack.sh); run from the repository
# root (bench/triton_autotune.py imports examples/ and python/ from it).
set -euo pipefail
A=$(cd "$1" && pwd)
OUT=$2
SHAPE=${3:-4096,4096,4096}
DTYPE=${4:-f16}
IFS=, read -r M N K <<<"$SHAPE"
mkdir -p "$OUT"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
now() { date +%s.%N; }

# The operating system's file cache warmed for both sides alike (torch and
# Triton are gigabytes of files): "cold" means Triton's compile cache, and
# without this the side that runs first pays for reading them from disk:
# what the imports touch, and all of Triton's own files (its first compile
# hashes the whole compiler library and runs its bundled ptxas).
TRITON_CACHE_DIR=$W/triton-warm python3 -c "import torch, triton" >/dev/null 2>&1 || true
triton_dir=$(python3 -c "import os, triton; print(os.path.dirname(triton.__file__))" 2>/dev/null || true)
[ -n "$triton_dir" ] && find "$triton_dir" -type f -exec cat {} + >/dev/null 2>&1 || true

export TRITON_CACHE_DIR=$W/triton-farm
t0=$(now)
"$A/bin/tunefarm" tune --ops-dir "$A/share/tunefarm/examples" --op triton_matmul --dtype "$DTYPE" \
  --shape "M=$M,N=$N,K=$K" --store "$W/db" --cache-dir "$W/cache" --bundle "$W/bundle" --backend cuda \
  --unsigned >"$OUT/farm_tune.txt" 2>&1
t1=$(now)
"$A/bin/tunefarm" results --store "$W/db" --format json >"$OUT/farm_results.json"
farm_winner=$(python3 -c '
import json, sys
rows = json.load(open(sys.argv[1]))
w = [r for r in rows if r.get("winner")][0]
print(json.dumps({k: int(v) for k, v in (kv.split("=") for kv in w["config"].split(","))}))' "$OUT/farm_results.json")

export TRITON_CACHE_DIR=$W/triton-auto
t2=$(now)
python3 bench/triton_autotune.py autotune --results "$OUT/farm_results.json" --shape "$SHAPE" --dtype "$DTYPE" \
  >"$OUT/autotune.json"
t3=$(now)
auto_winner=$(python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["chosen"]))' "$OUT/autotune.json")
python3 bench/triton_autotune.py compare --a "$farm_winner" --b "$auto_winner" --shape "$SHAPE" --dtype "$DTYPE" \
  >"$OUT/compare.json"

python3 - "$t0" "$t1" "$t2" "$t3" "$OUT" "$farm_winner" "$auto_winner" <<'PY' | tee "$OUT/summary.json"
import json, sys
t0, t1, t2, t3 = map(float, sys.argv[1:5])
out = sys.argv[5]
rows = json.load(open(out + "/farm_results.json"))
auto = json.load(open(out + "/autotune.json"))
cmp = json.load(open(out + "/compare.json"))
valid = [r for r in rows if r.get("check_passed")]
print(json.dumps({
    "configs": auto["configs"], "farm_rows": len(rows), "farm_valid": len(valid),
    "farm_started_unix": round(t0, 3), "farm_wall_s": round(t1 - t0, 2), "autotune_wall_s": round(t3 - t2, 2),
    "autotune_first_call_s": auto["first_call_s"], "speedup": round((t3 - t2) / (t1 - t0), 2),
    "farm_winner": json.loads(sys.argv[6]), "autotune_winner": json.loads(sys.argv[7]),
    "winners_timed_together_us": {"farm": cmp["a_us"], "autotune": cmp["b_us"]},
    "same_winner": cmp["same_config"], "autotune_winner_over_farm_winner": cmp["b_over_a"],
    "triton": auto["triton"]}, indent=1))
PY
