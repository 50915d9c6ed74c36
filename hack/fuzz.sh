#!/usr/bin/env bash
# Runs every Go fuzz target in the module for the given time (default 10s).
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fuzztime=${1:-10s}
grep -rl --include='*_test.go' '^func Fuzz' pkg cmd 2>/dev/null | xargs -n1 dirname | sort -u | while read -r dir; do
  mapfile -t targets < <(grep -h '^func Fuzz' "$dir"/*_test.go | sed 's/func \(Fuzz[A-Za-z0-9_]*\).*/\1/')
  for target in "${targets[@]}"; do
    echo ">> $dir $target"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "./$dir"
  done
done
