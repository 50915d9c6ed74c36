#!/usr/bin/env bash
# Fails when pkg/registry/postgres/schema/schema.sql is not the schema the
# migrations and function sources make (hack/update-schema.sh writes it).
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go run ./hack/schema --output "$tmp/schema.sql"
if ! diff -u pkg/registry/postgres/schema/schema.sql "$tmp/schema.sql"; then
  echo "pkg/registry/postgres/schema/schema.sql is out of date: run make update-schema and commit the result" >&2
  exit 1
fi
echo "schema.sql is up to date"
