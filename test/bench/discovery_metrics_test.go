package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

const (
	// metricsInterval is the scraper's default --metrics-interval.
	metricsInterval = 30 * time.Second
	// metricsHistory batches are kept: an hour at the default interval,
	// where the default --metrics-retention (24h) would keep 2,880.
	metricsHistory = 120
	// maxMetricsWrite is the goal for writing one scrape.
	maxMetricsWrite = time.Second
)

// benchMetricsWrite times the scraper's write of one scrape of nodeCount
// nodes: InsertNodeMetrics of one sample per node (which also copies each
// node's latest sample onto its NodeCapacity row), then PruneNodeMetrics.
// The table first gets metricsHistory batches of history, and each op's
// batch is one interval after the last, with a retention that makes every
// prune delete the batch that fell out: the steady state of a scraper
// that has run for an hour.
func (d *discoveryEnv) benchMetricsWrite(b *testing.B) {
	ctx := b.Context()
	base := time.Now().UTC().Truncate(time.Second)
	begin := time.Now()
	rows, err := d.seedMetricsHistory(ctx, base)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "discovery: %d metrics samples of history written in %s\n", rows, time.Since(begin).Round(time.Millisecond))

	snap, err := d.snapshot(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var insert, prune time.Duration
	for b.Loop() {
		b.StopTimer()
		observed := base.Add(time.Duration(d.scrapes) * metricsInterval)
		d.scrapes++
		samples := metricsBatch(observed)
		b.StartTimer()
		t0 := time.Now()
		inserted, err := d.registry.InsertNodeMetrics(ctx, samples)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		pruned, err := d.registry.PruneNodeMetrics(ctx, observed.Add(-(metricsHistory-1)*metricsInterval))
		if err != nil {
			b.Fatal(err)
		}
		insert += t1.Sub(t0)
		prune += time.Since(t1)
		if inserted != nodeCount || pruned != nodeCount {
			b.Fatalf("inserted %d and pruned %d samples, want %d each", inserted, pruned, nodeCount)
		}
	}
	// Each sample changes its node's usage, so its NodeCapacity row takes a
	// new resourceVersion and a change-feed entry.
	nodeRows, rvDelta, err := d.rowsWrittenSince(ctx, snap)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "discovery: %d scrapes restamped %d NodeCapacity rows (resourceVersion +%d)\n", b.N, nodeRows, rvDelta)
	res := metricsResult{
		write:  b.Elapsed() / time.Duration(b.N),
		insert: insert / time.Duration(b.N),
		prune:  prune / time.Duration(b.N),
		rows:   rows,
	}
	b.ReportMetric(ms(res.insert), "insert-ms")
	b.ReportMetric(ms(res.prune), "prune-ms")
	b.ReportMetric(float64(rows), "table-rows")
	discoveryResults.setMetrics(res)
}

// metricsResult is the mean write of one scrape.
type metricsResult struct {
	write, insert, prune time.Duration
	rows                 int64
}

// metricsBatch is one scrape: a sample per node observed at observed, over
// the kubelet's usual 20s window, with usage spread over the fleet.
func metricsBatch(observed time.Time) []store.NodeMetricsSample {
	samples := make([]store.NodeMetricsSample, nodeCount)
	for i := range samples {
		it := instanceTypes[i%len(instanceTypes)]
		samples[i] = store.NodeMetricsSample{
			ClusterID:    discoveryClusterID,
			Node:         nodeName(i),
			CPUNanoCores: it.cpuMillis * int64(20+(i+int(observed.Unix()))%60) / 100 * 1_000_000,
			MemoryBytes:  it.memoryBytes * int64(30+(i+int(observed.Unix()))%50) / 100,
			ObservedAt:   observed,
			Window:       20 * time.Second,
		}
	}
	return samples
}

// seedMetricsHistory writes metricsHistory batches, one interval apart and
// ending one interval before base, for every node of the member, in one
// statement, and analyzes the table as autovacuum would after such a load.
// It returns how many rows the table then holds.
func (d *discoveryEnv) seedMetricsHistory(ctx context.Context, base time.Time) (int64, error) {
	_, err := d.db.Exec(ctx, `
		INSERT INTO cluster_node_metrics (cluster_id, node, cpu_usage_nanocores, memory_usage_bytes, observed_at, window_seconds)
		SELECT n.cluster_id, n.name, 1000000000 + (i::int8 * 7919) % 2000 * 1000000, 8589934592 + (i::int8 * 104729) % 4096 * 1048576,
		       $2::timestamptz - make_interval(secs => i * $3::float8), 20
		FROM cluster_node n CROSS JOIN generate_series(1, $4::int) AS i
		WHERE n.cluster_id = $1
		ON CONFLICT (cluster_id, node, observed_at) DO NOTHING`,
		discoveryClusterID, base, metricsInterval.Seconds(), metricsHistory)
	if err != nil {
		return 0, fmt.Errorf("seed metrics history: %w", err)
	}
	if _, err := d.db.Exec(ctx, `ANALYZE cluster_node_metrics`); err != nil {
		return 0, fmt.Errorf("analyze cluster_node_metrics: %w", err)
	}
	var rows int64
	if err := d.db.QueryRow(ctx, `SELECT count(*) FROM cluster_node_metrics`).Scan(&rows); err != nil {
		return 0, fmt.Errorf("count metrics samples: %w", err)
	}
	return rows, nil
}
