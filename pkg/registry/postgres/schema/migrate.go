// Package schema is the registry's database schema: the versioned
// migrations (tables, indexes, data), one source file per function with
// its triggers (functions/), the checked-in dump of the result
// (schema.sql), and what applies, reverts and reports them.
package schema

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// MigrationLockKey is the advisory lock that serializes migrations across
// replicas; the value is arbitrary but fixed ("platreg1" in ASCII).
const MigrationLockKey int64 = 0x70_6c_61_74_72_65_67_31 // "platreg1"

// WriteProtocol is how this release's writers commit (migration 028,
// docs/upgrades.md): every connection says it (the run-time parameter
// WriteProtocolParam), and the registry refuses a publish from one
// below registry_state.write_protocol. Raise both together, in the
// migration that changes how writers must commit: 1, commit tickets whose
// wait reads the lock table (migrations 023 and 026).
const WriteProtocol = 1

// WriteProtocolParam is the run-time parameter that carries WriteProtocol.
const WriteProtocolParam = "registry.write_protocol"

// SetWriteProtocol makes every connection of cfg say the write protocol
// this release writes: every publish checks it (migration 028).
func SetWriteProtocol(cfg *pgxpool.Config) {
	cfg.ConnConfig.RuntimeParams[WriteProtocolParam] = strconv.Itoa(WriteProtocol)
}

var (
	sqlMigrateLock        = statement("migrate_lock")
	sqlMigrateUnlock      = statement("migrate_unlock")
	sqlMigrateCreateTable = statement("migrate_create_table")
	sqlMigrateTableExists = statement("migrate_table_exists")
	sqlMigrateApplied     = statement("migrate_applied")
	sqlMigrateRecord      = statement("migrate_record")
	sqlMigrateForget      = statement("migrate_forget")
)

type migration struct {
	Version int
	Name    string // e.g. 001_registry
	Up      string
	Down    string
	// UpAlone and DownAlone are the statements of a noTransaction file,
	// nil for a file that runs in one transaction.
	UpAlone, DownAlone []string
}

// noTransaction is the first line of a migration file whose statements
// cannot run in a transaction (CREATE INDEX CONCURRENTLY: an index built
// beside the writers instead of locking them out). Its statements run one
// by one, and the migration is recorded after the last; so every one must
// be safe to run again after any of them failed or its session ended (say
// DROP INDEX CONCURRENTLY IF EXISTS before the CREATE INDEX CONCURRENTLY
// that an interrupted build leaves behind INVALID). Its statements end
// with a semicolon at the end of a line and hold no dollar-quoted bodies
// (functions live in functions/).
const noTransaction = "-- registry:no-transaction"

// aloneStatements returns the statements of a noTransaction migration
// file, nil for one that runs in one transaction.
func aloneStatements(file, body string) ([]string, error) {
	if first, _, _ := strings.Cut(body, "\n"); strings.TrimSpace(first) != noTransaction {
		return nil, nil
	}
	return splitStatements(file, body)
}

// splitStatements splits a noTransaction migration into its statements: each
// ends with a semicolon at the end of a line; comment lines are dropped.
func splitStatements(file, body string) ([]string, error) {
	if strings.Contains(body, "$$") {
		return nil, fmt.Errorf("migration %s runs without a transaction and holds a dollar-quoted body: "+
			"put functions in functions/ and keep only single-line-terminated statements here", file)
	}
	var stmts []string
	var cur strings.Builder
	for line := range strings.Lines(body) {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		if strings.HasSuffix(trimmed, ";") {
			stmts = append(stmts, strings.TrimSpace(cur.String()))
			cur.Reset()
		}
	}
	if rest := strings.TrimSpace(cur.String()); rest != "" {
		return nil, fmt.Errorf("migration %s runs without a transaction and ends with a statement without a semicolon: %q", file, rest)
	}
	if len(stmts) == 0 {
		return nil, fmt.Errorf("migration %s runs without a transaction and holds no statement", file)
	}
	return stmts, nil
}

