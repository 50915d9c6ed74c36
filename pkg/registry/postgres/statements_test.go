package postgres

import (
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
)

// TestStatementsAllUsed: every embedded file was loaded at init, and no
// statement kept a header.
func TestStatementsAllUsed(t *testing.T) {
	t.Parallel()
	pgtesting.CheckStatementsLoaded(t, statements)
}

// TestStatementsPrepare: every statement parses and type-checks against the
// migrated schema.
func TestStatementsPrepare(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := migratedStore(t)
	conn, err := s.reads.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	pgtesting.CheckStatementsPrepare(ctx, t, conn.Conn(), statements)
}
