#!/usr/bin/env bash
# Fails when README.md or a page of docs/ names, in backticks, an identifier
# the code no longer has: a Go identifier, flag, metric, SQL object, file,
# make target or test (hack/docsidents/main.go says how each is checked).
# docs/benchmark-runs.md is not checked: it is a historical run log.
# A name only PostgreSQL or another tool has goes in hack/docsidents/known.txt;
# a renamed or removed one is fixed in the doc.
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/docsidents" ./hack/docsidents
"$tmp/docsidents" "$@"
