package postgres_test

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func exec(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func count(t *testing.T, conn *pgx.Conn, sql string) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(t.Context(), sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// TestStandby: a row written on the primary is visible on the standby once
// it replayed the primary's position; the standby refuses writes until it is
// promoted, then takes them.
func TestStandby(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	primary := pgtest.NewInstance(t, pgtest.Options{})
	if err := primary.CreateDatabase(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	standby := pgtest.NewStandby(t, primary, pgtest.StandbyOptions{Name: "replica_a"})
	if standby.Port() == primary.Port() {
		t.Fatalf("standby shares the primary's port %d", primary.Port())
	}

	var state, app string
	if err := connect(t, primary.DSN()).QueryRow(ctx, `SELECT state, application_name FROM pg_stat_replication`).Scan(&state, &app); err != nil {
		t.Fatalf("primary's pg_stat_replication: %v", err)
	}
	if state != "streaming" || app != "replica_a" {
		t.Errorf("pg_stat_replication: state %q application_name %q, want streaming replica_a", state, app)
	}

	p := connect(t, primary.DatabaseDSN("app"))
	exec(t, p, `CREATE TABLE item (v int)`)
	exec(t, p, `INSERT INTO item VALUES (1)`)
	lsn, err := primary.CurrentLSN(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := standby.WaitReplayed(ctx, lsn); err != nil {
		t.Fatal(err)
	}
	replayed, err := standby.ReplayLSN(ctx)
	if err != nil || replayed < lsn {
		t.Fatalf("ReplayLSN = %s, %v; want >= %s", replayed, err, lsn)
	}
	s := connect(t, standby.DatabaseDSN("app"))
	if n := count(t, s, `SELECT count(*) FROM item WHERE v = 1`); n != 1 {
		t.Fatalf("standby sees %d rows of the primary's insert, want 1", n)
	}
	if count(t, s, `SELECT pg_is_in_recovery()::int`) != 1 {
		t.Error("standby is not in recovery")
	}
	_, err = s.Exec(ctx, `INSERT INTO item VALUES (2)`)
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); !ok || pgErr.Code != "25006" {
		t.Errorf("insert on the standby: %v, want read_only_sql_transaction (25006)", err)
	}

	// CatchUp: the next write, without asking for the position.
	exec(t, p, `INSERT INTO item VALUES (3)`)
	if err := standby.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, `SELECT count(*) FROM item`); n != 2 {
		t.Errorf("standby sees %d rows after CatchUp, want 2", n)
	}

	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := connect(t, standby.DatabaseDSN("app"))
	exec(t, promoted, `INSERT INTO item VALUES (4)`)
	if n := count(t, promoted, `SELECT count(*) FROM item`); n != 3 {
		t.Errorf("promoted standby has %d rows, want 3", n)
	}
}

// TestKill: a crashed primary (SIGKILL) is gone with all its processes, its
// standby is promoted and has every write it replayed, and the old primary
// restarts from its data with crash recovery.
func TestKill(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	primary := pgtest.NewInstance(t, pgtest.Options{})
	standby := pgtest.NewStandby(t, primary, pgtest.StandbyOptions{})
	p := connect(t, primary.DSN())
	exec(t, p, `CREATE TABLE item (v int)`)
	exec(t, p, `INSERT INTO item SELECT generate_series(1, 100)`)
	if err := standby.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}

	pid := primary.Pid()
	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("postmaster pid %d still exists after Kill (%v)", pid, err)
	}
	if conn, err := pgx.Connect(ctx, primary.DSN()); err == nil {
		_ = conn.Close(ctx)
		t.Fatal("killed primary still accepts connections")
	}

	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	s := connect(t, standby.DSN())
	exec(t, s, `INSERT INTO item VALUES (101)`)
	if n := count(t, s, `SELECT count(*) FROM item`); n != 101 {
		t.Errorf("promoted standby has %d rows, want 101", n)
	}

	if err := primary.Resume(ctx); err != nil {
		t.Fatalf("restart after a crash: %v", err)
	}
	if n := count(t, connect(t, primary.DSN()), `SELECT count(*) FROM item`); n != 100 {
		t.Errorf("old primary has %d rows after crash recovery, want 100", n)
	}
}

func TestParseLSN(t *testing.T) {
	for in, want := range map[string]pgtest.LSN{"0/0": 0, "0/3000060": 0x3000060, "16/B374D848": 0x16_B374D848} {
		got, err := pgtest.ParseLSN(in)
		if err != nil || got != want || got.String() != in {
			t.Errorf("ParseLSN(%q) = %s (%d), %v; want %d", in, got, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "x/0", "0/100000000"} {
		if _, err := pgtest.ParseLSN(bad); err == nil {
			t.Errorf("ParseLSN(%q) succeeded", bad)
		}
	}
}

// TestMultiHostDSN: target_session_attrs picks the primary or the standby
// whatever the order of the hosts.
func TestMultiHostDSN(t *testing.T) {
	t.Parallel()
	primary := pgtest.NewInstance(t, pgtest.Options{})
	standby := pgtest.NewStandby(t, primary, pgtest.StandbyOptions{})
	for _, tc := range []struct {
		attrs       string
		wantStandby bool
	}{{"read-write", false}, {"primary", false}, {"standby", true}, {"prefer-standby", true}, {"read-only", true}} {
		for _, order := range [][]*pgtest.Instance{{primary, standby.Instance}, {standby.Instance, primary}} {
			dsn := pgtest.MultiHostDSN("", tc.attrs, order...)
			if n := count(t, connect(t, dsn), `SELECT pg_is_in_recovery()::int`); (n == 1) != tc.wantStandby {
				t.Errorf("%s: connected to the standby: %v, want %v", dsn, n == 1, tc.wantStandby)
			}
		}
	}
}
