package integration

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/test/framework"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// TestHungMigratorLetsTheLockGo: a replica whose host hangs (SIGSTOP) while
// it migrates holds the migration lock on a session that stays open; the
// next replica's `platform-apiserver migrate` waits for it only until
// PostgreSQL ends that idle session (30 s), then migrates: here migration
// 029, whose index the hung one built and never recorded, is built again
// and recorded. The hung one, woken, fails: its session is gone.
func TestHungMigratorLetsTheLockGo(t *testing.T) {
	oneFaultTestAtATime(t)
	ctx := t.Context()
	bin, err := framework.PlatformAPIServerBinary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dsn := pgtest.NewTestDatabase(t)
	migrate := func(ctx context.Context, args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, bin, append([]string{"migrate", "--postgres-dsn=" + dsn, "--postgres-allow-insecure"}, args...)...)
	}
	for _, args := range [][]string{nil, {"down", "--to=28"}} {
		if out, err := migrate(ctx, args...).CombinedOutput(); err != nil {
			t.Fatalf("migrate %v: %v\n%s", args, err, out)
		}
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()

	// The build waits for an open transaction on the change log, so that
	// the migrator is caught while it holds the lock.
	blockerConn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = blockerConn.Close(context.Background()) }()
	blocker, err := blockerConn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := blocker.Exec(ctx, `LOCK TABLE registry_change IN ROW EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	var hungOut bytes.Buffer
	hung := migrate(context.Background())
	hung.Stdout, hung.Stderr = &hungOut, &hungOut
	if err := hung.Start(); err != nil {
		t.Fatal(err)
	}
	hungDone := make(chan error, 1)
	go func() { hungDone <- hung.Wait() }()
	t.Cleanup(func() { // the process this test started, by pid
		_ = hung.Process.Signal(syscall.SIGCONT)
		_ = hung.Process.Kill()
		if err := <-hungDone; err != nil {
			t.Logf("the migrator this test started and ended: %v", err)
		}
	})
	var backend int32
	eventually(t, "the migrator's index build to wait for the open transaction", time.Minute, func(ctx context.Context) (bool, string) {
		err := conn.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE 'CREATE INDEX CONCURRENTLY%'`).Scan(&backend)
		return err == nil, fmt.Sprint(err)
	})
	if err := hung.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// The build ends on the server; the hung client never records it.
	eventually(t, "the hung migrator's session to sit idle with the lock", time.Minute, func(ctx context.Context) (bool, string) {
		var state, activity string
		err := conn.QueryRow(ctx, `SELECT (SELECT state FROM pg_stat_activity WHERE pid = $1),
			(SELECT string_agg(concat_ws(' ', pid, state, wait_event_type, wait_event, left(query, 60)), E'\n') FROM pg_stat_activity WHERE datname = current_database())`,
			backend).Scan(&state, &activity)
		return err == nil && state == "idle", fmt.Sprint(err) + "\n" + activity
	})

	start := time.Now()
	next, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if out, err := migrate(next).CombinedOutput(); err != nil {
		t.Fatalf("migrate beside the hung migrator (after %s): %v\n%s", time.Since(start).Round(time.Second), err, out)
	}
	t.Logf("the next migrate ran %s after the hung migrator's session went idle", time.Since(start).Round(100*time.Millisecond))
	var valid, recorded bool
	if err := conn.QueryRow(ctx, `SELECT (SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass('registry_change_kind_cluster_idx')),
		EXISTS (SELECT FROM schema_migrations WHERE version = 29)`).Scan(&valid, &recorded); err != nil || !valid || !recorded {
		t.Fatalf("after the next migrate: index valid %v, migration 029 recorded %v (%v); want both", valid, recorded, err)
	}

	if err := hung.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-hungDone:
		hungDone <- err // for the cleanup
		if err == nil {
			t.Errorf("the woken migrator succeeded after its session was ended:\n%s", hungOut.String())
		} else if !strings.Contains(hungOut.String(), "029_change_log_by_member") {
			t.Logf("the woken migrator failed without naming migration 029: %v\n%s", err, hungOut.String())
		}
	case <-time.After(time.Minute):
		t.Error("the woken migrator neither finished nor failed within a minute")
	}
}
