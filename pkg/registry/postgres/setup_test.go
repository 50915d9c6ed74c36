package postgres_test

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

func TestMain(m *testing.M) { os.Exit(pgtest.RunTests(m)) }

// testBundle is what setup returns beside the store.
type testBundle struct {
	ctx context.Context //nolint:containedctx // the test's context, cancelled by t.Cleanup
	dsn string
}

// setup returns a migrated store on a fresh database.
func setup(t *testing.T, opts postgres.Options) (*postgres.Store, testBundle) {
	t.Helper()
	s, b := setupUnmigrated(t, opts)
	if err := s.Migrate(b.ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s, b
}

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

// Records to write (pgtesting's).
var (
	node      = pgtesting.Node
	namespace = pgtesting.Namespace
	pod       = pgtesting.Pod
	slice     = pgtesting.ResourceSlice
	claim     = pgtesting.Claim
)

const gpuDriver, gpuClass = pgtesting.GPUDriver, pgtesting.GPUClass

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

func getNamespace(t *testing.T, s *postgres.Store, ctx context.Context, cluster, name string) *store.ClusterNamespace {
	t.Helper()
	n, err := s.GetClusterNamespace(ctx, name, cluster)
	if err != nil {
		t.Fatalf("GetClusterNamespace(%s, %s): %v", name, cluster, err)
	}
	return n
}

func listNodes(t *testing.T, s *postgres.Store, ctx context.Context, opts store.ListOptions) *store.Page[store.NodeCapacity] {
	t.Helper()
	p, err := s.NodeCapacities().List(ctx, opts)
	if err != nil {
		t.Fatalf("ListNodeCapacities: %v", err)
	}
	return p
}

func registryRV(t *testing.T, s *postgres.Store, ctx context.Context) int64 {
	t.Helper()
	return listNodes(t, s, ctx, store.ListOptions{Limit: 1}).ResourceVersion
}
