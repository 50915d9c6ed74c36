package dispatcher

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "platform_dispatcher"

var (
	nominations = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "nominations_total",
		Help:           "Workloads nominated to worker clusters, by reason: Fits (the best member that fits), NothingFitsMostRoom and Unmodelled (fallbacks).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	renominations = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "renominations_total",
		Help:           "Nominations of a Workload whose earlier nominee did not admit it within --nomination-timeout (or that waited before).",
		StabilityLevel: metrics.ALPHA,
	})
	waits = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "waits_total",
		Help:           "Decisions that nominated nothing, by reason: NothingFitsWaiting, NoCurrentMember, RegistryUnavailable, PlatformAccessDenied.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	decisionDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "decision_duration_seconds",
		Help:           "Time to decide a Workload: its PlacementReports and the choice, before the nomination is written.",
		Buckets:        metrics.ExponentialBuckets(0.002, 2, 14),
		StabilityLevel: metrics.ALPHA,
	})
	reportDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Subsystem:      metricsSubsystem,
		Name:           "placement_report_duration_seconds",
		Help:           "Time of one PlacementReport through the aggregator.",
		Buckets:        metrics.ExponentialBuckets(0.002, 2, 14),
		StabilityLevel: metrics.ALPHA,
	})
	inFlightPromises = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "inflight_promises",
		Help:           "Nominations whose room is held in the ledger (not yet visible in the registry's mirror).",
		StabilityLevel: metrics.ALPHA,
	})
)

var registerOnce sync.Once

// RegisterMetrics registers the dispatcher's metrics with the legacy
// registry, once.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(nominations, renominations, waits, decisionDuration, reportDuration, inFlightPromises)
	})
}
