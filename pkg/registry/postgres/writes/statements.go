package writes

import (
	"embed"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
)

// The write engine's statements, sql/<name>.sql (pgdb.Loader). Batches
// travel as one jsonb parameter, a JSON array of row objects that the
// statement decodes with jsonb_to_recordset (JSONRows).
//
//go:embed sql/*.sql
var sqlFiles embed.FS

var statements = pgdb.NewLoader(sqlFiles)

// statement returns the SQL of sql/<name>.sql; it panics at start-up on a
// missing file.
func statement(name string) string { return statements.Statement(name) }
