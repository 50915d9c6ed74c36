package schema_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/schema"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// changeLogByMember is migration 029, the first run without a transaction.
const (
	changeLogByMember = 29
	memberIndex       = "registry_change_kind_cluster_idx"
)

// TestMigrationWithoutTransactionInterrupted: migration 029 builds its index
// beside the writers (CREATE INDEX CONCURRENTLY), so a batch commits while
// the build waits; a build whose session ends half way (a replica killed
// while it migrates) leaves an INVALID index and the migration unrecorded,
// and the next Migrate builds it anew: a valid index, the migration
// recorded, the schema exactly schema.sql.
func TestMigrationWithoutTransactionInterrupted(t *testing.T) {
	t.Parallel()
	s, b := setupUnmigrated(t, postgres.Options{})
	ctx := b.Ctx
	if err := schema.MigrateTo(ctx, b.migrationConn(t), changeLogByMember-1); err != nil {
		t.Fatal(err)
	}
	// This binary's claim reads quotas' scopes (migration 030): a column
	// stands in for it while it claims.
	conn := b.Connect(t)
	if _, err := conn.Exec(ctx, `ALTER TABLE cluster_resource_quota ADD COLUMN scopes jsonb`); err != nil {
		t.Fatal(err)
	}
	fence, err := s.ClaimMember(ctx, "c", "replica-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ALTER TABLE cluster_resource_quota DROP COLUMN scopes`); err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Epoch: fence.Epoch, Failovers: fence.Failovers,
		Nodes: []store.Node{node("n1", 4000, 8<<30)}})

	blocker, pid, migrating := migrateCaughtInTheBuild(t, b, conn)

	// Writers go on while it waits.
	committed := make(chan error, 1)
	go func() {
		committed <- s.Apply(ctx, store.Batch{ClusterID: "c", Epoch: fence.Epoch, Failovers: fence.Failovers,
			Nodes: []store.Node{node("n1", 4000, 8<<30), node("n2", 2000, 4<<30)}})
	}()
	select {
	case err := <-committed:
		if err != nil {
			t.Fatalf("a batch committed during the build: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a batch waited 30s for the index build: the build locks the writers out")
	}

	// The migrating session ends half way.
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	if err := <-migrating; err == nil || !strings.Contains(err.Error(), "029_change_log_by_member") {
		t.Fatalf("Migrate whose session ended during the build: %v, want an error naming migration 029", err)
	}
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if valid, exists := indexState(t, conn, ctx); !exists || valid {
		t.Fatalf("after the interrupted build: index exists %v, valid %v; want an INVALID index left behind", exists, valid)
	}
	if recorded(t, conn, ctx) {
		t.Fatal("the interrupted migration 029 is recorded as applied")
	}

	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate after the interrupted build: %v", err)
	}
	if valid, exists := indexState(t, conn, ctx); !exists || !valid {
		t.Fatalf("after Migrate again: index exists %v, valid %v; want a valid index", exists, valid)
	}
	if !recorded(t, conn, ctx) {
		t.Fatal("migration 029 is not recorded after Migrate again")
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	checkSchemaFile(t, "a migration 029 run again after its build was interrupted", dumpSchema(t, b))

	// And down, without a transaction too, then up again.
	if err := schema.MigrateDownTo(ctx, b.migrationConn(t), 28); err != nil { // the later ones, then 029
		t.Fatal(err)
	}
	if _, exists := indexState(t, conn, ctx); exists || recorded(t, conn, ctx) {
		t.Fatalf("after down: index exists %v, recorded %v; want neither", exists, recorded(t, conn, ctx))
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	checkSchemaFile(t, "migration 029 down and up", dumpSchema(t, b))
}

// migrateCaughtInTheBuild runs Migrate on a connection of its own while
// blocker, a transaction that has taken the change log's writers' lock and
// not committed, keeps 029's concurrent build waiting before it reads the
// table; it returns once the build waits, with the migrating session's pid
// and Migrate's result to come.
func migrateCaughtInTheBuild(t *testing.T, b testBundle, conn *pgx.Conn) (blocker pgx.Tx, pid uint32, migrating <-chan error) {
	t.Helper()
	ctx := b.Ctx
	blocker, err := b.Connect(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := blocker.Exec(ctx, `LOCK TABLE registry_change IN ROW EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	mconn := b.migrationConn(t)
	pid = mconn.Conn().PgConn().PID()
	result := make(chan error, 1)
	go func() { result <- schema.Migrate(ctx, mconn) }()
	waitFor(t, "the build to wait for the open transaction", func() bool {
		var waiting bool
		err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE pid = $1 AND wait_event_type = 'Lock' AND query LIKE 'CREATE INDEX CONCURRENTLY%')`, pid).Scan(&waiting)
		return err == nil && waiting
	})
	return blocker, pid, result
}

