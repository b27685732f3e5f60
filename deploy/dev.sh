#!/usr/bin/env bash
# vocabd developer entry point. Usage:
#   deploy/dev.sh deps [run|test|sanitizers|bench|all]
#                         install the Debian packages (apt-get) that building and
#                         running (run), the Release test suite (test, default),
#                         the sanitizer and fuzz suites (sanitizers) or the
#                         benchmarks and reference scripts (bench) need
#   deploy/dev.sh build   deps run + configure + build (build/, Release)
#   deploy/dev.sh test    the test command: build + run the whole GoogleTest /
#                         pytest suite with ctest (build/, Release)
#   deploy/dev.sh test-sanitizers
#                         the suite under ASan+UBSan and the fuzzers (one clang
#                         build, build-asan/), then the threaded executables under
#                         TSan (build-tsan/); any report fails. VOCABD_FUZZ_SECONDS
#                         (default 60 per target, 30 in `ci`; 0 skips) sets the fuzz time
#   deploy/dev.sh test-asan | test-tsan | fuzz   one of those steps
#   deploy/dev.sh ci      test, then test-sanitizers: what .ci/run runs
#   deploy/dev.sh run     build + start vocabd on 127.0.0.1:50051 (VOCABD_LISTEN
#                         overrides) with the bundled stories260K model + show
#                         a real call (vocabctl talks to that address)
#   deploy/dev.sh stop    stop the server started by `run` (SIGTERM: it drains;
#                         waits for the process to exit)
# Each step prints its wall time; a ccache on PATH is used when present
# (VOCABD_CCACHE=0 turns it off).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${VOCABD_BUILD_DIR:-$ROOT/build}"
ASAN_DIR="${VOCABD_ASAN_BUILD_DIR:-$ROOT/build-asan}"
TSAN_DIR="${VOCABD_TSAN_BUILD_DIR:-$ROOT/build-tsan}"
# Compile jobs: one more than the cores (a link or a protoc step leaves a core
# idle otherwise); ctest runs as many tests as there are cores.
JOBS="${VOCABD_JOBS:-$(($(nproc) + 1))}"
TEST_JOBS="${VOCABD_TEST_JOBS:-$(nproc)}"

# Building and running vocabd, vocabctl and the Python client.
RUN_PACKAGES=(
  build-essential cmake ninja-build pkg-config lld
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler grpc-proto
  libdnnl-dev ocl-icd-opencl-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libabsl-dev
  libcli11-dev libssl-dev openssl libcpp-httplib-dev prometheus-cpp-dev libpcre2-dev libicu-dev
  python3-grpcio python3-protobuf python3-setuptools python3-numpy
  curl   # README's HTTP/JSON example
)
# The Release test suite (GoogleTest, pytest, the benchmarks' build; nginx
# and iproute2 for the fleet test, tests/deploy/fleet_test.py).
TEST_PACKAGES=(
  libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev
  python3-pytest python3-pip python3-yaml python3-sentencepiece python3-regex curl
  nginx iproute2
)
# The ASan+UBSan / fuzz build (clang) and TSan.
SANITIZER_PACKAGES=(clang libclang-rt-14-dev)
# Benchmarks' reference peers and plots, and the golden scripts' optional
# torch cross-check.
BENCH_PACKAGES=(python3-torch gnuplot-nox)

install_packages() {
  local missing=()
  for p in "$@"; do
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

deps() {
  local TIMEFORMAT="deps ${1:-test}: %R s wall"
  time case "${1:-test}" in
    run) install_packages "${RUN_PACKAGES[@]}" ;;
    test) install_packages "${RUN_PACKAGES[@]}" "${TEST_PACKAGES[@]}" ;;
    sanitizers) install_packages "${RUN_PACKAGES[@]}" "${TEST_PACKAGES[@]}" "${SANITIZER_PACKAGES[@]}" ;;
    bench) install_packages "${RUN_PACKAGES[@]}" "${TEST_PACKAGES[@]}" "${BENCH_PACKAGES[@]}" ;;
    all) install_packages "${RUN_PACKAGES[@]}" "${TEST_PACKAGES[@]}" "${SANITIZER_PACKAGES[@]}" \
                          "${BENCH_PACKAGES[@]}" ;;
    *) echo "deploy/dev.sh deps: unknown group '$1' (run, test, sanitizers, bench, all)"; exit 2 ;;
  esac
}

