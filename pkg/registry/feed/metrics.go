package feed

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	historyReads = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "platform_watch",
		Name:           "history_reads_total",
		Help:           "Resuming watches by where their history came from: memory (the window), database (a query), shared (a query another resume was already making).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"source"})
	droppedTotal = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      "platform_watch",
		Name:           "watchers_closed_behind_total",
		Help:           "Watchers closed because they fell --watch-buffer events behind; their clients resume from their last resourceVersion.",
		StabilityLevel: metrics.ALPHA,
	})
	feedLastRead = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "platform_watch",
		Name:           "feed_last_read_timestamp_seconds",
		Help:           "When this replica's change-feed follower last completed a read of the registry (Unix seconds).",
		StabilityLevel: metrics.ALPHA,
	})
	feedLagSeconds = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "platform_watch",
		Name:           "feed_lag_seconds",
		Help:           "Seconds since this replica's change-feed follower last reached the registry's present: how stale its watches may be.",
		StabilityLevel: metrics.ALPHA,
	})
	feedLagVersions = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      "platform_watch",
		Name:           "feed_lag_versions",
		Help:           "ResourceVersions between what this replica's watches have been sent and the latest this replica has seen exist.",
		StabilityLevel: metrics.ALPHA,
	})
	feedReadFailures = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      "platform_watch",
		Name:           "feed_read_failures_total",
		Help:           "Reads of the registry change feed that failed or ran past --watch-feed-read-timeout; the follower retries.",
		StabilityLevel: metrics.ALPHA,
	})
	feedChangesRead = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "platform_watch",
		Name:           "feed_changes_read_total",
		Help:           "Changes this replica's change-feed follower read from the registry, by kind: only the kinds it has watchers of, or had within the last 30 seconds.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind"})
	registerOnce sync.Once
)

// RegisterMetrics registers the follower's metrics with the legacy registry.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(historyReads, droppedTotal, feedLastRead, feedLagSeconds, feedLagVersions, feedReadFailures, feedChangesRead)
	})
}
