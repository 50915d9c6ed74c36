package replicas

import (
	"embed"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
)

// The statements of reads' routing and failovers, sql/<name>.sql
// (pgdb.Loader).
//
//go:embed sql/*.sql
var sqlFiles embed.FS

var statements = pgdb.NewLoader(sqlFiles)

// statement returns the SQL of sql/<name>.sql; it panics at start-up on a
// missing file.
func statement(name string) string { return statements.Statement(name) }
