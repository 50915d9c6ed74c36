#!/usr/bin/env bash
# Checks the Makefile's SLOW_TESTS (the slow tier, make test-slow): each name
# is a top-level test of test/integration and of no other package, so that
# make test skips exactly those tests and make test-slow runs every one.
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
line=$(grep -E '^SLOW_TESTS[[:space:]]*:=' Makefile) || {
  echo "Makefile: no SLOW_TESTS := line (the slow tier's test names, separated by |)" >&2
  exit 1
}
IFS='|' read -r -a names <<<"$(echo "${line#*:=}" | tr -d '[:space:]')"
status=0
for name in "${names[@]}"; do
  decl="^func ${name}\(t \*testing\.T\)"
  if ! grep -qE "$decl" test/integration/*_test.go; then
    echo "SLOW_TESTS names ${name}, which is no test of test/integration: fix the name in the Makefile or drop it" >&2
    status=1
  fi
  others=$(grep -rlE --include='*_test.go' "$decl" . | grep -v '^\./test/integration/' || true)
  if [[ -n "$others" ]]; then
    echo "SLOW_TESTS names ${name}, which is also a test in ${others//$'\n'/, }: make test would skip it there too; rename one" >&2
    status=1
  fi
done
exit "$status"
