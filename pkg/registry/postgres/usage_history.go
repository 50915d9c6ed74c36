package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/postgres/usage"
	"github.com/example/platform-apiserver/pkg/registry/postgres/views"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// UsageHistory summarizes the usage samples q selects from the hourly
// rollups (usage.History). It reads any server (a standby too): the
// history has no resourceVersion.
func (s *Store) UsageHistory(ctx context.Context, q store.UsageQuery) (*store.UsageHistory, error) {
	readTx := func(ctx context.Context, fn func(pgx.Tx) error) error { return s.readTx(ctx, store.Freshness{}, fn) }
	nodes := func(args *pgdb.Args, reqs labels.Requirements) ([]string, error) {
		return views.SelectorSQL(args, reqs, nil)
	}
	return usage.History(ctx, readTx, nodes, q)
}

// RecordNodeMetrics stores one scrape's samples in the history and reports
// the usage of the nodes the policy says are due (usage.Recorder).
func (s *Store) RecordNodeMetrics(ctx context.Context, f store.Fence, samples []store.NodeMetricsSample, policy store.UsageReporting) (store.MetricsRecorded, error) {
	return s.usage.RecordNodeMetrics(ctx, f, samples, policy)
}

// RecordNamespaceMetrics adds one scrape's namespace samples to the history
// and reports the usage of the namespaces the policy says are due
// (usage.Recorder).
func (s *Store) RecordNamespaceMetrics(ctx context.Context, f store.Fence, samples []store.NamespaceMetricsSample, policy store.UsageReporting) (int64, error) {
	return s.usage.RecordNamespaceMetrics(ctx, f, samples, policy)
}

// MaintainNodeMetrics prepares the partitions of the next hours, drops
// those past the retention, and makes stale reported usage unknown, once
// per interval across replicas (usage.Recorder).
func (s *Store) MaintainNodeMetrics(ctx context.Context, m store.MetricsMaintenance) (store.MetricsMaintained, error) {
	return s.usage.MaintainNodeMetrics(ctx, m)
}
