package schema_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/registrytest"
)

// The registry tests' helpers (registrytest), with a connection for the
// migrations beside them.

type testBundle struct{ registrytest.Bundle }

// setupUnmigrated returns a store on a fresh database, not migrated.
func setupUnmigrated(t *testing.T, opts postgres.Options) (*postgres.Store, testBundle) {
	t.Helper()
	s, b := registrytest.SetupUnmigrated(t, opts)
	return s, testBundle{b}
}

// migrationConn is a pooled connection to the test's database for the
// migrations, released when the test ends.
func (b testBundle) migrationConn(t *testing.T) *pgxpool.Conn {
	t.Helper()
	pool, err := pgxpool.New(b.Ctx, b.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	conn, err := pool.Acquire(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	return conn
}

var (
	policy     = registrytest.Policy
	mustApply  = registrytest.MustApply
	getNode    = registrytest.GetNode
	registryRV = registrytest.RegistryRV
)

// Records to write (pgtesting's).
var (
	node      = pgtesting.Node
	namespace = pgtesting.Namespace
	pod       = pgtesting.Pod
	slice     = pgtesting.ResourceSlice
	claim     = pgtesting.Claim
)
