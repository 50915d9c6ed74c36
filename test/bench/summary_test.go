package bench

import (
	"fmt"
	"io"
	"sync"
	"testing"
	"time"
)

// Goals from the issue: list and get through the aggregator at most 1.5× the
// time of kube-apiserver's own, and the platform-apiserver under 200 MiB
// resident with nodeCount nodes in the registry.
const (
	maxRatio  = 1.5
	maxRSSMiB = 200
)

// results keeps the last measurement of each sub-benchmark, by full name, for
// the summary TestMain prints after the benchmarks.
type results struct {
	mu sync.Mutex
	m  map[string]*result
}

type result struct {
	perOp          time.Duration
	rssMiB, hwmMiB float64
	watch          *watchLatency
}

func (r *results) get(name string) *result {
	if r.m == nil {
		r.m = map[string]*result{}
	}
	if r.m[name] == nil {
		r.m[name] = &result{}
	}
	return r.m[name]
}

// record keeps b's time per operation; call it after b.Loop has finished.
func (r *results) record(b *testing.B) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.get(b.Name()).perOp = b.Elapsed() / time.Duration(b.N)
}

func (r *results) recordMemory(b *testing.B, rssMiB, hwmMiB float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.get(b.Name())
	res.rssMiB, res.hwmMiB = rssMiB, hwmMiB
}

func (r *results) recordWatch(b *testing.B, lat watchLatency) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.get(b.Name()).watch = &lat
}

func (r *results) lookup(name string) (result, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res, ok := r.m[name]
	if !ok || res.perOp == 0 {
		return result{}, false
	}
	return *res, true
}

// printSummary prints the ratios ours/kube-apiserver and the memory against
// the goals. Its lines do not start with "Benchmark", so benchstat ignores them.
func printSummary(w io.Writer, e *env) {
	fmt.Fprintf(w, "\nsummary (goal: NodeCapacity through the aggregator ≤ %.1f× kube-apiserver's Nodes; platform-apiserver ≤ %d MiB resident)\n", maxRatio, maxRSSMiB)
	for _, op := range []string{"List", "Get"} {
		for _, via := range []string{viaKubectl, viaClientGo} {
			prefix := "Benchmark" + op + "/"
			kube, okKube := e.results.lookup(prefix + subName(via, kubeSide))
			ours, okOurs := e.results.lookup(prefix + subName(via, oursSide))
			if !okKube || !okOurs {
				continue
			}
			ratio := float64(ours.perOp) / float64(kube.perOp)
			line := fmt.Sprintf("  %-4s via %-9s  kube-apiserver %10s  aggregated %10s  ratio %.2f×  %s",
				op, via, kube.perOp.Round(time.Microsecond), ours.perOp.Round(time.Microsecond), ratio, verdict(ratio <= maxRatio))
			if direct, ok := e.results.lookup(prefix + subName(via, directSide)); ok {
				line += fmt.Sprintf("  (platform-apiserver direct %s)", direct.perOp.Round(time.Microsecond))
			}
			fmt.Fprintln(w, line)
		}
	}
	var peak float64
	for _, via := range []string{viaKubectl, viaClientGo} {
		name := "BenchmarkList/" + subName(via, oursSide)
		if res, ok := e.results.lookup(name); ok && res.hwmMiB > 0 {
			fmt.Fprintf(w, "  memory after %-56s VmRSS %6.1f MiB  VmHWM %6.1f MiB\n", name, res.rssMiB, res.hwmMiB)
			peak = max(peak, res.hwmMiB)
		}
	}
	if peak > 0 {
		fmt.Fprintf(w, "  peak resident (VmHWM) after the list benchmarks %.1f MiB against %d MiB: %s\n", peak, maxRSSMiB, verdict(peak < maxRSSMiB))
	}
	printWatchSummary(w, e)
}

// printWatchSummary prints the watch latencies and idle cost per watcher
// count, and the p99 at watchGoalWatchers against its goal.
func printWatchSummary(w io.Writer, e *env) {
	header := false
	for _, n := range watcherCounts {
		res, ok := e.results.lookup(fmt.Sprintf("BenchmarkWatchLatency/watchers=%d", n))
		if !ok || res.watch == nil {
			continue
		}
		if !header {
			fmt.Fprintf(w, "  watch, commit to client receipt through the aggregator (goal: p99 < %s with %d watchers):\n", maxWatchP99, watchGoalWatchers)
			header = true
		}
		lat := res.watch
		line := fmt.Sprintf("    %4d watchers  p50 %9s  p99 %9s  max %9s  (%d samples)  idle: %.3f cores, VmRSS %.1f MiB, VmHWM %.1f MiB",
			n, lat.p50.Round(10*time.Microsecond), lat.p99.Round(10*time.Microsecond), lat.max.Round(10*time.Microsecond),
			lat.samples, lat.idleCores, res.rssMiB, res.hwmMiB)
		if n == watchGoalWatchers {
			line += "  " + verdict(lat.p99 < maxWatchP99)
		}
		fmt.Fprintln(w, line)
	}
}

func verdict(met bool) string {
	if met {
		return "goal met"
	}
	return "GOAL MISSED"
}
