#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for
# SECONDS (default 60) on a seed corpus made from ../shared/models and
# tests/data (request_fuzzer: the server tests' requests, written by the
# fuzzer itself). Exit status != 0 when a target crashes (the reproducer is
# left in $FUZZ_DIR/artifacts/).
#   fuzz/run_fuzz.sh                      # 60 s each (CI)
#   fuzz/run_fuzz.sh 3600                 # long run, 1 h each
#   VOCABD_FUZZ_TARGETS=request_fuzzer fuzz/run_fuzz.sh 36000   # one target, 10 h
# request_fuzzer only (see the memory note in fuzz/request_fuzzer.cc):
#   VOCABD_FUZZ_JOBS=N                   N processes on one corpus (default 1)
#   VOCABD_FUZZ_RUNS_PER_PROCESS=K       a process is restarted after K inputs
#                                        (default 500000)
#   VOCABD_FUZZ_MAX_LEN=BYTES            longest input (default 65536)
# It prints the executions summed over every process and restart.
set -euo pipefail
SECONDS_EACH="${1:-60}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${VOCABD_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
FUZZ_DIR="${VOCABD_FUZZ_WORK_DIR:-$BUILD/work}"
MODELS="$ROOT/../shared/models"

# A build directory that is already configured with VOCABD_FUZZ=ON (deploy/dev.sh's
# build-asan/, whose objects also serve the ASan+UBSan test suite) is used as it
# is; otherwise one is configured for the fuzz targets only.
if ! grep -q '^VOCABD_FUZZ:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER=clang++ -DVOCABD_FUZZ=ON -DVOCABD_BUILD_TESTS=OFF \
    -DVOCABD_BUILD_BENCH=OFF >/dev/null
fi
TARGETS="${VOCABD_FUZZ_TARGETS:-safetensors_header_fuzzer gguf_fuzzer hf_config_fuzzer request_fuzzer}"
# shellcheck disable=SC2086
cmake --build "$BUILD" --target $TARGETS

mkdir -p "$FUZZ_DIR/artifacts"
seed() {  # seed <name> <files...>
  local dir="$FUZZ_DIR/corpus/$1"; shift
  mkdir -p "$dir"
  for f in "$@"; do [[ -f $f ]] && cp -f "$f" "$dir/$(echo "$f" | md5sum | cut -c1-16)"; done
  true
}
seed safetensors_header_fuzzer "$MODELS"/*/*.safetensors "$ROOT"/tests/data/forms/*/*.safetensors \
  "$ROOT"/tests/data/hostile/st_*/model.safetensors
seed gguf_fuzzer "$MODELS"/*/*.gguf "$ROOT"/tests/data/forms/*/*.gguf "$ROOT"/tests/data/hostile/gguf_*/*.gguf
seed hf_config_fuzzer "$MODELS"/*/config.json "$ROOT"/tests/data/forms/*/config.json \
  "$ROOT"/tests/data/hostile/cfg_*/config.json

mkdir -p "$FUZZ_DIR/corpus/request_fuzzer"
if [[ " $TARGETS " == *" request_fuzzer "* ]]; then
  VOCABD_REQUEST_SEEDS_OUT="$FUZZ_DIR/corpus/request_fuzzer" "$BUILD/fuzz/request_fuzzer"
fi

# One request_fuzzer job: restarted every RUNS_PER_PROCESS inputs until the
# time is up; stops at the first crash. Prints its executions.
request_fuzzer_job() {  # request_fuzzer_job <job number>
  local log="$FUZZ_DIR/request_fuzzer-job$1.log" end=$((SECONDS + SECONDS_EACH)) total=0 n
  : >"$log"
  # Per input: 10 s, RSS 2 GiB, and no single allocation above 128 MiB
  # (twice the server's --max-request-memory-bytes in the fuzzer: a bigger
  # one means a request's cost escaped the budget). Leak checks off: the
  # in-process server's threads hold memory across inputs.
  local limits=(-max_len="${VOCABD_FUZZ_MAX_LEN:-65536}" -rss_limit_mb=2048 -malloc_limit_mb=128
                -timeout=10 -detect_leaks=0)
  while ((SECONDS < end)); do
    if ! "$BUILD/fuzz/request_fuzzer" "$FUZZ_DIR/corpus/request_fuzzer" \
        -runs="${VOCABD_FUZZ_RUNS_PER_PROCESS:-500000}" -max_total_time=$((end - SECONDS)) \
        "${limits[@]}" -print_final_stats=1 \
        -artifact_prefix="$FUZZ_DIR/artifacts/request_fuzzer-" >>"$log" 2>&1; then
      tail -n 40 "$log"
      echo "request_fuzzer job $1: CRASH after $total executions (log: $log)"
      return 1
    fi
    n=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*$')
    total=$((total + n))
  done
  grep -E 'stat::(peak_rss_mb|slowest_unit_time_sec)|cov:' "$log" | tail -n 3
  echo "request_fuzzer job $1: $total executions, no crash (log: $log)"
}

# One target for SECONDS_EACH; its output is printed when it ends.
run_target() {  # run_target <target>
  local target=$1 log="$FUZZ_DIR/$1.log" status=0
  if [[ $target == request_fuzzer ]]; then
    local pids=()
    for ((job = 1; job <= ${VOCABD_FUZZ_JOBS:-1}; job++)); do
      request_fuzzer_job "$job" >"$log.job$job" 2>&1 &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || status=1; done
    cat "$log".job*
    return $status
  fi
  "$BUILD/fuzz/$target" "$FUZZ_DIR/corpus/$target" -max_total_time="$SECONDS_EACH" \
    -max_len=2097152 -rss_limit_mb=4096 -timeout=20 -print_final_stats=1 \
    -artifact_prefix="$FUZZ_DIR/artifacts/$target-" >"$log" 2>&1 || status=1
  tail -n 12 "$log"
  return $status
}

# VOCABD_FUZZ_PARALLEL targets run at once (default: the number of cores;
# each libFuzzer process is one thread, request_fuzzer's server has more).
status=0
parallel=${VOCABD_FUZZ_PARALLEL:-$(nproc)}
running=0
for target in $TARGETS; do
  echo "== $target: ${SECONDS_EACH}s"
  (run_target "$target" 2>&1 | sed "s/^/[$target] /"; exit "${PIPESTATUS[0]}") &
  running=$((running + 1))
  if ((running >= parallel)); then
    wait -n || status=1
    running=$((running - 1))
  fi
done
while ((running > 0)); do
  wait -n || status=1
  running=$((running - 1))
done
exit $status
