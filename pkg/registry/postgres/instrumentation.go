package postgres

import (
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "platform_registry"

// Writes are serialized on registry_state (docs/registry.md): how long a
// writer waits for that lock and how long it holds it are what a fleet's
// write throughput depends on, so they are measured per operation.
var (
	writerLockWait = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "writer_lock_wait_seconds",
		Help:           "Time a write transaction waited for the registry's writer lock (registry_state), by operation.",
		Buckets:        metrics.ExponentialBuckets(0.0005, 2, 16),
		StabilityLevel: metrics.ALPHA,
	}, []string{"op"})
	writerLockHold = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "writer_lock_hold_seconds",
		Help:           "Time a write transaction held the registry's writer lock, until its commit finished, by operation.",
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
	opApply        op = "apply"
	opReportUsage  op = "report_usage"
	opExpireUsage  op = "expire_usage"
	opRemoveMember op = "remove_member"
)

var registerOnce sync.Once

// RegisterMetrics registers the registry's metrics, and those of its
// connection pool, with the legacy registry the server's /metrics serves.
// Call it once per process, for the store the server uses.
func (s *Store) RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(writerLockWait, writerLockHold, memberLockWait, writeFailures, objectsChanged, readsByServer, standbyLag, standbyReplayLag, failoversTotal)
		legacyregistry.CustomMustRegister(&poolCollector{pool: s.pool})
	})
}

var (
	poolConns = metrics.NewDesc("platform_registry_pool_connections",
		"Connections of the registry's pool by state: acquired (in use), idle, constructing; and max, the pool's limit.",
		[]string{"state"}, nil, metrics.ALPHA, "")
	poolAcquires = metrics.NewDesc("platform_registry_pool_acquires_total",
		"Connection acquisitions from the registry's pool, by result: ok, waited (the pool was empty: a request queued), canceled.",
		[]string{"result"}, nil, metrics.ALPHA, "")
	poolAcquireSeconds = metrics.NewDesc("platform_registry_pool_acquire_seconds_total",
		"Total time spent acquiring connections from the registry's pool; its rate against the acquires' shows queueing.",
		nil, nil, metrics.ALPHA, "")
)

// poolCollector reports pgxpool's statistics at scrape time.
type poolCollector struct {
	metrics.BaseStableCollector
	pool *pgxpool.Pool
}

func (c *poolCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	ch <- poolConns
	ch <- poolAcquires
	ch <- poolAcquireSeconds
}

func (c *poolCollector) CollectWithStability(ch chan<- metrics.Metric) {
	st := c.pool.Stat()
	for state, v := range map[string]int32{
		"acquired": st.AcquiredConns(), "idle": st.IdleConns(), "constructing": st.ConstructingConns(), "max": st.MaxConns(),
	} {
		ch <- metrics.NewLazyConstMetric(poolConns, metrics.GaugeValue, float64(v), state)
	}
	for result, v := range map[string]int64{
		"ok": st.AcquireCount(), "waited": st.EmptyAcquireCount(), "canceled": st.CanceledAcquireCount(),
	} {
		ch <- metrics.NewLazyConstMetric(poolAcquires, metrics.CounterValue, float64(v), result)
	}
	ch <- metrics.NewLazyConstMetric(poolAcquireSeconds, metrics.CounterValue, st.AcquireDuration().Seconds())
}
