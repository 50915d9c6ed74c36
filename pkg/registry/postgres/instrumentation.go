package postgres

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/postgres/replicas"
)

const metricsSubsystem = "platform_registry"

// Writes commit in ticket order (docs/registry.md): how long a writer waits
// for its turn and how long it holds its ticket are what a fleet's write
// throughput depends on, so they are measured per operation. The metrics
// keep their names from when a single writer lock gave the order.
var (
	writerLockWait = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "writer_lock_wait_seconds",
		Help:           "Time a write transaction waited for its turn to commit (taking a commit ticket, then waiting for every earlier ticket's transaction to end), by operation.",
		Buckets:        metrics.ExponentialBuckets(0.0005, 2, 16),
		StabilityLevel: metrics.ALPHA,
	}, []string{"op"})
	writerLockHold = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "writer_lock_hold_seconds",
		Help:           "Time a write transaction held its commit ticket, from taking it until its commit finished, less its wait for earlier tickets, by operation.",
		Buckets:        metrics.ExponentialBuckets(0.0005, 2, 16),
		StabilityLevel: metrics.ALPHA,
	}, []string{"op"})
	memberLockWait = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "member_lock_wait_seconds",
		Help:           "Time a discovery write waited for its member's lock (held by an earlier write or claim of the same member; writers of other members do not wait for it).",
		Buckets:        metrics.ExponentialBuckets(0.0005, 2, 16),
		StabilityLevel: metrics.ALPHA,
	})
	writeFailures = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "write_failures_total",
		Help:           "Write transactions that failed (and rolled back), by operation.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"op"})
	objectsChanged = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "objects_changed_total",
		Help:           "API objects (view rows) given a new resourceVersion by committed writes, by kind: each is one change-feed entry and one watch event.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})
)

// op names a write operation in the metrics.
type op string

const (
	opApply                op = "apply"
	opRelistAggregates     op = "relist_aggregates"      // a relist's aggregates, restamped in slices (apply_relist.go)
	opReportUsage          op = "report_usage"           // a node scrape's usage report
	opReportNamespaceUsage op = "report_namespace_usage" // a namespace scrape's history and report
	opExpireUsage          op = "expire_usage"
	opRemoveMember         op = "remove_member"
)

var registerOnce sync.Once

// RegisterMetrics registers the registry's metrics, and those of its
// connection pool, with the legacy registry the server's /metrics serves.
// Call it once per process, for the store the server uses.
func (s *Store) RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(writerLockWait, writerLockHold, memberLockWait, writeFailures, objectsChanged)
		legacyregistry.MustRegister(replicas.Metrics()...)
		legacyregistry.CustomMustRegister(pgdb.NewPoolCollector(s.pools))
	})
}

// pools are the store's pools, the primary's and the standbys', for their
// metrics.
func (s *Store) pools() []*pgdb.Pool {
	return append(s.primaryPools(), s.replicas.Pools()...)
}
