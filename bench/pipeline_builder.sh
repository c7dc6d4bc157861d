#!/usr/bin/env bash
# What a builder adds (bench/pipeline.md): a CURVE farm on this host — a
# coordinator, one sim GPU worker that compiles with NVRTC on ONE thread,
# and, with BUILDER=1, one builder of one thread (`worker --compile-only`)
# — runs the six gemm_hopper shapes searched at budget 100. Each run starts
# from a fresh store and empty caches; the wall time of `submit --wait` and
# the sweep's pipeline line (`status`) are printed.
#
#   BUILDER=0 bash bench/pipeline_builder.sh [OUT_DIR]
#   BUILDER=1 bash bench/pipeline_builder.sh [OUT_DIR]
#
# BUDGET (100) and SHAPES (how many of the six, 6) make a shorter run.
# On a GPU host (GPU=1; TUNEFARM and OPS from a pack) the worker drives the
# host's CUDA devices: WORKER_THREADS and BUILDER_THREADS (1 each) size the
# two compile pools, so a builder on the host's idle cores can be weighed
# against the worker's pool alone.
set -eu
T=${TUNEFARM:-$(cd "$(dirname "$0")/.." && pwd)/build/cli/tunefarm}
OPS=${OPS:-$(cd "$(dirname "$0")/.." && pwd)/ops}
DEVICE="--backend sim --sim-models h100 --sim-compile nvrtc"
[ "${GPU:-0}" = 1 ] && DEVICE="--backend cuda"
D=${1:-/tmp/pipeline-builder}
rm -rf "$D" && mkdir -p "$D" && cd "$D"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
E=tcp://127.0.0.1:$PORT
for who in coordinator gpu builder client; do $T keys curve --out $who --name $who > /dev/null; done
cat gpu.pub > workers.allow
cat builder.pub > builders.allow
cat client.pub > clients.allow
$T coordinator --bind $E --store farm.db --curve-key coordinator --allow-list workers.allow \
  --builder-allow-list builders.allow --client-allow-list clients.allow > coordinator.log 2>&1 &
C=$!
K="--coordinator-key coordinator.pub"
$T worker --connect $E --name gpu --curve-key gpu $K $DEVICE \
  --compile-threads ${WORKER_THREADS:-1} --cache-dir gpu-cache > gpu.log 2>&1 &
G=$!
B=
if [ "${BUILDER:-0}" = 1 ]; then
  $T worker --compile-only --arch sm_90a --connect $E --name builder --curve-key builder $K \
    --compile-threads ${BUILDER_THREADS:-1} --cache-dir builder-cache > builder.log 2>&1 &
  B=$!
fi
ALL=("{ M = 32, N = 4096, K = 4096 }" "{ M = 256, N = 6144, K = 4096 }" "{ M = 1024, N = 4096, K = 14336 }"
     "{ M = 2048, N = 28672, K = 4096 }" "{ M = 4096, N = 4096, K = 4096 }" "{ M = 16384, N = 1024, K = 1024 }")
SHAPE_LIST=$(IFS=,; echo "${ALL[*]:0:${SHAPES:-6}}")
cat > six.toml <<TOML
[sweep]
name = "six"
ops = ["gemm_hopper"]
dtypes = ["f16"]
gpus = ["*"]
budget = ${BUDGET:-100}
confirm_top = 3
shapes = [ $SHAPE_LIST ]
TOML
FARM="--coordinator $E --curve-key client $K"
start=$(date +%s.%N)
$T submit six.toml $FARM --ops-dir "$OPS" --wait > submit.log 2>&1
end=$(date +%s.%N)
echo "builder=${BUILDER:-0} wall $(python3 -c "print(round($end - $start, 1))") s"
$T status $FARM | grep -E "six|pipeline:"
# CPU seconds each process spent (user + system; its NVRTC compiles included).
cpu() { awk -v t=$(getconf CLK_TCK) '{ printf "%.1f", ($14 + $15 + $16 + $17) / t }' /proc/$1/stat 2> /dev/null; }
echo "cpu seconds: coordinator $(cpu $C), gpu worker $(cpu $G)${B:+, builder $(cpu $B)}"
kill $G $B 2> /dev/null || true
kill $C 2> /dev/null || true
wait 2> /dev/null || true
[ "${GPU:-0}" = 1 ] && { $T best --store farm.db 2>&1 | head -20 || true; }
