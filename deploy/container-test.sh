#!/usr/bin/env bash
# Builds the vocabd container image from Dockerfile with buildah (no Docker
# engine needed), runs the server inside it and calls it from outside.
#
#   deploy/container-test.sh          (as root; installs buildah + debootstrap)
#
# 1. Base images made locally, no registry: `debootstrap --variant=minbase
#    bookworm` into a rootfs, given the official images' apt setup
#    (bookworm, bookworm-updates, bookworm-security sources; no .deb/pkgcache
#    left behind) and committed with buildah as debian:bookworm; then the
#    same rootfs without docs/man pages/translations (as the official slim
#    variant) as debian:bookworm-slim. Skipped when both images already exist
#    (VOCABD_REBUILD_BASE=1 forces).
# 2. buildah bud --isolation chroot --pull=never --format docker -t $IMAGE .
#    (default localhost/vocabd:<project version>)
# 3. Inspects the image: user 10001, entrypoint, HEALTHCHECK, exposed ports,
#    every shared library resolved (ldd), no compiler / -dev package.
# 4. buildah run --isolation chroot (host network) vocabd on 127.0.0.1:$PORT,
#    then from the host: `vocabctl health`, `vocabctl embed`, GET /metrics;
#    inside the image: the HEALTHCHECK command; then SIGTERM and exit 0.
# Prints the time of each step. Needs the Debian mirror this machine's apt
# uses (deploy/apt-mirror.sh; DEBIAN_MIRROR overrides) and, from step
# 4 on, a built vocabctl on the host (deploy/dev.sh build vocabctl, or
# VOCABD_BUILD_DIR); it may still be building while steps 1-3 run.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${VOCABD_BUILD_DIR:-$ROOT/build}"
WORK="${VOCABD_CONTAINER_WORK:-/var/tmp/vocabd-container}"
# The Debian mirrors this machine's apt uses (deploy/apt-mirror.sh reads
# /etc/apt/sources.list.d/*.sources and sources.list); DEBIAN_MIRROR and
# DEBIAN_SECURITY_MIRROR override them.
MIRROR="${DEBIAN_MIRROR:-$("$ROOT/deploy/apt-mirror.sh" bookworm)}"
SECURITY_MIRROR="${DEBIAN_SECURITY_MIRROR:-$("$ROOT/deploy/apt-mirror.sh" bookworm-security)}"
VERSION=$(sed -n 's/^project(vocabd VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
IMAGE="${VOCABD_IMAGE:-localhost/vocabd:$VERSION}"
PORT="${VOCABD_CONTAINER_PORT:-50151}"
METRICS_PORT="${VOCABD_CONTAINER_METRICS_PORT:-9190}"
HTTP_PORT="${VOCABD_CONTAINER_HTTP_PORT:-8180}"
VOCABCTL="$BUILD_DIR/client/vocabctl"
ISO=(--isolation chroot)

step_start=$SECONDS
step_last=$SECONDS
step() {
  local now=$SECONDS
  echo "== [total $((now - step_start))s, previous step $((now - step_last))s] $*"
  step_last=$now
}

[[ $(id -u) -eq 0 ]] || { echo "run as root (buildah chroot isolation + debootstrap)"; exit 2; }
for p in buildah debootstrap; do
  command -v "$p" >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$p"
done
[[ -x $VOCABCTL ]] || echo "note: no $VOCABCTL yet; build it before step 4" \
  "(deploy/dev.sh build vocabctl, or set VOCABD_BUILD_DIR)"
mkdir -p "$WORK"

have_image() { buildah inspect --type image "$1" >/dev/null 2>&1; }

# import_rootfs DIR NAME: a one-layer image from a directory tree.
import_rootfs() {
  local c m
  c=$(buildah from scratch)
  m=$(buildah mount "$c")
  cp -a "$1/." "$m/"
  buildah umount "$c" >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd bash "$c"
  buildah commit --quiet "$c" "$2" >/dev/null
  buildah rm "$c" >/dev/null
}

if [[ ${VOCABD_REBUILD_BASE:-0} == 1 ]] || ! have_image docker.io/library/debian:bookworm-slim \
    || ! have_image docker.io/library/debian:bookworm; then
  step "debootstrap bookworm (minbase) from $MIRROR"
  rm -rf "$WORK/rootfs"
  debootstrap --variant=minbase bookworm "$WORK/rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log"; exit 1; }
  r=$WORK/rootfs
  rm -rf "$r/var/cache/apt/archives/"*.deb "$r/var/cache/apt/"*.bin "$r/var/lib/apt/lists/"*
  # What the official images configure: all three suites, and apt keeps no
  # downloaded .deb or package cache in the image layers.
  rm -f "$r/etc/apt/sources.list"
  cat >"$r/etc/apt/sources.list.d/debian.sources" <<SRC
