package postgres_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

func TestMain(m *testing.M) { os.Exit(pgtest.RunTests(m)) }

func TestNewTestDatabase(t *testing.T) {
	t.Parallel()
	a, b := pgtest.NewTestDatabase(t), pgtest.NewTestDatabase(t)
	if a == b {
		t.Fatalf("two tests got the same database %q", a)
	}
	ctx := context.Background()
	for _, dsn := range []string{a, b} {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("fresh database has %d tables", n)
		}
		var v int
		if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&v); err != nil {
			t.Fatal(err)
		}
		if v < 150000 {
			t.Errorf("server version %d, want >= 15", v)
		}
		_ = conn.Close(ctx)
	}
}

func TestStartStop(t *testing.T) {
	if os.Getenv(pgtest.EnvDatabaseURL) != "" {
		t.Skip("TEST_DATABASE_URL set; not starting servers")
	}
	t.Parallel()
	ctx := context.Background()
	inst, err := pgtest.Start(ctx, pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, inst.DSN())
	if err != nil {
		t.Fatal(err)
	}
	var fsync string
	if err := conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil {
		t.Fatal(err)
	}
	if fsync != "off" {
		t.Errorf("fsync = %s, want off", fsync)
	}
	_ = conn.Close(ctx)
	if err := inst.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.Connect(ctx, inst.DSN()); err == nil {
		t.Error("server still accepts connections after Stop")
	}
}
