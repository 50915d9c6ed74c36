package changelog

import (
	"embed"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
)

// The change log's static SQL, sql/<name>.sql (pgdb.Loader). A view's
// reading of its entries is built from its declaration (changesSQL).

//go:embed sql/*.sql
var sqlFiles embed.FS

var statements = pgdb.NewLoader(sqlFiles)

// statement returns the SQL of sql/<name>.sql (pgdb.Loader.Statement).
func statement(name string) string { return statements.Statement(name) }
