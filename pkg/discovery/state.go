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

// registryState is the worker's state as the registry records it.
func (s memberState) registryState() store.MemberState {
	switch s {
	case memberSynced:
		return store.MemberSynced
	case memberStuck:
		return store.MemberLagging
	case memberUnreachable:
		return store.MemberUnreachable
	default:
		return store.MemberSyncing
	}
}

// reportStates records the worker's mirroring state in the registry while
// it holds the member, at once and whenever the state changes (a failed
// report is retried), so the member's ClusterCapacity shows it; it returns
// when ctx ends.
func (w *worker) reportStates(ctx context.Context) {
	logger := klog.FromContext(ctx)
	var reported store.MemberState
	failing := false
	for {
		if st := w.state().registryState(); st != reported {
			rctx, cancel := context.WithTimeout(ctx, w.tuning.ApplyTimeout)
			err := w.store.RecordMemberState(rctx, st)
			cancel()
			switch {
			case err == nil:
				reported, failing = st, false
			case ctx.Err() != nil:
				return
			case !failing:
				failing = true
				logger.Error(err, "Cannot record the member's mirroring state in the registry; retrying", "state", st)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-w.tuning.Clock.After(stateReportInterval):
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
func (m *memberStore) RecordMemberState(ctx context.Context, st store.MemberState) error {
	return m.check(m.w.RecordMemberState(ctx, m.current(), st))
}
