package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// recommendNamespace is the namespace of the 5,000-node member whose week
// BenchmarkRecommendation sizes.
const recommendNamespace = "team-00"

// BenchmarkRecommendation measures a recommendation of a namespace's
// requests over a week (issue 53) in the 5,000-node member: a
// LocalUsageReport with spec.recommend, which reads the namespace's 168
// hourly rollups, beside PostgreSQL computing the same figures (p95, max,
// the share of samples under the sized requests) from the week's raw
// samples, a minute apart (10,080), as a client holding them would.
func BenchmarkRecommendation(b *testing.B) {
	e := setup(b)
	ctx := b.Context()
	if err := e.seedNamespaceWeek(ctx); err != nil {
		b.Fatalf("seed a namespace's week: %v", err)
	}
	b.Run("namespace/7d/reads=rollups", func(b *testing.B) {
		benchLatency(b, func(ctx context.Context) error {
			r, err := e.platform.PlatformV1alpha1().LocalUsageReports(recommendNamespace).Create(ctx, &v1alpha1.LocalUsageReport{
				Spec: v1alpha1.UsageReportSpec{Cluster: clusterID, Window: metav1.Duration{Duration: 7 * 24 * time.Hour},
					Recommend: &v1alpha1.RecommendOptions{}}}, metav1.CreateOptions{})
			if err == nil && (r.Status.Recommendation == nil || r.Status.Samples < 7*24*60) {
				err = fmt.Errorf("a recommendation of %d samples: %+v", r.Status.Samples, r.Status.Recommendation)
			}
			return err
		})
	})
	b.Run("namespace/7d/reads=raw-samples", func(b *testing.B) {
		conn, err := e.db.Acquire(ctx)
		must(b, err)
		defer conn.Release()
		const query = `WITH w AS (SELECT * FROM bench_namespace_samples WHERE observed_at >= $1),
			p AS (SELECT percentile_disc(0.95) WITHIN GROUP (ORDER BY cpu) AS cpu95, max(cpu) AS cpu_max,
				percentile_disc(0.95) WITHIN GROUP (ORDER BY memory) AS memory95, max(memory) AS memory_max FROM w)
			SELECT p.*, (SELECT count(*) FILTER (WHERE cpu <= p.cpu95 * 1.15) FROM w),
				(SELECT count(*) FILTER (WHERE memory <= p.memory95 * 1.15) FROM w), (SELECT count(*) FROM w) FROM p`
		since := time.Now().Add(-7 * 24 * time.Hour)
		benchLatency(b, func(ctx context.Context) error {
			var cpu95, cpuMax, mem95, memMax, cpuCovered, memCovered, n int64
			return conn.QueryRow(ctx, query, since).Scan(&cpu95, &cpuMax, &mem95, &memMax, &cpuCovered, &memCovered, &n)
		})
	})
}

var seedWeek struct {
	once sync.Once
	err  error
}

// seedNamespaceWeek records a week of recommendNamespace's usage a minute
// apart through the scraper's write path (RecordNamespaceMetrics; each call
// one minute of every hour, as the rollups take one sample an hour a
// statement), keeping the raw samples in bench_namespace_samples for the
// baseline.
func (e *env) seedNamespaceWeek(ctx context.Context) error {
	seedWeek.once.Do(func() { seedWeek.err = e.writeNamespaceWeek(ctx) })
	return seedWeek.err
}

func (e *env) writeNamespaceWeek(ctx context.Context) error {
	_, err := e.db.Exec(ctx, `CREATE TABLE bench_namespace_samples AS
		SELECT t AS observed_at,
			(2e9 * (0.3 + 0.5 * greatest(0, cos((extract(hour FROM t AT TIME ZONE 'UTC') - 14) / 24 * 2 * pi())) + 0.05 * random()))::bigint AS cpu,
			(4 * 2^30 * (0.5 + 0.3 * greatest(0, cos((extract(hour FROM t AT TIME ZONE 'UTC') - 14) / 24 * 2 * pi())) + 0.02 * random()))::bigint AS memory
		FROM generate_series(date_trunc('minute', now()) - interval '7 days' + interval '1 minute', now(), interval '1 minute') t`)
	if err != nil {
		return err
	}
	policy := store.UsageReporting{Threshold: 0.05, Period: 5 * time.Minute}
	for minute := range 60 {
		rows, err := e.db.Query(ctx, `SELECT observed_at, cpu, memory FROM bench_namespace_samples
			WHERE extract(minute FROM observed_at) = $1 ORDER BY observed_at`, minute)
		if err != nil {
			return err
		}
		var samples []store.NamespaceMetricsSample
		for rows.Next() {
			s := store.NamespaceMetricsSample{ClusterID: clusterID, Namespace: recommendNamespace, Pods: int64(nodeCount / namespaceCount)}
			if err := rows.Scan(&s.ObservedAt, &s.CPUNanoCores, &s.MemoryBytes); err != nil {
				rows.Close()
				return err
			}
			samples = append(samples, s)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if _, err := e.registry.RecordNamespaceMetrics(ctx, store.Fence{ClusterID: clusterID}, samples, policy); err != nil {
			return fmt.Errorf("record minute %d of every hour: %w", minute, err)
		}
	}
	return nil
}
