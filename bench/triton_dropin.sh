#!/usr/bin/env bash
# The one-import change on two Triton tutorial kernels (examples/python:
# fused softmax, layer norm), on this host's GPU, each in four processes:
#   1. first: every width tuned on a local farm (`tunefarm.triton.autotune`),
#      checked against torch, then its winner and `@triton.autotune`'s over
#      the same configs timed by triton.testing.do_bench in that process;
#   2. second: a new process answered from the store (the seconds its first
#      call took, and the whole process's);
#   3. lookup: TUNEFARM_AUTOTUNE=lookup, the same answers, no farm started;
#   4. export: `tunefarm export` writes the per-device JSON, and
#      bench/triton_dropin_loader.py (json.load, no tunefarm) launches the
#      plain kernel with each file's config and checks it.
#
#   bench/triton_dropin.sh ARTIFACT OUT_DIR
#
# ARTIFACT is a packed tunefarm (scripts/pack.sh); run from the repository
# root. Writes OUT_DIR/summary.txt (printed last) and OUT_DIR/raw.tgz.
set -uo pipefail
A=$(cd "$1" && pwd)
OUT=$2
mkdir -p "$OUT"
W=$(mktemp -d)
RAW=$W/raw
mkdir -p "$RAW"
export PYTHONPATH=$A/python PYTHONUNBUFFERED=1 XDG_CACHE_HOME=$W/cache
# The farm's library finds its dependencies in the artifact's lib/ (its
# RPATH); NVRTC is the host's toolkit's.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The confined harness writes only what its box grants: a Triton cache the
# environment names is granted, and so is the harness's log.
export TRITON_CACHE_DIR=$W/triton TUNEFARM_HARNESS_LOG=$RAW/harness.log
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
wall() {  # name, command...: runs it, output in $RAW/name.txt, wall seconds in $RAW/name.wall
  local name=$1; shift
  local t0; t0=$(date +%s.%N)
  "$@" >"$RAW/$name.txt" 2>&1
  local rc=$?
  python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$t0" "$(date +%s.%N)" \
    >"$RAW/$name.wall"
  say "--- $name (rc $rc, $(cat "$RAW/$name.wall") s wall)"
  grep -v "^\s*$" "$RAW/$name.txt" | tail -8 | tee -a "$SUMMARY"
}

say "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
say "python: $(python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)')"
# Warm the OS file cache for torch and Triton (both processes alike).
python3 -c "import torch, triton" >/dev/null 2>&1

for ex in softmax layernorm; do
  case $ex in
    softmax) op=softmax_kernel key=n_cols ;;
    layernorm) op=layer_norm_fwd key=N ;;
  esac
  db=$W/$ex.db
  wall "${ex}_first" python3 examples/python/triton_$ex.py --store "$db" --compare
  wall "${ex}_second" python3 examples/python/triton_$ex.py --store "$db"
  wall "${ex}_lookup" env TUNEFARM_AUTOTUNE=lookup python3 examples/python/triton_$ex.py --store "$db"
  wall "${ex}_export" "$A/bin/tunefarm" export --store "$db" --op $op --key $key --out "$RAW/${ex}_configs"
  for f in "$RAW/${ex}_configs"/*.json; do [ -e "$f" ] && { say "$(basename "$f"):"; cat "$f" | tee -a "$SUMMARY"; }; done
  wall "${ex}_loader" python3 bench/triton_dropin_loader.py $ex "$RAW/${ex}_configs"
  "$A/bin/tunefarm" results --store "$db" --format csv >"$RAW/${ex}_results.csv" 2>&1
done
tar -C "$W" -czf "$OUT/raw.tgz" raw
rm -rf "$W"
