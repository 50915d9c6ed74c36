package usage

import (
	"context"
	"maps"
	"os"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/platform-apiserver/pkg/registry/postgres/schema"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

func TestMain(m *testing.M) { os.Exit(pgtest.RunTests(m)) }

// TestStatementsAllUsed: every embedded file was loaded at init.
func TestStatementsAllUsed(t *testing.T) {
	t.Parallel()
	unused, err := statements.Unused()
	if err != nil {
		t.Fatalf("embedded SQL files: %v", err)
	}
	for _, f := range unused {
		t.Errorf("%s is embedded but no statement loads it", f)
	}
}

// TestStatementsPrepare: every statement parses and type-checks against the
// migrated schema.
func TestStatementsPrepare(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, err := pgxpool.New(context.Background(), pgtest.NewTestDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if err := schema.Migrate(ctx, conn); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	loaded := statements.Statements()
	for _, name := range slices.Sorted(maps.Keys(loaded)) {
		if _, err := conn.Conn().Prepare(ctx, name, loaded[name]); err != nil {
			t.Errorf("prepare %s: %v", name, err)
		}
	}
}