// LatestVersion is the newest migration this binary knows.
func LatestVersion() (int, error) {
	all, err := migrations()
	if err != nil {
		return 0, err
	}
	if len(all) == 0 {
		return 0, errors.New("no migrations")
	}
	return all[len(all)-1].Version, nil
}

// migrations parses the embedded NNN_name.{up,down}.sql files and those
// at the root of each of extra (an extension's, docs/kinds.md), in order
// of version; no two may share one.
func migrations(extra ...fs.FS) ([]migration, error) {
	own, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	byName := map[string]*migration{}
	for _, fsys := range append([]fs.FS{own}, extra...) {
		ms, err := parseMigrations(fsys)
		if err != nil {
			return nil, err
		}
		for name, m := range ms {
			if byName[name] != nil {
				return nil, fmt.Errorf("migration %s is the registry's and an extension's", name)
			}
			byName[name] = m
		}
	}
	out := make([]migration, 0, len(byName))
	for _, m := range byName {
		if m.Up == "" || m.Down == "" {
			return nil, fmt.Errorf("migration %s lacks its up or down file", m.Name)
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s share a version", out[i-1].Name, out[i].Name)
		}
	}
	return out, nil
}

// parseMigrations parses the migration files at the root of fsys, by name.
func parseMigrations(fsys fs.FS) (map[string]*migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	byName := map[string]*migration{}
	for _, e := range entries {
		file := e.Name()
		base, dir, ok := strings.Cut(strings.TrimSuffix(file, ".sql"), ".")
		if !ok || (dir != "up" && dir != "down") {
			return nil, fmt.Errorf("migration %s: want NNN_name.up.sql or NNN_name.down.sql", file)
		}
		num, _, _ := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("migration %s: want a numeric prefix: %w", file, err)
		}
		body, err := fs.ReadFile(fsys, file)
		if err != nil {
			return nil, err
		}
		m := byName[base]
		if m == nil {
			m = &migration{Version: v, Name: base}
			byName[base] = m
		}
		alone, err := aloneStatements(file, string(body))
		if err != nil {
			return nil, err
		}
		if dir == "up" {
			m.Up, m.UpAlone = string(body), alone
		} else {
			m.Down, m.DownAlone = string(body), alone
		}
	}
	return byName, nil
}

// Migrate applies every pending migration, each in its own transaction,
// and the function sources (migrate_sources.go) that changed, in the
// transaction of the last migration it applies or in one of their own. An
// advisory lock makes replicas that start together take turns. conn is a
// connection of the migration's own, without a statement timeout: the
// migrations, and the wait for another replica's, may take longer than any
// request. extra are an extension's migrations (see migrations).
func Migrate(ctx context.Context, conn *pgxpool.Conn, extra ...fs.FS) error {
	return migrateUp(ctx, conn, -1, functionFiles, extra...)
}

// errStartOver is a migration without a transaction ended by a deadlock:
// a replica of a release that waits in pg_advisory_lock for the migration
// lock waits for the build's session while the build waits for the
// waiter's snapshot to end (migrate_lock.sql). The build starts over once
// the migration lock was let go, so that the waiter takes it.
var errStartOver = errors.New("ended by a deadlock with a replica waiting for the migration lock")

// migrateUp applies the pending migrations up to version through (all if
// < 0), then the function sources of fsys unless it is nil. A binary that
// does not know every applied migration leaves the sources alone: a newer
// one applied them, and this one's would be older.
func migrateUp(ctx context.Context, conn *pgxpool.Conn, through int, fsys fs.FS, extra ...fs.FS) error {
	all, err := migrations(extra...)
	if err != nil {
		return err
	}
	return migrateUpWith(ctx, conn, all, through, fsys)
}

