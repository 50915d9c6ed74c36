#!/usr/bin/env bash
# Fails when any Go file is not gofmt-formatted.
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bad=$(git ls-files -z --cached --others --exclude-standard '*.go' | xargs -0 gofmt -l)
if [[ -n "$bad" ]]; then
  echo "these files need gofmt -w:" >&2
  echo "$bad" >&2
  exit 1
fi
