package usage

import (
	"context"
	"fmt"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/postgres/writes"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

var (
	// sqlNamespaceUsageDue names the due samples and the usage to end
	// without a commit ticket; sqlReportNamespaceUsage reports those
	// alone in a views section, re-checked, at most writes.ViewRowsPerCommit a transaction.
	sqlNamespaceUsageDue    = statements.Statement("namespace_usage_due_names")
	sqlReportNamespaceUsage = statements.Statement("namespace_report_usage")
	// sqlNamespaceRollup adds the samples of known namespaces to their
	// usage history.
	sqlNamespaceRollup = statements.Statement("namespace_rollup")
)

// namespaceSampleRow is a namespace sample in the JSON the statements decode.
type namespaceSampleRow struct {
	Namespace    string    `json:"namespace"`
	CPUNanoCores int64     `json:"cpu_usage_nanocores"`
	MemoryBytes  int64     `json:"memory_usage_bytes"`
	Pods         int64     `json:"pods"`
	ObservedAt   time.Time `json:"observed_at"`
}

// RecordNamespaceMetrics reports the usage samples of member f.ClusterID's
// namespaces on their ClusterNamespaces when the policy says they are due
// (namespace_usage_due.sql: as for nodes, with the larger of the
// namespace's requests and its reported usage in place of allocatable),
// and makes unknown the usage of its namespaces the scrape lacks (no pod
// runs there) and no sample confirmed for policy.UnknownAfter; it returns
// how many it changed. Every sample also goes into the namespaces' hourly
// usage history (once, however often it is scraped). A scrape with none
// due takes two short statements and no commit ticket; otherwise views
// sections write the due namespaces alone, in parts of writes.ViewRowsPerCommit, as for
// nodes.
func (r *Recorder) RecordNamespaceMetrics(ctx context.Context, f store.Fence, samples []store.NamespaceMetricsSample, policy store.UsageReporting) (int64, error) {
	rows := make([]namespaceSampleRow, 0, len(samples))
	for _, m := range samples {
		if m.ClusterID != f.ClusterID {
			return 0, fmt.Errorf("record namespace metrics of member %s: a sample of namespace %s is of member %s", f.ClusterID, m.Namespace, m.ClusterID)
		}
		rows = append(rows, namespaceSampleRow{Namespace: m.Namespace, CPUNanoCores: m.CPUNanoCores, MemoryBytes: m.MemoryBytes, Pods: m.Pods, ObservedAt: m.ObservedAt})
	}
	param, err := writes.JSONRows(rows)
	if err != nil {
		return 0, fmt.Errorf("record namespace metrics: %w", err)
	}
	// Fenced as every write of the member, under its lock (not the
	// writers'): a replica that lost the member, or a member deleted
	// meanwhile, adds no history. A scrape without samples (no pod runs)
	// has none to add, but may still end usage below.
	if len(rows) > 0 {
		err = r.engine.Write(ctx, opReportNamespaceUsage, writes.Sections{Member: func(w *writes.Writer) error {
			if err := w.Fence(f); err != nil {
				return err
			}
			_, err := w.Tx().Exec(ctx, sqlNamespaceRollup, f.ClusterID, param)
			return err
		}})
		if err != nil {
			return 0, fmt.Errorf("record namespace metrics: %w", err)
		}
	}
	var cut *time.Time
	var due, absent []string
	if err := r.pool.QueryRow(ctx, sqlNamespaceUsageDue, f.ClusterID, param, policy.Threshold, policy.Period.Seconds(), unknownAfterSeconds(policy)).
		Scan(&cut, &due, &absent); err != nil {
		return 0, fmt.Errorf("record namespace metrics: %w", pgdb.InterpretError(err))
	}
	if len(due) == 0 && len(absent) == 0 {
		return 0, nil
	}
	reported, err := reportInParts(ctx, r, opReportNamespaceUsage, f, samplesOf(rows, due), absent, writes.JSONRows[namespaceSampleRow],
		func(w *writes.Writer, param []byte, absent []string) (int64, error) {
			return w.StampCounted("report namespace usage", sqlReportNamespaceUsage,
				f.ClusterID, param, policy.Threshold, policy.Period.Seconds(), cut, w.StartRV(), absent)
		})
	if err != nil {
		return reported, fmt.Errorf("record namespace metrics: %w", err)
	}
	return reported, nil
}

// samplesOf returns the samples of the namespaces named.
func samplesOf(rows []namespaceSampleRow, names []string) []namespaceSampleRow {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	out := make([]namespaceSampleRow, 0, len(names))
	for _, r := range rows {
		if want[r.Namespace] {
			out = append(out, r)
		}
	}
	return out
}

// unknownAfterSeconds is policy.UnknownAfter for namespace_usage_cut, nil
// (SQL NULL: never) without one.
func unknownAfterSeconds(policy store.UsageReporting) *float64 {
	if policy.UnknownAfter <= 0 {
		return nil
	}
	return new(policy.UnknownAfter.Seconds())
}
