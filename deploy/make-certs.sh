#!/bin/sh
# A private CA, a server certificate and a client certificate for vocabd's
# TLS / mutual TLS, with the openssl CLI (Debian `openssl`). The recipe of
# docs/operating.md ("TLS, mTLS and tokens"), as a script:
#
#   deploy/make-certs.sh DIR [SAN ...]
#
# SAN entries name the server as clients dial it: DNS:host or IP:addr
# (default: DNS:localhost DNS:vocabd IP:127.0.0.1). A client dialing a name
# or address not in the list must pass --tls-server-name NAME (vocabctl) /
# Tls(server_name=...) (Python) with a name that is.
# Writes DIR/ca.pem ca.key server.pem server.key client.pem client.key
# (keys: EC P-256, certificates valid VOCABD_CERT_DAYS days, default 365).
# Then:
#   vocabd --tls-cert DIR/server.pem --tls-key DIR/server.key \
#          [--tls-client-ca DIR/ca.pem]                       # mutual TLS
#   vocabctl --ca DIR/ca.pem [--cert DIR/client.pem --key DIR/client.key] health
set -eu
[ $# -ge 1 ] || { sed -n '2,20p' "$0"; exit 2; }
dir=$1
shift
[ $# -gt 0 ] || set -- DNS:localhost DNS:vocabd IP:127.0.0.1
days=${VOCABD_CERT_DAYS:-365}
san=$(printf '%s,' "$@")
san=${san%,}
mkdir -p "$dir"
cd "$dir"
key="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
# 1. The CA (self-signed, may sign certificates only).
openssl req -x509 $key -keyout ca.key -out ca.pem -days "$days" -subj "/CN=vocabd-ca" \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
# 2. The server: subjectAltName is what clients check (the CN is ignored).
printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$san" >server.ext
openssl req $key -keyout server.key -out server.csr -subj "/CN=vocabd"
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days "$days" \
  -out server.pem -extfile server.ext
# 3. A client, for --tls-client-ca (mutual TLS).
printf 'extendedKeyUsage=clientAuth\n' >client.ext
openssl req $key -keyout client.key -out client.csr -subj "/CN=vocabd-client"
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days "$days" \
  -out client.pem -extfile client.ext
rm -f server.csr client.csr server.ext client.ext ca.srl
chmod 600 ca.key server.key client.key
echo "wrote $(pwd)/{ca,server,client}.{pem,key} (server SAN: $san)"
