package usage_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/writes"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// thresholdOnly has a period so long that no test crosses one.
var thresholdOnly = store.UsageReporting{Threshold: 0.05, Period: 100 * 365 * 24 * time.Hour}

// TestRecordNodeMetricsReports walks one node through the threshold rule:
// the usage a NodeCapacity shows (and its resourceVersion) changes only when
// usage moves past the threshold, while every sample lands in the history.
func TestRecordNodeMetricsReports(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Nodes: []store.Node{node("n1", metricsNodeCPU, metricsNodeMem)}})
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	sample := func(at time.Duration, cpuMillis int64, mem int64) store.NodeMetricsSample {
		return store.NodeMetricsSample{ClusterID: "c", Node: "n1", CPUNanoCores: cpuMillis * 1e6, MemoryBytes: mem,
			ObservedAt: t0.Add(at), Window: 20 * time.Second}
	}
	steps := []struct {
		name         string
		sample       store.NodeMetricsSample
		wantStored   int64
		wantReported int64
		wantCPU      int64 // millis shown
		wantAt       time.Duration
	}{
		{name: "first sample is reported", sample: sample(0, 500, 2*gib), wantStored: 1, wantReported: 1, wantCPU: 500},
		{name: "duplicate", sample: sample(0, 500, 2*gib), wantCPU: 500},
		{name: "small move stays quiet", sample: sample(30*time.Second, 580, 2*gib+100<<20), wantStored: 1, wantCPU: 500},
		{name: "move of exactly the threshold stays quiet", sample: sample(time.Minute, 600, 2*gib), wantStored: 1, wantCPU: 500},
		{name: "CPU past the threshold", sample: sample(90*time.Second, 601, 2*gib), wantStored: 1, wantReported: 1, wantCPU: 601, wantAt: 90 * time.Second},
		{name: "memory past the threshold", sample: sample(2*time.Minute, 601, 2*gib+500<<20), wantStored: 1, wantReported: 1, wantCPU: 601, wantAt: 2 * time.Minute},
		{name: "older sample is history only", sample: sample(100*time.Second, 1900, 7*gib), wantStored: 1, wantCPU: 601, wantAt: 2 * time.Minute},
		{name: "quiet hours later", sample: sample(5*time.Hour, 610, 2*gib+500<<20), wantStored: 1, wantCPU: 601, wantAt: 2 * time.Minute},
	}
	for _, step := range steps {
		before := getNode(t, s, ctx, "c", "n1").ResourceVersion
		got, err := s.RecordNodeMetrics(ctx, store.Fence{ClusterID: "c"}, []store.NodeMetricsSample{step.sample}, thresholdOnly)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got.Stored != step.wantStored || got.Reported != step.wantReported {
			t.Errorf("%s: recorded %+v, want %d stored and %d reported", step.name, got, step.wantStored, step.wantReported)
		}
		n := getNode(t, s, ctx, "c", "n1")
		if n.Usage == nil || n.Usage.CPUNanoCores != step.wantCPU*1e6 || !n.Usage.Timestamp.Equal(t0.Add(step.wantAt)) {
			t.Errorf("%s: usage %+v, want %dm at %s", step.name, n.Usage, step.wantCPU, t0.Add(step.wantAt))
		}
		if bumped := n.ResourceVersion != before; bumped != (step.wantReported > 0) {
			t.Errorf("%s: resourceVersion %d → %d, want a new one only when reported", step.name, before, n.ResourceVersion)
		}
	}
	if got := countRows(t, b, `SELECT count(*) FROM cluster_node_metrics WHERE node = 'n1'`); got != 7 {
		t.Errorf("history holds %d samples of n1, want 7 (every distinct sample)", got)
	}
}

