package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
)

// historyWindow and historyStep are the usage history BenchmarkFleetOverview
// seeds for every registry node: a day of samples a minute apart (discovery
// scrapes every 30 s; the rollups' size depends on node-hours and buckets,
// not on the samples, so a day at 30 s reads the same rollups).
const (
	historyWindow = 24 * time.Hour
	historyStep   = time.Minute
	// historyPool selects every 20th node (storeNode's infra pool).
	historyPool = "platform.example.io/pool=infra"
)

// BenchmarkFleetOverview measures what issue 12's kinds save a client, each
// beside what a client does without them: the member's ClusterCapacity vs
// listing and summing its NodeCapacities, and a UsageReport (hourly
// rollups) vs PostgreSQL computing the same statistics from the raw
// samples, for the member, its infra pool and one node.
func BenchmarkFleetOverview(b *testing.B) {
	e := setup(b)
	ctx := b.Context()
	b.Run("clustercapacity/get", func(b *testing.B) {
		benchClient(b, e, 1, func(ctx context.Context) (int, error) {
			cc, err := e.platform.PlatformV1alpha1().ClusterCapacities().Get(ctx, clusterID, metav1.GetOptions{})
			if err == nil && cc.Status.Nodes.Total != nodeCount {
				return 0, fmt.Errorf("ClusterCapacity counts %d nodes, want %d", cc.Status.Nodes.Total, nodeCount)
			}
			return 1, err
		})
	})
	b.Run("clustercapacity/list-and-sum", func(b *testing.B) {
		benchClient(b, e, nodeCount, func(ctx context.Context) (int, error) {
			list, err := e.platform.PlatformV1alpha1().NodeCapacities().List(ctx, metav1.ListOptions{})
			if err != nil {
				return 0, err
			}
			var alloc, req resource.Quantity
			for _, nc := range list.Items {
				alloc.Add(nc.Status.Allocatable.CPU)
				req.Add(nc.Status.Requested.CPU)
			}
			return len(list.Items), nil
		})
	})

	if err := e.seedUsageHistory(ctx); err != nil {
		b.Fatalf("seed usage history: %v", err)
	}
	since := time.Now().Add(-historyWindow)
	for _, sel := range []struct {
		name string
		spec v1alpha1.UsageReportSpec
		raw  string // the samples' filter for the raw-samples side
	}{
		{"member", v1alpha1.UsageReportSpec{}, ""},
		{"pool", v1alpha1.UsageReportSpec{NodeSelector: historyPool},
			`AND node IN (SELECT name FROM cluster_node WHERE cluster_id = 'bench' AND labels @> '{"platform.example.io/pool":"infra"}')`},
		{"node", v1alpha1.UsageReportSpec{NodeName: getNodeName}, `AND node = '` + getNodeName + `'`},
	} {
		spec := sel.spec
		spec.Cluster, spec.Window = clusterID, metav1.Duration{Duration: historyWindow}
		b.Run("usagehistory/"+sel.name+"/reads=rollups", func(b *testing.B) {
			benchLatency(b, func(ctx context.Context) error {
				r, err := e.platform.PlatformV1alpha1().UsageReports().Create(ctx, &v1alpha1.UsageReport{Spec: spec}, metav1.CreateOptions{})
				if err == nil && r.Status.Samples == 0 {
					err = fmt.Errorf("report without samples: %+v", r.Status)
				}
				return err
			})
		})
		b.Run("usagehistory/"+sel.name+"/reads=raw-samples", func(b *testing.B) {
			conn, err := e.db.Acquire(ctx)
			must(b, err)
			defer conn.Release()
			query := `SELECT count(*), avg(cpu_usage_nanocores)::bigint, max(cpu_usage_nanocores),
				percentile_disc(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY cpu_usage_nanocores),
				avg(memory_usage_bytes)::bigint, max(memory_usage_bytes),
				percentile_disc(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY memory_usage_bytes)
				FROM cluster_node_metrics WHERE cluster_id = 'bench' AND observed_at >= $1 ` + sel.raw
			benchLatency(b, func(ctx context.Context) error {
				var n, cpuAvg, cpuMax, memAvg, memMax int64
				var cpuP, memP []int64
				return conn.QueryRow(ctx, query, since).Scan(&n, &cpuAvg, &cpuMax, &cpuP, &memAvg, &memMax, &memP)
			})
		})
	}
}

// benchLatency runs op b.N times and reports its p50 and p99 latency.
func benchLatency(b *testing.B, op func(context.Context) error) {
	must(b, op(b.Context())) // warm
	took := loopLatencies(b, func() ([]time.Duration, error) {
		start := time.Now()
		err := op(b.Context())
		return []time.Duration{time.Since(start)}, err
	})
	took.summary().report(b, "", false)
}

var seedHistory struct {
	once sync.Once
	err  error
}

// seedUsageHistory writes historyWindow of samples every historyStep for
// every registry node straight into the history table (faster than
// recording them scrape by scrape), then rebuilds the rollups from them with
// the rollup migration itself. Usage varies around each node's allocatable
// share so the histograms are realistic: a few buckets a node-hour.
func (e *env) seedUsageHistory(ctx context.Context) error {
	seedHistory.once.Do(func() { seedHistory.err = e.writeUsageHistory(ctx) })
	return seedHistory.err
}

func (e *env) writeUsageHistory(ctx context.Context) error {
	for _, sql := range []string{
		`SELECT cluster_node_metrics_ensure_partitions(now() - interval '25 hours', now() + interval '1 hour')`,
		`INSERT INTO cluster_node_metrics (cluster_id, node, cpu_usage_nanocores, memory_usage_bytes, observed_at, window_seconds)
		 SELECT n.cluster_id, n.name,
		        (n.allocatable_cpu_millis * 1e6 * (0.3 + 0.2 * sin(extract(epoch FROM t) / 3600 + i) + 0.05 * random()))::bigint,
		        (n.allocatable_memory_bytes * (0.5 + 0.1 * cos(extract(epoch FROM t) / 7200 + i) + 0.02 * random()))::bigint,
		        t, 30
		 FROM (SELECT *, row_number() OVER (ORDER BY name) AS i FROM cluster_node WHERE cluster_id = 'bench') n,
		      generate_series(date_trunc('minute', now()) - interval '24 hours', now(), interval '1 minute') t
		 ON CONFLICT DO NOTHING`,
	} {
		if _, err := e.db.Exec(ctx, sql); err != nil {
			return fmt.Errorf("%.60s...: %w", sql, err)
		}
	}
	if err := e.registry.MigrateDownTo(ctx, 9); err != nil {
		return err
	}
	if err := e.registry.Migrate(ctx); err != nil {
		return err
	}
	var rollups bool
	err := e.db.QueryRow(ctx, `SELECT EXISTS (SELECT FROM cluster_node_usage_hourly)`).Scan(&rollups)
	if err == nil && !rollups {
		err = errors.New("no usage rollups after rebuilding them from the samples")
	}
	return err
}
