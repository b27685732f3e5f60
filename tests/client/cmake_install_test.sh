#!/bin/sh
# `cmake --install` puts vocabd, vocabctl, the default model and the Python
# client where a user finds them, and the installed vocabd finds its default
# model from any working directory (lib/core/data_path.h).
#   tests/client/cmake_install_test.sh BUILD_DIR
set -eu
BUILD=$1
PY=/usr/bin/python3
tmp=$(mktemp -d)
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
cmake --install "$BUILD" --prefix "$tmp/prefix" >"$tmp/install.log"
p=$tmp/prefix
for f in bin/vocabd bin/vocabctl share/vocabd/models/stories260K/stories260K.bin \
         share/vocabd/models/stories260K/tok512.bin share/vocabd/examples/stories260k_generate.py; do
  [ -e "$p/$f" ] || { echo "missing $p/$f"; cat "$tmp/install.log"; exit 1; }
done
site=$(ls -d "$p"/lib/python3*/dist-packages)
[ -f "$site/vocabd/v1/embedding_pb2_grpc.py" ] || { echo "no Python client in $site"; exit 1; }

# Started from an unrelated directory with no --model: the built-in default
# (models/stories260K/stories260K.bin) resolves to share/vocabd/models.
mkdir "$tmp/elsewhere"
cd "$tmp/elsewhere"
"$p/bin/vocabd" --listen 127.0.0.1:0 >"$tmp/vocabd.log" 2>&1 &
pid=$!
port=""
for _ in $(seq 1 300); do
  port=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$tmp/vocabd.log" | head -1)
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$port" ] || { echo "installed vocabd did not start:"; cat "$tmp/vocabd.log"; exit 1; }
grep -q "$p/share/vocabd/models/stories260K/stories260K.bin" "$tmp/vocabd.log" ||
  { echo "vocabd did not load the installed model:"; cat "$tmp/vocabd.log"; exit 1; }
"$p/bin/vocabctl" --target "127.0.0.1:$port" embed --ids 1,403 >"$tmp/embed.txt"
grep -q "shape: \[2, 64\]" "$tmp/embed.txt" || { cat "$tmp/embed.txt"; exit 1; }
# The installed Python client talks to it.
PYTHONPATH="$site" "$PY" -c "
import sys, vocabd
c = vocabd.VocabdClient('127.0.0.1:$port')
assert vocabd.__file__.startswith('$site'), vocabd.__file__
assert c.embed([1, 403]).shape == (2, 64)
assert c.tokenize('Once upon a time') == [1, 403, 407, 261, 378]
print('installed client OK:', [m.name for m in c.models()])
"
# The installed example finds the installed model (share/vocabd/models) by
# itself, run from an unrelated directory, and generates through the server.
PYTHONPATH="$site" "$PY" "$p/share/vocabd/examples/stories260k_generate.py" \
  --target "127.0.0.1:$port" --steps 24 >"$tmp/story.txt" 2>"$tmp/story.err" ||
  { echo "installed example failed:"; cat "$tmp/story.err"; exit 1; }
grep -q "^Once upon a time" "$tmp/story.txt" || { echo "installed example wrote:"; cat "$tmp/story.txt"; exit 1; }
# A missing relative model names every path tried.
if "$p/bin/vocabd" --listen 127.0.0.1:0 --model x=models/nope.bin >"$tmp/bad.log" 2>&1; then
  echo "vocabd started with a missing model"; exit 1
fi
grep -q "tried $tmp/elsewhere/models/nope.bin, $p/share/vocabd/models/nope.bin" "$tmp/bad.log" ||
  { echo "missing-model message lacks the tried paths:"; cat "$tmp/bad.log"; exit 1; }
echo "cmake --install OK ($p)"
