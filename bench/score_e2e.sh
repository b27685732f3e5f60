#!/usr/bin/env bash
# End-to-end Score throughput over gRPC (README "Scoring performance"):
# 1 caller vs 64 concurrent single-row callers, dynamic batching off vs on,
# against a real vocabd serving the synthetic Llama-3 head.
#
#   bench/score_e2e.sh [BUILD_DIR] [CHECKPOINT] [SECONDS]
#   defaults: build, /tmp/vocabd-bench/llama3-f32 (bench/make_llama3_head.py), 8
#   env: PORT (50777), MAX_BATCH_ROWS (256), WEIGHTS_DTYPE (unset: the
#   checkpoint's own; e.g. bf16 or q8_0 -> --weights-dtype llama3=VALUE, so a
#   quantized head is timed from the same F32/BF16 checkpoint; a GGUF file of
#   a quantized type is served as such without it)
set -euo pipefail
BUILD=${1:-build}
CKPT=${2:-/tmp/vocabd-bench/llama3-f32}
SECONDS_PER_RUN=${3:-8}
PORT=${PORT:-50777}
MAX_BATCH_ROWS=${MAX_BATCH_ROWS:-256}
WEIGHTS_FLAG=()
if [[ -n "${WEIGHTS_DTYPE:-}" ]]; then WEIGHTS_FLAG=(--weights-dtype "llama3=$WEIGHTS_DTYPE"); fi
VOCABD="$BUILD/server/vocabd"
LOAD="$BUILD/bench/score_load"

run_server() {  # $1 = true|false (dynamic batching)
  "$VOCABD" --listen "127.0.0.1:$PORT" --model "llama3=$CKPT" --dynamic-batching="$1" \
    --max-batch-rows "$MAX_BATCH_ROWS" --max-queue-delay-us 0 --max-queue-rows 4096 \
    --max-queue-size 4096 --log-level warn "${WEIGHTS_FLAG[@]}" &
  SERVER_PID=$!
  for _ in $(seq 1 600); do
    # Ready when one Score call succeeds (score_load's warm-up call).
    if "$LOAD" --target "127.0.0.1:$PORT" --model llama3 --hidden-size 4096 --seconds 0 \
      >/dev/null 2>&1; then return; fi
    sleep 0.5
  done
  echo "vocabd did not become healthy" >&2
  exit 1
}

stop_server() { kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true; }

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| dynamic batching | callers | requests/s | p50 ms | p99 ms |"
echo "|---|---|---|---|---|"
for batching in false true; do
  run_server "$batching"
  for c in 1 64; do
    line=$("$LOAD" --target "127.0.0.1:$PORT" --model llama3 --hidden-size 4096 \
      --concurrency "$c" --seconds "$SECONDS_PER_RUN")
    rps=$(sed -n 's/.*rps=\([0-9.]*\).*/\1/p' <<<"$line")
    p50=$(sed -n 's/.*p50_ms=\([0-9.]*\).*/\1/p' <<<"$line")
    p99=$(sed -n 's/.*p99_ms=\([0-9.]*\).*/\1/p' <<<"$line")
    echo "| $batching | $c | $rps | $p50 | $p99 |"
  done
  stop_server
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