// TestUsageRefreshedOncePerPeriod: with constant usage each node's reported
// sample is replaced once per period, each node at its own phase, so the
// refreshes spread over the period instead of all coming due in one scrape.
func TestUsageRefreshedOncePerPeriod(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	const (
		nodes    = 100
		interval = 30 * time.Second
		scrapes  = 30 // 15 minutes: three periods
	)
	applyMetricsNodes(t, s, ctx, nodes)
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	reportedAt := map[string][]time.Time{}
	for k := range scrapes {
		at := t0.Add(time.Duration(k) * interval)
		samples := make([]store.NodeMetricsSample, nodes)
		for i := range samples {
			samples[i] = store.NodeMetricsSample{ClusterID: "c", Node: nodeNameN(i), CPUNanoCores: 300e6, MemoryBytes: gib, ObservedAt: at}
		}
		got, err := s.RecordNodeMetrics(ctx, store.Fence{ClusterID: "c"}, samples, policy)
		if err != nil {
			t.Fatal(err)
		}
		if k > 0 && got.Reported > nodes/4 {
			t.Errorf("scrape %d refreshed %d of %d nodes at once; want the refreshes spread over the period", k, got.Reported, nodes)
		}
		for _, n := range listNodes(t, s, ctx, store.ListOptions{}).Items {
			if ts := reportedAt[n.Node.Name]; n.Usage != nil && (len(ts) == 0 || !ts[len(ts)-1].Equal(n.Usage.Timestamp)) {
				reportedAt[n.Node.Name] = append(ts, n.Usage.Timestamp)
			}
		}
	}
	for name, ts := range reportedAt {
		// First report, then one per period boundary crossed in 14.5 minutes.
		if len(ts) < 3 || len(ts) > 4 {
			t.Errorf("%s reported %d times in three periods, want the first report and 2 or 3 refreshes: %v", name, len(ts), ts)
		}
		for i := 1; i < len(ts); i++ {
			if gap := ts[i].Sub(ts[i-1]); gap > policy.Period || (i > 1 && gap < policy.Period-interval) {
				t.Errorf("%s refreshed %s after its last report, want once per %s period", name, gap, policy.Period)
			}
		}
	}
	if len(reportedAt) != nodes {
		t.Errorf("%d nodes reported, want %d", len(reportedAt), nodes)
	}
}

