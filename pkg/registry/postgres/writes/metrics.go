package writes

import (
	"k8s.io/component-base/metrics"
)

const metricsSubsystem = "platform_registry"

// Writes commit in ticket order (docs/write-path.md): how long a writer waits
// for its turn and how long it holds its ticket are what a fleet's write
// throughput depends on, so they are measured per operation. The metrics
// keep their names (writer_lock_*) from when a single writer lock gave the
// order, so dashboards and alerts keep working; they measure tickets.
var (
	writerLockWait = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "writer_lock_wait_seconds",
		Help:           "Time a write transaction waited for its turn to commit (taking a commit ticket, then waiting for every earlier ticket's transaction to end), by operation (named for the single writer lock that ordered commits before commit tickets).",
		Buckets:        metrics.ExponentialBuckets(0.0005, 2, 16),
		StabilityLevel: metrics.ALPHA,
	}, []string{"op"})
	writerLockHold = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "writer_lock_hold_seconds",
		Help:           "Time a write transaction held its commit ticket, from taking it until its commit finished, less its wait for earlier tickets, by operation (named for the single writer lock that ordered commits before commit tickets).",
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

// Op names a write operation in the metrics (the label op).
type Op string

// The engine's own operations; usage reports and expiry have theirs
// (package usage).
const (
	opApply            Op = "apply"
	opRelistAggregates Op = "relist_aggregates" // a relist's aggregates, restamped in parts (apply_relist.go)
	opRemoveMember     Op = "remove_member"
	opMemberState      Op = "member_state"
)

// Metrics are the write engine's metrics, to register once per process.
func Metrics() []metrics.Registerable {
	return []metrics.Registerable{writerLockWait, writerLockHold, memberLockWait, writeFailures, objectsChanged}
}
