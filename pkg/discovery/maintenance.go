package discovery

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// maintenanceParams configure the metrics history housekeeping.
type maintenanceParams struct {
	Store  store.Writer
	Tuning Tuning
}

// runMetricsMaintenance keeps the metrics history of the whole registry once
// per metrics interval (not once per member): it prepares the partitions of
// the coming hours, drops those older than the retention, and makes the
// usage of nodes whose metrics stopped coming unknown. Every replica runs
// it; the registry lets one round per interval through (the others are
// skipped), and every step is idempotent.
func runMetricsMaintenance(ctx context.Context, p maintenanceParams) {
	t := p.Tuning
	for {
		maintainMetricsOnce(ctx, p)
		select {
		case <-ctx.Done():
			return
		case <-t.Clock.After(t.MetricsInterval):
		}
	}
}

// maintainMetricsOnce runs one round, bounded by MaintenanceTimeout.
func maintainMetricsOnce(ctx context.Context, p maintenanceParams) store.MetricsMaintained {
	t := p.Tuning
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithTimeout(ctx, t.MaintenanceTimeout)
	defer cancel()
	now := t.Clock.Now()
	start := now
	done, err := p.Store.MaintainNodeMetrics(ctx, store.MetricsMaintenance{
		Now:           now,
		RetainAfter:   now.Add(-t.MetricsRetention),
		UnknownBefore: now.Add(-usageStaleAfter(t)),
		Interval:      t.MetricsInterval,
	})
	partitionsDropped.Add(float64(done.DroppedPartitions))
	usageExpired.Add(float64(done.Unknown))
	if err != nil {
		maintenanceErrors.Inc()
		logger.Error(err, "Maintaining the node metrics history failed; retrying at the next interval", "retention", t.MetricsRetention)
		return done
	}
	if done.Skipped {
		return done
	}
	maintenanceDuration.Observe(t.Clock.Since(start).Seconds())
	if done.DroppedPartitions > 0 || done.Unknown > 0 {
		logger.V(2).Info("Maintained the node metrics history", "droppedPartitions", done.DroppedPartitions, "usageBecameUnknown", done.Unknown)
	}
	return done
}

// usageStaleAfter is the age at which a reported sample is no longer shown.
// A node that still reports is restamped once a new sample is a period
// newer than the reported one; that sample reaches the registry up to a
// sample resolution of metrics-server (60s by default) plus a scrape
// interval later. Two periods plus an interval leave room for both, as the
// node lifecycle controller's grace period does for missed heartbeats.
func usageStaleAfter(t Tuning) time.Duration {
	return 2*t.UsageReportPeriod + t.MetricsInterval
}
