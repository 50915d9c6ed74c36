package schema_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
	"github.com/example/platform-apiserver/pkg/registry/store"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// The helpers below are those of package postgres's tests that the upgrade
// test writes a registry with.

// testBundle is what setupUnmigrated returns beside the store.
type testBundle struct {
	ctx context.Context //nolint:containedctx // the test's context, cancelled by t.Cleanup
	dsn string
}

// setupUnmigrated returns a store on a fresh database, not migrated.
func setupUnmigrated(t *testing.T, opts postgres.Options) (*postgres.Store, testBundle) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	dsn := pgtest.NewTestDatabase(t)
	s, err := postgres.Open(ctx, dsn, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(s.Close)
	return s, testBundle{ctx: ctx, dsn: dsn}
}

// connect opens a connection of the test's own to its database, closed
// when the test ends.
func (b testBundle) connect(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(b.ctx, b.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// migrationConn is a pooled connection to the test's database for the
// migrations, released when the test ends.
func (b testBundle) migrationConn(t *testing.T) *pgxpool.Conn {
	t.Helper()
	pool, err := pgxpool.New(b.ctx, b.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	conn, err := pool.Acquire(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	return conn
}

var policy = store.UsageReporting{Threshold: 0.05, Period: 5 * time.Minute}

// Records to write (pgtesting's).
var (
	node      = pgtesting.Node
	namespace = pgtesting.Namespace
	pod       = pgtesting.Pod
	slice     = pgtesting.ResourceSlice
	claim     = pgtesting.Claim
)

func mustApply(t *testing.T, s *postgres.Store, ctx context.Context, b store.Batch) {
	t.Helper()
	if err := s.Apply(ctx, b); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

func getNode(t *testing.T, s *postgres.Store, ctx context.Context, cluster, name string) *store.NodeCapacity {
	t.Helper()
	n, err := s.GetNodeCapacity(ctx, cluster, name)
	if err != nil {
		t.Fatalf("GetNodeCapacity(%s, %s): %v", cluster, name, err)
	}
	return n
}

func registryRV(t *testing.T, s *postgres.Store, ctx context.Context) int64 {
	t.Helper()
	p, err := s.NodeCapacities().List(ctx, store.ListOptions{Limit: 1})
	if err != nil {
		t.Fatalf("ListNodeCapacities: %v", err)
	}
	return p.ResourceVersion
}
