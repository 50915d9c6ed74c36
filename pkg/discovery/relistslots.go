package discovery

import (
	"context"
	"slices"
	"sync"
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
//
// A freed slot goes to the longest-waiting relist that goes first (see
// acquire), then to the longest-waiting other one.
type relistSlots struct {
	clock clock.PassiveClock

	mu   sync.Mutex
	free int
	// first and others are the waiting relists, oldest first: each is
	// handed its slot by closing its channel.
	first, others []chan struct{}
}

func newRelistSlots(n int, c clock.PassiveClock) *relistSlots {
	if n <= 0 {
		return nil
	}
	return &relistSlots{free: n, clock: c}
}

// acquire waits for a slot and returns its release; ok is false when ctx
// ended first. A relist that goes first (a member's nodes or namespaces,
// which waited for that member's pods to sync) is handed a slot before
// every relist of another kind still waiting: a member then finishes its
// sync while others list their pods, so the nodes' views sections, which
// commit in turn, overlap the pods' lists, which do not
// (docs/discovery.md, "Relists take turns").
func (r *relistSlots) acquire(ctx context.Context, first bool) (release func(), ok bool) {
	if r == nil {
		return func() {}, true
	}
	r.mu.Lock()
	if r.free > 0 {
		r.free--
		r.mu.Unlock()
		return r.once(), true
	}
	ready := make(chan struct{})
	queue := &r.others
	if first {
		queue = &r.first
	}
	*queue = append(*queue, ready)
	r.mu.Unlock()

	start := r.clock.Now()
	relistsWaiting.Inc()
	defer relistsWaiting.Dec()
	select {
	case <-ready:
		klog.FromContext(ctx).V(2).Info("Waited for a relist slot", "waited", r.clock.Since(start).Round(time.Millisecond))
		return r.once(), true
	case <-ctx.Done():
		r.mu.Lock()
		i := slices.Index(*queue, ready)
		if i >= 0 {
			*queue = slices.Delete(*queue, i, i+1)
		}
		r.mu.Unlock()
		if i < 0 { // handed a slot as ctx ended: pass it on
			r.release()
		}
		return nil, false
	}
}

// once is a slot's release, which frees it once however often called.
func (r *relistSlots) once() func() {
	return sync.OnceFunc(r.release)
}

// release hands a slot to the next waiting relist, or frees it.
func (r *relistSlots) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, queue := range []*[]chan struct{}{&r.first, &r.others} {
		if len(*queue) > 0 {
			close((*queue)[0])
			*queue = (*queue)[1:]
			return
		}
	}
	r.free++
}
