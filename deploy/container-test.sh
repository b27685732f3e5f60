#!/usr/bin/env bash
# Builds the vocabd container image from Dockerfile with buildah (no Docker
# engine needed), runs the server inside it and calls it from outside.
#
#   deploy/container-test.sh          (as root; installs buildah + debootstrap)
#
# 1. Base images made locally, no registry: `debootstrap --variant=minbase
#    bookworm` into a rootfs, committed with buildah as debian:bookworm-slim
#    and tagged debian:bookworm (the build stage apt-installs its toolchain).
#    Skipped when both images already exist (VOCABD_REBUILD_BASE=1 forces).
# 2. buildah bud --isolation chroot --pull=never -t localhost/vocabd:dev .
# 3. buildah run --isolation chroot (host network) vocabd on 127.0.0.1:$PORT,
#    then from the host: `vocabctl health`, `vocabctl embed`, GET /metrics;
#    inside the image: the HEALTHCHECK command; then SIGTERM and exit 0.
# Prints the time of each step. Needs the Debian mirror (apt) and a built
# vocabctl on the host (deploy/dev.sh build, or VOCABD_BUILD_DIR).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${VOCABD_BUILD_DIR:-$ROOT/build}"
WORK="${VOCABD_CONTAINER_WORK:-/var/tmp/vocabd-container}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
IMAGE="${VOCABD_IMAGE:-localhost/vocabd:dev}"
PORT="${VOCABD_CONTAINER_PORT:-50151}"
METRICS_PORT="${VOCABD_CONTAINER_METRICS_PORT:-9190}"
VOCABCTL="$BUILD_DIR/client/vocabctl"
ISO=(--isolation chroot)

step_start=$SECONDS
step() { echo "== [$((SECONDS - step_start))s] $*"; }

[[ $(id -u) -eq 0 ]] || { echo "run as root (buildah chroot isolation + debootstrap)"; exit 2; }
for p in buildah debootstrap; do
  command -v "$p" >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$p"
done
[[ -x $VOCABCTL ]] || { echo "no $VOCABCTL: run deploy/dev.sh build first (or set VOCABD_BUILD_DIR)"; exit 2; }
mkdir -p "$WORK"

have_image() { buildah inspect --type image "$1" >/dev/null 2>&1; }

if [[ ${VOCABD_REBUILD_BASE:-0} == 1 ]] || ! have_image docker.io/library/debian:bookworm-slim \
    || ! have_image docker.io/library/debian:bookworm; then
  step "debootstrap bookworm (minbase) from $MIRROR"
  rm -rf "$WORK/rootfs"
  debootstrap --variant=minbase bookworm "$WORK/rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log"; exit 1; }
  rm -rf "$WORK/rootfs/var/cache/apt/archives/"*.deb "$WORK/rootfs/var/lib/apt/lists/"*
  step "import rootfs as debian:bookworm-slim / debian:bookworm"
  ctr=$(buildah from scratch)
  mnt=$(buildah mount "$ctr")
  cp -a "$WORK/rootfs/." "$mnt/"
  buildah umount "$ctr" >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd /bin/bash "$ctr"
  # Full names, so the Dockerfile's short names resolve locally with --pull=never.
  buildah commit --quiet "$ctr" docker.io/library/debian:bookworm-slim >/dev/null
  buildah rm "$ctr" >/dev/null
  buildah tag docker.io/library/debian:bookworm-slim docker.io/library/debian:bookworm
fi

step "buildah bud -> $IMAGE"
buildah bud "${ISO[@]}" --pull=never --network host --layers=false -f "$ROOT/Dockerfile" \
  -t "$IMAGE" "$ROOT" >"$WORK/bud.log" 2>&1 || { tail -40 "$WORK/bud.log"; exit 1; }
buildah images "$IMAGE"

step "run vocabd in the image on 127.0.0.1:$PORT (host network)"
ctr=$(buildah from --pull=never "$IMAGE")
cleanup() {
  [[ -n ${run_pid:-} ]] && kill "$run_pid" 2>/dev/null || true
  buildah rm "$ctr" >/dev/null 2>&1 || true
}
trap cleanup EXIT
buildah run "${ISO[@]}" --network host --user 10001:10001 "$ctr" -- \
  /opt/vocabd/bin/vocabd --listen "127.0.0.1:$PORT" --metrics-listen "127.0.0.1:$METRICS_PORT" \
  >"$WORK/vocabd.log" 2>&1 &
run_pid=$!
for _ in $(seq 1 100); do
  "$VOCABCTL" --target "127.0.0.1:$PORT" --timeout 1000 health >/dev/null 2>&1 && break
  sleep 0.2
done

step "from outside: vocabctl health / embed, GET /metrics"
"$VOCABCTL" --target "127.0.0.1:$PORT" health
"$VOCABCTL" --target "127.0.0.1:$PORT" embed --ids 1,403,407
/usr/bin/python3 - "$METRICS_PORT" <<'PY'
import sys, urllib.request
body = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=5).read().decode()
assert 'vocabd_requests_total{method="/vocabd.v1.EmbeddingService/Embed",code="OK"} 1' in body, body
print([l for l in body.splitlines() if l.startswith("vocabd_build_info")][0])
PY

step "inside: the HEALTHCHECK command"
buildah run "${ISO[@]}" --network host --user 10001:10001 \
  --env "VOCABD_TARGET=127.0.0.1:$PORT" "$ctr" -- /opt/vocabd/bin/vocabctl --timeout 2000 health

step "SIGTERM -> graceful drain"
vocabd_pid=$(pgrep -P "$run_pid" -x vocabd || true)
[[ -z $vocabd_pid ]] && vocabd_pid=$(pgrep -P "$(pgrep -P "$run_pid" | head -1)" -x vocabd || true)
[[ -n $vocabd_pid ]] || { echo "cannot find the vocabd process under buildah run $run_pid"; exit 1; }
kill -TERM "$vocabd_pid"
rc=0; wait "$run_pid" || rc=$?
run_pid=""
tail -3 "$WORK/vocabd.log"
[[ $rc -eq 0 ]] || { echo "vocabd exited $rc"; exit 1; }
step "container test passed (image $IMAGE)"
