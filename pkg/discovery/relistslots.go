package discovery

import (
	"context"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// relistSlots bounds how many relists one replica runs at once
// (SyncConfig.MaxRelists): a replica that takes over hundreds of members at
// once lists and commits them a few at a time, the others waiting their
// turn with no request or commit timeout running, instead of all of them
// competing for the member API servers and the registry's writer until
// their commits time out, their continue tokens expire and their work is
// redone. A nil *relistSlots imposes no limit.
type relistSlots struct {
	slots chan struct{}
	clock clock.PassiveClock
}

func newRelistSlots(n int, c clock.PassiveClock) *relistSlots {
	if n <= 0 {
		return nil
	}
	return &relistSlots{slots: make(chan struct{}, n), clock: c}
}

// acquire waits for a slot and returns its release; ok is false when ctx
// ended first.
func (r *relistSlots) acquire(ctx context.Context) (release func(), ok bool) {
	if r == nil {
		return func() {}, true
	}
	select {
	case r.slots <- struct{}{}:
	default:
		start := r.clock.Now()
		relistsWaiting.Inc()
		select {
		case r.slots <- struct{}{}:
			relistsWaiting.Dec()
			klog.FromContext(ctx).V(2).Info("Waited for a relist slot", "waited", r.clock.Since(start).Round(time.Millisecond))
		case <-ctx.Done():
			relistsWaiting.Dec()
			return nil, false
		}
	}
	return func() { <-r.slots }, true
}
