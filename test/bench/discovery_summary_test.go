package bench

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Goals from the discovery issue (the restart's "ready in seconds" is read
// as under maxRestartReady).
const (
	maxSyncHWMMiB   = 300
	maxRestartReady = 10 * time.Second
)

// discoveryResults keeps what BenchmarkDiscovery measured, for the lines TestMain
// prints after the benchmarks.
var discoveryResults discoverySummary

type discoverySummary struct {
	mu        sync.Mutex
	sync      *syncResult
	restart   *restartResult
	freshness *freshnessResult
	metrics   *metricsResult
}

func (s *discoverySummary) setSync(r syncResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sync = &r
}

func (s *discoverySummary) setRestart(r restartResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restart = &r
}

func (s *discoverySummary) setFreshness(r freshnessResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.freshness = &r
}

func (s *discoverySummary) setMetrics(r metricsResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.metrics = &r
}

// print writes the discovery results against their goals, if any were
// measured. Its lines do not start with "Benchmark", so benchstat ignores
// them. With several ops per sub-benchmark, each line shows the worst op
// (the freshness percentiles are over every change).
func (s *discoverySummary) print(w io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sync == nil && s.restart == nil && s.freshness == nil && s.metrics == nil {
		return
	}
	fmt.Fprintf(w, "\ndiscovery summary (%d nodes, %d namespaces, %d pods in kube-apiserver)\n", nodeCount, syncNamespaces, syncPods)
	if r := s.sync; r != nil {
		fmt.Fprintf(w, "  initial sync       %d rows in %s (worst of %d), peak VmHWM %.1f MiB against %d MiB: %s\n",
			r.rows, r.synced.Round(time.Millisecond), r.ops, r.hwmMiB, maxSyncHWMMiB, verdict(r.hwmMiB < maxSyncHWMMiB))
	}
	if r := s.restart; r != nil {
		fmt.Fprintf(w, "  restart unchanged  /readyz after %s (worst of %d), %d rows written (resourceVersion +%d), %d relists: %s\n",
			r.ready.Round(time.Millisecond), r.ops, r.rows, r.rvDelta, r.relists, verdict(r.ready < maxRestartReady && r.rows == 0 && r.rvDelta == 0))
	}
	if r := s.freshness; r != nil {
		fmt.Fprintf(w, "  freshness          p50 %s  p99 %s  max %s over %d changes at %.1f/s (discovery commit lag %s, server %.2f cores) against p99 < %s: %s\n",
			r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond), r.max.Round(time.Millisecond), r.samples, r.rate,
			r.commitLag.Round(time.Millisecond), r.cores, maxFreshnessP99, verdict(r.p99 < maxFreshnessP99))
	}
	if r := s.metrics; r != nil {
		fmt.Fprintf(w, "  metrics write      %s per scrape of %d nodes (insert %s, prune %s; %d rows of history) against %s: %s\n",
			r.write.Round(time.Millisecond), nodeCount, r.insert.Round(time.Millisecond), r.prune.Round(time.Millisecond), r.rows,
			maxMetricsWrite, verdict(r.write < maxMetricsWrite))
	}
}
