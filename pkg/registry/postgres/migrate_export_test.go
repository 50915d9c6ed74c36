package postgres

import "context"

// MigrateThrough applies the pending migrations up to version, and not the
// function sources: the registry as a release from before the sources
// (main before issue 51, migrations 001 to 028) migrated it.
func (s *Store) MigrateThrough(ctx context.Context, version int) error {
	return s.migrateUp(ctx, version, nil)
}
