package usage

import (
	"os"
	"strings"
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
	"github.com/example/platform-apiserver/pkg/registry/postgres/schema"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

func TestMain(m *testing.M) { os.Exit(pgtest.RunTests(m)) }

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
	conn := pgtesting.MigratedConn(t, schema.Migrate)
	pgtesting.CheckStatementsPrepare(t.Context(), t, conn.Conn(), statements)
}
