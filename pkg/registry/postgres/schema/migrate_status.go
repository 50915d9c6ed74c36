package schema

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
)

// sqlMigrateHistory reads the applied migrations with names and times.
var sqlMigrateHistory = statement("migrate_history")

// MigrationState is one registry migration as `platform-apiserver migrate
// status` shows it: embedded in this binary, applied to the database, or both.
type MigrationState struct {
	Version int
	Name    string
	// Applied says the database has it; AppliedAt is when (zero if not).
	Applied   bool
	AppliedAt time.Time
	// Known says this binary embeds it. An applied migration this binary
	// does not know was applied by a newer one: rolling back to this binary
	// would run it against a schema it was not written for.
	Known bool
}

// MigrationStatus lists the embedded migrations and those recorded in
// conn's database, by version. It changes nothing: without a
// schema_migrations table every embedded migration is pending.
func MigrationStatus(ctx context.Context, conn *pgxpool.Conn, extra ...fs.FS) ([]MigrationState, error) {
	all, err := migrations(extra...)
	if err != nil {
		return nil, err
	}
	byVersion := map[int]*MigrationState{}
	for _, m := range all {
		byVersion[m.Version] = &MigrationState{Version: m.Version, Name: m.Name, Known: true}
	}
	var exists bool
	if err := conn.QueryRow(ctx, sqlMigrateTableExists).Scan(&exists); err != nil {
		return nil, fmt.Errorf("check schema_migrations: %w", pgdb.InterpretError(err))
	}
	if exists {
		rows, err := conn.Query(ctx, sqlMigrateHistory)
		if err != nil {
			return nil, fmt.Errorf("read schema_migrations: %w", pgdb.InterpretError(err))
		}
		var (
			version int32
			name    string
			at      time.Time
		)
		_, err = pgx.ForEachRow(rows, []any{&version, &name, &at}, func() error {
			st := byVersion[int(version)]
			if st == nil {
				st = &MigrationState{Version: int(version), Name: name}
				byVersion[int(version)] = st
			}
			st.Applied, st.AppliedAt = true, at
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read schema_migrations: %w", pgdb.InterpretError(err))
		}
	}
	out := make([]MigrationState, 0, len(byVersion))
	for _, st := range byVersion {
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}
