package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Node metrics history lives in cluster_node_metrics, partitioned by the hour
// of observed_at (migration 004); a node's NodeCapacity shows its *reported*
// sample (cluster_node.usage_*), which changes only when the reporting policy
// says so. See docs/registry.md, "Node usage".

// metricsSamplesSQL is a CTE list over the samples passed as parallel arrays
// $1..$6: "samples" keeps those of nodes the registry knows (observed no
// earlier than the node's creation, so a recreated node never takes its
// predecessor's usage), "newest" the newest of them per node.
const metricsSamplesSQL = `
	input AS (
		SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[], $5::timestamptz[], $6::float8[])
			AS s(cluster_id, node, cpu_usage_nanocores, memory_usage_bytes, observed_at, window_seconds)
	), samples AS (
		SELECT s.* FROM input s JOIN cluster_node n ON n.cluster_id = s.cluster_id AND n.name = s.node
		WHERE n.created_at IS NULL OR s.observed_at >= n.created_at
	), newest AS (
		SELECT DISTINCT ON (cluster_id, node) * FROM samples ORDER BY cluster_id, node, observed_at DESC
	)`

// usageDueSQL is true when node n's newest sample s is to be reported:
// it is newer than the reported one, and there is none, or usage moved by
// more than $7 (a fraction) of allocatable, or s is in a later report period
// ($8 seconds) than the reported one. Each node's periods start at its own
// phase (cluster_node_usage_phase, a hash of its key), so a quiet fleet's
// refreshes spread evenly over the period instead of all coming due in the
// same scrape; a reported sample is replaced at least once per period.
const usageDueSQL = `
	s.observed_at > coalesce(n.usage_observed_at, '-infinity')
	AND (n.usage_observed_at IS NULL
		OR floor((extract(epoch FROM s.observed_at) + cluster_node_usage_phase(n.cluster_id, n.name, $8::float8)) / $8::float8)
			> floor((extract(epoch FROM n.usage_observed_at) + cluster_node_usage_phase(n.cluster_id, n.name, $8::float8)) / $8::float8)
		OR abs(s.cpu_usage_nanocores - n.usage_cpu_nanocores) > $7::float8 * n.allocatable_cpu_millis * 1000000
		OR abs(s.memory_usage_bytes - n.usage_memory_bytes) > $7::float8 * n.allocatable_memory_bytes)`

// recordMetricsSQL stores the samples of known nodes in the history without
// taking the writers' lock (the history is no view: it has no
// resourceVersion) and returns the keys of the nodes whose usage is due for
// a report.
var recordMetricsSQL = `
	WITH ` + metricsSamplesSQL + `, stored AS (
		INSERT INTO cluster_node_metrics (cluster_id, node, cpu_usage_nanocores, memory_usage_bytes, observed_at, window_seconds)
		SELECT * FROM samples
		ON CONFLICT (cluster_id, node, observed_at) DO NOTHING
		RETURNING 1
	), due AS (
		SELECT s.cluster_id, s.node FROM newest s JOIN cluster_node n ON n.cluster_id = s.cluster_id AND n.name = s.node
		WHERE ` + usageDueSQL + `
	)
	SELECT (SELECT count(*) FROM stored),
		coalesce((SELECT array_agg(cluster_id) FROM due), '{}'), coalesce((SELECT array_agg(node) FROM due), '{}')`

// reportUsageSQL reports the due samples on the view rows (re-checking the
// rule); $9 is the writer's start resourceVersion.
var reportUsageSQL = `
	WITH ` + metricsSamplesSQL + `, reported AS (
		UPDATE cluster_node n SET
			usage_cpu_nanocores  = s.cpu_usage_nanocores,
			usage_memory_bytes   = s.memory_usage_bytes,
			usage_observed_at    = s.observed_at,
			usage_window_seconds = s.window_seconds,
			resource_version     = ` + nextRV("n", "$9") + `
		FROM newest s
		WHERE n.cluster_id = s.cluster_id AND n.name = s.node AND ` + usageDueSQL + `
		RETURNING n.resource_version
	)
	SELECT count(*), coalesce(max(resource_version), 0) FROM reported`

// maxSampleSpan bounds the time one batch of samples may span, so a bad
// timestamp cannot make a partition for every hour of a year.
const maxSampleSpan = 7 * 24 * time.Hour

