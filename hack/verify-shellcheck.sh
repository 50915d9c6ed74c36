#!/usr/bin/env bash
# Runs shellcheck over every shell script in hack/ and .ci/: the *.sh files and
# any other file whose first line is a sh/bash shebang (.ci/run).
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if ! command -v shellcheck >/dev/null 2>&1; then
  echo "shellcheck is missing: run 'make deps' as root, or 'sudo apt-get install shellcheck'" >&2
  exit 1
fi
scripts=()
while IFS= read -r -d '' file; do
  [[ -f $file ]] || continue
  if [[ $file == *.sh ]] || head -n1 "$file" | grep -qE '^#!.*[/ ](ba|da|k)?sh\b'; then
    scripts+=("$file")
  fi
done < <(git ls-files -z --cached --others --exclude-standard hack .ci)
shellcheck "${scripts[@]}"
echo "shellcheck: ${#scripts[@]} scripts clean"
