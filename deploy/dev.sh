#!/usr/bin/env bash
# vocabd developer entry point. Usage:
#   deploy/dev.sh deps    install the Debian packages vocabd needs (apt-get)
#   deploy/dev.sh build   deps + configure + build (build/, Release)
#   deploy/dev.sh test    build + run the whole test suite with ctest
#   deploy/dev.sh run     build + start vocabd on 127.0.0.1:50051 with the
#                         bundled stories260K model + show a real call
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
  python3-grpcio gnuplot-nox
  python3-torch
  clang libclang-rt-14-dev
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

build() {
  deps
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
  cmake --build "$BUILD_DIR" -j "$JOBS"
}

run_tests() {
  build
  cd "$BUILD_DIR"
  ctest --output-on-failure -j "$JOBS" --timeout 900
  # libFuzzer targets for the checkpoint parsers (fuzz/), 60 s each after ctest.
  if [[ ${VOCABD_FUZZ_SECONDS:-60} != 0 ]]; then
    VOCABD_FUZZ_BUILD_DIR="${BUILD_DIR}-fuzz" "$ROOT/fuzz/run_fuzz.sh" "${VOCABD_FUZZ_SECONDS:-60}"
  fi
}

run_server() {
  build
  local pidfile="$BUILD_DIR/vocabd.pid" log="$BUILD_DIR/vocabd.log"
  if [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    echo "vocabd already running (pid $(cat "$pidfile")); deploy/dev.sh stop first"; exit 1
  fi
  cd "$ROOT"
  "$BUILD_DIR/server/vocabd" --listen 127.0.0.1:50051 \
    --model stories260K=models/stories260K/stories260K.bin \
    --model stories260K-hf=models/stories260K-hf >"$log" 2>&1 &
  echo $! >"$pidfile"
  for _ in $(seq 1 100); do
    "$BUILD_DIR/client/vocabctl" health >/dev/null 2>&1 && break
    sleep 0.1
  done
  echo "vocabd running on 127.0.0.1:50051 (pid $(cat "$pidfile"), log $log)"
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
  run) run_server ;;
  stop) stop_server ;;
  *) sed -n '2,9p' "$0"; exit 2 ;;
esac
