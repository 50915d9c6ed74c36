// Command docsidents fails when README.md or a page in docs/ names, in
// backticks, an identifier the repository no longer has: a Go identifier, a
// flag, a metric, a SQL table, column or function, a file, a make target or a
// test. hack/verify-docs-identifiers.sh runs it (make verify).
//
// Only backticked tokens that look like one of those classes are checked
// (classify); everything else (commands, YAML, prose, values) is left alone.
// Each class is checked against what the code has (index.check):
//
//   - Go: pkg.Name, Type.Member and pkg.Type.Member against the declarations
//     of the module's Go files (package-level funcs, types, consts and vars,
//     methods, struct fields and interface methods, through embedding);
//     pkg.Name of an imported package against the selectors the code writes;
//     a single word (SomeConst, funcName, a JSON field name) and any other
//     dotted name (an API field path, a chart value) against every
//     identifier, JSON name and string literal of the code, never its
//     comments;
//   - flags (--name, -name) against the string literals of the module's Go
//     files and of the k8s.io option packages cmd/apiserver registers;
//   - metrics (platform_..., anywhere in a span) against the names the code
//     declares (Namespace, Subsystem and Name of component-base's *Opts, the
//     name of NewDesc), with the histogram suffixes, and the names in
//     artifacts/ (alert rules, dashboard);
//   - SQL names (lower_snake, table.column) against the words of the .sql
//     files under pkg/, of the Go code and of artifacts/, or the end of a
//     metric's name;
//   - files against the tree (path, path:line, path#anchor, <placeholder>,
//     a glob, the tail of a path or a base name);
//   - make targets against the Makefile; Test/Benchmark/Fuzz/Example names
//     against the functions of the _test.go files.
//
// The code is this module's: not the other modules under hack/ (lint,
// tools), not this check's own directory. A few library packages whose
// names the docs use (libraryPackages) count too. A name nothing here can
// show (a PostgreSQL setting, kubectl's flag) is listed in
// hack/docsidents/known.txt with the reason; an entry no doc needs any more
// fails the check as well, so the list stays short.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	verbose := flag.Bool("v", false, "print every checked reference")
	flag.Parse()
	stale, err := run(os.Stdout, *root, libraryPackages, *verbose)
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	case stale > 0:
		os.Exit(1)
	}
}

