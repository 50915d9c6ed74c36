package writes

import (
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/postgres/schema"
)

// PendingApplies is how many Apply batches wait for a group commit.
func (e *Engine) PendingApplies() int {
	e.applies.mu.Lock()
	defer e.applies.mu.Unlock()
	return len(e.applies.pending)
}

// NewTestEngine is an engine on dsn, on a pool like the store's writes
// pool, closed when the test ends.
func NewTestEngine(t testing.TB, dsn string) *Engine {
	t.Helper()
	return New(pgtesting.Pool(t, dsn, schema.SetWriteProtocol))
}

// migratedEngine is an engine on a fresh migrated database, and its pool.
func migratedEngine(t testing.TB) (*Engine, *pgdb.Pool) {
	t.Helper()
	pool := pgtesting.MigratedPool(t, schema.Migrate, schema.SetWriteProtocol)
	return New(pool), pool
}
