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
		r.print(w)
	}
}

// print writes the quiet-fleet lines of the discovery summary.
func (r *metricsResult) print(w io.Writer) {
	var quiet, quietRows, quietEvents int
	var crossing, crossingEvents, periodic, periodicEvents, first int
	var crossingRows int64
	exact := true
	for _, s := range r.scrapes {
		exact = exact && s.events == int(s.reported) && s.changeRows == s.reported && int(s.reported) == s.due && len(s.unexpected) == 0
		switch s.kind {
		case "quiet":
			quiet++
			quietRows = max(quietRows, int(s.changeRows))
			quietEvents = max(quietEvents, s.events)
		case "threshold":
			crossing, crossingRows, crossingEvents = s.due, s.changeRows, s.events
		case "period":
			periodic, periodicEvents = s.due, s.events
		case "first":
			first = s.events
		}
	}
	fmt.Fprintf(w, "  metrics watch      %d quiet scrapes: at most %d change-log rows and %d NodeCapacity events each; %d nodes crossing the threshold: %d rows, %d events against exactly them: %s\n",
		quiet, quietRows, quietEvents, crossing, crossingRows, crossingEvents, verdict(exact && quietRows == 0 && quietEvents == 0 && crossing > 0))
	fmt.Fprintf(w, "                     (first scrape %d events; the report period's refresh %d nodes, %d events; today's design: %d change-log rows every scrape)\n",
		first, periodic, periodicEvents, r.legacyChangeRows)
	fmt.Fprintf(w, "  metrics write      %s per scrape of %d samples vs today's %s (%.0f vs %.0f µs/sample; %d scrapes on %d samples of history): %.2f× against ≤ %.2f×: %s\n",
		r.newWrite.Round(100*time.Microsecond), nodeCount, r.legacyWrite.Round(time.Millisecond),
		float64(r.newWrite.Microseconds())/nodeCount, float64(r.legacyWrite.Microseconds())/nodeCount,
		r.ops, r.newHistoryRows, r.ratio(), maxMetricsWriteRatio, verdict(r.ratio() <= maxMetricsWriteRatio))
	line := fmt.Sprintf("                     (of which %d quiet scrapes %s each", r.quietOps, r.newQuietWrite.Round(100*time.Microsecond))
	for _, op := range r.reportingOps {
		line += fmt.Sprintf("; a scrape reporting %d nodes %s", op.reported, op.took.Round(100*time.Microsecond))
	}
	fmt.Fprintln(w, line+")")
	fmt.Fprintf(w, "  metrics history    %s vs today's %s for a day of %d nodes (%.0f vs %.0f bytes/sample); prune of an hour (%d samples) %s vs %s\n",
		mibString(r.newBytes.total()), mibString(r.legacyBytes.total()), nodeCount, r.newBytesPerSample(), r.legacyBytesPerSample(),
		r.prunedRows, r.newPrune.Round(100*time.Microsecond), r.legacyPrune.Round(time.Millisecond))
}
