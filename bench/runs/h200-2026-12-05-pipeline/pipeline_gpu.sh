#!/usr/bin/env bash
# The pipeline's figures on a GPU host (bench/pipeline.md), from packed
# farms: .art/packs.tar.xz holds `tunefarm/` (scripts/pack.sh build
# .art/tunefarm) and, for the record before, `base/` (the same pack of the
# farm it is weighed against, its lib/ left out: the libraries are the same).
#
#   PART=1 bash bench/pipeline_gpu.sh   # the six gemm_hopper shapes cold: base, then this farm
#   PART=2 bash bench/pipeline_gpu.sh   # the same, fresh store, warm cubin cache; the README's first command
#   PART=3 bash bench/pipeline_gpu.sh   # the base alone, cold (when PART=1's base did not run)
#
# Each tune writes its log and `--format json` document under $OUT; the
# lines that matter go to $OUT/log.txt.
set -u
ROOT=$PWD
W=/tmp/w
mkdir -p $W
[ -d $W/tunefarm ] || tar xJf $ROOT/.art/packs.tar.xz -C $W
A=$W/tunefarm
export LD_LIBRARY_PATH=$A/lib:/usr/local/cuda/lib64
L=$OUT/log.txt
OPS=$A/share/tunefarm/ops
SHAPES="--shape M=32,N=4096,K=4096 --shape M=256,N=6144,K=4096 --shape M=1024,N=4096,K=14336 --shape M=2048,N=28672,K=4096 --shape M=4096,N=4096,K=4096 --shape M=16384,N=1024,K=1024"
P=${PART:-1}
want() { case ",$P," in *",$1,"*) return 0 ;; esac; return 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >> $L
echo "cores: $(nproc)" >> $L

# tune NAME BINARY CACHE [more args]: the six shapes, default strategy,
# budget 500, confirm top 3, a fresh store, the given cubin cache.
six() {
  local name=$1 bin=$2 cache=$3; shift 3
  rm -rf $W/runs/$name.db $W/runs/$name && mkdir -p $W/runs
  echo "=== $name ($(date -u +%T))" >> $L
  timeout ${LIMIT:-330} $bin tune --op gemm_hopper --ops-dir $OPS --dtype f16 $SHAPES --budget 500 --confirm-top 3 \
    --store $W/runs/$name.db --cache-dir $cache --unsigned --bundle $W/runs/$name "$@" > $OUT/$name.log 2> $OUT/$name.err
  echo "tune rc=$? ($(date -u +%T))" >> $L
  grep -aE "^h100|searched:|vs cublaslt|default .* winner|^  \* |^sweep:|^compile:|^busy:|^failures" \
    $OUT/$name.log $OUT/$name.err | cut -c1-260 | head -60 >> $L
}

if want 1; then
  rm -rf $W/cache-base $W/cache-new
  LIMIT=330 six base $W/base/libexec/tunefarm $W/cache-base
  LIMIT=240 six cold $A/libexec/tunefarm $W/cache-new --format json
  cp $W/cache-new -r $W/cache-warm
fi
if want 3; then
  rm -rf $W/cache-base
  LIMIT=${BASE_LIMIT:-330} six base $W/base/libexec/tunefarm $W/cache-base
fi
if want 2; then
  if [ ! -d $W/cache-warm ]; then  # a fresh machine: warm the cache with a cold run of this farm first
    rm -rf $W/cache-warm
    LIMIT=240 six cold2 $A/libexec/tunefarm $W/cache-warm --format json
  fi
  LIMIT=${WARM_LIMIT:-200} six warm $A/libexec/tunefarm $W/cache-warm --format json
  echo "=== README first command, cold ($(date -u +%T))" >> $L
  rm -rf $W/readme $W/cache-readme && mkdir -p $W/readme
  (cd $W/readme && /usr/bin/time -f "wall %e s" timeout 200 $A/bin/tunefarm tune --dtype f16 --shape M=4096,N=4096,K=4096 \
     --cache-dir $W/cache-readme --unsigned > $OUT/readme.log 2> $OUT/readme.err)
  grep -aE "vs cublaslt|default .* winner|^sweep:|^compile:|^busy:|^wall" $OUT/readme.log $OUT/readme.err | cut -c1-260 >> $L
fi