// migrateUpWith is migrateUp with the migrations all.
func migrateUpWith(ctx context.Context, conn *pgxpool.Conn, all []migration, through int, fsys fs.FS) error {
	for attempt := 1; ; attempt++ {
		err := migrateUpOnce(ctx, conn, all, through, fsys)
		if attempt == migrationAttempts || !errors.Is(err, errStartOver) {
			return err
		}
		klog.FromContext(ctx).Info("Registry migration starts over after letting another replica take the migration lock", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}

// migrateUpOnce is one attempt of migrateUp.
func migrateUpOnce(ctx context.Context, conn *pgxpool.Conn, all []migration, through int, fsys fs.FS) error {
	var (
		sources []functionSource
		err     error
	)
	if fsys != nil {
		if sources, err = functionSources(fsys); err != nil {
			return err
		}
	}
	logger := klog.FromContext(ctx)
	return withMigrationLock(ctx, conn, func() error {
		applied, err := appliedVersions(ctx, conn)
		if err != nil {
			return err
		}
		known := make(map[int]bool, len(all))
		var pending []migration
		for _, m := range all {
			known[m.Version] = true
			if !applied[m.Version] && (through < 0 || m.Version <= through) {
				pending = append(pending, m)
			}
		}
		for v := range applied {
			if sources != nil && !known[v] {
				logger.Info("Not applying the registry's function sources: a newer binary applied migrations this one does not know", "migration", v)
				sources = nil
			}
		}
		logSources := func(names []string) {
			if len(names) > 0 {
				logger.Info("Applied registry function sources", "count", len(names), "functions", names)
			}
		}
		// The sources are applied in the transaction of the last pending
		// migration, or in one of their own when it has none; those that
		// migrations call, before the first that may call them too.
		sourcesApplied := false
		called := calledByMigrations(sources)
		for i, m := range pending {
			if len(called) > 0 && m.Version > lastMigrationWithFunctions {
				if err := migrationTx(ctx, conn, func(tx pgx.Tx) error { return applyUnrecorded(ctx, tx, called) }); err != nil {
					return fmt.Errorf("apply the function sources migrations call, before %s: %w", m.Name, pgdb.InterpretError(err))
				}
				called = nil
			}
			withSources := sources != nil && i == len(pending)-1
			if m.UpAlone != nil {
				if err := migrateAlone(ctx, conn, m.Name, m.UpAlone, sqlMigrateRecord, m.Version, m.Name); err != nil {
					return err
				}
				logger.Info("Applied registry migration", "migration", m.Name)
				continue
			}
			var done []string
			sourcesApplied = withSources
			err := migrationTx(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, m.Up); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, sqlMigrateRecord, m.Version, m.Name); err != nil {
					return err
				}
				if !withSources {
					return nil
				}
				var err error
				done, err = applyFunctionSources(ctx, tx, sources)
				return err
			})
			if err != nil {
				what := "migration " + m.Name
				if withSources {
					what += " and the function sources"
				}
				return fmt.Errorf("apply %s: %w", what, pgdb.InterpretError(err))
			}
			logger.Info("Applied registry migration", "migration", m.Name)
			logSources(done)
		}
		if sources == nil || sourcesApplied {
			return nil
		}
		var done []string
		err = migrationTx(ctx, conn, func(tx pgx.Tx) error {
			var err error
			done, err = applyFunctionSources(ctx, tx, sources)
			return err
		})
		if err != nil {
			return fmt.Errorf("apply the function sources: %w", pgdb.InterpretError(err))
		}
		logSources(done)
		return nil
	})
}

// migrationAttempts bounds the runs of a migration's transaction that
// PostgreSQL ended to break a deadlock: its DDL locks tables that writers
// of a release running beside it may hold while they wait for a lock it
// holds (registry_state's, say, taken by a trigger it defines).
const migrationAttempts = 3

// migrationTx runs fn in a transaction on conn, again after a deadlock.
func migrationTx(ctx context.Context, conn *pgxpool.Conn, fn func(pgx.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := pgx.BeginFunc(ctx, conn, fn)
		if attempt == migrationAttempts || !isDeadlock(err) {
			return err
		}
		klog.FromContext(ctx).Info("Registry migration ended by a deadlock; running it again", "attempt", attempt, "err", err)
	}
}

