#!/usr/bin/env bash
# The deployment flow on a GPU host, end to end: a signed bundle is loaded and
# verified, looked up for this GPU at several shapes (tuned shape, nearest
# tuned shape, op default, a bundle that knows only another GPU), and each
# answer is compiled, checked and timed by deploy_gemm.
#
#   examples/deploy_gemm/run_on_gpu.sh ART_DIR EXAMPLE_DIR [BUNDLE.tfb PUBKEY]
#
#   ART_DIR      scripts/pack.sh output: bin/tunefarm, share/tunefarm/ops
#   EXAMPLE_DIR  examples/deploy_gemm/pack.sh output: bin/deploy_gemm, bin/make_test_bundle
#   BUNDLE.tfb PUBKEY   a bundle signed by the farm and its public key.
#
# Without a bundle: when this tunefarm can sign (`tunefarm keys sign`), it
# makes a key pair and tunes gemm_sm90 f16 on this GPU at 1024^3 and 4096^3
# with `tunefarm tune --sign-key`; otherwise it uses the signed fixture of
# make_test_bundle (configs of a recorded H100 run). The bundle for another
# GPU always comes from make_test_bundle.
#
# Exits non-zero when any run fails its check, or a tampered bundle loads.
set -uo pipefail
if [[ $# -ne 2 && $# -ne 4 ]]; then
  sed -n '2,19p' "$0" >&2
  exit 2
fi
art=$1 ex=$2
ops=$art/share/tunefarm/ops
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

model=$("$ex/bin/deploy_gemm" --print-gpu-model) || exit 1
echo "this GPU's model key: $model"
"$ex/bin/make_test_bundle" "$work/fixture" h100-80gb-hbm3 "$model" || exit 1
if [[ $# -eq 4 ]]; then
  bundle=$3 key=$4
elif "$art/bin/tunefarm" keys sign --help 2>&1 | grep -q -- --out; then
  "$art/bin/tunefarm" keys sign --out "$work/farm.key" || exit 1
  "$art/bin/tunefarm" tune --op gemm_sm90 --dtype f16 --shape M=1024,N=1024,K=1024 \
    --shape M=4096,N=4096,K=4096 --ops-dir "$ops" --store "$work/db" --bundle "$work/tuned" \
    --sign-key "$work/farm.key" --quiet | tail -n 12 || exit 1
  bundle=$work/tuned.tfb key=$work/farm.key.pub
else
  echo "this tunefarm cannot sign bundles: using the fixture"
  bundle=$work/fixture/gemm-tuned.tfb key=$work/fixture/farm.pub
fi
"$art/bin/tunefarm" bundle show "$bundle"

failed=0
run() {  # KEY BUNDLE deploy_gemm-args...
  local k=$1 b=$2
  shift 2
  echo
  echo "=== deploy_gemm --bundle $b $*"
  "$ex/bin/deploy_gemm" --bundle "$b" --key "$k" --ops-dir "$ops" "$@" || { echo "FAILED"; failed=1; }
}
run "$key" "$bundle" --op gemm_sm90 --M 4096 --N 4096 --K 4096               # tuned shape
run "$key" "$bundle" --op gemm_sm90 --M 8192 --N 8192 --K 4096               # nearest tuned shape
run "$key" "$bundle" --op gemm_sm90 --M 4096 --N 4096 --K 4096 --dtype bf16  # not tuned: op default
run "$key" "$bundle" --op gemm --M 4096 --N 4096 --K 4096                    # portable op
run "$work/fixture/farm.pub" "$work/fixture/gemm-other-gpu.tfb" \
  --op gemm_sm90 --M 4096 --N 4096 --K 4096                                  # only another GPU tuned

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