launcher_flags() {
  if [[ ${VOCABD_CCACHE:-1} != 0 ]] && command -v ccache >/dev/null; then
    echo "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
  fi
}

# configure_and_build DIR [CMAKE ARG...] -- [TARGET...]: everything, or only
# the named targets.
configure_and_build() {
  local dir=$1 args=()
  shift
  while (($#)) && [[ $1 != -- ]]; do args+=("$1"); shift; done
  (($#)) && shift
  # shellcheck disable=SC2046
  cmake -S "$ROOT" -B "$dir" -G Ninja $(launcher_flags) "${args[@]}" >/dev/null
  local TIMEFORMAT="build $(basename "$dir"): %R s wall, %U s user, %S s sys"
  time if (($#)); then
    cmake --build "$dir" -j "$JOBS" --target "$@"
  else
    cmake --build "$dir" -j "$JOBS"
  fi
}

RELEASE_ARGS=(-DCMAKE_BUILD_TYPE=Release -DVOCABD_BUILD_TESTS=ON -DVOCABD_BUILD_BENCH=ON)
# build: the Release tree (build/): everything, tests, tools and benchmarks.
build() {
  deps test
  configure_and_build "$BUILD_DIR" "${RELEASE_ARGS[@]}" --
}

run_tests() {
  local start=$SECONDS
  deps test
  configure_and_build "$BUILD_DIR" "${RELEASE_ARGS[@]}" --
  local TIMEFORMAT="ctest build: %R s wall, %U s user, %S s sys"
  time (cd "$BUILD_DIR" && ctest --output-on-failure -j "$TEST_JOBS" --timeout 900)
  echo "deploy/dev.sh test: $((SECONDS - start)) s in all"
}

SUPP="$ROOT/deploy/sanitizers"
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:detect_stack_use_after_return=0"
export LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$SUPP/ubsan.supp"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:history_size=7:suppressions=$SUPP/tsan.supp:print_suppressions=0"

# ASan + UBSan: one clang build (build-asan/) that also carries libFuzzer's
# coverage instrumentation, so the same objects serve the test suite and
# the fuzz targets (fuzz/). -O1 -g1: the usual sanitizer level; compiles
# much faster than -O3 and keeps stacks readable. The first report aborts
# the test (halt_on_error) and so fails ctest.
# The GoogleTest executables run as 8 shards each (VOCABD_TEST_SHARDS,
# tests/CMakeLists.txt): every TEST runs, in 8 processes per executable rather
# than one process per TEST.
SANITIZER_TEST_SHARDS=8
ASAN_ARGS=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ -DVOCABD_SANITIZE=address,undefined
           -DVOCABD_FUZZ=ON -DVOCABD_BUILD_BENCH=OFF "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG"
           -DVOCABD_TEST_SHARDS=$SANITIZER_TEST_SHARDS)
asan_tests() {
  local start=$SECONDS
  deps sanitizers
  configure_and_build "$ASAN_DIR" "${ASAN_ARGS[@]}" --
  local TIMEFORMAT="asan ctest: %R s wall, %U s user, %S s sys"
  time (cd "$ASAN_DIR" && ctest --output-on-failure -j "$TEST_JOBS" --timeout 1800)
  echo "asan suite (build + test): $((SECONDS - start)) s"
}

FUZZ_TARGETS="safetensors_header_fuzzer gguf_fuzzer hf_config_fuzzer request_fuzzer"
# The fuzz targets from build-asan/ (built there by asan_tests, or now).
fuzz() {
  [[ ${VOCABD_FUZZ_SECONDS:-60} == 0 ]] && return 0
  deps sanitizers
  local TIMEFORMAT="fuzz (build + runs): %R s wall, %U s user, %S s sys"
  configure_and_build "$ASAN_DIR" "${ASAN_ARGS[@]}" -- $FUZZ_TARGETS
  time VOCABD_FUZZ_BUILD_DIR="$ASAN_DIR" "$ROOT/fuzz/run_fuzz.sh" "${VOCABD_FUZZ_SECONDS:-60}"
}

# TSan on the code that has threads: the executables labelled `threads`
# (lib/serving, the server, e2e and client-against-server tests;
# tests/CMakeLists.txt). OMP_NUM_THREADS=1: oneDNN's OpenMP workers
# synchronise through libgomp barriers TSan cannot see (tsan.supp).
tsan_tests() {
  local start=$SECONDS
  deps sanitizers
  configure_and_build "$TSAN_DIR" -DCMAKE_BUILD_TYPE=Release -DVOCABD_SANITIZE=thread -DVOCABD_BUILD_BENCH=OFF \
    "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" -- vocabd_serving_tests vocabd_server_tests
  local TIMEFORMAT="tsan ctest: %R s wall, %U s user, %S s sys"
  time (cd "$TSAN_DIR" && OMP_NUM_THREADS=1 ctest --output-on-failure -j "$TEST_JOBS" --timeout 1800 -L threads)
  echo "tsan suite (build + test): $((SECONDS - start)) s"
}

sanitizer_tests() {
  asan_tests
  fuzz
  tsan_tests
}

run_server() {
  deps run
  configure_and_build "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -- vocabd vocabctl vocabd_python vocabd_make_gguf generate_text
  local pidfile="$BUILD_DIR/vocabd.pid" log="$BUILD_DIR/vocabd.log"
  if [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    echo "vocabd already running (pid $(cat "$pidfile")); deploy/dev.sh stop first"; exit 1
  fi
  cd "$ROOT"
  local listen="${VOCABD_LISTEN:-127.0.0.1:50051}"
  "$BUILD_DIR/server/vocabd" --listen "$listen" \
    --model stories260K=models/stories260K/stories260K.bin \
    --model stories260K-hf=models/stories260K-hf >>"$log" 2>&1 &
  echo $! >"$pidfile"
  export VOCABD_TARGET="$listen"
  for _ in $(seq 1 100); do
    "$BUILD_DIR/client/vocabctl" health >/dev/null 2>&1 && break
    sleep 0.1
  done
  echo "vocabd running on $listen${VOCABD_HTTP_LISTEN:+, HTTP/JSON on $VOCABD_HTTP_LISTEN} (pid $(cat "$pidfile"), log $log)"
  echo "\$ vocabctl health"; "$BUILD_DIR/client/vocabctl" health
  echo "\$ vocabctl embed --ids 1,403,407"; "$BUILD_DIR/client/vocabctl" embed --ids 1,403,407
  echo "stop it with: deploy/dev.sh stop"
}

# SIGTERM drains the server (in-flight calls finish); waits up to 60 s for
# the process to exit.
stop_server() {
  local pidfile="$BUILD_DIR/vocabd.pid"
  if [[ -f $pidfile ]] && kill -TERM "$(cat "$pidfile")" 2>/dev/null; then
    local pid; pid="$(cat "$pidfile")"
    echo "sent SIGTERM to $pid"
    for _ in $(seq 1 600); do
      kill -0 "$pid" 2>/dev/null || { echo "vocabd (pid $pid) exited"; break; }
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && echo "vocabd (pid $pid) still running after 60 s"
  fi
  rm -f "$pidfile"
}

case "${1:-}" in
  deps) deps "${2:-test}" ;;
  build) build ;;
  test) run_tests ;;
  test-sanitizers) sanitizer_tests ;;
  test-asan) asan_tests ;;
  test-tsan) tsan_tests ;;
  fuzz) fuzz ;;
  # CI fuzzes 30 s per target (a regression check of the corpus and the
  # targets; long runs are fuzz/run_fuzz.sh's job).
  ci) start=$SECONDS; export VOCABD_FUZZ_SECONDS=${VOCABD_FUZZ_SECONDS:-30}
      run_tests; sanitizer_tests; echo "deploy/dev.sh ci: $((SECONDS - start)) s in all" ;;
  run) run_server ;;
  stop) stop_server ;;
  *) sed -n '2,23p' "$0"; exit 2 ;;
esac
