package usage

import (
	"context"
	"fmt"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/postgres/writes"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Node metrics history lives in cluster_node_metrics, partitioned by the hour
// of observed_at (migration 004); a node's NodeCapacity shows its *reported*
// sample (cluster_node.usage_*), which changes only when the reporting policy
// says so. See docs/registry.md, "Node usage".

var (
	// sqlRecordMetrics stores the samples of known nodes in the history
	// without a commit ticket and returns the keys of the nodes whose
	// usage is due for a report; sqlReportUsage reports those on the view
	// rows, re-checking the rule (metrics_usage_due.sql).
	sqlRecordMetrics     = statements.Statement("metrics_record")
	sqlReportUsage       = statements.Statement("metrics_report_usage")
	sqlTakeTurn          = statements.Statement("metrics_take_turn")
	sqlExpireUsage       = statements.Statement("metrics_expire_usage")
	sqlExpireLockMembers = statements.Statement("metrics_expire_lock_members")
)

// maxSampleSpan bounds the time one batch of samples may span, so a bad
// timestamp cannot make a partition for every hour of a year.
const maxSampleSpan = 7 * 24 * time.Hour

// RecordNodeMetrics stores one scrape's samples in the history and reports
// the usage of the nodes the policy says are due, and makes unknown that of
// the member's nodes the scrape lacks and no sample confirmed for
// policy.UnknownAfter. A scrape with no node due takes two short statements
// and never a commit ticket; otherwise views sections of at most writes.ViewRowsPerCommit
// nodes each restamp the due nodes, given only their samples, so the
// ticket is held for work in proportion to them, not to the scrape.
func (r *Recorder) RecordNodeMetrics(ctx context.Context, f store.Fence, samples []store.NodeMetricsSample, policy store.UsageReporting) (store.MetricsRecorded, error) {
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
	if err := EnsurePartitions(ctx, r.pool, first, last); err != nil {
		return out, err
	}
	param, err := sampleRows(samples)
	if err != nil {
		return out, fmt.Errorf("record node metrics: %w", err)
	}
	// A usage no sample confirmed since cut becomes unknown; cut is on the
	// member's clock, as the samples are (nil, SQL NULL: never).
	cut := unknownCut(last, policy)
	var dueClusters, dueNodes, absent []string
	if err := r.pool.QueryRow(ctx, sqlRecordMetrics, param, policy.Threshold, policy.Period.Seconds(), f.ClusterID, cut).
		Scan(&out.Stored, &dueClusters, &dueNodes, &absent); err != nil {
		return out, fmt.Errorf("record node metrics: %w", pgdb.InterpretError(err))
	}
	if len(dueNodes) == 0 && len(absent) == 0 {
		return out, nil
	}
	due := newestOf(samples, dueClusters, dueNodes)
	out.Reported, err = reportInParts(ctx, r, opReportUsage, f, due, absent, sampleRows,
		func(w *writes.Writer, param []byte, absent []string) (int64, error) {
			return w.StampCounted("report node usage", sqlReportUsage, param, policy.Threshold, policy.Period.Seconds(),
				f.ClusterID, cut, w.StartRV(), absent)
		})
	if err != nil {
		return out, fmt.Errorf("record node metrics: %w", err)
	}
	return out, nil
}

// reportInParts writes a usage report of the due samples, fenced by f, at
// most writes.ViewRowsPerCommit a transaction: report stamps one part (encoded) and
// the names of the rows whose usage becomes unknown, which go with the
// first part. It returns how many rows the parts stamped.
func reportInParts[T any](ctx context.Context, r *Recorder, o writes.Op, f store.Fence, due []T, absent []string,
	encode func([]T) ([]byte, error), report func(w *writes.Writer, param []byte, absent []string) (int64, error)) (int64, error) {
	var reported int64
	for start := 0; start == 0 || start < len(due); start += writes.ViewRowsPerCommit {
		param, err := encode(due[start:min(start+writes.ViewRowsPerCommit, len(due))])
		if err != nil {
			return reported, err
		}
		var n int64
		err = r.engine.Write(ctx, o, writes.Sections{
			Member: func(w *writes.Writer) error { return w.Fence(f) },
			Views: func(w *writes.Writer) (err error) {
				n, err = report(w, param, absent)
				return err
			},
		})
		if err != nil {
			return reported, err
		}
		reported += n
		absent = nil // made unknown by the first
	}
	return reported, nil
}

// MaintainNodeMetrics prepares the partitions of the next hours, drops those
// entirely before m.RetainAfter, and makes stale reported usage unknown.
func (r *Recorder) MaintainNodeMetrics(ctx context.Context, m store.MetricsMaintenance) (store.MetricsMaintained, error) {
	var out store.MetricsMaintained
	var dropped int
	due, err := r.takeTurn(ctx, "metrics-maintenance", m.Interval)
	if err != nil || !due {
		out.Skipped = err == nil
		return out, err
	}
	if err := EnsurePartitions(ctx, r.pool, m.Now, m.Now.Add(2*time.Hour)); err != nil {
		return out, err
	}
	dropped, err = DropPartitions(ctx, r.pool, m.RetainAfter)
	out.DroppedPartitions = dropped
	if err != nil {
		return out, err
	}
	if err := ExpireRollups(ctx, r.pool, m.RetainAfter); err != nil {
		return out, err
	}
	out.Unknown, err = r.expireUsage(ctx, m.UnknownBefore)
	return out, err
}

// takeTurn reports whether this caller runs the registry-wide task now: it
// does when no caller ran it within interval, and then records the time
// (the database's clock, which every replica shares) as its last run.
// Concurrent callers take turns on the task's row, so replicas that call
// on the same interval run it about once per interval.
func (r *Recorder) takeTurn(ctx context.Context, task string, interval time.Duration) (bool, error) {
	// A little under the interval, so callers on the same schedule do not
	// skip every other round on jitter.
	within := interval * 9 / 10
	tag, err := r.pool.Exec(ctx, sqlTakeTurn, task, within.Seconds())
	if err != nil {
		return false, fmt.Errorf("%s: take turn: %w", task, pgdb.InterpretError(err))
	}
	return tag.RowsAffected() == 1, nil
}

// expireUsage makes the usage of nodes and namespaces whose reported sample
// was observed before `before` unknown; it takes a commit ticket only when
// it locked a member with any (the member section finds them), and stamps
// at most writes.ViewRowsPerCommit nodes and as many namespaces a transaction. It
// stamps only the rows of members whose lock was free:
// a views section must not wait for a member's writer, which may be
// waiting for its ticket (docs/registry.md, "Commits in ticket order"); a
// busy member's usage is left to the next maintenance.
func (r *Recorder) expireUsage(ctx context.Context, before time.Time) (int64, error) {
	var total int64
	for {
		var expired int64
		var members []string
		err := r.engine.Write(ctx, opExpireUsage, writes.Sections{
			Member: func(w *writes.Writer) error {
				if err := w.Tx().QueryRow(ctx, sqlExpireLockMembers, before, writes.MemberLockClass).Scan(&members); err != nil {
					return fmt.Errorf("lock the members of stale usage: %w", err)
				}
				return nil
			},
			SkipViews: func() bool { return len(members) == 0 },
			Views: func(w *writes.Writer) (err error) {
				expired, err = w.StampCounted("expire stale usage", sqlExpireUsage, before, w.StartRV(), writes.ViewRowsPerCommit, members)
				return err
			},
		})
		total += expired
		if err != nil || expired == 0 { // expired == 0: nothing left a part can take
			return total, err
		}
	}
}

// sampleRow is one row of the jsonb parameter of metrics_record and
// metrics_report_usage (metrics_samples.sql).
type sampleRow struct {
	ClusterID         string    `json:"cluster_id"`
	Node              string    `json:"node"`
	CPUUsageNanocores int64     `json:"cpu_usage_nanocores"`
	MemoryUsageBytes  int64     `json:"memory_usage_bytes"`
	ObservedAt        time.Time `json:"observed_at"`
	WindowSeconds     float64   `json:"window_seconds"`
}

// sampleRows encodes samples as the jsonb parameter $1 of metrics_record and
// metrics_report_usage.
func sampleRows(samples []store.NodeMetricsSample) ([]byte, error) {
	rows := make([]sampleRow, len(samples))
	for i, m := range samples {
		if err := writes.CheckText("node metrics sample", m.ClusterID, m.Node); err != nil {
			return nil, err
		}
		rows[i] = sampleRow{ClusterID: m.ClusterID, Node: m.Node, CPUUsageNanocores: m.CPUNanoCores, MemoryUsageBytes: m.MemoryBytes,
			ObservedAt: m.ObservedAt.UTC().Truncate(time.Microsecond), WindowSeconds: m.Window.Seconds()}
	}
	return writes.JSONRows(rows)
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

// unknownCut is the time before which a reported usage no sample
// confirmed becomes unknown, reckoned from newest; nil without
// policy.UnknownAfter.
func unknownCut(newest time.Time, policy store.UsageReporting) *time.Time {
	if policy.UnknownAfter <= 0 {
		return nil
	}
	return new(newest.Add(-policy.UnknownAfter))
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
