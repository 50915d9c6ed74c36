package schema

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// MigrateThrough applies the pending migrations up to version, and not the
// function sources: the registry as a release from before the sources
// (main before issue 51, migrations 001 to 028) migrated it.
func MigrateThrough(ctx context.Context, conn *pgxpool.Conn, version int) error {
	return migrateUp(ctx, conn, version, nil)
}

// MigrateTo applies the pending migrations up to version and the function
// sources: the registry as this binary's release with migrations up to
// version would leave it.
func MigrateTo(ctx context.Context, conn *pgxpool.Conn, version int) error {
	return migrateUp(ctx, conn, version, functionFiles)
}

// SplitStatements is splitStatements.
var SplitStatements = splitStatements
