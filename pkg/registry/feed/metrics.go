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
	registerOnce sync.Once
)

// RegisterMetrics registers the follower's metrics with the legacy registry.
func RegisterMetrics() {
	registerOnce.Do(func() { legacyregistry.MustRegister(historyReads, droppedTotal) })
}
