#!/usr/bin/env bash
# Deploys a farm with the Ansible playbooks onto this machine, the way CI can:
# no systemd, no root, a scratch prefix (ansible/inventories/local: a
# coordinator and one host with two simulated GPUs and a builder, CURVE on). Then drives
# the deployed farm with the deployed binary: a sweep, a signed bundle, and
# its rollout, which must refuse a tampered bundle.
#
#   tests/system/ansible_deploy_test.sh BUILD_DIR SOURCE_DIR
#
# Exits 77 (skipped) when ansible-playbook is missing.
set -euo pipefail
BUILD_DIR=$(cd "${1:?usage: $0 BUILD_DIR SOURCE_DIR}" && pwd)
SRC_DIR=$(cd "${2:?usage: $0 BUILD_DIR SOURCE_DIR}" && pwd)

if ! command -v ansible-playbook >/dev/null; then
  echo "SKIP: ansible-playbook is not installed (apt-get install ansible)"
  exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/tunefarm-ansible.XXXXXX")
prefix=$work/prefix
run_dir=$prefix/var/run/tunefarm

stop_all() {
  local pid_file pids=()
  for pid_file in "$run_dir"/*.pid; do
    [[ -s "$pid_file" ]] && pids+=("$(cat "$pid_file")")
  done
  ((${#pids[@]})) || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 50); do
    kill -0 "${pids[@]}" 2>/dev/null || return 0
    sleep 0.2
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
}

teardown() {
  local rc=$?
  if ((rc != 0)) && [[ -d "$prefix/var/log/tunefarm" ]]; then
    for log in "$prefix"/var/log/tunefarm/*.log; do
      echo "--- $log"
      tail -n 20 "$log"
    done
  fi
  stop_all
  rm -rf "$work"
}
trap teardown EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# No fixed port: the coordinator's are free ones, and the workers' and the
# builder's /metrics (the roles' 9460+ and 9470) are left off.
port=$(free_port) http_port=$(free_port)

"$SRC_DIR/scripts/pack.sh" "$BUILD_DIR" "$work/artifact"

export ANSIBLE_CONFIG=$SRC_DIR/ansible/ansible.cfg
export ANSIBLE_LOCAL_TEMP=$work/ansible-tmp ANSIBLE_REMOTE_TEMP=$work/ansible-tmp
export ANSIBLE_NOCOLOR=1
playbook() {
  ansible-playbook -i "$SRC_DIR/ansible/inventories/local" "$SRC_DIR/ansible/playbooks/$1" \
    -e tunefarm_prefix="$prefix" -e tunefarm_use_systemd=false \
    -e tunefarm_artifact="$work/artifact" -e tunefarm_port="$port" -e tunefarm_http_port="$http_port" \
    -e tunefarm_worker_http_port= -e tunefarm_builder_http_port= "${@:2}"
}

echo "== deploy: coordinator and 2 sim workers on tcp://127.0.0.1:$port"
playbook deploy.yml | tee "$work/deploy1.log"
for name in coordinator sim-gpus-gpu0 sim-gpus-gpu1 sim-gpus-builder; do
  "$prefix/sbin/tunefarm-service" status "$name" || fail "$name is not running"
done
# The GPU host's builder runs under a key of its own, on the builder
# allow-list; the host's own key stays on the workers' alone.
curve=$prefix/etc/tunefarm/curve
host_key=$(grep -v '^#' "$curve/sim-gpus.key.pub" | head -1 | cut -d' ' -f1)
builder_key=$(grep -v '^#' "$curve/sim-gpus-builder.key.pub" | head -1 | cut -d' ' -f1)
[[ -n "$builder_key" && "$builder_key" != "$host_key" ]] || fail "the GPU host's builder has no key of its own"
grep -qF -- "$builder_key" "$prefix/etc/tunefarm/allowed_builder_keys" || fail "the builder's key is not admitted"
grep -qF -- "$host_key" "$prefix/etc/tunefarm/allowed_builder_keys" && fail "the worker's key is on the builder list"
grep -qF -- "$host_key" "$prefix/etc/tunefarm/allowed_keys" || fail "the worker's key is not admitted"
for _ in $(seq 100); do
  grep -q "hello builder=sim-gpus-builder" "$prefix"/var/log/tunefarm/coordinator*.log 2>/dev/null && break
  sleep 0.2
done
grep -q "hello builder=sim-gpus-builder" "$prefix"/var/log/tunefarm/coordinator*.log \
  || fail "the coordinator never heard the GPU host's builder"

echo "== deploy again: nothing changes"
playbook deploy.yml | tee "$work/deploy2.log"
grep -E '^[a-z-]+ +: ok=' "$work/deploy2.log" | grep -vE 'changed=0 .*failed=0' \
  && fail "a second deploy changed something"

echo "== nightly: script installed (no timer without systemd)"
cat >"$work/sweep.toml" <<'EOF'
[sweep]
name   = "ansible-smoke"
ops    = ["gemm"]
dtypes = ["f16"]
gpus   = ["*"]
shapes = [ { M = 1024, N = 1024, K = 1024 } ]
EOF
playbook nightly.yml -e tunefarm_sweep="$work/sweep.toml"
sh -n "$prefix/sbin/tunefarm-nightly"
grep -q -- "submit $prefix/etc/tunefarm/nightly.toml" "$prefix/sbin/tunefarm-nightly" \
  || fail "the nightly script does not submit the installed sweep"

echo "== a sweep through the deployed farm"
tf=$prefix/bin/tunefarm
key=$prefix/etc/tunefarm/curve/coordinator.key
timeout 300 "$tf" submit "$work/sweep.toml" --coordinator "tcp://127.0.0.1:$port" \
  --ops-dir "$prefix/share/tunefarm/ops" --curve-key "$key" --coordinator-key "$key.pub" --wait
"$tf" status --coordinator "tcp://127.0.0.1:$port" --curve-key "$key" --coordinator-key "$key.pub"
# tunefarm_http_port: the coordinator serves /metrics where the inventory says.
python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
  "http://127.0.0.1:$http_port/metrics" > "$work/metrics.txt" || fail "no /metrics on $http_port"
grep -q '^tunefarm_workers 2$' "$work/metrics.txt" || fail "/metrics on $http_port does not count 2 workers"
grep -q '^tunefarm_builders 1$' "$work/metrics.txt" || fail "/metrics on $http_port does not count the builder"

# The store has a single owner: publish once the coordinator is down.
"$prefix/sbin/tunefarm-service" stop coordinator
store=$prefix/var/lib/tunefarm/db
"$tf" results --store "$store" --format csv >"$work/results.csv"
for model in sim-h100 sim-a100; do
  grep -q "$model" "$work/results.csv" || fail "no results from the $model worker"
done
"$tf" keys sign --out "$work/sign.key"
"$tf" publish --store "$store" --out "$work/bundles/smoke" --sign-key "$work/sign.key"
"$tf" bundle show "$work/bundles/smoke.tfb"

echo "== rollout: the signed bundle goes live"
trusted="{\"tunefarm_bundle_trusted_keys\": [\"$work/sign.key.pub\"]}"
playbook rollout_bundles.yml -e tunefarm_bundle="$work/bundles/smoke.tfb" -e "$trusted"
live=$prefix/var/lib/tunefarm/bundles/smoke.tfb
cmp "$live" "$work/bundles/smoke.tfb" || fail "the live bundle is not the published one"
[[ -f "${live%.tfb}.json" && -f "$live.rollout" ]] || fail "the bundle's JSON or rollout record is missing"

echo "== rollout: a tampered bundle is refused and the live one stays"
mkdir -p "$work/tampered"
cp "$work/bundles/smoke.tfb" "$work/tampered/smoke.tfb"
python3 - "$work/tampered/smoke.tfb" <<'EOF'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
data[len(data) // 2] ^= 0xFF
open(sys.argv[1], "wb").write(data)
EOF
if playbook rollout_bundles.yml -e tunefarm_bundle="$work/tampered/smoke.tfb" -e "$trusted" \
    >"$work/rollout-tampered.log" 2>&1; then
  cat "$work/rollout-tampered.log"
  fail "the rollout accepted a tampered bundle"
fi
grep -A2 'Verify the staged bundle on this host' "$work/rollout-tampered.log" | grep -q '^fatal' \
  || { cat "$work/rollout-tampered.log"; fail "the rollout failed, but not at the bundle's verification"; }
cmp "$live" "$work/bundles/smoke.tfb" || fail "a refused bundle replaced the live one"

echo "PASS"
