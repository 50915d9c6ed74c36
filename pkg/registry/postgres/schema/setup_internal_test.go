package schema

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

func TestMain(m *testing.M) { os.Exit(pgtest.RunTests(m)) }

// migrationConn returns a connection to the database of dsn for the
// migrations, released when the test ends.
func migrationConn(t *testing.T, dsn string) *pgxpool.Conn {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatalf("pool of %s: %v", dsn, err)
	}
	t.Cleanup(pool.Close)
	conn, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	return conn
}

// TestStatementsAllUsed: every embedded file was loaded at init, and no
// statement kept a header or an include.
func TestStatementsAllUsed(t *testing.T) {
	t.Parallel()
	pgtesting.CheckStatementsLoaded(t, statements)
}

// TestStatementsPrepare: every statement parses and type-checks against the
// migrated schema.
func TestStatementsPrepare(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn := migrationConn(t, pgtest.NewTestDatabase(t))
	if err := Migrate(ctx, conn); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	pgtesting.CheckStatementsPrepare(ctx, t, conn.Conn(), statements)
}
