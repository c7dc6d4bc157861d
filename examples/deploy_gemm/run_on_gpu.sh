#!/usr/bin/env bash
# The deployment flow on a GPU host, end to end: a signed bundle is loaded and
# verified, looked up for this GPU at several shapes (exact, nearest tuned
# shape, op default, a bundle that knows only another GPU), and each answer
# is compiled, checked and timed by deploy_gemm.
#
#   examples/deploy_gemm/run_on_gpu.sh ART_DIR EXAMPLE_DIR [BUNDLE.tfb PUBKEY]
#
#   ART_DIR      scripts/pack.sh output: bin/tunefarm, share/tunefarm/ops
#   EXAMPLE_DIR  examples/deploy_gemm/pack.sh output: bin/deploy_gemm, bin/make_test_bundle
#   BUNDLE.tfb PUBKEY   a bundle signed by the farm and its public key. The
#                tunefarm command has no key or signing subcommand yet, so
#                without them make_test_bundle writes a key pair and signed
#                fixture bundles (h100-80gb-hbm3 and this GPU's model).
#
# Exits non-zero when any run fails its check, or a tampered bundle loads.
set -uo pipefail
if [[ $# -ne 2 && $# -ne 4 ]]; then
  sed -n '2,16p' "$0" >&2
  exit 2
fi
art=$1 ex=$2
ops=$art/share/tunefarm/ops
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

model=$("$ex/bin/deploy_gemm" --print-gpu-model) || exit 1
echo "this GPU's model key: $model"
other=""
if [[ $# -eq 4 ]]; then
  bundle=$3 key=$4
else
  "$ex/bin/make_test_bundle" "$work" h100-80gb-hbm3 "$model" || exit 1
  bundle=$work/gemm-tuned.tfb key=$work/farm.pub other=$work/gemm-other-gpu.tfb
fi
"$art/bin/tunefarm" bundle show "$bundle"

failed=0
run() {
  echo
  echo "=== deploy_gemm $*"
  "$ex/bin/deploy_gemm" --key "$key" --ops-dir "$ops" "$@" || { echo "FAILED: $*"; failed=1; }
}
run --bundle "$bundle" --op gemm_sm90 --M 4096 --N 4096 --K 4096              # tuned shape
run --bundle "$bundle" --op gemm_sm90 --M 8192 --N 8192 --K 4096              # nearest tuned shape
run --bundle "$bundle" --op gemm_sm90 --M 4096 --N 4096 --K 4096 --dtype bf16 # no bf16 entry: default
run --bundle "$bundle" --op gemm --M 4096 --N 4096 --K 4096                   # portable op, its default
if [[ -n $other ]]; then
  run --bundle "$other" --op gemm_sm90 --M 4096 --N 4096 --K 4096             # bundle for another GPU
fi

# One byte changed after signing must be refused.
cp "$bundle" "$work/tampered.tfb"
printf '\x5a' | dd of="$work/tampered.tfb" bs=1 seek=40 conv=notrunc status=none
echo
echo "=== a tampered bundle"
if "$ex/bin/deploy_gemm" --bundle "$work/tampered.tfb" --key "$key" --ops-dir "$ops" --M 4096 --N 4096 --K 4096; then
  echo "FAILED: a tampered bundle was accepted"
  failed=1
else
  echo "refused, as it must be"
fi
exit $failed