// run checks the docs against the tree at root and the library packages,
// printing each stale reference and each needless known.txt entry to w; it
// returns how many there are.
func run(w io.Writer, root string, libs map[string][]string, verbose bool) (int, error) {
	docs, err := docFiles(root)
	if err != nil {
		return 0, err
	}
	known, err := readKnown(filepath.Join(root, "hack", "docsidents", "known.txt"))
	if err != nil {
		return 0, err
	}
	idx, err := buildIndex(root, libs)
	if err != nil {
		return 0, err
	}
	checked, stale := 0, 0
	needed := set{}
	for _, doc := range docs {
		data, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			return 0, err
		}
		for _, sp := range extractSpans(string(data)) {
			for _, r := range classify(sp.text) {
				checked++
				r.kind = idx.kindOf(r)
				ok := idx.check(r)
				if !ok && known[r.name] {
					ok = true
					needed.add(r.name)
				}
				if verbose {
					fmt.Fprintf(w, "%s:%d: %s %q ok=%v\n", doc, sp.line, r.kind, r.name, ok)
				}
				if !ok {
					stale++
					fmt.Fprintf(w, "%s:%d: `%s` names no %s in the code (renamed or removed? fix the doc or add it to hack/docsidents/known.txt)\n",
						doc, sp.line, r.name, r.kind)
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(known)) {
		if !needed[name] {
			stale++
			fmt.Fprintf(w, "hack/docsidents/known.txt: `%s` is not needed (no doc names it, or the code has it): remove it\n", name)
		}
	}
	if stale > 0 {
		fmt.Fprintf(w, "docs identifiers: %d problems in %d references of %d files\n", stale, checked, len(docs))
		return stale, nil
	}
	fmt.Fprintf(w, "docs identifiers: %d references in %d files checked\n", checked, len(docs))
	return 0, nil
}

// docFiles are README.md and docs/*.md. docs/benchmark-runs.md is left out:
// it is a historical log of benchmark runs, which names what the code had
// then, on purpose.
func docFiles(root string) ([]string, error) {
	docs := []string{"README.md"}
	matches, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	for _, m := range matches {
		if filepath.Base(m) == "benchmark-runs.md" {
			continue
		}
		docs = append(docs, filepath.ToSlash(filepath.Join("docs", filepath.Base(m))))
	}
	return docs, nil
}

// readKnown reads known.txt: one name a line, a comment after # saying why.
func readKnown(file string) (map[string]bool, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	known := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		if name := strings.TrimSpace(line); name != "" {
			known[name] = true
		}
	}
	return known, sc.Err()
}

// A span is the text of one inline code span and the line it starts on.
type span struct {
	line int
	text string
}

var fenceRE = regexp.MustCompile("^[ \t]*(`{3,}|~{3,})")

// extractSpans returns the inline code spans of a Markdown text outside
// fenced code blocks, as CommonMark reads them: a run of n backticks opens a
// span that the next run of exactly n backticks closes, within one
// paragraph (a span never crosses a blank line); a newline inside it is a
// space, and one space on each side is stripped. Fences may be indented (in
// a list item).
func extractSpans(text string) []span {
	var spans []span
	lines := strings.Split(text, "\n")
	var para []string
	paraStart := 0
	flush := func() {
		spans = append(spans, paragraphSpans(para, paraStart)...)
		para = nil
	}
	fence := ""
	for i, l := range lines {
		if fence != "" {
			if m := fenceRE.FindStringSubmatch(l); m != nil && m[1][0] == fence[0] && len(m[1]) >= len(fence) &&
				strings.TrimSpace(l[len(m[0]):]) == "" {
				fence = ""
			}
			continue
		}
		if m := fenceRE.FindStringSubmatch(l); m != nil {
			flush()
			fence = m[1]
			continue
		}
		if strings.TrimSpace(l) == "" {
			flush()
			continue
		}
		if len(para) == 0 {
			paraStart = i + 1
		} else {
			l = strings.TrimLeft(l, " \t") // a continuation line's indent is not content
		}
		para = append(para, l)
	}
	flush()
	return spans
}

func paragraphSpans(lines []string, firstLine int) []span {
	text := strings.Join(lines, "\n")
	var spans []span
	for i := 0; i < len(text); {
		switch {
		case text[i] == '\\' && i+1 < len(text):
			i += 2
			continue
		case text[i] != '`':
			i++
			continue
		}
		n := runLen(text, i)
		closeAt := -1
		for j := i + n; j < len(text); {
			if text[j] != '`' {
				j++
				continue
			}
			m := runLen(text, j)
			if m == n {
				closeAt = j
				break
			}
			j += m
		}
		if closeAt < 0 {
			i += n // a literal run of backticks
			continue
		}
		content := strings.ReplaceAll(text[i+n:closeAt], "\n", " ")
		if len(content) >= 2 && content[0] == ' ' && content[len(content)-1] == ' ' && strings.TrimSpace(content) != "" {
			content = content[1 : len(content)-1]
		}
		spans = append(spans, span{line: firstLine + strings.Count(text[:i], "\n"), text: content})
		i = closeAt + n
	}
	return spans
}

func runLen(s string, i int) int {
	n := 0
	for i+n < len(s) && s[i+n] == '`' {
		n++
	}
	return n
}

// The kinds of reference, as the message names them.
const (
	kindGo     = "Go identifier"
	kindPath   = "Go identifier, API field or chart value"
	kindFlag   = "flag"
	kindMetric = "metric"
	kindSQL    = "SQL object or name"
	kindFile   = "file"
	kindMake   = "make target"
	kindTest   = "test function"
)

// A ref is one name a span refers to, and what it should be.
type ref struct {
	kind string
	name string
}

var (
	metricRE     = regexp.MustCompile(`(^|[^A-Za-z0-9_.])(platform_[a-z0-9_]*[a-z0-9](_\*)?)`)
	makeRE       = regexp.MustCompile(`^make ([a-z][a-z0-9_-]*)$`)
	longFlagRE   = regexp.MustCompile(`^--([a-z0-9][a-z0-9-]*[a-z0-9](-\*)?)(=\S*)?$`)
	shortFlagRE  = regexp.MustCompile(`^-([a-z][a-z0-9]*(-[a-z0-9]+)+)(=\S*)?$`)
	testRE       = regexp.MustCompile(`^((Test|Benchmark|Fuzz|Example)[A-Z0-9_][A-Za-z0-9_]*)(/\S*)?$`)
	snakeRE      = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9*]+)+$`)
	snakeWildRE  = regexp.MustCompile(`^[a-z*][a-z0-9*]*(_[a-z0-9*]+)+$`)
	sqlColumnRE  = regexp.MustCompile(`^([a-z][a-z0-9_]*)\.([a-z][a-z0-9_]*)$`)
	camelRE      = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*$`)
	lowerCamelRE = regexp.MustCompile(`^[a-z]+[A-Z][A-Za-z0-9]*$`)
	goIdentRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	callRE       = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_.]*)\([^()]*\)$`)
	argsRE       = regexp.MustCompile(`(\([^()]*\)|\[[^\[\]]*\]|\{[^{}]*\})$`)
	lineSuffixRE = regexp.MustCompile(`:\d+(-\d+)?$`)
	angleRE      = regexp.MustCompile(`<[^<>]*>`)
	braceRE      = regexp.MustCompile(`\{([^{}]*)\}`)
	versionRE    = regexp.MustCompile(`^v[0-9]+$`)
	placeholder  = regexp.MustCompile(`<[^<>]*>|\.\.\.|…|N{2,}`)
)

// fileExts are the extensions that make a token a file name.
var fileExts = map[string]bool{
	"go": true, "sql": true, "md": true, "sh": true, "yaml": true, "yml": true, "json": true,
	"txt": true, "mod": true, "sum": true, "tpl": true, "list": true, "conf": true,
}

// classify returns what a backticked token refers to, if it looks like a
// name this check knows: none for anything else.
func classify(tok string) []ref {
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return nil
	}
	// Metric names are found anywhere in a span: in a PromQL expression,
	// with labels, in a sentence.
	var refs []ref
	for _, m := range metricRE.FindAllStringSubmatch(tok, -1) {
		refs = append(refs, ref{kindMetric, m[2]})
	}
	if len(refs) > 0 {
		return refs
	}
	if m := makeRE.FindStringSubmatch(tok); m != nil {
		return []ref{{kindMake, m[1]}}
	}
	if m := callRE.FindStringSubmatch(tok); m != nil {
		tok = m[1] // ClaimMember(cluster, owner): the name called
	}
	if strings.ContainsAny(tok, " \t") {
		return nil
	}
	if m := longFlagRE.FindStringSubmatch(tok); m != nil {
		return []ref{{kindFlag, "--" + m[1]}}
	}
	if m := shortFlagRE.FindStringSubmatch(tok); m != nil {
		return []ref{{kindFlag, "-" + m[1]}}
	}
	if m := testRE.FindStringSubmatch(tok); m != nil {
		return []ref{{kindTest, m[1]}}
	}
	if p, ok := filePath(tok); ok {
		return []ref{{kindFile, p}}
	}
	name := stripArgs(tok)
	switch {
	case name == "" || placeholder.MatchString(name):
		return nil
	case snakeRE.MatchString(name) || strings.Contains(name, "*") && snakeWildRE.MatchString(name):
		return []ref{{kindSQL, name}}
	case sqlColumnRE.MatchString(name) && strings.Contains(name, "_"):
		return []ref{{kindSQL, name}}
	case strings.Contains(name, "."):
		switch {
		case !goQualified(name):
			return nil
		case isExported(name):
			return []ref{{kindGo, name}}
		}
		return []ref{{kindPath, name}}
	case camelRE.MatchString(name), lowerCamelRE.MatchString(name):
		return []ref{{kindGo, name}}
	}
	return nil
}

// stripArgs takes the arguments, type parameters or composite fields off a
// name: ClaimMember(cluster, owner), Records[R], Value(),
// UsageReporting{Threshold}.
func stripArgs(s string) string {
	for {
		t := argsRE.ReplaceAllString(s, "")
		if t == s {
			return s
		}
		s = t
	}
}

// goQualified tells a.B (a package or type and a member) from a field path
// or a domain: every part a Go identifier, not a host name.
func goQualified(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) > 3 {
		return false
	}
	for _, p := range parts {
		if !goIdentRE.MatchString(p) {
			return false
		}
	}
	switch parts[len(parts)-1] {
	case "io", "com", "org", "dev", "svc", "local":
		return false
	}
	return true
}

// filePath returns the path a token names, without a :line or #anchor, if
// it is one: a path under a top-level directory of the tree, or a path or
// base name with a known extension. URLs, absolute paths, home paths,
// _output/ (built, not checked in) and placeholders are not.
func filePath(tok string) (string, bool) {
	p := lineSuffixRE.ReplaceAllString(tok, "")
	if i := strings.Index(p, "#"); i >= 0 {
		p = p[:i]
	}
	switch {
	case p == "" || strings.ContainsAny(p, "=$~:@"),
		strings.HasPrefix(p, "/"), strings.HasPrefix(p, "-"), strings.HasPrefix(p, "_output/"),
		strings.HasPrefix(p, ".") && !strings.Contains(p, "/"), // .down.sql: an extension
		placeholder.MatchString(p) && !strings.Contains(p, "<"):
		return "", false
	}
	base := path.Base(strings.TrimSuffix(p, "/"))
	ext := ""
	if i := strings.LastIndex(base, "."); i > 0 {
		ext = base[i+1:]
	}
	switch {
	case fileExts[ext] || strings.HasSuffix(base, ".{up,down}.sql"):
		return p, true
	case strings.Contains(p, "/") && topLevel[strings.SplitN(p, "/", 2)[0]]:
		return p, true
	}
	return "", false
}

// topLevel are the tree's top-level directories whose paths docs name
// without an extension (a package, a folder).
var topLevel = map[string]bool{
	"cmd": true, "pkg": true, "docs": true, "hack": true, "test": true, "artifacts": true, ".ci": true,
}

// The index: what the repository has.
type index struct {
	root       string
	words      set            // identifiers and string-literal words of the Go code, words of the SQL and artifacts
	lowerWords set            // the Go identifiers with their first letter lowered (JSON names of Go fields)
	packages   map[string]set // package name: its package-level names
	members    map[string]set // type name: its methods and fields
	embeds     map[string][]string
	selectors  set // pkg.Name as the code writes it (imported packages)
	importName set // the names imported packages have in the code
	tests      set
	metrics    set
	flags      set
	makes      set
	files      []string // every file and directory, slash-separated, relative
	artifacts  strings.Builder
}

type set map[string]bool

func (s set) add(w ...string) {
	for _, x := range w {
		s[x] = true
	}
}

var wordRE = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

func buildIndex(root string, libs map[string][]string) (*index, error) {
	idx := &index{
		root: root, words: set{}, lowerWords: set{}, packages: map[string]set{}, members: map[string]set{},
		embeds: map[string][]string{}, selectors: set{}, importName: set{}, tests: set{}, metrics: set{},
		flags: set{}, makes: set{},
	}
	var goFiles []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch {
			case rel == ".":
				return nil
			case rel == ".git" || rel == "_output":
				return filepath.SkipDir
			case fileExists(filepath.Join(p, "go.mod")):
				// Another module (hack/lint, hack/tools/...): its files are
				// still files, its Go is not this module's code.
				idx.files = append(idx.files, rel+"/")
				return walkFilesOnly(p, root, &idx.files)
			}
			idx.files = append(idx.files, rel+"/")
			return nil
		}
		idx.files = append(idx.files, rel)
		switch {
		case strings.HasPrefix(rel, "hack/docsidents/"):
			// This check's own code and test name what it looks for, and
			// what must fail.
		case strings.HasSuffix(rel, ".go"):
			goFiles = append(goFiles, p)
		case strings.HasSuffix(rel, ".sql") && strings.HasPrefix(rel, "pkg/"),
			strings.HasPrefix(rel, "artifacts/"):
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			idx.words.add(wordRE.FindAllString(string(data), -1)...)
			if strings.HasPrefix(rel, "artifacts/") {
				idx.artifacts.WriteString(string(data))
				for _, m := range metricRE.FindAllStringSubmatch(string(data), -1) {
					idx.metrics.add(m[2])
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := idx.parseGo(goFiles); err != nil {
		return nil, err
	}
	if err := idx.libraryWords(libs); err != nil {
		return nil, err
	}
	if err := idx.makeTargets(filepath.Join(root, "Makefile")); err != nil {
		return nil, err
	}
	return idx, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func walkFilesOnly(dir, root string, files *[]string) error {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			rel += "/"
		}
		if p != dir {
			*files = append(*files, rel)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return filepath.SkipDir
}

// parseGo collects the declarations, identifiers, string literals, tests,
// metric names and flag literals of the module's Go files.
func (idx *index) parseGo(files []string) error {
	fset := token.NewFileSet()
	type parsed struct {
		file *ast.File
		dir  string
		test bool
	}
	var all []parsed
	consts := map[string]map[string]ast.Expr{} // dir: const name: value
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := filepath.Dir(f)
		all = append(all, parsed{af, dir, strings.HasSuffix(f, "_test.go")})
		if consts[dir] == nil {
			consts[dir] = map[string]ast.Expr{}
		}
		for _, d := range af.Decls {
			if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.CONST {
				for _, s := range gd.Specs {
					vs := s.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							consts[dir][n.Name] = vs.Values[i]
						}
					}
				}
			}
		}
	}
	for _, p := range all {
		pkg := strings.TrimSuffix(p.file.Name.Name, "_test")
		if idx.packages[pkg] == nil {
			idx.packages[pkg] = set{}
		}
		for _, imp := range p.file.Imports {
			if imp.Name != nil {
				idx.importName.add(imp.Name.Name)
			} else if ip, err := strconv.Unquote(imp.Path.Value); err == nil {
				idx.importName.add(importBase(ip))
			}
		}
		for _, d := range p.file.Decls {
			idx.declare(pkg, d, p.test)
		}
		str := func(e ast.Expr) (string, bool) { return evalString(e, consts[p.dir], 0) }
		ast.Inspect(p.file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Ident:
				idx.words.add(n.Name)
				idx.lowerWords.add(lowerFirst(n.Name))
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok {
					idx.selectors.add(x.Name + "." + n.Sel.Name)
				}
			case *ast.BasicLit:
				idx.literal(n)
			case *ast.Field:
				idx.tag(n)
			case *ast.CompositeLit:
				idx.metricOpts(n, str)
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "NewDesc" && len(n.Args) > 0 {
					if s, ok := str(n.Args[0]); ok {
						idx.metrics.add(s)
					}
				}
			}
			return true
		})
	}
	return nil
}

func importBase(ip string) string {
	b := path.Base(ip)
	if versionRE.MatchString(b) && path.Dir(ip) != "." {
		if strings.Contains(ip, "/apis/") || strings.Contains(ip, "/api/") {
			return b // k8s.io/api/core/v1 is imported as v1
		}
		return path.Base(path.Dir(ip))
	}
	return strings.TrimPrefix(b, "go-")
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// declare records a top-level declaration: its name in its package, a
// method or a type's fields and embedded types among the members.
func (idx *index) declare(pkg string, d ast.Decl, test bool) {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil {
			idx.packages[pkg].add(d.Name.Name)
			if test && testRE.MatchString(d.Name.Name) {
				idx.tests.add(d.Name.Name)
			}
			return
		}
		if len(d.Recv.List) == 1 {
			idx.member(recvType(d.Recv.List[0].Type), d.Name.Name)
		}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.ValueSpec:
				for _, n := range s.Names {
					idx.packages[pkg].add(n.Name)
				}
			case *ast.TypeSpec:
				idx.packages[pkg].add(s.Name.Name)
				if idx.members[s.Name.Name] == nil {
					idx.members[s.Name.Name] = set{}
				}
				var fields *ast.FieldList
				switch t := s.Type.(type) {
				case *ast.StructType:
					fields = t.Fields
				case *ast.InterfaceType:
					fields = t.Methods
				}
				if fields == nil {
					continue
				}
				for _, f := range fields.List {
					if len(f.Names) == 0 {
						if e := typeName(f.Type); e != "" {
							idx.embeds[s.Name.Name] = append(idx.embeds[s.Name.Name], e)
							idx.member(s.Name.Name, e)
						}
						continue
					}
					for _, n := range f.Names {
						idx.member(s.Name.Name, n.Name)
					}
				}
			}
		}
	}
}

func (idx *index) member(typ, name string) {
	if typ == "" {
		return
	}
	if idx.members[typ] == nil {
		idx.members[typ] = set{}
	}
	idx.members[typ].add(name)
}

// recvType is the type name of a method's receiver: T of *T, T[K], T.
func recvType(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.ParenExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

// typeName is the name of an embedded type: T of *T, pkg.T, T[K].
func typeName(e ast.Expr) string {
	if sel, ok := e.(*ast.SelectorExpr); ok {
		return sel.Sel.Name
	}
	switch t := e.(type) {
	case *ast.StarExpr:
		return typeName(t.X)
	case *ast.IndexExpr:
		return typeName(t.X)
	case *ast.IndexListExpr:
		return typeName(t.X)
	}
	return recvType(e)
}

// evalString evaluates a constant string expression: a literal, a constant
// of the package, a + b.
func evalString(e ast.Expr, consts map[string]ast.Expr, depth int) (string, bool) {
	if depth > 10 {
		return "", false
	}
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.Ident:
		if v, ok := consts[e.Name]; ok {
			return evalString(v, consts, depth+1)
		}
	case *ast.ParenExpr:
		return evalString(e.X, consts, depth)
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			a, ok1 := evalString(e.X, consts, depth+1)
			b, ok2 := evalString(e.Y, consts, depth+1)
			return a + b, ok1 && ok2
		}
	}
	return "", false
}

// metricOpts adds the name of a component-base (or Prometheus) metric
// declared with CounterOpts, GaugeOpts, HistogramOpts or SummaryOpts:
// Namespace, Subsystem and Name joined by underscores.
func (idx *index) metricOpts(c *ast.CompositeLit, str func(ast.Expr) (string, bool)) {
	var tn string
	switch t := c.Type.(type) {
	case *ast.SelectorExpr:
		tn = t.Sel.Name
	case *ast.Ident:
		tn = t.Name
	}
	if !strings.HasSuffix(tn, "Opts") {
		return
	}
	parts := map[string]string{}
	for _, el := range c.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		k, ok := kv.Key.(*ast.Ident)
		if !ok {
			continue
		}
		if s, ok := str(kv.Value); ok {
			parts[k.Name] = s
		}
	}
	if parts["Name"] == "" {
		return
	}
	var name []string
	for _, k := range []string{"Namespace", "Subsystem", "Name"} {
		if parts[k] != "" {
			name = append(name, parts[k])
		}
	}
	idx.metrics.add(strings.Join(name, "_"))
}

// libraryPackages are the packages of the module's dependencies whose
// names the docs use as the code's own: their identifiers, JSON names and
// string literals count as words of the code, their string literals as flag
// names. Each is named in go.mod; a directory that is gone fails the check.
var libraryPackages = map[string][]string{
	// The flags cmd/apiserver registers through genericoptions and
	// logsapi; the watch cache docs/watch.md compares with; priority and
	// fairness's debug endpoints (docs/security.md).
	"k8s.io/apiserver":      {"pkg/server/options", "pkg/storage/cacher", "pkg/util/flowcontrol"},
	"k8s.io/component-base": {"logs/api/v1", "featuregate"},
	// Pod and node fields the placement model and the install name, the
	// FlowSchema conditions.
	"k8s.io/api": {"core/v1", "flowcontrol/v1"},
	// The connection string's keywords (pool_max_conns, target_session_attrs).
	"github.com/jackc/pgx/v5": {"pgconn", "pgxpool"},
	// kubectl's field validation (docs/security.md).
	"k8s.io/cli-runtime": {"pkg/resource"},
	// Kueue's Workload and configuration fields docs/dispatcher.md names.
	"sigs.k8s.io/kueue": {"apis/kueue/v1beta2", "apis/config/v1beta2"},
}

// libraryWords adds the names of the library packages, and their files
// (as module/package/file.go, so a doc may name one by its base name).
func (idx *index) libraryWords(libs map[string][]string) error {
	if len(libs) == 0 {
		return nil
	}
	mods := slices.Sorted(maps.Keys(libs))
	cmd := exec.Command("go", append([]string{"list", "-m", "-f", "{{.Path}} {{.Dir}}"}, mods...)...)
	cmd.Dir = idx.root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("finding the library packages: %w", err)
	}
	fset := token.NewFileSet()
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		mod, dir, ok := strings.Cut(line, " ")
		if !ok || dir == "" {
			return fmt.Errorf("module %s is not downloaded: run go mod download", mod)
		}
		for _, sub := range libs[mod] {
			files, err := filepath.Glob(filepath.Join(dir, sub, "*.go"))
			if err != nil {
				return err
			}
			if len(files) == 0 {
				return fmt.Errorf("%s/%s has no Go files: update libraryPackages in hack/docsidents/main.go", mod, sub)
			}
			for _, f := range files {
				if strings.HasSuffix(f, "_test.go") {
					continue
				}
				idx.files = append(idx.files, path.Join(mod, sub, filepath.Base(f)))
				af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
				if err != nil {
					return err
				}
				ast.Inspect(af, func(n ast.Node) bool {
					switch n := n.(type) {
					case *ast.Ident:
						idx.words.add(n.Name)
					case *ast.BasicLit:
						idx.literal(n)
					case *ast.Field:
						idx.tag(n)
					}
					return true
				})
			}
		}
	}
	return nil
}

// literal adds a string literal: a flag name if it is one, its words.
func (idx *index) literal(n *ast.BasicLit) {
	if n.Kind != token.STRING {
		return
	}
	if s, err := strconv.Unquote(n.Value); err == nil {
		idx.words.add(wordRE.FindAllString(s, -1)...)
		idx.flags.add(s)
	}
}

// tag adds the JSON and protobuf names of a struct field.
func (idx *index) tag(n *ast.Field) {
	if n.Tag == nil {
		return
	}
	tag, err := strconv.Unquote(n.Tag.Value)
	if err != nil {
		return
	}
	for _, key := range []string{"json", "protobuf"} {
		if v, ok := reflect.StructTag(tag).Lookup(key); ok {
			idx.words.add(strings.Split(v, ",")[0])
		}
	}
}

var targetRE = regexp.MustCompile(`^([A-Za-z0-9_.-]+(?:\s+[A-Za-z0-9_.-]+)*)\s*:([^=]|$)`)

func (idx *index) makeTargets(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	for l := range strings.SplitSeq(string(data), "\n") {
		if m := targetRE.FindStringSubmatch(l); m != nil {
			idx.makes.add(strings.Fields(m[1])...)
		}
	}
	return nil
}

// kindOf names a dotted name's kind by its qualifier: Go when that is a
// package or type of the module.
func (idx *index) kindOf(r ref) string {
	if r.kind != kindPath {
		return r.kind
	}
	x, _, _ := strings.Cut(r.name, ".")
	_, isType := idx.members[x]
	if _, isPkg := idx.packages[x]; isPkg && x != "main" || isType {
		return kindGo
	}
	return r.kind
}

// check tells whether the repository has what r names.
func (idx *index) check(r ref) bool {
	switch r.kind {
	case kindMake:
		return idx.makes[r.name]
	case kindTest:
		return idx.tests[r.name]
	case kindFlag:
		return idx.checkFlag(r.name)
	case kindMetric:
		return idx.checkMetric(r.name)
	case kindFile:
		return idx.checkFile(r.name)
	case kindSQL:
		return idx.checkSQL(r.name)
	case kindGo, kindPath:
		return idx.checkGo(r.name)
	}
	return false
}

func (idx *index) checkFlag(name string) bool {
	long := strings.HasPrefix(name, "--")
	name = strings.TrimLeft(name, "-")
	if prefix, ok := strings.CutSuffix(name, "*"); ok {
		for f := range idx.flags {
			if strings.HasPrefix(f, prefix) {
				return true
			}
		}
		return false
	}
	if idx.flags[name] {
		return true
	}
	if !long {
		// A single dash is Go's flag package (go test ./test/bench/
		// -fleet-scale) or the tail of a long flag a table names after it
		// (--leader-elect-lease-duration, -renew-deadline).
		for f := range idx.flags {
			if strings.HasSuffix(f, "-"+name) && !strings.Contains(f, " ") {
				return true
			}
		}
	}
	return false
}

var histogramSuffix = regexp.MustCompile(`_(bucket|sum|count)$`)

func (idx *index) checkMetric(name string) bool {
	if prefix, ok := strings.CutSuffix(name, "*"); ok {
		for m := range idx.metrics {
			if strings.HasPrefix(m, prefix) {
				return true
			}
		}
		return false
	}
	return idx.metrics[name] || idx.metrics[histogramSuffix.ReplaceAllString(name, "")]
}

// checkFile: a path under the root (with <placeholder>, * and {a,b}), else
// the end of a path (files/alerts_test.yaml, kind.go), else a base name
// that artifacts/ uses as a key (a ConfigMap's platform-apiserver.json).
func (idx *index) checkFile(p string) bool {
	if !strings.Contains(p, "/") && strings.Contains(idx.artifacts.String(), p) {
		return true
	}
	pat := angleRE.ReplaceAllString(p, "*")
	var pats []string
	if m := braceRE.FindStringSubmatchIndex(pat); m != nil {
		for alt := range strings.SplitSeq(pat[m[2]:m[3]], ",") {
			pats = append(pats, pat[:m[0]]+alt+pat[m[1]:])
		}
	} else {
		pats = []string{pat}
	}
	dir := strings.HasSuffix(p, "/")
	for _, pat := range pats {
		pat = strings.TrimSuffix(pat, "/")
		rooted := topLevel[strings.SplitN(pat, "/", 2)[0]] || !strings.Contains(pat, "/") && fileExists(filepath.Join(idx.root, pat))
		for _, f := range idx.files {
			isDir := strings.HasSuffix(f, "/")
			if dir && !isDir {
				continue
			}
			f = strings.TrimSuffix(f, "/")
			if ok, _ := path.Match(pat, f); ok {
				return true
			}
			if rooted {
				continue
			}
			// The tail of a path: as many segments as the pattern has.
			n := strings.Count(pat, "/") + 1
			segs := strings.Split(f, "/")
			if len(segs) < n {
				continue
			}
			if ok, _ := path.Match(pat, strings.Join(segs[len(segs)-n:], "/")); ok {
				return true
			}
		}
	}
	return false
}

// checkSQL: every word of a lower_snake name or table.column is a word of
// the SQL, of the Go code or of artifacts/, or the name is the end of a
// metric's (wait_seconds); * matches any part of a word.
func (idx *index) checkSQL(name string) bool {
	if !strings.Contains(name, ".") && !strings.Contains(name, "*") {
		for m := range idx.metrics {
			if strings.HasSuffix(m, "_"+name) {
				return true
			}
		}
	}
	for w := range strings.SplitSeq(name, ".") {
		if !strings.Contains(w, "*") {
			if !idx.words[w] {
				return false
			}
			continue
		}
		re := regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(w), `\*`, `[a-z0-9_]*`) + "$")
		found := false
		for x := range idx.words {
			if re.MatchString(x) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// checkGo: a single word is any identifier or string-literal word of the
// code (a const, a func, an enum value, a JSON field name). A qualified
// name must be declared: pkg.Name in the package, Type.Member among the
// type's methods and fields (or those of what it embeds), pkg.Type.Member
// both. pkg.Name of an imported package must be written so in the code.
// Anything else with a dot (an imported type's Quantity.Value, a lower-case
// type's member, a field path such as status.mirroring.completeAsOf or
// members.existingSecret) needs every part to be a word of the code.
func (idx *index) checkGo(name string) bool {
	parts := strings.Split(name, ".")
	if len(parts) == 1 {
		return idx.words[name] || lowerCamelRE.MatchString(name) && idx.lowerWords[name]
	}
	x, rest := parts[0], parts[1:]
	pkg, isPkg := idx.packages[x]
	isPkg = isPkg && x != "main"
	if isPkg && pkg[rest[0]] && (len(rest) == 1 || idx.hasMember(rest[0], rest[1])) {
		return true
	}
	_, isType := idx.members[x]
	if isType && idx.hasMember(x, rest[0]) {
		return true
	}
	switch {
	case isType && isExported(x), isPkg && isExported(rest[0]):
		return false
	case !isPkg && idx.importName[x] && isExported(rest[0]):
		return idx.selectors[x+"."+rest[0]]
	}
	return idx.allWords(parts)
}

func (idx *index) allWords(parts []string) bool {
	for _, p := range parts {
		if !idx.words[p] {
			return false
		}
	}
	return true
}

func isExported(s string) bool { return s != "" && s[0] >= 'A' && s[0] <= 'Z' }

// hasMember looks for a method or field of every type of that name, and of
// what they embed.
func (idx *index) hasMember(typ, name string) bool {
	seen := set{}
	queue := []string{typ}
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		if seen[t] {
			continue
		}
		seen[t] = true
		if idx.members[t][name] {
			return true
		}
		queue = append(queue, idx.embeds[t]...)
	}
	return false
}