// TestRecordNodeMetricsQuietFleet: a scrape of unchanged usage writes no
// change-feed entry and publishes no resourceVersion.
func TestRecordNodeMetricsQuietFleet(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	const nodes = 2100 // the first report in several transactions (ViewRowsPerCommit)
	applyMetricsNodes(t, s, ctx, nodes)
	rv0 := registryRV(t, s, ctx)
	t0 := time.Now().UTC().Truncate(time.Second)
	scrape := func(k int, cpuMillis int64) store.MetricsRecorded {
		samples := make([]store.NodeMetricsSample, nodes)
		for i := range samples {
			samples[i] = store.NodeMetricsSample{ClusterID: "c", Node: nodeNameN(i), CPUNanoCores: (cpuMillis + int64(k%3)) * 1e6,
				MemoryBytes: gib, ObservedAt: t0.Add(time.Duration(k) * 30 * time.Second), Window: 20 * time.Second}
		}
		got, err := s.RecordNodeMetrics(ctx, store.Fence{ClusterID: "c"}, samples, thresholdOnly)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := scrape(0, 300); got.Reported != nodes {
		t.Fatalf("first scrape reported %d nodes, want %d", got.Reported, nodes)
	}
	if n := countRows(t, b, `SELECT count(DISTINCT committed_at) FROM registry_change WHERE resource_version > $1 AND kind = 'NodeCapacity'`, rv0); n != commitsInParts(nodes) {
		t.Errorf("the first scrape reported its %d nodes in %d transactions, want %d of at most %d", nodes, n, commitsInParts(nodes), writes.ViewRowsPerCommit)
	}
	rv := registryRV(t, s, ctx)
	changes := countRows(t, b, `SELECT count(*) FROM registry_change`)
	for k := 1; k <= 9; k++ {
		if got := scrape(k, 300); got.Stored != nodes || got.Reported != 0 {
			t.Errorf("scrape %d of unchanged usage: %+v, want %d stored and none reported", k, got, nodes)
		}
	}
	if now := registryRV(t, s, ctx); now != rv {
		t.Errorf("registry resourceVersion moved from %d to %d over quiet scrapes", rv, now)
	}
	if now := countRows(t, b, `SELECT count(*) FROM registry_change`); now != changes {
		t.Errorf("registry_change grew from %d to %d rows over quiet scrapes", changes, now)
	}

	// The scrapes stop: the expiry makes every node's usage unknown, in
	// transactions of at most ViewRowsPerCommit.
	after := t0.Add(10 * time.Minute)
	got, err := s.MaintainNodeMetrics(ctx, store.MetricsMaintenance{Now: after, RetainAfter: t0.Add(-time.Hour), UnknownBefore: after})
	if err != nil {
		t.Fatal(err)
	}
	if got.Unknown != nodes {
		t.Errorf("the expiry made %d nodes' usage unknown, want %d", got.Unknown, nodes)
	}
	if n := countRows(t, b, `SELECT count(DISTINCT committed_at) FROM registry_change WHERE resource_version > $1 AND kind = 'NodeCapacity'`, rv); n != commitsInParts(nodes) {
		t.Errorf("the expiry stamped its %d nodes in %d transactions, want %d of at most %d", nodes, n, commitsInParts(nodes), writes.ViewRowsPerCommit)
	}
	if u := getNode(t, s, ctx, "c", nodeNameN(nodes-1)).Usage; u != nil {
		t.Errorf("a node whose scrapes stopped shows usage %+v, want unknown", u)
	}
}

// TestNodeMetricsBelongToTheirNode: samples of unknown nodes, or observed
// before the node was created, are not recorded; a deleted node's samples go
// with it, and a node recreated under its name starts without usage.
func TestNodeMetricsBelongToTheirNode(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	sample := func(name string, at time.Time) store.NodeMetricsSample {
		return store.NodeMetricsSample{ClusterID: "c", Node: name, CPUNanoCores: 1e8, MemoryBytes: gib, ObservedAt: at, Window: time.Second}
	}
	if got, err := s.RecordNodeMetrics(ctx, store.Fence{ClusterID: "c"}, []store.NodeMetricsSample{sample("ghost", t0)}, policy); err != nil || got.Stored != 0 {
		t.Fatalf("sample of an unknown node: %+v, %v; want nothing stored", got, err)
	}
	n1 := node("n1", metricsNodeCPU, metricsNodeMem)
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Nodes: []store.Node{n1}})
	if _, err := s.RecordNodeMetrics(ctx, store.Fence{ClusterID: "c"}, []store.NodeMetricsSample{sample("n1", t0), sample("n1", t0.Add(time.Minute))}, policy); err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Deleted: store.Keys{store.ResourceNodes: {{Name: "n1"}}}})
	if got := countRows(t, b, `SELECT count(*) FROM cluster_node_metrics WHERE node = 'n1'`); got != 0 {
		t.Errorf("%d samples of the deleted node n1 remain", got)
	}
	recreated := n1
	recreated.UID, recreated.CreatedAt = "uid-n1-again", t0.Add(2*time.Minute)
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Nodes: []store.Node{recreated}})
	if u := getNode(t, s, ctx, "c", "n1").Usage; u != nil {
		t.Fatalf("recreated node shows usage %+v, want unknown", u)
	}
	// The scraper may still see the old node's sample once.
	if got, err := s.RecordNodeMetrics(ctx, store.Fence{ClusterID: "c"}, []store.NodeMetricsSample{sample("n1", t0.Add(90*time.Second))}, policy); err != nil || got.Stored != 0 || got.Reported != 0 {
		t.Fatalf("sample observed before the recreated node existed: %+v, %v; want ignored", got, err)
	}
	if got, err := s.RecordNodeMetrics(ctx, store.Fence{ClusterID: "c"}, []store.NodeMetricsSample{sample("n1", t0.Add(3*time.Minute))}, policy); err != nil || got.Reported != 1 {
		t.Fatalf("first sample of the recreated node: %+v, %v; want it reported", got, err)
	}
}