// isDeadlock tells whether PostgreSQL ended err's statement to break a
// deadlock.
func isDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgerrcode.DeadlockDetected
}

// migrateAlone runs the statements of a noTransaction migration file one
// by one on conn, then record (its recording or forgetting in
// schema_migrations) with args. A failure leaves it unrecorded, to run
// again whole.
func migrateAlone(ctx context.Context, conn *pgxpool.Conn, name string, stmts []string, record string, args ...any) error {
	for _, stmt := range stmts {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			if isDeadlock(err) {
				err = fmt.Errorf("%w: %w", errStartOver, err)
			}
			return fmt.Errorf("migration %s (run without a transaction; running it again starts it over): %q: %w", name, stmt, pgdb.InterpretError(err))
		}
	}
	if _, err := conn.Exec(ctx, record, args...); err != nil {
		return fmt.Errorf("migration %s: record it: %w", name, pgdb.InterpretError(err))
	}
	return nil
}

// MigrateDown reverts the newest steps applied migrations (all if steps <
// 0), on conn, with extra (as for Migrate).
func MigrateDown(ctx context.Context, conn *pgxpool.Conn, steps int, extra ...fs.FS) error {
	return migrateDown(ctx, conn, steps, 0, extra...)
}

// MigrateDownTo reverts every applied migration newer than version, on
// conn, with extra (as for Migrate).
func MigrateDownTo(ctx context.Context, conn *pgxpool.Conn, version int, extra ...fs.FS) error {
	return migrateDown(ctx, conn, -1, version, extra...)
}

// migrateDown reverts up to steps (all if < 0) applied migrations newer
// than floor, newest first.
func migrateDown(ctx context.Context, conn *pgxpool.Conn, steps, floor int, extra ...fs.FS) error {
	all, err := migrations(extra...)
	if err != nil {
		return err
	}
	return withMigrationLock(ctx, conn, func() error {
		applied, err := appliedVersions(ctx, conn)
		if err != nil {
			return err
		}
		for i := len(all) - 1; i >= 0 && steps != 0 && all[i].Version > floor; i-- {
			m := all[i]
			if !applied[m.Version] {
				continue
			}
			if err := revert(ctx, conn, m); err != nil {
				return err
			}
			klog.FromContext(ctx).Info("Reverted registry migration", "migration", m.Name)
			steps--
		}
		return nil
	})
}

// revert runs m's down file and forgets m in schema_migrations: in one
// transaction, or statement by statement for a noTransaction file.
func revert(ctx context.Context, conn *pgxpool.Conn, m migration) error {
	if m.DownAlone != nil {
		return migrateAlone(ctx, conn, m.Name, m.DownAlone, sqlMigrateForget, m.Version)
	}
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, m.Down); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sqlMigrateForget, m.Version)
		return err
	})
	if err != nil {
		return fmt.Errorf("revert migration %s: %w", m.Name, pgdb.InterpretError(err))
	}
	return nil
}

// Pending names the embedded migrations, and those of extra, not yet
// applied to conn's database.
func Pending(ctx context.Context, conn *pgxpool.Conn, extra ...fs.FS) ([]string, error) {
	all, err := migrations(extra...)
	if err != nil {
		return nil, err
	}
	applied, err := appliedVersionsIfAny(ctx, conn)
	if err != nil {
		return nil, err
	}
	var pending []string
	for _, m := range all {
		if !applied[m.Version] {
			pending = append(pending, m.Name)
		}
	}
	return pending, nil
}

