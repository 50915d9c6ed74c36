package writes

import (
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
	"github.com/example/platform-apiserver/pkg/registry/postgres/schema"
)

// TestStatementsAllUsed: every embedded file was loaded at init.
func TestStatementsAllUsed(t *testing.T) {
	t.Parallel()
	pgtesting.CheckStatementsLoaded(t, statements)
}

// TestStatementsPrepare: every statement parses and type-checks against the
// migrated schema.
func TestStatementsPrepare(t *testing.T) {
	t.Parallel()
	conn := pgtesting.MigratedConn(t, schema.Migrate)
	pgtesting.CheckStatementsPrepare(t.Context(), t, conn.Conn(), statements)
}
