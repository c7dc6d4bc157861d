#!/usr/bin/env bash
# A new worker host on a warm fleet (bench/pipeline.md): a CURVE farm on
# this host — a coordinator and sim GPU workers that compile with NVRTC —
# measures every legal config of `gemm` (f16) at one shape on worker "a",
# at another on worker "c" (so that each image has two witnesses, which the
# coordinator needs to serve a worker's image to another); then a worker
# "b" with an empty cubin cache (a new host) measures them at a third
# shape. b's configs were all compiled by the fleet: the coordinator serves
# their images, and the figure is how long b's device waited for compiles
# (or fetches) against the wall time of its sweep. ONE_WITNESS=1 leaves
# "c" out: nothing is then served.
#
#   bash bench/pipeline_warm_fleet.sh [OUT_DIR]
set -eu
T=${TUNEFARM:-$(cd "$(dirname "$0")/.." && pwd)/build/cli/tunefarm}
OPS=$(cd "$(dirname "$0")/.." && pwd)/ops
D=${1:-/tmp/pipeline-warm-fleet}
rm -rf "$D" && mkdir -p "$D" && cd "$D"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
E=tcp://127.0.0.1:$PORT
for who in coordinator a b c client; do $T keys curve --out $who --name $who > /dev/null; done
cat a.pub b.pub c.pub > workers.allow
cat client.pub > clients.allow
$T coordinator --bind $E --store farm.db --curve-key coordinator --allow-list workers.allow \
  --client-allow-list clients.allow > coordinator.log 2>&1 &
C=$!
K="--coordinator-key coordinator.pub"
FARM="--coordinator $E --curve-key client $K"
# sweep NAME SHAPE WORKER: one host's sweep of every legal config.
sweep() {
  $T worker --connect $E --name $3 --curve-key $3 $K --backend sim --sim-models h100 --sim-compile nvrtc \
    --cache-dir $3-cache > $3.log 2>&1 &
  local w=$!
  printf '[sweep]\nname = "%s"\nops = ["gemm"]\ndtypes = ["f16"]\ngpus = ["*"]\nstrategy = "exhaustive"\nshapes = [ %s ]\n' \
    "$1" "$2" > $1.toml
  local start=$(date +%s.%N)
  $T submit $1.toml $FARM --ops-dir "$OPS" --wait > $1.log 2>&1
  local end=$(date +%s.%N)
  echo "$1 on $3: wall $(python3 -c "print(round($end - $start, 1))") s"
  $T status $FARM | grep -A1 -E "^[0-9a-f-]+ +$1 " | grep "pipeline:"
  kill $w && wait $w 2> /dev/null || true
}
sweep cold "{ M = 4096, N = 4096, K = 4096 }" a
[ "${ONE_WITNESS:-0}" = 1 ] || sweep second "{ M = 1024, N = 1024, K = 1024 }" c
sweep warm "{ M = 2048, N = 2048, K = 2048 }" b
kill $C 2> /dev/null || true
wait 2> /dev/null || true
