#!/bin/sh
# The Python client installs from the checkout with pip and nothing fetched:
# --no-build-isolation (Debian's setuptools), --no-deps (Debian's grpcio,
# protobuf, numpy), --no-index (no package index at all). Built from a copy
# of clients/python + proto/ so the checkout gets no build/ or egg-info.
#   tests/client/python_pip_install_test.sh SOURCE_DIR
set -eu
SRC=$1
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/clients"
cp -r "$SRC/clients/python" "$tmp/src/clients/python"
cp -r "$SRC/proto" "$tmp/src/proto"
rm -rf "$tmp/src/clients/python/build" "$tmp/src/clients/python"/*.egg-info
PIP_NO_CACHE_DIR=1 "$PY" -m pip install -q --no-build-isolation --no-deps --no-index \
  --target "$tmp/site" "$tmp/src/clients/python"
# The wrapper and every generated module import from the installed tree only.
cd "$tmp"
PYTHONPATH="$tmp/site" "$PY" - "$tmp/site" <<'PY'
import importlib, os, sys
site = sys.argv[1]
import vocabd
assert vocabd.__file__.startswith(site), vocabd.__file__
for p in ("tensor", "rope", "model", "embedding", "scoring", "position", "tokenizer"):
    for suffix in ("_pb2", "_pb2_grpc"):
        m = importlib.import_module(f"vocabd.v1.{p}{suffix}")
        assert m.__file__.startswith(site), m.__file__
from vocabd.v1 import embedding_pb2, model_pb2
# proto3 `optional` survived generation (protoc 3.21, not grpc-tools' 3.5.1).
assert embedding_pb2.EmbedRequest.DESCRIPTOR.fields_by_name["learned_position_offset"].has_presence
assert model_pb2.ModelState.Value("AVAILABLE") == 5
c = vocabd.VocabdClient("127.0.0.1:1")
c.close()
print("pip install OK:", sorted(os.listdir(os.path.join(site, "vocabd", "v1")))[:4], "...")
PY
# Another python3 without Debian's modules (pyenv, conda: the first on PATH
# of some machines) gets a message naming the interpreter, /usr/bin/python3
# and the missing modules, not pip's "invalid command 'bdist_wheel'".
for other in $(which -a python3 2>/dev/null); do
  [ "$(readlink -f "$other")" = "$(readlink -f "$PY")" ] && continue
  "$other" -c 'import grpc' 2>/dev/null && continue
  "$other" -m pip --version >/dev/null 2>&1 || continue
  if PIP_NO_CACHE_DIR=1 "$other" -m pip install --no-build-isolation --no-deps --no-index \
       --target "$tmp/other-site" "$tmp/src/clients/python" >"$tmp/other.log" 2>&1; then
    echo "pip install under $other (no grpc) succeeded"; exit 1
  fi
  grep -q "cannot import grpc" "$tmp/other.log" && grep -q "/usr/bin/python3 -m pip install" "$tmp/other.log" ||
    { echo "pip install under $other: unclear failure:"; cat "$tmp/other.log"; exit 1; }
  echo "pip install under $other refused with the interpreter hint"
done
