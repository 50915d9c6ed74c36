package discovery

import (
	"context"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// stateReportInterval is how often a worker compares its state with the
// one it last recorded in the registry.
const stateReportInterval = time.Second

// lastChangeResolution is how much later a change must be than the one
// last reported to be reported: a busy member's ClusterCapacity takes at
// most one version this often for it.
const lastChangeResolution = time.Minute

// lastUsageResolution is the same for the member's usage heartbeat, the
// time of the newest node metrics sample recorded: a scraped member's
// ClusterCapacity takes one version this often for it, and its quiet
// nodes none.
const lastUsageResolution = time.Minute

// timesInterval is how long after the last report the times (the last
// change, the usage heartbeat, the mirror's heartbeat) may be reported
// again: a member's ClusterCapacity takes at most one version this often
// for them, together; only a change of state is reported sooner. The
// mirror's heartbeat, how far the registry holds every change of the
// member, is then reported whenever it moved, however little: a quiet
// member's moves with bookmarks about a minute apart, and a rule of "a
// minute past the one reported" would skip every one that came a little
// early, doubling its data age. Readers judge staleness from that age; a
// healthy member's stays under about two minutes.
const timesInterval = time.Minute

// completeAsOf is the member time up to which the registry holds every
// change of every resource the member serves: the minimum over them, zero
// while one has not committed a batch that says.
func (w *worker) completeAsOf() time.Time {
	var asOf time.Time
	for _, s := range w.syncers {
		st := s.status()
		switch {
		case st.notServed:
		case st.completeAsOf.IsZero():
			return time.Time{}
		case asOf.IsZero() || st.completeAsOf.Before(asOf):
			asOf = st.completeAsOf
		}
	}
	return asOf
}

// lastChange is when the worker last committed a change of the member.
func (w *worker) lastChange() time.Time {
	var last time.Time
	for _, s := range w.syncers {
		if c := s.status().lastChange; c.After(last) {
			last = c
		}
	}
	return last
}

// reportStates records the worker's mirroring state in the registry while
// it holds the member, at once and whenever the state changes, and, once
// the last report is timesInterval old, the time of its last committed
// change when it is lastChangeResolution past the one reported, the usage
// heartbeat when it is lastUsageResolution past and the mirror's heartbeat
// (completeAsOf) when it moved, each report carrying every time as it is
// (a failed report is retried), so
// the member's ClusterCapacity shows them; it returns when ctx ends. The
// mirror's heartbeat is written through the same registry writes it
// vouches for: when they fail, it stops, and readers see it age.
func (w *worker) reportStates(ctx context.Context) {
	logger := klog.FromContext(ctx)
	var reported store.MemberStatus
	var reportedAt time.Time // of the last report recorded
	failing := false
	for {
		st := store.MemberStatus{State: w.state(), LastChange: reported.LastChange, LastUsage: reported.LastUsage, CompleteAsOf: reported.CompleteAsOf}
		change, usage, complete := w.lastChange(), w.scraper.lastUsage(), w.completeAsOf()
		if reportedAt.IsZero() || w.cfg.Clock.Since(reportedAt) >= timesInterval {
			if change.Sub(reported.LastChange) >= lastChangeResolution {
				st.LastChange = change
			}
			if usage.Sub(reported.LastUsage) >= lastUsageResolution {
				st.LastUsage = usage
			}
			if complete.After(reported.CompleteAsOf) {
				st.CompleteAsOf = complete
			}
		}
		if st != reported {
			// A report that is due anyway carries every time as it is
			// now: a busy, scraped member's ClusterCapacity then takes one
			// version a minute for the three, not one for each (at 200
			// members, each a views section and a change-log entry).
			if change.After(st.LastChange) {
				st.LastChange = change
			}
			if usage.After(st.LastUsage) {
				st.LastUsage = usage
			}
			if complete.After(st.CompleteAsOf) {
				st.CompleteAsOf = complete
			}
			rctx, cancel := context.WithTimeout(ctx, w.cfg.Sync.ApplyTimeout)
			err := w.store.RecordMemberState(rctx, st)
			cancel()
			switch {
			case err == nil:
				reported, reportedAt, failing = st, w.cfg.Clock.Now(), false
				if !st.CompleteAsOf.IsZero() {
					completeAsOf.WithLabelValues(w.clusterID).Set(float64(st.CompleteAsOf.UnixNano()) / 1e9)
				}
			case ctx.Err() != nil:
				return
			case !failing:
				failing = true
				logger.Error(err, "Cannot record the member's mirroring state in the registry; retrying", "state", st.State)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-w.cfg.Clock.After(stateReportInterval):
		}
	}
}

// startReporting runs reportStates until the returned stop is called.
func (w *worker) startReporting(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { w.reportStates(ctx) })
	return func() {
		cancel()
		wg.Wait()
	}
}

// RecordMemberState records the member's state, fenced by the claim.
func (m *memberStore) RecordMemberState(ctx context.Context, st store.MemberStatus) error {
	return m.check(m.w.RecordMemberState(ctx, m.current(), st))
}
