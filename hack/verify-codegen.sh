#!/usr/bin/env bash
# Fails when generated code differs from what hack/update-codegen.sh produces.
set -o errexit -o nounset -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Regenerate in a copy of the tree so a failed verify never touches the checkout.
cd "$root"
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$tmp" 2>/dev/null || true
cp -r "$root/.git" "$tmp/.git" 2>/dev/null || true
(cd "$tmp" && hack/update-codegen.sh >/dev/null)

status=0
for path in pkg/generated pkg/apis hack/api-rule-violations.list; do
  if ! diff -Nru "$root/$path" "$tmp/$path"; then
    status=1
  fi
done
if [[ $status -ne 0 ]]; then
  echo "generated code is out of date: run hack/update-codegen.sh (make generate) and commit the result" >&2
  exit 1
fi
echo "generated code is up to date"
