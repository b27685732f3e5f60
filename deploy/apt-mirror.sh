#!/bin/sh
# Prints the URI this machine's apt uses for a Debian suite, read from its
# own sources (deb822 /etc/apt/sources.list.d/*.sources, then one-line
# /etc/apt/sources.list and /etc/apt/sources.list.d/*.list), so no mirror
# host name is written into the repository.
#
#   deploy/apt-mirror.sh SUITE        e.g. bookworm, bookworm-security
#
# Exit 1 (and a message) when no `deb` source lists SUITE.
# APT_ETC overrides /etc/apt (tests).
set -eu
suite=${1:?usage: apt-mirror.sh SUITE}
etc=${APT_ETC:-/etc/apt}
uri=$(
  for f in "$etc"/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # deb822 stanzas: blank-line separated; fields Types, URIs, Suites.
    awk -v want="$suite" '
      function flush() {
        if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " want " ") && uris != "") {
          split(uris, u, " "); print u[1]; found = 1; exit
        }
        types = ""; uris = ""; suites = ""
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      tolower($1) == "types:" { $1 = ""; types = $0; sub(/^ +/, "", types) }
      tolower($1) == "uris:" { $1 = ""; uris = $0; sub(/^ +/, "", uris) }
      tolower($1) == "suites:" { $1 = ""; suites = $0; sub(/^ +/, "", suites) }
      END { if (!found) flush() }
    ' "$f"
  done
  for f in "$etc"/sources.list "$etc"/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    # deb [options] URI SUITE COMPONENT...
    awk -v want="$suite" '
      $1 == "deb" {
        i = 2
        if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
        if ($(i + 1) == want) { print $i; exit }
      }
    ' "$f"
  done
)
uri=$(printf '%s\n' "$uri" | sed -n '1{s:/*$::;p}')
if [ -z "$uri" ]; then
  echo "apt-mirror.sh: no deb source for suite '$suite' in $etc/sources.list{,.d/*}" >&2
  exit 1
fi
echo "$uri"
