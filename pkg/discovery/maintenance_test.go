package discovery

import (
	"context"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// maintenanceStore records what MaintainNodeMetrics was asked.
type maintenanceStore struct {
	recordingStore
	got []store.MetricsMaintenance
}

func (s *maintenanceStore) MaintainNodeMetrics(_ context.Context, m store.MetricsMaintenance) (store.MetricsMaintained, error) {
	s.got = append(s.got, m)
	return store.MetricsMaintained{}, nil
}

// TestMaintenanceHorizons: history is kept for the retention, and a usage
// nothing confirms is shown for --usage-unknown-after (5 minutes) plus the
// heartbeat's resolution (a minute).
func TestMaintenanceHorizons(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	st := &maintenanceStore{}
	maintainMetricsOnce(t.Context(), maintenanceParams{Store: st, Metrics: DefaultConfig().Metrics, Clock: testingclock.NewFakeClock(now)})
	want := store.MetricsMaintenance{
		Now:           now,
		RetainAfter:   now.Add(-24 * time.Hour),
		UnknownBefore: now.Add(-6 * time.Minute),
		Interval:      30 * time.Second,
	}
	if len(st.got) != 1 || st.got[0] != want {
		t.Errorf("MaintainNodeMetrics called with %+v, want once with %+v", st.got, want)
	}
}
