#!/usr/bin/env bash
# vocabd developer entry point. Usage:
#   deploy/dev.sh deps    install the Debian packages vocabd needs (apt-get)
#   deploy/dev.sh build   deps + configure + build (build/, Release)
#   deploy/dev.sh test    build + run the whole test suite with ctest, then the
#                         same suite under ASan+UBSan and under TSan (separate
#                         build dirs build-asan/, build-tsan/; any report
#                         fails), then the 60 s fuzz runs. This is what CI runs.
#                         VOCABD_SANITIZERS=0 skips the sanitizer suites (quick
#                         local runs); VOCABD_FUZZ_SECONDS=0 skips fuzzing.
#   deploy/dev.sh test-asan | test-tsan   one sanitizer suite only
#   deploy/dev.sh run     build + start vocabd on 127.0.0.1:50051 (VOCABD_LISTEN
#                         overrides) with the bundled stories260K model + show
#                         a real call (vocabctl talks to that address)
#   deploy/dev.sh stop    stop the server started by `run`
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${VOCABD_BUILD_DIR:-$ROOT/build}"
JOBS="${VOCABD_JOBS:-$(nproc)}"

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto
  libdnnl-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libabsl-dev libcli11-dev libssl-dev
  python3-numpy
  python3-torch
  libcpp-httplib-dev prometheus-cpp-dev openssl python3-yaml ocl-icd-opencl-dev
  python3-grpcio gnuplot-nox libopenblas-dev
  python3-protobuf python3-setuptools python3-pytest python3-pip
  clang libclang-rt-14-dev
  libpcre2-dev libicu-dev python3-sentencepiece
)

deps() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "installing: ${missing[*]}"
    local SUDO=""
    [[ $(id -u) -ne 0 ]] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

# build [TARGET...]: everything, or only the named targets.
build() {
  deps
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
  local TIMEFORMAT="build: %R s wall, %U s user, %S s sys"
  time if (($#)); then
    cmake --build "$BUILD_DIR" -j "$JOBS" --target "$@"
  else
    cmake --build "$BUILD_DIR" -j "$JOBS"
  fi
}

run_tests() {
  local start=$SECONDS
  build
  local TIMEFORMAT="ctest: %R s wall, %U s user, %S s sys"
  time (cd "$BUILD_DIR" && ctest --output-on-failure -j "$JOBS" --timeout 900)
  if [[ ${VOCABD_SANITIZERS:-1} != 0 ]]; then
    sanitizer_tests asan
    sanitizer_tests tsan
  fi
  # libFuzzer targets (fuzz/): the checkpoint parsers and request_fuzzer (every
  # RPC through the real handlers), 60 s each after ctest.
  if [[ ${VOCABD_FUZZ_SECONDS:-60} != 0 ]]; then
    local TIMEFORMAT="fuzz (build + runs): %R s wall, %U s user, %S s sys"
    time VOCABD_FUZZ_BUILD_DIR="${BUILD_DIR}-fuzz" "$ROOT/fuzz/run_fuzz.sh" "${VOCABD_FUZZ_SECONDS:-60}"
  fi
  echo "deploy/dev.sh test: $((SECONDS - start)) s in all"
}

# The whole suite built with sanitizers; the first report aborts the test
# (halt_on_error) and so fails ctest. Suppressions: deploy/sanitizers/.
sanitizer_tests() {
  local kind=$1 dir flags start=$SECONDS extra_env=()
  deps
  case $kind in
    asan) dir="${VOCABD_ASAN_BUILD_DIR:-$ROOT/build-asan}"; flags="address,undefined" ;;
    # OMP_NUM_THREADS=1: oneDNN's OpenMP workers synchronise through libgomp
    # barriers TSan cannot see (see deploy/sanitizers/tsan.supp).
    tsan) dir="${VOCABD_TSAN_BUILD_DIR:-$ROOT/build-tsan}"; flags="thread"; extra_env=(OMP_NUM_THREADS=1) ;;
    *) echo "unknown sanitizer $kind"; exit 2 ;;
  esac
  # -O1: the usual sanitizer optimisation level; compiles much faster than
  # Release's -O3 and keeps stacks readable.
  cmake -S "$ROOT" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVOCABD_SANITIZE="$flags" \
    -DVOCABD_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG"
  local TIMEFORMAT="$kind build: %R s wall, %U s user, %S s sys"
  time cmake --build "$dir" -j "$JOBS"
  local supp="$ROOT/deploy/sanitizers"
  TIMEFORMAT="$kind ctest: %R s wall, %U s user, %S s sys"
  time (cd "$dir" &&
    ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=0" \
    LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0" \
    UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$supp/ubsan.supp" \
    TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:history_size=7:suppressions=$supp/tsan.supp:print_suppressions=0" \
    env "${extra_env[@]}" ctest --output-on-failure -j "$JOBS" --timeout 1800)
  echo "$kind suite (build + test): $((SECONDS - start)) s"
}

run_server() {
  build vocabd vocabctl vocabd_python
  local pidfile="$BUILD_DIR/vocabd.pid" log="$BUILD_DIR/vocabd.log"
  if [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    echo "vocabd already running (pid $(cat "$pidfile")); deploy/dev.sh stop first"; exit 1
  fi
  cd "$ROOT"
  local listen="${VOCABD_LISTEN:-127.0.0.1:50051}"
  "$BUILD_DIR/server/vocabd" --listen "$listen" \
    --model stories260K=models/stories260K/stories260K.bin \
    --model stories260K-hf=models/stories260K-hf >"$log" 2>&1 &
  echo $! >"$pidfile"
  export VOCABD_TARGET="$listen"
  for _ in $(seq 1 100); do
    "$BUILD_DIR/client/vocabctl" health >/dev/null 2>&1 && break
    sleep 0.1
  done
  echo "vocabd running on $listen (pid $(cat "$pidfile"), log $log)"
  echo "\$ vocabctl health"; "$BUILD_DIR/client/vocabctl" health
  echo "\$ vocabctl embed --ids 1,403,407"; "$BUILD_DIR/client/vocabctl" embed --ids 1,403,407
  echo "stop it with: deploy/dev.sh stop"
}

stop_server() {
  local pidfile="$BUILD_DIR/vocabd.pid"
  [[ -f $pidfile ]] && kill -TERM "$(cat "$pidfile")" 2>/dev/null && echo "sent SIGTERM to $(cat "$pidfile")"
  rm -f "$pidfile"
}

case "${1:-}" in
  deps) deps ;;
  build) build ;;
  test) run_tests ;;
  test-asan) sanitizer_tests asan ;;
  test-tsan) sanitizer_tests tsan ;;
  run) run_server ;;
  stop) stop_server ;;
  *) sed -n '2,15p' "$0"; exit 2 ;;
esac
