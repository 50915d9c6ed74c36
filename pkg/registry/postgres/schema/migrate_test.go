package schema_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/schema"
)

func TestMigrateUpDownUp(t *testing.T) {
	t.Parallel()
	_, b := setupUnmigrated(t, postgres.Options{})
	mconn := b.migrationConn(t)
	conn := b.Connect(t)
	tables := func() int {
		var n int
		if err := conn.QueryRow(b.Ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename NOT IN ('schema_migrations', 'registry_schema_sources')`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	migrate := func(ctx context.Context) error { return schema.Migrate(ctx, mconn) }
	steps := []struct {
		name       string
		run        func(context.Context) error
		wantTables int
	}{
		{name: "up", run: migrate, wantTables: 19},
		{name: "up again is a no-op", run: migrate, wantTables: 19},
		{name: "down", run: func(ctx context.Context) error { return schema.MigrateDown(ctx, mconn, -1) }, wantTables: 0},
		{name: "up after down", run: migrate, wantTables: 19},
	}
	for _, step := range steps {
		if err := step.run(b.Ctx); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got := tables(); got != step.wantTables {
			t.Fatalf("%s: %d tables, want %d", step.name, got, step.wantTables)
		}
	}
	var seq int
	if err := conn.QueryRow(b.Ctx, `SELECT count(*) FROM pg_class WHERE relkind = 'S' AND relname IN ('registry_resource_version', 'registry_ticket')`).Scan(&seq); err != nil || seq != 1 {
		t.Fatalf("sequences of versions after up/down/up: count %d, err %v; want registry_ticket alone", seq, err)
	}
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	s, b := setupUnmigrated(t, postgres.Options{})
	errs := make(chan error, 2)
	for _, conn := range []*pgxpool.Conn{b.migrationConn(t), b.migrationConn(t)} {
		go func() { errs <- schema.Migrate(b.Ctx, conn) }()
	}
	var failed []error
	for range 2 {
		if err := <-errs; err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		t.Fatalf("concurrent Migrate: %v", failed)
	}
	if err := s.Ready(b.Ctx); err != nil {
		t.Fatalf("Ready after concurrent Migrate: %v", err)
	}
}
