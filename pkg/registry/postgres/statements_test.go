package postgres

import (
	"strings"
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
)

// TestStatementsAllUsed: every embedded file was loaded at init, as a
// statement or an include, and no statement kept a header or an include.
func TestStatementsAllUsed(t *testing.T) {
	t.Parallel()
	pgtesting.CheckStatementsLoaded(t, statements)
	if !strings.Contains(sqlReportUsage, "cluster_node_usage_phase") {
		t.Errorf("includes not expanded:\n%s", sqlReportUsage)
	}
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
