package pgdb

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// A package's static SQL is data: each statement is a file sql/<name>.sql,
// embedded in the binary and loaded by a Loader into a package-level
// variable, so a missing or misspelt file panics when the package
// initializes, never on a rare code path in production.
//
// A file starts with comment lines saying what the statement does and what
// its parameters are; they are dropped on loading. {{name}} in a file is
// replaced by sql/<name>.sql: fragments that several statements share (a
// column list, the usage reporting rule), kept once.

var includePattern = regexp.MustCompile(`\{\{\s*([a-z0-9_]+)\s*\}\}`)

// Loader reads sql/<name>.sql files from fsys (a package's embedded
// files); its record of what it read lets a test check that every file is
// used and every statement prepares.
type Loader struct {
	fsys fs.FS
	// loaded maps each statement loaded by name to its SQL; included names
	// the files read as includes (fragments).
	loaded   map[string]string
	included map[string]bool
}

// NewLoader returns a Loader of the sql/*.sql files of fsys.
func NewLoader(fsys fs.FS) *Loader {
	return &Loader{fsys: fsys, loaded: map[string]string{}, included: map[string]bool{}}
}

// Statement returns the SQL of sql/<name>.sql with its includes expanded.
// It panics if a file is missing or empty or an include is circular: call it
// from a package-level variable's initializer, so a typo fails at start-up.
func (l *Loader) Statement(name string) string {
	sql, err := l.load(name)
	if err != nil {
		panic(fmt.Sprintf("registry SQL: %v", err))
	}
	return sql
}

// load returns the SQL of sql/<name>.sql with its includes expanded.
func (l *Loader) load(name string) (string, error) {
	sql, err := l.read(name, nil)
	if err != nil {
		return "", err
	}
	l.loaded[name] = sql
	return sql, nil
}

func (l *Loader) read(name string, including []string) (string, error) {
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

// Statements returns the statements loaded so far by name, without the
// fragments only included in others.
func (l *Loader) Statements() map[string]string {
	out := make(map[string]string, len(l.loaded))
	for name, sql := range l.loaded {
		if !l.included[name] {
			out[name] = sql
		}
	}
	return out
}

// Unused returns the files of fsys that no statement loaded, as a statement
// or an include.
func (l *Loader) Unused() ([]string, error) {
	files, err := fs.Glob(l.fsys, "sql/*.sql")
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no sql/*.sql files")
	}
	var unused []string
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".sql")
		if _, ok := l.loaded[name]; !ok && !l.included[name] {
			unused = append(unused, f)
		}
	}
	return unused, nil
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
