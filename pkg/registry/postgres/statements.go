package postgres

import (
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// The store's static SQL is data: each statement is a file sql/<name>.sql,
// embedded in the binary and loaded by statement(name) into a package-level
// variable, so a missing or misspelt file panics when the package
// initializes, never on a rare code path in production. Only SQL assembled
// at run time stays in Go: a list's WHERE clause from selectors (selector.go,
// read.go), the change feed's per-kind projection (changefeed.go), and DDL
// naming a partition (metrics.go). Batches travel as one jsonb parameter, a
// JSON array of row objects that the statement decodes with
// jsonb_to_recordset (see jsonRows).
//
// A file starts with comment lines saying what the statement does and what
// its parameters are; they are dropped on loading. {{name}} in a file is
// replaced by sql/<name>.sql: fragments that several statements share (a
// column list, the usage reporting rule), kept once.

//go:embed sql/*.sql
var sqlFiles embed.FS

// statements loads the embedded files; its record of what it read lets a
// test check that every file is used and every statement prepares.
var statements = newStatementLoader(sqlFiles)

// statement returns the SQL of sql/<name>.sql with its includes expanded.
// It panics if a file is missing or empty or an include is circular: call it
// from a package-level variable's initializer, so a typo fails at start-up.
func statement(name string) string {
	sql, err := statements.load(name)
	if err != nil {
		panic(fmt.Sprintf("registry SQL: %v", err))
	}
	return sql
}

var includePattern = regexp.MustCompile(`\{\{\s*([a-z0-9_]+)\s*\}\}`)

// statementLoader reads sql/<name>.sql files from fsys.
type statementLoader struct {
	fsys fs.FS
	// loaded maps each statement loaded by name to its SQL; included names
	// the files read as includes (fragments).
	loaded   map[string]string
	included map[string]bool
}

func newStatementLoader(fsys fs.FS) *statementLoader {
	return &statementLoader{fsys: fsys, loaded: map[string]string{}, included: map[string]bool{}}
}

// load returns the SQL of sql/<name>.sql with its includes expanded.
func (l *statementLoader) load(name string) (string, error) {
	sql, err := l.read(name, nil)
	if err != nil {
		return "", err
	}
	l.loaded[name] = sql
	return sql, nil
}

func (l *statementLoader) read(name string, including []string) (string, error) {
	if slices.Contains(including, name) {
		return "", fmt.Errorf("sql/%s.sql includes itself: %s", name, strings.Join(append(including, name), " → "))
	}
	body, err := fs.ReadFile(l.fsys, "sql/"+name+".sql")
	if err != nil {
		return "", fmt.Errorf("statement %q: %w", name, err)
	}
	if len(including) > 0 {
		l.included[name] = true
	}
	sql := stripHeader(string(body))
	var inner error
	sql = includePattern.ReplaceAllStringFunc(sql, func(m string) string {
		part, err := l.read(includePattern.FindStringSubmatch(m)[1], append(including, name))
		if err != nil && inner == nil {
			inner = err
		}
		return part
	})
	if inner != nil {
		return "", inner
	}
	if sql == "" {
		return "", fmt.Errorf("sql/%s.sql has no statement", name)
	}
	return sql, nil
}

// stripHeader drops a file's leading comment and blank lines and its
// trailing white space.
func stripHeader(sql string) string {
	for {
		line, rest, more := strings.Cut(sql, "\n")
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "--") {
			return strings.TrimRightFunc(sql, unicode.IsSpace)
		}
		if !more {
			return ""
		}
		sql = rest
	}
}
