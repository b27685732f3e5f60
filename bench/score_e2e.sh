#!/usr/bin/env bash
# End-to-end Score throughput over gRPC (docs/performance.md, "End to end"):
# 1 caller vs 64 concurrent single-row callers, dynamic batching off vs on,
# against a real vocabd serving the synthetic Llama-3 head.
#
#   bench/score_e2e.sh [BUILD_DIR] [CHECKPOINT] [SECONDS]
#   defaults: build, /tmp/vocabd-bench/llama3-f32 (bench/make_llama3_head.py), 8
#   env: PORT (50777), MAX_BATCH_ROWS (256), WEIGHTS_DTYPE (unset: the
#   checkpoint's own; e.g. bf16 or q8_0 -> --weights-dtype llama3=VALUE, so a
#   quantized head is timed from the same F32/BF16 checkpoint; a GGUF file of
#   a quantized type is served as such without it), ALLOW_BUSY (1: run even
#   when the machine is busy)
#
# Load: the load average is printed before and after. The benchmark itself
# keeps every core busy (the server and the load generator), so the load
# average during a run says nothing about other work; what does is the CPU
# time of every other process: for each row, the machine's busy time
# (/proc/stat) minus the server's (/proc/PID/stat) and the load generator's
# (the shell's `times` for its children), in cores over the row's wall time.
# A row where other processes used more than 0.25 of a core, or that starts
# at a 1-minute load average above 1.5, is no result: its figures print as
# BUSY(x) and the script exits 3 (it refuses to start at that load unless
# ALLOW_BUSY=1). Before each row it waits, up to 60 s, for the load average
# left by the previous row to fall to 1.5. The head kernels that ran (the
# server's "model serving" log line, lm_head_kernel) are printed before the
# table.
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
BUSY_LOAD=1.5
OTHER_MAX=0.25  # cores of other processes' CPU time that make a row BUSY
SERVER_LOG=$(mktemp /tmp/score_e2e.XXXXXX.log)
trap 'rm -f "$SERVER_LOG"' EXIT
load1() { cut -d' ' -f1 /proc/loadavg; }
is_busy() { awk -v l="$(load1)" -v b="$BUSY_LOAD" 'BEGIN { exit !(l > b) }'; }
mark() { if [[ "$ROW_BUSY" == 1 ]]; then echo "BUSY($1)"; else echo "$1"; fi; }
TICK=$(getconf CLK_TCK)
# Busy jiffies of the whole machine (user nice system irq softirq steal).
busy_jiffies() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
# utime + stime of a process, jiffies.
proc_jiffies() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# The shell's children's user + system seconds (the second line of `times`).
children_seconds() {
  times | awk 'NR == 2 { s = 0; for (i = 1; i <= 2; ++i) { split($i, a, "m");
    sub("s", "", a[2]); s += a[1] * 60 + a[2] } print s }'
}
now_seconds() { date +%s.%N; }
ANY_BUSY=0

run_server() {  # $1 = true|false (dynamic batching)
  "$VOCABD" --listen "127.0.0.1:$PORT" --model "llama3=$CKPT" --dynamic-batching="$1" \
    --max-batch-rows "$MAX_BATCH_ROWS" --max-queue-delay-us 0 --max-queue-rows 4096 \
    --max-queue-size 4096 --log-level info "${WEIGHTS_FLAG[@]}" >"$SERVER_LOG" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 600); do
    # Ready when one Score call succeeds (score_load's warm-up call).
    if "$LOAD" --target "127.0.0.1:$PORT" --model llama3 --hidden-size 4096 --seconds 0 \
      >/dev/null 2>&1; then return; fi
    sleep 0.5
  done
  echo "vocabd did not become healthy" >&2
  cat "$SERVER_LOG" >&2
  exit 1
}

stop_server() { kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
if is_busy && [[ "${ALLOW_BUSY:-0}" != 1 ]]; then
  echo "score_e2e: 1-minute load average $(load1) > $BUSY_LOAD: the machine is busy and no" \
    "figure would be a result. Run when it is idle, or set ALLOW_BUSY=1 for figures marked BUSY." >&2
  exit 2
fi
TABLE=()
for batching in false true; do
  run_server "$batching"
  # The head kernels that ran: the server logs them once per model.
  echo "server (dynamic batching $batching): $(grep -m1 'model serving' "$SERVER_LOG" || echo 'no model serving line')"
  declare -A RPS=()
  for c in 1 64; do
    ROW_BUSY=0
    for _ in $(seq 1 12); do is_busy || break; sleep 5; done
    if is_busy; then ROW_BUSY=1; fi
    t0=$(now_seconds); b0=$(busy_jiffies); s0=$(proc_jiffies "$SERVER_PID"); l0=$(children_seconds)
    line=$("$LOAD" --target "127.0.0.1:$PORT" --model llama3 --hidden-size 4096 \
      --concurrency "$c" --seconds "$SECONDS_PER_RUN")
    t1=$(now_seconds); b1=$(busy_jiffies); s1=$(proc_jiffies "$SERVER_PID"); l1=$(children_seconds)
    other=$(awk -v b="$((b1 - b0))" -v s="$((s1 - s0))" -v l0="$l0" -v l1="$l1" -v t0="$t0" \
      -v t1="$t1" -v tick="$TICK" 'BEGIN { o = ((b - s) / tick - (l1 - l0)) / (t1 - t0);
      printf "%.2f", o < 0 ? 0 : o }')
    echo "callers $c, batching $batching: other processes used $other cores" \
      "(load average $(cut -d' ' -f1-3 /proc/loadavg))"
    if awk -v o="$other" -v m="$OTHER_MAX" 'BEGIN { exit !(o > m) }'; then ROW_BUSY=1; fi
    if [[ "$ROW_BUSY" == 1 ]]; then ANY_BUSY=1; fi
    rps=$(sed -n 's/.*rps=\([0-9.]*\).*/\1/p' <<<"$line")
    p50=$(sed -n 's/.*p50_ms=\([0-9.]*\).*/\1/p' <<<"$line")
    p99=$(sed -n 's/.*p99_ms=\([0-9.]*\).*/\1/p' <<<"$line")
    RPS[$c]=$rps
    ratio="-"
    if [[ "$c" == 64 ]]; then
      ratio=$(awk -v a="${RPS[64]}" -v b="${RPS[1]}" 'BEGIN { if (b > 0) printf "%.1fx", a / b; else print "-" }')
    fi
    TABLE+=("| $batching | $c | $(mark "$rps") | $(mark "$p50") | $(mark "$p99") | $(mark "$ratio") |")
  done
  stop_server
done
echo "| dynamic batching | callers | requests/s | p50 ms | p99 ms | requests/s vs 1 caller |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${TABLE[@]}"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ "$ANY_BUSY" == 1 ]]; then
  echo "BUSY: other processes used more than $OTHER_MAX of a core, or the 1-minute load average" \
    "was above $BUSY_LOAD at the start, while figures marked BUSY(x) were measured: they are" \
    "not results."
  exit 3
fi
