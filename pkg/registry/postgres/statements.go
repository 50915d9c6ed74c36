package postgres

import (
	"embed"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
)

// The store's own static SQL (the change log's reads and compaction, the
// notifications, the continue-token key) is data: each statement is a file
// sql/<name>.sql, loaded by statement(name) into a package-level variable
// (pgdb.Loader). The packages below it load theirs likewise. Only SQL
// assembled at run time stays in Go: a list's WHERE clause from selectors
// (package views), the change feed's per-kind projection (changefeed.go),
// and DDL naming a partition (package usage).

//go:embed sql/*.sql
var sqlFiles embed.FS

// statements loads the embedded files; its record of what it read lets a
// test check that every file is used and every statement prepares.
var statements = pgdb.NewLoader(sqlFiles)

// statement returns the SQL of sql/<name>.sql with its includes expanded.
// It panics if a file is missing or empty or an include is circular: call it
// from a package-level variable's initializer, so a typo fails at start-up.
func statement(name string) string { return statements.Statement(name) }
