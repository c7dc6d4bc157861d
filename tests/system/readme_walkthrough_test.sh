#!/usr/bin/env bash
# The README's farm walkthrough, run as written: the shell block between
# "walkthrough: begin" and "walkthrough: end" in README.md, in a fresh folder
# laid out as a checkout (ops/ and sweeps/), with `tunefarm` on PATH and a
# simulated worker (SIM, as the README says for a host without a GPU).
#   readme_walkthrough_test.sh TUNEFARM_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
mkdir -p "$work/bin" "$work/config"
ln -s "$bin" "$work/bin/tunefarm"
ln -s "$src/ops" "$work/ops"
ln -s "$src/sweeps" "$work/sweeps"
sed -n '/<!-- walkthrough: begin -->/,/<!-- walkthrough: end -->/p' "$src/README.md" | sed '/^<!--/d;/^```/d' \
  > "$work/walkthrough.sh"
[ -s "$work/walkthrough.sh" ] || { echo "FAIL: no walkthrough block in README.md"; exit 1; }
# The README's port may be taken on a shared host: the walkthrough runs on a
# free one, as written otherwise.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sed -i "s/:5555\b/:$port/g" "$work/walkthrough.sh"
cd "$work"
cat > run.sh <<'RUN'
set -e
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null' EXIT
RUN
cat walkthrough.sh >> run.sh
echo 'echo WALKTHROUGH-DONE' >> run.sh
PATH="$work/bin:$PATH" SIM="--backend sim --sim-models h100" XDG_CONFIG_HOME="$work/config" \
  timeout 600 bash run.sh > out.log 2>&1
rc=$?
fail() { echo "FAIL: $1"; echo "--- walkthrough"; cat walkthrough.sh; echo "--- output"; tail -60 out.log; rm -rf "$work"; exit 1; }
[ $rc -eq 0 ] || fail "the walkthrough exited $rc"
grep -q WALKTHROUGH-DONE out.log || fail "it stopped early"
grep -q "^gpu_model,op,dtype,shape,config," out.log || fail "results printed no CSV"
[ -s bundles/nightly.tfb ] && [ -s bundles/nightly.json ] || fail "no bundle"
grep -q '"backend": "sim"' bundles/nightly.json || fail "the bundle does not say it is simulated"
grep -q "SIMULATED" out.log || fail "no line says the figures are simulated"
[ "$(stat -c %a keys/me.key)" = 600 ] || fail "a secret key readable by others"
echo "ok: the README's walkthrough ran as written ($(grep -c . walkthrough.sh) lines)"
rm -rf "$work"
