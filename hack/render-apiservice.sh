#!/usr/bin/env bash
# Prints artifacts/deploy/50-apiservice.yaml with caBundle set to the given
# PEM CA file, the CA that signed the platform-apiserver-tls serving cert.
set -o errexit -o nounset -o pipefail
if [[ $# -ne 1 || ! -r "$1" ]]; then
  echo "usage: $0 CA_PEM_FILE   (the CA that signed platform-apiserver-tls)" >&2
  exit 2
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bundle=$(base64 -w0 < "$1")
sed "s|CA_BUNDLE_BASE64|$bundle|" "$root/artifacts/deploy/50-apiservice.yaml"
