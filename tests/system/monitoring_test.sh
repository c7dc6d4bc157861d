#!/usr/bin/env bash
# The monitoring files and the coordinator's /metrics against Prometheus's own
# checker: promtool's config and rules checks on ansible/monitoring/, and its
# metrics check on what a running coordinator serves (with a sweep in it, so
# that per-sweep series are there too).
#   monitoring_test.sh TUNEFARM_BINARY SOURCE_DIR     (exit 77: no promtool)
set -uo pipefail
bin=$1 src=$2
command -v promtool > /dev/null || { echo "SKIP: no promtool (Debian package prometheus)"; exit 77; }
promtool check config "$src/ansible/monitoring/prometheus.yml" || exit 1
promtool check rules "$src/ansible/monitoring/tunefarm.rules.yml" || exit 1

work=$(mktemp -d)
trap 'kill $coord $worker 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
port=$((20000 + RANDOM % 20000)) http=$((20000 + RANDOM % 20000))
"$bin" coordinator --bind "tcp://127.0.0.1:$port" --store "$work/db" --http-port "$http" > "$work/coord.log" 2>&1 &
coord=$!
"$bin" worker --connect "tcp://127.0.0.1:$port" --backend sim --sim-models h100 > "$work/worker.log" 2>&1 &
worker=$!
cat > "$work/sweep.toml" <<TOML
[sweep]
name = "monitoring"
ops = ["gemm"]
dtypes = ["f16"]
shapes = [ { M = 256, N = 256, K = 256 } ]
TOML
"$bin" submit "$work/sweep.toml" --ops-dir "$src/ops" --coordinator "tcp://127.0.0.1:$port" --wait \
  > "$work/submit.log" 2>&1 || { cat "$work/submit.log" "$work/coord.log"; exit 1; }
# The page is a snapshot the coordinator refreshes: read it until the sweep is in it.
if ! python3 - "$http" > "$work/metrics.txt" <<'PY'
import sys, time, urllib.request
for _ in range(40):
    text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=10).read().decode()
    if "\ntunefarm_sweep_pairs_done{" in text:
        print(text, end="")
        sys.exit(0)
    time.sleep(0.25)
sys.exit(1)
PY
then
  echo "no per-sweep series in /metrics"; cat "$work/coord.log"; exit 1
fi
promtool check metrics < "$work/metrics.txt" || exit 1
# The series an operator runs a fleet on.
for series in 'tunefarm_build_info{version=' 'tunefarm_model_devices{gpu_model="sim-h100"} 1' \
              'tunefarm_worker_leases{worker=' 'tunefarm_configs_queued{gpu_model="sim-h100"}' \
              'tunefarm_units_leased{gpu_model="sim-h100"}' 'tunefarm_store_bytes '; do
  grep -qF "$series" "$work/metrics.txt" || { echo "/metrics lacks $series"; cat "$work/metrics.txt"; exit 1; }
done
echo "monitoring: config, rules and /metrics pass promtool"
