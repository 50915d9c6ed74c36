package postgres

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestStatementsAllUsed: every embedded file was loaded at init, as a
// statement or an include, and no statement kept a header or an include.
func TestStatementsAllUsed(t *testing.T) {
	t.Parallel()
	unused, err := statements.Unused()
	if err != nil {
		t.Fatalf("embedded SQL files: %v", err)
	}
	for _, f := range unused {
		t.Errorf("%s is embedded but no statement loads it", f)
	}
	for name, sql := range statements.Statements() {
		if strings.Contains(sql, "{{") || strings.HasPrefix(sql, "--") || sql != strings.TrimSpace(sql) {
			t.Errorf("statement %s was not expanded or stripped: %q", name, sql)
		}
	}
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
	loaded := statements.Statements()
	for _, name := range slices.Sorted(maps.Keys(loaded)) {
		if _, err := conn.Conn().Prepare(ctx, name, loaded[name]); err != nil {
			t.Errorf("prepare %s: %v", name, err)
		}
	}
}
