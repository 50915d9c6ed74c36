package pgdb

import (
	"testing"
	"testing/fstest"
)

// TestStatementLoader: a missing file, an empty one and a circular include
// are errors, and Statement panics on them (at init, for a package-level
// variable); headers are dropped and includes nest.
func TestStatementLoader(t *testing.T) {
	t.Parallel()
	l := NewLoader(fstest.MapFS{
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
	l.Statement("no_such_statement")
}
