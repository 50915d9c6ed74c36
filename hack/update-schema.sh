#!/usr/bin/env bash
# Regenerates pkg/registry/postgres/schema/schema.sql: the schema of a
# registry migrated from empty, dumped from a throwaway PostgreSQL 15 that
# hack/schema starts on 127.0.0.1 (docs/registry.md, "Where the schema lives").
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
go run ./hack/schema --output pkg/registry/postgres/schema/schema.sql
echo "wrote pkg/registry/postgres/schema/schema.sql"
