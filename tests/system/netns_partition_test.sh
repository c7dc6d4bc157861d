#!/usr/bin/env bash
# Hosts with their own addresses: the coordinator and three workers each in a
# network namespace, joined by a bridge. One worker's link is cut for longer
# than the heartbeat timeout and then restored: its leases go back to the
# queue, the sweep completes, and the store holds every pair exactly once.
# Needs root and iproute2; exits 77 (skipped) without them.
#   netns_partition_test.sh TUNEFARM_BINARY SOURCE_DIR
set -euo pipefail
BIN=$1
SRC=$2
[[ $(id -u) -eq 0 ]] || { echo "skip: needs root for ip netns"; exit 77; }
command -v ip >/dev/null || { echo "skip: no iproute2"; exit 77; }
TAG=tf$$
ip netns add "$TAG-probe" 2>/dev/null || { echo "skip: ip netns not permitted here"; exit 77; }
ip netns del "$TAG-probe"

DIR=$(mktemp -d)
HOSTS=(coord w0 w1 w2)
cleanup() {
  for p in "$DIR"/*.pid; do [[ -f $p ]] && kill -9 "$(cat "$p")" 2>/dev/null || true; done
  for h in "${HOSTS[@]}"; do ip netns del "$TAG-$h" 2>/dev/null || true; done
  ip link del "$TAG-br" 2>/dev/null || true
}
trap cleanup EXIT

ip link add "$TAG-br" type bridge
ip link set "$TAG-br" up
i=1
for h in "${HOSTS[@]}"; do
  ip netns add "$TAG-$h"
  ip link add "$TAG-$h" type veth peer name eth0 netns "$TAG-$h"
  ip link set "$TAG-$h" master "$TAG-br" up
  ip -n "$TAG-$h" addr add "10.77.0.$i/24" dev eth0
  ip -n "$TAG-$h" link set eth0 up
  ip -n "$TAG-$h" link set lo up
  i=$((i + 1))
done
COORD_IP=10.77.0.1
EP="tcp://$COORD_IP:5555"

cat > "$DIR/sweep.toml" <<TOML
[sweep]
name = "netns"
ops = ["synthetic"]
dtypes = ["f32"]
configs_per_unit = 20
shapes = [ { N = 4096 }, { N = 65536 }, { N = 1048576 }, { N = 4194304 } ]
TOML

# Starts a command in host $1's namespace in the background. The subshell
# execs into `ip netns exec`, which execs the command, so $! is the
# command's own pid and killing it leaves nothing behind.
spawn_in() { local h=$1; shift; (exec ip netns exec "$TAG-$h" "$@") & }
spawn_in coord "$BIN" coordinator --bind "$EP" --insecure-plaintext --store "$DIR/store" \
  --heartbeat-ms 200 --liveness 5 -v > "$DIR/coordinator.log" 2>&1
echo $! > "$DIR/coordinator.pid"
for w in w0 w1 w2; do
  spawn_in "$w" "$BIN" worker --connect "$EP" --insecure-plaintext --backend sim --name "$w" \
    --sim-faults busy=0.004 -v > "$DIR/$w.log" 2>&1
  echo $! > "$DIR/$w.pid"
done
sleep 1.5
spawn_in coord "$BIN" submit "$DIR/sweep.toml" --coordinator "$EP" --ops-dir "$SRC/tests/data/ops" \
  --wait > "$DIR/submit.log" 2>&1
SUBMIT=$!
sleep 2
echo "cutting w1's link"
ip link set "$TAG-w1" down
sleep 4   # > 5 heartbeats of 200 ms
ip link set "$TAG-w1" up
echo "restored w1's link"
if ! wait $SUBMIT; then
  echo "FAIL: sweep did not finish"; tail -20 "$DIR/submit.log" "$DIR/coordinator.log"; exit 1
fi
grep -q "worker missed its heartbeats.* worker=w1 " "$DIR/coordinator.log" || {
  echo "FAIL: the coordinator never declared w1 dead"; tail -30 "$DIR/coordinator.log"; exit 1; }
for p in "$DIR"/*.pid; do kill "$(cat "$p")" 2>/dev/null || true; done
for p in "$DIR"/*.pid; do while kill -0 "$(cat "$p")" 2>/dev/null; do sleep 0.1; done; done

"$BIN" results --store "$DIR/store" --format json > "$DIR/results.json"
python3 - "$DIR/results.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
keys = [(r["gpu_model"], r["config_id"], r["shape"]) for r in rows]
expected = 600 * 4
assert len(keys) == len(set(keys)), f"{len(keys) - len(set(keys))} pairs stored twice"
assert len(keys) == expected, f"{len(keys)} pairs stored, expected {expected}"
print(f"ok: {len(keys)} pairs, each once")
PY
grep -h "connection lost" "$DIR/w1.log" | head -2 || true
echo "PASS"
