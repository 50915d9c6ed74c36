package views

import (
	"embed"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
)

// The views' static SQL, sql/<name>.sql (pgdb.Loader). A list's query is
// assembled at run time from its selectors (selector.go, read.go), a view's
// get and write statements from its declaration (view.go, view_write.go).

//go:embed sql/*.sql
var sqlFiles embed.FS

var statements = pgdb.NewLoader(sqlFiles)

// statement returns the SQL of sql/<name>.sql (pgdb.Loader.Statement).
func statement(name string) string { return statements.Statement(name) }