Types: deb
URIs: $MIRROR
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY_MIRROR
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  clean='"rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"'
  cat >"$r/etc/apt/apt.conf.d/docker-clean" <<CONF
DPkg::Post-Invoke { $clean; };
APT::Update::Post-Invoke { $clean; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CONF
  echo 'Acquire::Languages "none";' >"$r/etc/apt/apt.conf.d/docker-no-languages"
  echo 'Apt::AutoRemove::SuggestsImportant "false";' >"$r/etc/apt/apt.conf.d/docker-autoremove-suggests"
  step "import rootfs as debian:bookworm"
  # Full names, so the Dockerfile's short names resolve locally with --pull=never.
  import_rootfs "$r" docker.io/library/debian:bookworm
  step "slim it (no docs, man pages, translations) and import as debian:bookworm-slim"
  cat >"$r/etc/dpkg/dpkg.cfg.d/docker" <<'CONF'
# as in the official slim images: packages installed later skip these too
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
CONF
  find "$r/usr/share/doc" -mindepth 1 -not -type d -not -name copyright -delete
  find "$r/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$r/usr/share/info/"* "$r/usr/share/linda/"* "$r/usr/share/lintian/overrides/"* \
    "$r/usr/share/locale/"* "$r/usr/share/man/"*
  import_rootfs "$r" docker.io/library/debian:bookworm-slim
  for t in bookworm bookworm-slim; do buildah images "docker.io/library/debian:$t" | tail -n +2; done
fi

step "buildah bud -> $IMAGE (compiles vocabd + vocabctl in the build stage)"
# --format docker: the OCI image format has no HEALTHCHECK (buildah drops it).
buildah bud "${ISO[@]}" --pull=never --network host --layers=false --format docker \
  --build-arg "VOCABD_GIT_SHA=$(git -C "$ROOT" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)" \
  -f "$ROOT/Dockerfile" -t "$IMAGE" "$ROOT" >"$WORK/bud.log" 2>&1 \
  || { tail -40 "$WORK/bud.log"; exit 1; }
buildah images "$IMAGE"

step "inspect the runtime image: config, libraries, no toolchain"
buildah inspect --type image "$IMAGE" >"$WORK/inspect.json"
/usr/bin/python3 - "$WORK/inspect.json" "$VERSION" <<'PY'
import json, sys
img = json.load(open(sys.argv[1]))
c = img["Docker"]["config"]
checks = {
    "user": (c.get("User"), "10001:10001"),
    "entrypoint": (c.get("Entrypoint"), ["/opt/vocabd/bin/vocabd"]),
    "healthcheck": ((c.get("Healthcheck") or {}).get("Test"),
                    ["CMD", "/opt/vocabd/bin/vocabctl", "--timeout", "2000", "health"]),
    "exposed ports": (sorted(c.get("ExposedPorts") or {}), ["50051/tcp", "8080/tcp", "9090/tcp"]),
    "version label": ((c.get("Labels") or {}).get("org.opencontainers.image.version"), sys.argv[2]),
}
bad = [f"{k}: {got!r} != {want!r}" for k, (got, want) in checks.items() if got != want]
for k, (got, _) in checks.items():
    print(f"  {k}: {got}")
if bad:
    sys.exit("unexpected image config:\n  " + "\n  ".join(bad))
PY
ctr=$(buildah from --pull=never "$IMAGE")
trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
buildah run "${ISO[@]}" --network host "$ctr" -- /bin/sh -euc '
  id
  for b in /opt/vocabd/bin/vocabd /opt/vocabd/bin/vocabctl; do
    if ldd "$b" | grep "not found"; then echo "$b: missing libraries"; exit 1; fi
  done
  dev=$(dpkg-query -W -f="\${Package}\n" \
    | grep -E -- "-dev$|^(gcc|g\+\+|cpp|clang|binutils|make|cmake|ninja-build)(-[0-9.]+)?$" || true)
  [ -z "$dev" ] || { echo "toolchain / -dev packages in the runtime image:" $dev; exit 1; }
  for c in cc gcc g++ c++ clang ld as make cmake; do
    ! command -v "$c" >/dev/null || { echo "$c in the runtime image"; exit 1; }
  done
  echo "all libraries resolved, no toolchain, $(dpkg-query -W | wc -l) packages"
  du -sh /opt/vocabd/bin /opt/vocabd/models /usr/lib/x86_64-linux-gnu'
buildah rm "$ctr" >/dev/null
trap - EXIT

[[ -x $VOCABCTL ]] || { echo "no $VOCABCTL: run deploy/dev.sh build vocabctl first (or set VOCABD_BUILD_DIR)"; exit 2; }

step "run vocabd in the image on 127.0.0.1:$PORT (host network)"
ctr=$(buildah from --pull=never "$IMAGE")
cleanup() {
  [[ -n ${run_pid:-} ]] && kill "$run_pid" 2>/dev/null || true
  buildah rm "$ctr" >/dev/null 2>&1 || true
}
trap cleanup EXIT
buildah run "${ISO[@]}" --network host --user 10001:10001 "$ctr" -- \
  /opt/vocabd/bin/vocabd --listen "127.0.0.1:$PORT" --metrics-listen "127.0.0.1:$METRICS_PORT" \
  --http-listen "127.0.0.1:$HTTP_PORT" >"$WORK/vocabd.log" 2>&1 &
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

step "from outside: HTTP/JSON GET /readyz, POST /v1/EmbeddingService/Embed"
/usr/bin/python3 - "$HTTP_PORT" <<'PY'
import json, sys, urllib.request
base = f"http://127.0.0.1:{sys.argv[1]}"
ready = json.load(urllib.request.urlopen(base + "/readyz", timeout=5))
assert ready["status"] == "READY", ready
req = urllib.request.Request(base + "/v1/EmbeddingService/Embed?tensors=values",
                             data=b'{"sequences": [{"tokenIds": [1, 403, 407]}]}',
                             headers={"Content-Type": "application/json"})
out = json.load(urllib.request.urlopen(req, timeout=5))
assert out["embeddings"]["shape"] == ["3", "64"] and len(out["embeddings"]["values"]) == 192, out
print("HTTP Embed ok:", out["embeddings"]["shape"])
PY

step "inside: the HEALTHCHECK command"
buildah run "${ISO[@]}" --network host --user 10001:10001 \
  --env "VOCABD_TARGET=127.0.0.1:$PORT" "$ctr" -- /opt/vocabd/bin/vocabctl --timeout 2000 health

step "SIGTERM -> graceful drain"
# buildah run (chroot) re-execs itself twice before exec'ing vocabd
# (buildah -> chroot runtime -> chroot exec -> vocabd): search the subtree.
find_vocabd() {
  local c
  for c in $(pgrep -P "$1" || true); do
    [[ $(cat "/proc/$c/comm" 2>/dev/null) == vocabd ]] && { echo "$c"; return 0; }
    find_vocabd "$c" && return 0
  done
  return 1
}
vocabd_pid=$(find_vocabd "$run_pid" || true)
[[ -n $vocabd_pid ]] || { echo "cannot find the vocabd process under buildah run $run_pid"; exit 1; }
kill -TERM "$vocabd_pid"
rc=0; wait "$run_pid" || rc=$?
run_pid=""
tail -3 "$WORK/vocabd.log"
[[ $rc -eq 0 ]] || { echo "vocabd exited $rc"; exit 1; }
step "container test passed (image $IMAGE, $(buildah images --format '{{.Size}}' "$IMAGE"))"