// RecordNodeMetrics stores samples in the history and reports the usage of
// the nodes the policy says are due. A scrape with no node due takes two
// short statements and never the writers' lock; otherwise one serialized
// write restamps the due nodes, given only their samples, so the lock is
// held for work in proportion to them, not to the scrape.
func (s *Store) RecordNodeMetrics(ctx context.Context, f store.Fence, samples []store.NodeMetricsSample, policy store.UsageReporting) (store.MetricsRecorded, error) {
	var out store.MetricsRecorded
	if len(samples) == 0 {
		return out, nil
	}
	first, last := samples[0].ObservedAt, samples[0].ObservedAt
	for _, m := range samples {
		if m.ClusterID != f.ClusterID {
			return out, fmt.Errorf("record node metrics of member %s: a sample of node %s is of member %s", f.ClusterID, m.Node, m.ClusterID)
		}
		first, last = minTime(first, m.ObservedAt), maxTime(last, m.ObservedAt)
	}
	if span := last.Sub(first); span > maxSampleSpan {
		return out, fmt.Errorf("record node metrics: samples span %s (%s to %s), more than %s: one scrape's samples are minutes apart",
			span, first.Format(time.RFC3339), last.Format(time.RFC3339), maxSampleSpan)
	}
	if err := s.ensureMetricsPartitions(ctx, first, last); err != nil {
		return out, err
	}
	args := append(sampleArrays(samples), policy.Threshold, policy.Period.Seconds())
	var dueClusters, dueNodes []string
	if err := s.pool.QueryRow(ctx, recordMetricsSQL, args...).Scan(&out.Stored, &dueClusters, &dueNodes); err != nil {
		return out, fmt.Errorf("record node metrics: %w", interpretError(err))
	}
	if len(dueNodes) == 0 {
		return out, nil
	}
	due := newestOf(samples, dueClusters, dueNodes)
	args = append(sampleArrays(due), policy.Threshold, policy.Period.Seconds())
	err := s.write(ctx, opReportUsage, sections{
		member: func(w *writer) error { return w.fence(f) },
		views: func(w *writer) (err error) {
			out.Reported, err = w.stampCounted("report node usage", reportUsageSQL, append(args, w.startRV)...)
			return err
		},
	})
	if err != nil {
		return out, fmt.Errorf("record node metrics: %w", err)
	}
	return out, nil
}

// MaintainNodeMetrics prepares the partitions of the next hours, drops those
// entirely before m.RetainAfter, and makes stale reported usage unknown.
func (s *Store) MaintainNodeMetrics(ctx context.Context, m store.MetricsMaintenance) (store.MetricsMaintained, error) {
	var out store.MetricsMaintained
	var dropped int
	due, err := s.takeTurn(ctx, "metrics-maintenance", m.Interval)
	if err != nil || !due {
		out.Skipped = err == nil
		return out, err
	}
	if err := s.ensureMetricsPartitions(ctx, m.Now, m.Now.Add(2*time.Hour)); err != nil {
		return out, err
	}
	dropped, err = s.dropMetricsPartitions(ctx, m.RetainAfter)
	out.DroppedPartitions = dropped
	if err != nil {
		return out, err
	}
	out.Unknown, err = s.expireUsage(ctx, m.UnknownBefore)
	return out, err
}

// takeTurn reports whether this caller runs the registry-wide task now: it
// does when no caller ran it within interval, and then records the time
// (the database's clock, which every replica shares) as its last run.
// Concurrent callers take turns on the task's row, so replicas that call
// on the same interval run it about once per interval.
func (s *Store) takeTurn(ctx context.Context, task string, interval time.Duration) (bool, error) {
	// A little under the interval, so callers on the same schedule do not
	// skip every other round on jitter.
	within := interval * 9 / 10
	tag, err := s.pool.Exec(ctx, `
		INSERT INTO registry_task AS t (name, last_run) VALUES ($1, clock_timestamp())
		ON CONFLICT (name) DO UPDATE SET last_run = EXCLUDED.last_run
		WHERE t.last_run <= EXCLUDED.last_run - make_interval(secs => $2)`, task, within.Seconds())
	if err != nil {
		return false, fmt.Errorf("%s: take turn: %w", task, interpretError(err))
	}
	return tag.RowsAffected() == 1, nil
}

