#!/usr/bin/env bash
# Builds the envelope decoder's libFuzzer target with clang and runs it.
#
#   tests/fuzz/build_and_run.sh [--build-dir DIR] [--runs N] [--max-time S]
#                               [--seeds] [-- <extra libFuzzer flags>]
#
#   --runs N      inputs to try (default 200000); --max-time caps the run too
#   --seeds       regenerate the checked-in seed corpus (tests/fuzz/corpus)
#
# New inputs the fuzzer finds go to DIR/corpus, never into the source tree;
# a crashing input is written to DIR/artifacts/ and the script fails.
# Exits 77 (ctest's SKIP_RETURN_CODE) when clang with libFuzzer is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build="$root/build-fuzz"
runs=200000
max_time=0
seeds=0
extra=()
while (($#)); do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --max-time) max_time=$2; shift 2 ;;
    --seeds) seeds=1; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "build_and_run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

cxx=${FUZZ_CXX:-}
if [[ -z "$cxx" ]]; then
  for c in clang++ clang++-14 clang++-15 clang++-16; do
    if command -v "$c" >/dev/null; then cxx=$(command -v "$c"); break; fi
  done
fi
if [[ -z "$cxx" ]]; then
  echo "SKIP: no clang++ (Debian: apt-get install clang libclang-rt-14-dev)"
  exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' \
  >"$probe/p.cc"
if ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe/p.cc" -o "$probe/p" 2>"$probe/err"; then
  echo "SKIP: $cxx cannot build libFuzzer targets (Debian: apt-get install libclang-rt-14-dev)"
  sed 's/^/  /' "$probe/err" | head -5
  exit 77
fi
cc=${cxx/clang++/clang}

gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S "$here" -B "$build" "${gen[@]}" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_BUILD_TYPE=None >/dev/null
fi
cmake --build "$build" -j "${FUZZ_BUILD_JOBS:-2}"

if ((seeds)); then
  rm -f "$here"/corpus/seed-*
  "$build/envelope_seeds" "$here/corpus"
  exit 0
fi

mkdir -p "$build/corpus" "$build/artifacts"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
args=(-runs="$runs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
      -artifact_prefix="$build/artifacts/")
((max_time > 0)) && args+=(-max_total_time="$max_time")
cd "$build"
exec ./envelope_fuzz "${args[@]}" "${extra[@]}" "$build/corpus" "$here/corpus"