// CheckWriteProtocol fails when the registry requires a write protocol
// above WriteProtocol (a newer release's migration raised it): this
// replica's publishes would all fail, so it cannot write its members, and
// leaves readiness saying so.
func CheckWriteProtocol(ctx context.Context, db interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) error {
	var required int
	if err := db.QueryRow(ctx, sqlWriteProtocol).Scan(&required); err != nil {
		return fmt.Errorf("%w: read the registry's write protocol: %w", store.ErrUnavailable, pgdb.InterpretError(err))
	}
	if required > WriteProtocol {
		return fmt.Errorf("%w: the registry requires write protocol %d or later and this replica writes %d: it cannot write its members; "+
			"upgrade it to the release of the registry's newest migration (docs/upgrades.md)", store.ErrUnavailable, required, WriteProtocol)
	}
	return nil
}

var sqlWriteProtocol = statement("migrate_write_protocol")

// migrationIdleTimeout is how long a migrating session may sit idle,
// between its statements, before PostgreSQL ends it and with it the
// migration lock (TestHungMigratorLetsTheLockGo).
const migrationIdleTimeout = "30s"

// migrationLockRetry is how often a replica tries the migration lock while
// another holds it.
const migrationLockRetry = 250 * time.Millisecond

// takeMigrationLock takes the migration lock on conn, trying until it gets
// it or ctx ends (migrate_lock.sql says why it does not wait for it).
func takeMigrationLock(ctx context.Context, conn *pgxpool.Conn) error {
	for waited := false; ; waited = true {
		var taken bool
		if err := conn.QueryRow(ctx, sqlMigrateLock, MigrationLockKey).Scan(&taken); err != nil {
			return fmt.Errorf("migrate: take advisory lock: %w", pgdb.InterpretError(err))
		}
		if taken {
			return nil
		}
		if !waited {
			klog.FromContext(ctx).Info("Waiting for another replica's registry migration to end")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("migrate: wait for another replica's migration: %w", ctx.Err())
		case <-time.After(migrationLockRetry):
		}
	}
}

// withMigrationLock runs fn holding the migration lock on conn, with
// schema_migrations created.
func withMigrationLock(ctx context.Context, conn *pgxpool.Conn, fn func() error) error {
	// A migrator that hangs (a paused host: its socket stays open) while it
	// holds the lock would keep every other replica from starting: its
	// session, idle between statements, ends after migrationIdleTimeout.
	if _, err := conn.Exec(ctx, "SELECT set_config('idle_session_timeout', $1, false)", migrationIdleTimeout); err != nil {
		return fmt.Errorf("migrate: set idle_session_timeout: %w", pgdb.InterpretError(err))
	}
	if err := takeMigrationLock(ctx, conn); err != nil {
		return err
	}
	defer func() {
		// Unlock on the same session; if that fails the session ends and
		// Postgres releases the lock, so destroy the connection.
		ctx := context.WithoutCancel(ctx)
		if _, err := conn.Exec(ctx, sqlMigrateUnlock, MigrationLockKey); err != nil {
			_ = conn.Conn().Close(ctx)
		} else if _, err := conn.Exec(ctx, "RESET idle_session_timeout"); err != nil {
			_ = conn.Conn().Close(ctx)
		}
	}()
	if _, err := conn.Exec(ctx, sqlMigrateCreateTable); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", pgdb.InterpretError(err))
	}
	return fn()
}

func appliedVersions(ctx context.Context, conn *pgxpool.Conn) (map[int]bool, error) {
	rows, err := conn.Query(ctx, sqlMigrateApplied)
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", pgdb.InterpretError(err))
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", pgdb.InterpretError(err))
	}
	applied := make(map[int]bool, len(versions))
	for _, v := range versions {
		applied[int(v)] = true
	}
	return applied, nil
}

// appliedVersionsIfAny treats a missing schema_migrations table as nothing applied.
func appliedVersionsIfAny(ctx context.Context, conn *pgxpool.Conn) (map[int]bool, error) {
	var exists bool
	if err := conn.QueryRow(ctx, sqlMigrateTableExists).Scan(&exists); err != nil {
		return nil, fmt.Errorf("check schema_migrations: %w", pgdb.InterpretError(err))
	}
	if !exists {
		return map[int]bool{}, nil
	}
	return appliedVersions(ctx, conn)
}
