#!/usr/bin/env bash
# Fails when go.mod/go.sum of the module or of a tools module (hack/lint, hack/tools) are not tidy.
set -o errexit -o nounset -o pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
for dir in "$root" "$root/hack/lint" "$root/hack/tools" "$root/hack/tools/kwok" "$root/hack/tools/metrics-server" "$root/hack/tools/helm" "$root/hack/tools/kueue"; do
  (cd "$dir" && go mod tidy -diff) || {
    echo "go.mod/go.sum in $dir are not tidy: run 'go mod tidy' there and commit" >&2
    exit 1
  }
done