// ensureMetricsPartitions creates the hourly history partitions covering
// [from, to] that are missing.
func (s *Store) ensureMetricsPartitions(ctx context.Context, from, to time.Time) error {
	if _, err := s.pool.Exec(ctx, `SELECT cluster_node_metrics_ensure_partitions($1, $2)`, from, to); err != nil {
		return fmt.Errorf("create node metrics partitions: %w", interpretError(err))
	}
	return nil
}

// partitionDropLockTimeout bounds how long dropping a partition waits for
// its parent's lock (inserts hold it for milliseconds); on timeout the drop
// is retried at the next maintenance.
const partitionDropLockTimeout = "5s"

// dropMetricsPartitions drops the history partitions whose hour ended at or
// before `before`, each in its own short transaction.
func (s *Store) dropMetricsPartitions(ctx context.Context, before time.Time) (int, error) {
	rows, err := s.pool.Query(ctx, `SELECT name FROM cluster_node_metrics_partitions() WHERE upper_bound <= $1 ORDER BY upper_bound`, before)
	if err != nil {
		return 0, fmt.Errorf("list node metrics partitions: %w", interpretError(err))
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("list node metrics partitions: %w", interpretError(err))
	}
	dropped := 0
	for _, name := range names {
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '`+partitionDropLockTimeout+`'`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `DROP TABLE IF EXISTS `+pgx.Identifier{name}.Sanitize())
			return err
		})
		if err != nil {
			return dropped, fmt.Errorf("drop node metrics partition %s: %w", name, interpretError(err))
		}
		dropped++
	}
	return dropped, nil
}

// expireUsage makes the usage of nodes whose reported sample was observed
// before `before` unknown; it takes the writers' lock only when there are any.
func (s *Store) expireUsage(ctx context.Context, before time.Time) (int64, error) {
	var stale bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM cluster_node WHERE usage_observed_at < $1)`, before).Scan(&stale); err != nil {
		return 0, fmt.Errorf("find stale node usage: %w", interpretError(err))
	}
	if !stale {
		return 0, nil
	}
	var expired int64
	err := s.write(ctx, opExpireUsage, sections{views: func(w *writer) (err error) {
		expired, err = w.stampCounted("expire stale node usage", `
			WITH expired AS (
				UPDATE cluster_node n SET usage_cpu_nanocores = NULL, usage_memory_bytes = NULL,
					usage_observed_at = NULL, usage_window_seconds = NULL,
					resource_version = `+nextRV("n", "$2")+`
				WHERE n.usage_observed_at < $1
				RETURNING n.resource_version)
			SELECT count(*), coalesce(max(resource_version), 0) FROM expired`, before, w.startRV)
		return err
	}})
	return expired, err
}

// sampleArrays passes samples as the parallel arrays $1..$6 of
// metricsSamplesSQL.
func sampleArrays(samples []store.NodeMetricsSample) []any {
	n := len(samples)
	clusters, nodes := make([]string, n), make([]string, n)
	cpu, mem := make([]int64, n), make([]int64, n)
	observed, window := make([]time.Time, n), make([]float64, n)
	for i, m := range samples {
		clusters[i], nodes[i], cpu[i], mem[i] = m.ClusterID, m.Node, m.CPUNanoCores, m.MemoryBytes
		observed[i], window[i] = m.ObservedAt, m.Window.Seconds()
	}
	return []any{clusters, nodes, cpu, mem, observed, window}
}

// newestOf returns the newest sample of each node named by the parallel
// key arrays.
func newestOf(samples []store.NodeMetricsSample, clusters, nodes []string) []store.NodeMetricsSample {
	want := make(map[[2]string]int, len(nodes))
	for i := range nodes {
		want[[2]string{clusters[i], nodes[i]}] = -1
	}
	for i, m := range samples {
		k := [2]string{m.ClusterID, m.Node}
		if j, ok := want[k]; ok && (j < 0 || m.ObservedAt.After(samples[j].ObservedAt)) {
			want[k] = i
		}
	}
	out := make([]store.NodeMetricsSample, 0, len(want))
	for _, i := range want {
		if i >= 0 {
			out = append(out, samples[i])
		}
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
