package postgres

import (
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// TestStatementsAllUsed: every embedded file was loaded at init, as a
// statement or an include, and no statement kept a header or an include.
func TestStatementsAllUsed(t *testing.T) {
	t.Parallel()
	files, err := fs.Glob(sqlFiles, "sql/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("embedded SQL files: %v, %v", files, err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "sql/"), ".sql")
		if _, ok := statements.loaded[name]; !ok && !statements.included[name] {
			t.Errorf("%s is embedded but no statement loads it", f)
		}
	}
	for name, sql := range statements.loaded {
		if strings.Contains(sql, "{{") || strings.HasPrefix(sql, "--") || sql != strings.TrimSpace(sql) {
			t.Errorf("statement %s was not expanded or stripped: %q", name, sql)
		}
	}
	if !strings.Contains(sqlReportUsage, "cluster_node_usage_phase") {
		t.Errorf("includes not expanded:\n%s", sqlReportUsage)
	}
}

// TestStatementLoader: a missing file, an empty one and a circular include
// are errors, and statement panics on them (at init, for a package-level
// variable); headers are dropped and includes nest.
func TestStatementLoader(t *testing.T) {
	t.Parallel()
	l := newStatementLoader(fstest.MapFS{
		"sql/get.sql":     {Data: []byte("-- What it does.\n--\n-- $1: a key.\n\nSELECT {{cols}} FROM t\nWHERE k = $1\n\n")},
		"sql/cols.sql":    {Data: []byte("-- Fragment.\n{{ key }}, b")},
		"sql/key.sql":     {Data: []byte("a")},
		"sql/empty.sql":   {Data: []byte("-- only a comment\n\n")},
		"sql/loop.sql":    {Data: []byte("SELECT {{loop2}}")},
		"sql/loop2.sql":   {Data: []byte("{{loop}}")},
		"sql/missing.sql": {Data: []byte("SELECT {{nope}}")},
	})
	got, err := l.load("get")
	if want := "SELECT a, b FROM t\nWHERE k = $1"; err != nil || got != want {
		t.Errorf("load(get) = %q, %v; want %q", got, err, want)
	}
	if !l.included["cols"] || !l.included["key"] || l.included["get"] {
		t.Errorf("included = %v, want cols and key", l.included)
	}
	for _, name := range []string{"nope", "empty", "loop", "missing"} {
		if got, err := l.load(name); err == nil {
			t.Errorf("load(%s) = %q, want an error", name, got)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("statement of a missing file did not panic")
		}
	}()
	statement("no_such_statement")
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
	names := make([]string, 0, len(statements.loaded))
	for name := range statements.loaded {
		if !statements.included[name] {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		if _, err := conn.Conn().Prepare(ctx, name, statements.loaded[name]); err != nil {
			t.Errorf("prepare %s: %v", name, err)
		}
	}
}
