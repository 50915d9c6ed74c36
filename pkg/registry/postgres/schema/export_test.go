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
