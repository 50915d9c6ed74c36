package discovery

import (
	"context"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// maintenanceParams configure the metrics history housekeeping.
type maintenanceParams struct {
	Store   store.Writer
	Metrics MetricsConfig
	Clock   clock.Clock
}

// runMetricsMaintenance keeps the metrics history of the whole registry once
// per metrics interval (not once per member): it prepares the partitions of
// the coming hours, drops those older than the retention, and makes the
// usage of nodes whose metrics stopped coming unknown. Every replica runs
// it; the registry lets one round per interval through (the others are
// skipped), and every step is idempotent.
func runMetricsMaintenance(ctx context.Context, p maintenanceParams) {
	for {
		maintainMetricsOnce(ctx, p)
		select {
		case <-ctx.Done():
			return
		case <-p.Clock.After(p.Metrics.Interval):
		}
	}
}

// maintainMetricsOnce runs one round, bounded by MaintenanceTimeout.
func maintainMetricsOnce(ctx context.Context, p maintenanceParams) store.MetricsMaintained {
	m := p.Metrics
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithTimeout(ctx, m.MaintenanceTimeout)
	defer cancel()
	now := p.Clock.Now()
	start := now
	done, err := p.Store.MaintainNodeMetrics(ctx, store.MetricsMaintenance{
		Now:           now,
		RetainAfter:   now.Add(-m.Retention),
		UnknownBefore: now.Add(-usageStaleAfter(m)),
		Interval:      m.Interval,
	})
	partitionsDropped.Add(float64(done.DroppedPartitions))
	usageExpired.Add(float64(done.Unknown))
	if err != nil {
		maintenanceErrors.Inc()
		logger.Error(err, "Maintaining the node metrics history failed; retrying at the next interval", "retention", m.Retention)
		return done
	}
	if done.Skipped {
		return done
	}
	maintenanceDuration.Observe(p.Clock.Since(start).Seconds())
	if done.DroppedPartitions > 0 || done.Unknown > 0 {
		logger.V(2).Info("Maintained the node metrics history", "droppedPartitions", done.DroppedPartitions, "usageBecameUnknown", done.Unknown)
	}
	return done
}

// usageStaleAfter is how long a reported usage nothing confirms is still
// shown: a node's is confirmed by its member's usage heartbeat, which the
// registry holds to lastUsageResolution (so it may be that much older than
// the newest sample: the usage is shown that much longer), a namespace's
// by a sample in its history.
func usageStaleAfter(m MetricsConfig) time.Duration {
	return m.UsageReporting.UnknownAfter + lastUsageResolution
}

// MinUsageUnknownAfter is the least --usage-unknown-after that does not
// make a healthy member's usage blink unknown: a sample reaches the
// registry up to metrics-server's resolution plus a scrape interval after
// it was taken, and a node missing from one scrape is kept.
func MinUsageUnknownAfter(m MetricsConfig) time.Duration {
	return 2*m.Interval + m.Resolution
}