// TestMaintainNodeMetrics: retention drops whole hourly partitions and keeps
// the recent ones, and a node whose samples stopped shows unknown usage.
func TestMaintainNodeMetrics(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	t0 := time.Now().UTC().Truncate(time.Hour).Add(10 * time.Hour)
	n1, n2 := node("n1", metricsNodeCPU, metricsNodeMem), node("n2", metricsNodeCPU, metricsNodeMem)
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Nodes: []store.Node{n1, n2}})
	var samples []store.NodeMetricsSample
	for _, at := range []time.Duration{-5 * time.Hour, -3 * time.Hour, -90 * time.Minute, 0, 10 * time.Minute} {
		samples = append(samples, store.NodeMetricsSample{ClusterID: "c", Node: "n1", CPUNanoCores: 1e8, MemoryBytes: gib, ObservedAt: t0.Add(at)})
	}
	samples = append(samples, store.NodeMetricsSample{ClusterID: "c", Node: "n2", CPUNanoCores: 1e8, MemoryBytes: gib, ObservedAt: t0.Add(-3 * time.Hour)})
	if got, err := s.RecordNodeMetrics(ctx, store.Fence{ClusterID: "c"}, samples, policy); err != nil || got.Stored != 6 {
		t.Fatalf("RecordNodeMetrics = %+v, %v; want 6 stored", got, err)
	}
	before := registryRV(t, s, ctx)
	got, err := s.MaintainNodeMetrics(ctx, store.MetricsMaintenance{
		Now: t0.Add(10 * time.Minute), RetainAfter: t0.Add(-2 * time.Hour), UnknownBefore: t0.Add(-time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The samples' partitions cover every hour from t0-5h to t0; those of
	// t0-5h, t0-4h and t0-3h end by t0-2h, t0-90m's ends after.
	if got.DroppedPartitions != 3 || got.Unknown != 1 {
		t.Errorf("MaintainNodeMetrics = %+v, want 3 partitions dropped and 1 node's usage unknown", got)
	}
	if n := countRows(t, b, `SELECT count(*) FROM cluster_node_metrics`); n != 3 {
		t.Errorf("%d samples remain, want the 3 of the retained hours", n)
	}
	if u := getNode(t, s, ctx, "c", "n2").Usage; u != nil {
		t.Errorf("n2, whose only sample is 3h old, shows usage %+v; want unknown", u)
	}
	if u := getNode(t, s, ctx, "c", "n1").Usage; u == nil || !u.Timestamp.Equal(t0.Add(10*time.Minute)) {
		t.Errorf("n1 shows usage %+v, want its newest sample", u)
	}
	after := registryRV(t, s, ctx)
	if n := countRows(t, b, `SELECT count(*) FROM registry_change WHERE resource_version > $1 AND resource_version <= $2`, before, after); n != 2 {
		t.Errorf("registry resourceVersion %d → %d with %d changes, want two (n2's usage became unknown, and its member's ClusterCapacity)", before, after, n)
	}
	// Partitions of the next hours exist ahead of the samples.
	var ahead int64
	if err := queryRow(t, b, `SELECT count(*) FROM cluster_node_metrics_partitions() WHERE upper_bound > $1`, t0.Add(2*time.Hour)).Scan(&ahead); err != nil || ahead == 0 {
		t.Errorf("partitions ahead of now: %d, %v; want some", ahead, err)
	}
	again, err := s.MaintainNodeMetrics(ctx, store.MetricsMaintenance{
		Now: t0.Add(10 * time.Minute), RetainAfter: t0.Add(-2 * time.Hour), UnknownBefore: t0.Add(-time.Hour),
	})
	if err != nil || again != (store.MetricsMaintained{}) {
		t.Errorf("second maintenance = %+v, %v; want nothing to do", again, err)
	}
}

// TestMigrationKeepsMetricsHistory: samples recorded before the history was
// partitioned stay readable in one partition, dropped whole once its newest
// hour falls out of the retention.
func TestMigrationKeepsMetricsHistory(t *testing.T) {
	t.Parallel()
	s, b := setupUnmigrated(t, postgres.Options{})
	ctx := b.Ctx
	// Up to the unpartitioned table of migration 003, through 004's down.
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.MigrateDownTo(ctx, 3); err != nil {
		t.Fatal(err)
	}
	old := time.Now().UTC().Add(-30 * time.Hour)
	if _, err := queryExec(t, b, `INSERT INTO cluster_node_metrics (cluster_id, node, cpu_usage_nanocores, memory_usage_bytes, observed_at)
		SELECT 'c', 'n' || i, 1, 1, $1::timestamptz + make_interval(mins => i) FROM generate_series(1, 100) i`, old); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, b, `SELECT count(*) FROM cluster_node_metrics`); n != 100 {
		t.Fatalf("%d samples after the migration, want 100", n)
	}
	got, err := s.MaintainNodeMetrics(ctx, store.MetricsMaintenance{Now: time.Now(), RetainAfter: time.Now().Add(-24 * time.Hour), UnknownBefore: time.Now().Add(-time.Hour)})
	if err != nil || got.DroppedPartitions != 1 {
		t.Fatalf("MaintainNodeMetrics = %+v, %v; want the pre-migration partition dropped", got, err)
	}
	if n := countRows(t, b, `SELECT count(*) FROM cluster_node_metrics`); n != 0 {
		t.Errorf("%d samples after the retention, want 0", n)
	}
}

// applyMetricsNodes applies nodes n0000… of member "c", each of the metrics
// tests' size.
func applyMetricsNodes(t *testing.T, s *postgres.Store, ctx context.Context, nodes int) {
	t.Helper()
	batch := store.Batch{ClusterID: "c"}
	for i := range nodes {
		batch.Nodes = append(batch.Nodes, node(nodeNameN(i), metricsNodeCPU, metricsNodeMem))
	}
	mustApply(t, s, ctx, batch)
}

// TestRecordNodeMetricsRejectsAWideSpan: a batch whose timestamps span more
// than a week is a clock error, refused whole with a message saying so
// rather than creating a history partition for every hour in between.
func TestRecordNodeMetricsRejectsAWideSpan(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	now := time.Now().UTC()
	_, err := s.RecordNodeMetrics(b.Ctx, store.Fence{ClusterID: "c"}, []store.NodeMetricsSample{
		{ClusterID: "c", Node: "n1", ObservedAt: now},
		{ClusterID: "c", Node: "n2", ObservedAt: now.AddDate(-1, 0, 0)},
	}, policy)
	if err == nil || !strings.Contains(err.Error(), "samples span") {
		t.Fatalf("RecordNodeMetrics of samples a year apart: %v; want an error naming the span", err)
	}
	if n := countRows(t, b, `SELECT count(*) FROM cluster_node_metrics_partitions()`); n != 0 {
		t.Errorf("%d partitions created for the refused batch", n)
	}
}

// TestMetricsPartitionsCreatedConcurrently: replicas and members that need
// the same new hourly partitions at once all succeed.
func TestMetricsPartitionsCreatedConcurrently(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	future := time.Now().UTC().Add(48 * time.Hour)
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			_, err := s.MaintainNodeMetrics(b.Ctx, store.MetricsMaintenance{Now: future, RetainAfter: time.Unix(0, 0), UnknownBefore: time.Unix(0, 0)})
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Errorf("concurrent MaintainNodeMetrics: %v", err)
		}
	}
	if n := countRows(t, b, `SELECT count(*) FROM cluster_node_metrics_partitions()`); n != 3 {
		t.Errorf("%d partitions, want the 3 hours from now on", n)
	}
}
