#!/usr/bin/env bash
# The monitoring files and the farm's /metrics against Prometheus's own
# checker: promtool's config and rules checks and the rules' unit tests on
# ansible/monitoring/, and its
# metrics check on what a running coordinator and worker serve (with a sweep
# done, so that per-sweep series and histograms have samples).
#   monitoring_test.sh TUNEFARM_BINARY SOURCE_DIR     (exit 77: no promtool)
set -uo pipefail
bin=$1 src=$2
command -v promtool > /dev/null || { echo "SKIP: no promtool (Debian package prometheus)"; exit 77; }
promtool check config "$src/ansible/monitoring/prometheus.yml" || exit 1
promtool check rules "$src/ansible/monitoring/tunefarm.rules.yml" || exit 1
# The alerts' own tests: a cancelled sweep does not fire, a coordinator down does.
(cd "$src/ansible/monitoring" && promtool test rules tunefarm.rules.test.yml) || exit 1

work=$(mktemp -d)
trap 'kill $coord $worker 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
# Ports the kernel picks (0): the processes name them in their logs.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin" coordinator --bind "tcp://127.0.0.1:$port" --store "$work/db" --http-port 0 > "$work/coord.log" 2>&1 &
coord=$!
"$bin" worker --connect "tcp://127.0.0.1:$port" --backend sim --sim-models h100 \
  --http-port 0 > "$work/worker.log" 2>&1 &
worker=$!
# The port of the first "http://127.0.0.1:PORT/" in log $1.
http_port_in() {
  for _ in $(seq 100); do
    p=$(sed -n 's|.*http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$1" | head -1)
    [ -n "$p" ] && { echo "$p"; return 0; }
    sleep 0.1
  done
  return 1
}
http=$(http_port_in "$work/coord.log") || { echo "the coordinator named no HTTP port"; cat "$work/coord.log"; exit 1; }
whttp=$(http_port_in "$work/worker.log") || { echo "the worker named no HTTP port"; cat "$work/worker.log"; exit 1; }
cat > "$work/sweep.toml" <<TOML
[sweep]
name = "monitoring"
ops = ["gemm"]
dtypes = ["f16"]
shapes = [ { M = 256, N = 256, K = 256 } ]
TOML
"$bin" submit "$work/sweep.toml" --ops-dir "$src/ops" --coordinator "tcp://127.0.0.1:$port" --wait \
  > "$work/submit.log" 2>&1 || { cat "$work/submit.log" "$work/coord.log"; exit 1; }
# /metrics of port $1 once it holds $2 (the coordinator's page is a snapshot
# it refreshes every second).
scrape() {
  python3 - "$1" "$2" <<'PY'
import sys, time, urllib.request
for _ in range(40):
    text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=10).read().decode()
    if sys.argv[2] in text:
        print(text, end="")
        sys.exit(0)
    time.sleep(0.25)
sys.exit(1)
PY
}
scrape "$http" $'\ntunefarm_unit_seconds_count{' > "$work/metrics.txt" ||
  { echo "no per-sweep series in /metrics"; cat "$work/coord.log"; exit 1; }
scrape "$whttp" $'\ntunefarm_worker_unit_seconds_count{' > "$work/worker_metrics.txt" ||
  { echo "no unit histogram in the worker's /metrics"; cat "$work/worker.log"; exit 1; }
promtool check metrics < "$work/metrics.txt" || exit 1
promtool check metrics < "$work/worker_metrics.txt" || exit 1
# The series an operator runs a fleet on.
for series in 'tunefarm_build_info{version=' 'tunefarm_model_devices{gpu_model="sim-h100"} 1' \
              'tunefarm_worker_leases{worker=' 'tunefarm_configs_queued{gpu_model="sim-h100"}' \
              'tunefarm_units_leased{gpu_model="sim-h100"}' 'tunefarm_store_bytes ' \
              'tunefarm_sweep_pairs_done{' 'tunefarm_model_results_stored_total{gpu_model="sim-h100"}' \
              'tunefarm_ingest_seconds_bucket{le="+Inf"}' 'tunefarm_unit_seconds_bucket{gpu_model="sim-h100",le=' \
              'tunefarm_leases_expired_total 0' 'tunefarm_worker_deaths_total 0'; do
  grep -qF "$series" "$work/metrics.txt" || { echo "/metrics lacks $series"; cat "$work/metrics.txt"; exit 1; }
done
for series in 'tunefarm_worker_build_info{version=' 'tunefarm_worker_devices{gpu_model="sim-h100"} 1' \
              'tunefarm_worker_connected 1' 'tunefarm_worker_results_total{gpu_model="sim-h100",class="ok"}' \
              'tunefarm_worker_measure_seconds_count ' 'tunefarm_worker_units_total '; do
  grep -qF "$series" "$work/worker_metrics.txt" || { echo "worker /metrics lacks $series"; cat "$work/worker_metrics.txt"; exit 1; }
done
# What was stored is what the worker produced (the coordinator's snapshot
# may be a second behind the end of the sweep).
for _ in $(seq 60); do
  stored=$(sed -n 's/^tunefarm_model_results_stored_total{gpu_model="sim-h100"} //p' "$work/metrics.txt")
  produced=$(awk '/^tunefarm_worker_results_total/ {n += $2} END {print n}' "$work/worker_metrics.txt")
  [ "$stored" = "$produced" ] && break
  sleep 0.25
  scrape "$http" tunefarm_ > "$work/metrics.txt"
done
[ "$stored" = "$produced" ] || { echo "stored $stored rows, the worker produced $produced"; exit 1; }
echo "monitoring: config, rules and both /metrics pass promtool ($stored rows)"
