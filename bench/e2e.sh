#!/usr/bin/env bash
# vocabd end-to-end load test (docs/performance.md, "End to end"): one command.
#
#   bench/e2e.sh [BUILD_DIR]        (default: build/)
#
# Environment: DURATION (per level, default 5s), WARMUP (default 1s), SOAK (the
# soak run's length, default 60s; the documented soak is 10m), OUT (results
# folder, default WORK/results), WORK (scratch, default /tmp/vocabd_e2e: the
# synthetic 16 MiB model lives there, never in git).
#
# Starts on loopback: vocabd on a synthetic Llama (vocab 1024 x hidden 4096,
# F32), bench/null_server (same API and response bytes, no compute) and
# bench/py_peer.py (python3-grpcio + NumPy); drives them with
# `vocabctl bench`, then writes OUT/e2e.csv, OUT/soak.json, OUT/e2e.md
# (tables) and OUT/e2e.png (plot) via bench/e2e_report.py.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
DURATION=${DURATION:-5s}
WARMUP=${WARMUP:-1s}
SOAK=${SOAK:-60s}
WORK=${WORK:-/tmp/vocabd_e2e}
OUT=${OUT:-$WORK/results}
PY=/usr/bin/python3
mkdir -p "$OUT" "$WORK"

if [[ ! -x $BUILD/server/vocabd || ! -x $BUILD/client/vocabctl || ! -x $BUILD/bench/null_server ]]; then
  [[ -f $BUILD/build.ninja ]] || cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
  ninja -C "$BUILD" vocabd vocabctl null_server
fi
VOCABD=$BUILD/server/vocabd
VOCABCTL=$BUILD/client/vocabctl
NULL_SERVER=$BUILD/bench/null_server

MODEL=$WORK/synth-v1024-h4096
[[ -f $MODEL/model.safetensors ]] || $PY "$ROOT/bench/make_synthetic_model.py" "$MODEL" --vocab 1024 --hidden 4096

P_VOCABD=127.0.0.1:50771
P_NULL=127.0.0.1:50772
P_PY=127.0.0.1:50773
P_NOBATCH=127.0.0.1:50774

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

wait_ready() {  # target
  for _ in $(seq 1 100); do
    "$VOCABCTL" --target "$1" --timeout 1000 models >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "server at $1 did not come up" >&2
  return 1
}

# Dynamic batching: compare on/off when vocabd has the flag.
# --help is captured whole first: `vocabd --help | grep -q` under pipefail
# fails whenever grep exits before vocabd has written everything (SIGPIPE).
BATCH_FLAG=""
VOCABD_HELP=$("$VOCABD" --help 2>&1) || { echo "$VOCABD --help failed" >&2; exit 1; }
if [[ $VOCABD_HELP == *--dynamic-batching* ]]; then BATCH_FLAG=--dynamic-batching; fi
echo "e2e: results go to $OUT" >&2

start_vocabd() {  # listen extra-args...
  local listen=$1
  shift
  "$VOCABD" --listen "$listen" --model "synth=$MODEL" --log-level warn "$@" >"$WORK/vocabd-${listen##*:}.log" 2>&1 &
  PIDS+=($!)
  LAST_PID=$!
}

if [[ -n $BATCH_FLAG ]]; then
  start_vocabd "$P_VOCABD" "$BATCH_FLAG=true"
  VOCABD_PID=$LAST_PID
  start_vocabd "$P_NOBATCH" "$BATCH_FLAG=false"
else
  start_vocabd "$P_VOCABD"
  VOCABD_PID=$LAST_PID
fi
"$NULL_SERVER" --listen "$P_NULL" --vocab 1024 --hidden 4096 >"$WORK/null.log" 2>&1 &
PIDS+=($!)
$PY "$ROOT/bench/py_peer.py" --checkpoint "$MODEL" --listen "$P_PY" --gen-dir "$WORK/pygen" --workers 16 \
  >"$WORK/py_peer.log" 2>&1 &
PIDS+=($!)
for t in "$P_VOCABD" "$P_NULL" "$P_PY"; do wait_ready "$t"; done
[[ -n $BATCH_FLAG ]] && wait_ready "$P_NOBATCH"

CSV=$OUT/e2e.csv
rm -f "$CSV"
bench() {  # label target rpc args...
  local label=$1 target=$2 rpc=$3
  shift 3
  echo "== $label: $rpc $*" >&2
  "$VOCABCTL" --target "$target" --timeout 30000 bench "$rpc" --duration "$DURATION" --warmup "$WARMUP" \
    --no-progress --allow-errors --label "$label" --csv "$CSV" "$@"
}

# 1. Embed 128 tokens x 4096 hidden F32 (2 MiB responses): vocabd vs null vs Python.
EMBED=(--tokens 128 --rows 1 --dtype f32 --concurrency 1,8,64 --connections 2)
bench "vocabd" "$P_VOCABD" embed "${EMBED[@]}" --verify
bench "null" "$P_NULL" embed "${EMBED[@]}"
bench "python" "$P_PY" embed "${EMBED[@]}"

# 2. Score, one hidden row per call (what a decode loop sends), top-5 + target.
SCORE=(--rows 1 --top-k 5 --concurrency 1,2,4,8,16,32,64 --connections 2)
if [[ -n $BATCH_FLAG ]]; then
  bench "vocabd batching on" "$P_VOCABD" score "${SCORE[@]}" --verify
  bench "vocabd batching off" "$P_NOBATCH" score "${SCORE[@]}" --verify
else
  bench "vocabd (no batcher)" "$P_VOCABD" score "${SCORE[@]}" --verify
fi
bench "null" "$P_NULL" score "${SCORE[@]}"
bench "python" "$P_PY" score "${SCORE[@]}"

# 3. Latency at a fixed Poisson rate below saturation: half of vocabd's
#    best closed-loop throughput for each RPC.
half_rate() {  # label rpc
  awk -F, -v l="$1" -v r="$2" '$1 == l && $2 == r && $6 == "closed-loop" { if ($11 > m) m = $11 }
       END { printf "%d", (m > 2 ? m / 2 : 1) }' "$CSV"
}
VLABEL=vocabd
[[ -n $BATCH_FLAG ]] && VLABEL="vocabd batching on"
EMBED_RATE=$(half_rate vocabd embed)
SCORE_RATE=$(half_rate "$VLABEL" score)
bench "vocabd fixed rate" "$P_VOCABD" embed --tokens 128 --rows 1 --concurrency 64 --connections 2 \
  --rate "$EMBED_RATE" --arrival poisson
bench "vocabd fixed rate" "$P_VOCABD" score --rows 1 --top-k 5 --concurrency 64 --connections 2 \
  --rate "$SCORE_RATE" --arrival poisson

# 4. Soak (short): constant rate, p99 per 10 s window, server RSS start/end.
#    The full soak is the same command with --duration 10m --window 60s.
echo "== soak $SOAK at $EMBED_RATE/s" >&2
"$VOCABCTL" --target "$P_VOCABD" --json bench embed --tokens 128 --rows 1 --concurrency 64 --connections 2 \
  --rate "$EMBED_RATE" --duration "$SOAK" --window 10s --server-pid "$VOCABD_PID" --verify \
  --no-progress --label soak --csv "$CSV" >"$OUT/soak.json"

$PY "$ROOT/bench/e2e_report.py" "$CSV" "$OUT/soak.json" --md "$OUT/e2e.md" --png "$OUT/e2e.png" \
  --batching "$([[ -n $BATCH_FLAG ]] && echo yes || echo no)"
echo "wrote $OUT/e2e.md $OUT/e2e.png $CSV $OUT/soak.json" >&2
