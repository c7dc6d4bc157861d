#!/bin/bash
# The README's first command on a fresh Debian 12 (no GPU): set-up, then tune.
cd /root/tunefarm
s=$(date +%s)
scripts/setup.sh > /root/setup.log 2>&1; echo "setup rc=$? seconds=$(( $(date +%s) - s ))"
t=$(date +%s)
build/cli/tunefarm tune --backend sim --op gemm --dtype f16 --shape M=4096,N=4096,K=4096 > /root/tune.log 2>&1
echo "tune rc=$? seconds=$(( $(date +%s) - t )) total=$(( $(date +%s) - s ))"
