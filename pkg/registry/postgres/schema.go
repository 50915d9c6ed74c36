package postgres

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/postgres/schema"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// The registry's schema and its migrations are package schema's; the store
// gives them a connection of its writes pool and tells readiness.

// Migrate applies every pending migration and the function sources that
// changed (schema.Migrate).
func (s *Store) Migrate(ctx context.Context) error {
	return s.withMigrationConn(ctx, func(conn *pgxpool.Conn) error { return schema.Migrate(ctx, conn, s.extraMigrations()...) })
}

// MigrateDown reverts the newest steps applied migrations (all if steps < 0).
func (s *Store) MigrateDown(ctx context.Context, steps int) error {
	return s.withMigrationConn(ctx, func(conn *pgxpool.Conn) error { return schema.MigrateDown(ctx, conn, steps, s.extraMigrations()...) })
}

// MigrateDownTo reverts every applied migration newer than version.
func (s *Store) MigrateDownTo(ctx context.Context, version int) error {
	return s.withMigrationConn(ctx, func(conn *pgxpool.Conn) error {
		return schema.MigrateDownTo(ctx, conn, version, s.extraMigrations()...)
	})
}

// MigrationStatus lists the embedded migrations and those recorded in the
// database, by version (schema.MigrationStatus).
func (s *Store) MigrationStatus(ctx context.Context) ([]schema.MigrationState, error) {
	conn, err := s.writes.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", pgdb.InterpretError(err))
	}
	defer conn.Release()
	return schema.MigrationStatus(ctx, conn, s.extraMigrations()...)
}

// PendingMigrations names the migrations not yet applied.
func (s *Store) PendingMigrations(ctx context.Context) ([]string, error) {
	return s.pendingMigrations(ctx, s.writes.Pool)
}

// extraMigrations are the extension's migrations, beside the registry's own.
func (s *Store) extraMigrations() []fs.FS {
	if s.opts.Extension.Migrations == nil {
		return nil
	}
	return []fs.FS{s.opts.Extension.Migrations}
}

// errConnectionLost marks a check that failed because its connection died
// under it.
var errConnectionLost = errors.New("connection lost")

func (s *Store) pendingMigrations(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, pgdb.InterpretError(err)
	}
	defer conn.Release()
	pending, err := schema.Pending(ctx, conn, s.extraMigrations()...)
	if err != nil {
		if conn.Conn().IsClosed() {
			return nil, fmt.Errorf("%w: %w", errConnectionLost, err)
		}
		return nil, err
	}
	return pending, nil
}

// Ready returns nil when the database is reachable and fully migrated, and
// otherwise an error wrapping store.ErrUnavailable that says what is wrong.
// It uses the health-check pool.
func (s *Store) Ready(ctx context.Context) error {
	pending, err := s.pendingMigrations(ctx, s.health.Pool)
	for range healthPoolSize {
		if !errors.Is(err, errConnectionLost) {
			break
		}
		// An idle connection whose server crashed or failed over fails
		// its next query; that is not the database's answer. Ask again:
		// the pool dropped the dead one, so this takes another
		// connection, each idle one at most once.
		pending, err = s.pendingMigrations(ctx, s.health.Pool)
	}
	if err != nil {
		if errors.Is(err, store.ErrUnavailable) {
			return err
		}
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	if n := len(pending); n > 0 {
		noun := "migrations"
		if n == 1 {
			noun = "migration"
		}
		return fmt.Errorf("%w: %d %s pending (%s); run `platform-apiserver migrate`",
			store.ErrUnavailable, n, noun, strings.Join(pending, ", "))
	}
	return schema.CheckWriteProtocol(ctx, s.health)
}

// withMigrationConn runs fn on a connection of the writes pool that
// failover handling does not cut and that has no statement timeout.
func (s *Store) withMigrationConn(ctx context.Context, fn func(*pgxpool.Conn) error) error {
	conn, err := s.writes.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", pgdb.InterpretError(err))
	}
	defer conn.Release()
	// A migration's locks may keep the change feed's reads waiting past
	// their timeout: that must not cut the migration's own connection.
	defer s.writes.Spare(conn.Conn().PgConn())()
	if err := pgdb.LiftStatementTimeout(ctx, conn); err != nil { // connect.go
		return fmt.Errorf("migrate: %w", err)
	}
	defer pgdb.RestoreStatementTimeout(ctx, conn)
	return fn(conn)
}
