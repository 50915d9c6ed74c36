package replicas_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
	"github.com/example/platform-apiserver/pkg/registry/store"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// The tests run the store (package postgres) on primaries and standbys:
// reads, the change feed and writes are what a replica's routing and a
// failover's record serve.

func TestMain(m *testing.M) { os.Exit(pgtest.RunTests(m)) }

// haStore is a migrated store on the primary of primaryDSN.
func haStore(t *testing.T, primaryDSN string, opts postgres.Options) (*postgres.Store, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	s, err := postgres.Open(ctx, primaryDSN, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s, ctx
}

// connect opens a connection of the test's own to dsn, closed when the
// test ends.
func connect(t *testing.T, ctx context.Context, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func presentRV(t *testing.T, s *postgres.Store, ctx context.Context) int64 {
	t.Helper()
	_, rv, err := s.Changes(ctx, store.ChangeFilter{}, 1<<62, 0)
	if err != nil {
		t.Fatal(err)
	}
	return rv
}

func mustApply(t *testing.T, s *postgres.Store, ctx context.Context, b store.Batch) {
	t.Helper()
	if err := s.Apply(ctx, b); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

var node = pgtesting.Node

const gib = int64(1) << 30

func asNode(o any) *store.NodeCapacity { n, _ := o.(*store.NodeCapacity); return n }
