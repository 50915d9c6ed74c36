package bench

import (
	"fmt"
	"io"
	"sync"
	"testing"
)

// summary is the one result printer: each benchmark adds its lines against
// its goals under a section title, and TestMain prints them after the
// benchmarks. Its lines do not start with "Benchmark", so benchstat ignores
// them.
var summary report

type report struct {
	mu     sync.Mutex
	titles []string
	lines  map[string][]string
}

// printf adds a line under section.
func (r *report) printf(section, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lines == nil {
		r.lines = map[string][]string{}
	}
	if _, ok := r.lines[section]; !ok {
		r.titles = append(r.titles, section)
	}
	r.lines[section] = append(r.lines[section], fmt.Sprintf(format, args...))
}

func (r *report) print(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.titles {
		fmt.Fprintf(w, "\n%s\n", t)
		for _, l := range r.lines[t] {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
}

func verdict(met bool) string {
	if met {
		return "goal met"
	}
	return "GOAL MISSED"
}

// must fails tb with err, if any.
func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
