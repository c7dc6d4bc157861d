#!/usr/bin/env bash
# The Debian package: cpack makes it, its control data names the libraries
# the farm links and what it loads at run time, and, installed (as root,
# with dpkg), its tunefarm runs a sweep on the shipped ops, its units and
# configuration are in place (the workers' home apart from the state folder
# that holds the coordinator's store, which program ops cannot write), the
# Python package finds libtunefarm_c.so, and it removes cleanly. Without root the package is unpacked and run from there.
#   deb_package_test.sh BUILD_DIR     (exit 77: no cpack/dpkg-deb)
set -uo pipefail
build=$1
for tool in cpack dpkg-deb; do
  command -v "$tool" > /dev/null || { echo "SKIP: no $tool"; exit 77; }
done
work=$(mktemp -d)
installed=""
cleanup() {
  [[ -n "$installed" ]] && dpkg -P tunefarm > /dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

(cd "$build" && cpack -G DEB -B "$work/out" > "$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; fail "cpack"; }
deb=$(ls "$work"/out/tunefarm_*.deb 2>/dev/null | head -1)
[[ -f "$deb" ]] || fail "no .deb made"
echo "package: $(basename "$deb") ($(du -h "$deb" | cut -f1))"
depends=$(dpkg-deb -f "$deb" Depends)
for want in libzmq5 libcapnp libsodium libspdlog libjs-chart.js python3 adduser; do
  [[ "$depends" == *"$want"* ]] || fail "Depends lacks $want: $depends"
done
contents=$(dpkg-deb -c "$deb")
for want in ./usr/bin/tunefarm ./usr/include/tune/c.h ./usr/include/tune/launcher.h \
            ./usr/share/tunefarm/ops/gemm/op.toml ./usr/share/tunefarm/python/tunefarm/harness.py \
            ./usr/share/tunefarm/examples/triton_matmul/op.toml ./etc/tunefarm/coordinator.env \
            tunefarmConfig.cmake libtunefarm_c.so; do
  grep -q -- "$want" <<<"$contents" || fail "the package lacks $want"
done
if command -v python3 > /dev/null && python3 -c "import jinja2" 2>/dev/null; then
  grep -q ./lib/systemd/system/tunefarm-worker@.service <<<"$contents" || fail "the package lacks the worker unit"
  # The builder (worker --compile-only) has a unit of its own, as confined
  # as the workers', and its configuration file.
  grep -q ./lib/systemd/system/tunefarm-builder.service <<<"$contents" || fail "the package lacks the builder unit"
  grep -q ./etc/tunefarm/builder.env <<<"$contents" || fail "the package lacks /etc/tunefarm/builder.env"
  builder_path=$(grep -o '\./[^ ]*lib/systemd/system/tunefarm-builder\.service' <<<"$contents" | head -1)
  builder_unit=$(dpkg-deb --fsys-tarfile "$deb" | tar -xO "$builder_path")
  grep -q 'worker --compile-only' <<<"$builder_unit" || fail "the builder unit does not run worker --compile-only"
  grep -qx 'InaccessiblePaths=-/var/lib/tunefarm' <<<"$builder_unit" || fail "the builder unit can reach /var/lib/tunefarm"
  # Workers have a home apart from the state folder (the service user's
  # home, which holds the coordinator's store), and cannot reach that folder.
  unit_path=$(grep -o '\./[^ ]*lib/systemd/system/tunefarm-worker@\.service' <<<"$contents" | head -1)
  unit=$(dpkg-deb --fsys-tarfile "$deb" | tar -xO "$unit_path")
  worker_home=$(sed -n 's/^Environment=HOME=//p' <<<"$unit")
  [[ -n "$worker_home" ]] || fail "the worker unit sets no HOME"
  [[ "$worker_home" != /var/lib/tunefarm && "$worker_home" != /var/lib/tunefarm/* ]] \
    || fail "the workers' home $worker_home is in the state folder"
  grep '^ReadWritePaths=' <<<"$unit" | grep -q /var/lib/tunefarm && fail "the worker unit may write /var/lib/tunefarm"
  grep -qx 'InaccessiblePaths=-/var/lib/tunefarm' <<<"$unit" || fail "the worker unit can reach /var/lib/tunefarm"
  dpkg-deb -I "$deb" postinst | grep -q "$worker_home" || fail "postinst does not make the workers' home $worker_home"
fi

if [[ $(id -u) == 0 && "${TUNEFARM_TEST_DEB_INSTALL:-1}" != 0 ]] &&
   [[ "$(dpkg-query -W -f='${Status}' tunefarm 2>/dev/null)" != *" installed" ]]; then
  dpkg -i "$deb" > "$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i"; }
  installed=1
  root=""
  getent passwd tunefarm > /dev/null || fail "postinst made no tunefarm user"
  [[ -d /var/lib/tunefarm ]] || fail "postinst made no /var/lib/tunefarm"
  if [[ -n "${worker_home:-}" ]]; then
    [[ "$(stat -c %U:%a "$worker_home" 2>/dev/null)" == tunefarm:700 ]] \
      || fail "postinst made no workers' home $worker_home owned by tunefarm, mode 0700"
  fi
  echo "installed with dpkg"
else
  dpkg-deb -x "$deb" "$work/root"
  root="$work/root"
  export LD_LIBRARY_PATH="$root/usr/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "unpacked into $root (not root, or a tunefarm package is installed already)"
fi

tf="$root/usr/bin/tunefarm"
"$tf" --version | grep -q "tunefarm " || fail "tunefarm --version"
"$tf" op check "$root/usr/share/tunefarm/ops/rmsnorm" --gpu h100-80gb-hbm3 --sample 1 > "$work/opcheck.log" 2>&1 \
  || { cat "$work/opcheck.log"; fail "op check of a shipped op"; }
XDG_CONFIG_HOME="$work/config" "$tf" tune --backend sim --ops-dir "$root/usr/share/tunefarm/ops" --op rmsnorm \
  --dtype f16 --shape ROWS=1024,N=1024 --store "$work/db" --bundle "$work/b" --quiet > "$work/tune.log" 2>&1 \
  || { cat "$work/tune.log"; fail "tune from the package"; }
[[ -f "$work/b.tfb" ]] || fail "no bundle"
PYTHONPATH="$root/usr/share/tunefarm/python" TUNEFARM_LIB="${root:+$root/usr/lib/libtunefarm_c.so}" python3 - "$work/b.tfb" \
  "$work/config/tunefarm/bundle.key.pub" <<'PY' || fail "the Python package over the installed C library"
import sys, tunefarm
b = tunefarm.Bundle.load(sys.argv[1], [sys.argv[2]])
a = b.lookup("rmsnorm", "f16", "sim-h100", {"ROWS": 1024, "N": 1024})
assert a.level == "exact", a.level
print("python: lookup", a.level, a.config)
PY
if [[ -n "$installed" ]] && grep -qw landlock /sys/kernel/security/lsm 2>/dev/null; then
  # A program op run as a packaged worker would be, with the service user's
  # home: it writes neither the coordinator's store nor that home.
  made_store=""
  [[ -d /var/lib/tunefarm/store ]] || made_store=1
  mkdir -p /var/lib/tunefarm/store "$work/ops/planter"
  cat > "$work/ops/planter/op.toml" <<'TOML'
[op]
name = "planter"
dims = ["N"]
dtypes = ["f32"]
default = { X = 1 }
[params]
X = [1]
[program]
files = ["run.sh"]
run = "sh run.sh"
timeout = 20
TOML
  cat > "$work/ops/planter/run.sh" <<'SH'
for f in /var/lib/tunefarm/store/planted "$HOME/planted"; do (echo x > "$f") 2>/dev/null; done
echo '{"tunefarm": 1, "check": "pass", "samples_us": [3, 1, 2]}'
SH
  HOME=/var/lib/tunefarm XDG_CONFIG_HOME="$work/config" "$tf" tune --backend sim --ops-dir "$work/ops" --op planter \
    --dtype f32 --shape N=1024 --store "$work/db2" --bundle "$work/b2" --quiet > "$work/planter.log" 2>&1 \
    || { cat "$work/planter.log"; fail "tune of a program op from the package"; }
  [[ ! -e /var/lib/tunefarm/store/planted && ! -e /var/lib/tunefarm/planted ]] \
    || fail "a program op wrote into /var/lib/tunefarm"
  [[ -n "$made_store" ]] && rmdir /var/lib/tunefarm/store
  echo "a program op could not write the state folder"
fi
if [[ -n "$installed" ]]; then
  [[ -f /lib/systemd/system/tunefarm-coordinator.service || ! -d "$build/packaging/units" ]] || fail "no coordinator unit installed"
  dpkg -P tunefarm > "$work/dpkg-p.log" 2>&1 || { cat "$work/dpkg-p.log"; fail "dpkg -P"; }
  installed=""
  [[ ! -e /usr/bin/tunefarm && ! -e /etc/tunefarm/coordinator.env ]] || fail "dpkg -P left files behind"
fi
echo "OK"