// indexState tells whether migration 029's index exists and is valid.
func indexState(t *testing.T, conn *pgx.Conn, ctx context.Context) (valid, exists bool) {
	t.Helper()
	err := conn.QueryRow(ctx, `SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass($1)`, memberIndex).Scan(&valid)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	return valid, err == nil
}

// recorded tells whether migration 029 is recorded as applied.
func recorded(t *testing.T, conn *pgx.Conn, ctx context.Context) bool {
	t.Helper()
	var applied bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM schema_migrations WHERE version = $1)`, changeLogByMember).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	return applied
}

// waitFor polls cond for up to a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
	}
}

// TestSplitStatements: a migration run without a transaction is split into
// its statements, and one that cannot be split safely is refused.
func TestSplitStatements(t *testing.T) {
	t.Parallel()
	got, err := schema.SplitStatements("x", "-- registry:no-transaction\n-- why\nDROP INDEX CONCURRENTLY IF EXISTS i;\n\nCREATE INDEX CONCURRENTLY i\n  ON t (a, b);\n")
	if err != nil || len(got) != 2 || got[0] != "DROP INDEX CONCURRENTLY IF EXISTS i;" || got[1] != "CREATE INDEX CONCURRENTLY i\n  ON t (a, b);" {
		t.Errorf("split: %q, %v", got, err)
	}
	for body, want := range map[string]string{
		"-- registry:no-transaction\nCREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1; $$;\n": "dollar-quoted",
		"-- registry:no-transaction\nCREATE INDEX CONCURRENTLY i ON t (a)\n":                             "without a semicolon",
		"-- registry:no-transaction\n-- nothing\n":                                                       "no statement",
	} {
		if _, err := schema.SplitStatements("x", body); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("split %q: %v, want an error saying %q", body, err, want)
		}
	}
}

// TestMigrationWithoutTransactionBesideAnOldWaiter: a replica of a release
// that waits for the migration lock inside pg_advisory_lock (every release
// before migration 029) holds a snapshot the index build waits for, while it
// waits for the lock the build's session holds. PostgreSQL ends the build
// as a deadlock; Migrate lets the lock go, so that the waiter takes it, and
// builds again.
func TestMigrationWithoutTransactionBesideAnOldWaiter(t *testing.T) {
	t.Parallel()
	s, b := setupUnmigrated(t, postgres.Options{})
	ctx := b.Ctx
	if err := schema.MigrateTo(ctx, b.migrationConn(t), changeLogByMember-1); err != nil {
		t.Fatal(err)
	}
	conn := b.Connect(t)
	var deadlockTimeoutMS int
	if err := conn.QueryRow(ctx, `SELECT setting::int FROM pg_settings WHERE name = 'deadlock_timeout'`).Scan(&deadlockTimeoutMS); err != nil {
		t.Fatal(err)
	}
	deadlockTimeout := time.Duration(deadlockTimeoutMS) * time.Millisecond
	// The build waits for the blocker first, so that the old waiter below
	// waits, and has its one deadlock check, before the cycle closes.
	blocker, _, migrating := migrateCaughtInTheBuild(t, b, conn)

	// The old release's wait for the migration lock, then what it does
	// with it when nothing it knows is pending: let it go.
	old := b.Connect(t)
	oldDone := make(chan error, 1)
	go func() {
		if _, err := old.Exec(ctx, `SELECT pg_advisory_lock($1)`, schema.MigrationLockKey); err != nil {
			oldDone <- err
			return
		}
		_, err := old.Exec(ctx, `SELECT pg_advisory_unlock($1)`, schema.MigrationLockKey)
		oldDone <- err
	}()
	oldPID := old.PgConn().PID()
	waitFor(t, "the old replica to wait for the migration lock", func() bool {
		var waiting bool
		err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock')`, oldPID).Scan(&waiting)
		return err == nil && waiting
	})
	time.Sleep(2 * deadlockTimeout) // its deadlock check found no cycle
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	select {
	case err := <-migrating:
		if err != nil {
			t.Fatalf("Migrate beside an old replica waiting for the migration lock: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Migrate beside an old replica waiting for the migration lock: still running after a minute")
	}
	select {
	case err := <-oldDone:
		if err != nil {
			t.Fatalf("the old replica's wait for the migration lock: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the old replica never got the migration lock")
	}
	if valid, exists := indexState(t, conn, ctx); !exists || !valid || !recorded(t, conn, ctx) {
		t.Fatalf("index exists %v, valid %v, migration recorded %v; want all", exists, valid, recorded(t, conn, ctx))
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatal(err)
	}
}
