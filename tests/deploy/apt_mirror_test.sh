#!/bin/sh
# deploy/apt-mirror.sh reads the mirror from apt's own sources (deb822 and
# one-line forms), and container-test.sh writes no mirror host name.
#   tests/deploy/apt_mirror_test.sh SOURCE_DIR
set -eu
SRC=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
check() {  # check SUITE WANT
  got=$(APT_ETC="$tmp/etc" sh "$SRC/deploy/apt-mirror.sh" "$1") || fail "$1: exit $?"
  [ "$got" = "$2" ] || fail "$1: got '$got', want '$2'"
}
mkdir -p "$tmp/etc/sources.list.d"
cat >"$tmp/etc/sources.list.d/debian.sources" <<'SRC'
Types: deb-src
URIs: http://src.mirror.test/debian
Suites: bookworm

Types: deb
# a comment
URIs: http://mirror.test/debian/ http://second.test/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://security.test/debian-security
Suites: bookworm-security
Components: main
SRC
check bookworm http://mirror.test/debian
check bookworm-updates http://mirror.test/debian
check bookworm-security http://security.test/debian-security
# One-line sources.list, with an [options] block.
rm "$tmp/etc/sources.list.d/debian.sources"
cat >"$tmp/etc/sources.list" <<'SRC'
# deb http://commented.test/debian bookworm main
deb-src http://src.test/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://line.test/debian bookworm main
deb http://line-sec.test/debian-security bookworm-security main
SRC
check bookworm http://line.test/debian
check bookworm-security http://line-sec.test/debian-security
# No source for the suite: exit 1 with a message.
if APT_ETC="$tmp/etc" sh "$SRC/deploy/apt-mirror.sh" trixie 2>"$tmp/err"; then fail "trixie found"; fi
grep -q "no deb source for suite 'trixie'" "$tmp/err" || fail "message: $(cat "$tmp/err")"
# No mirror host written in container-test.sh (it asks apt-mirror.sh).
if grep -nE 'https?://[a-z0-9.-]+\.(org|net|com|io)' "$SRC/deploy/container-test.sh"; then
  fail "container-test.sh names a mirror host"
fi
grep -q 'apt-mirror.sh' "$SRC/deploy/container-test.sh" || fail "container-test.sh does not use apt-mirror.sh"
echo "apt-mirror OK"
