// Package feed tails the registry's change feed once per process and fans
// the changes out to every watch the server serves. It is woken by the
// feed's notifications and polls as a fallback, so a missed notification
// delays events by at most one poll interval and never loses them.
package feed

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Item is what a subscription receives: a change, or progress saying every
// change up to ResourceVersion has been delivered.
type Item struct {
	Change *store.Change
	// ResourceVersion is the change's version, or the progress mark.
	ResourceVersion int64
}

// Options tune a Follower.
type Options struct {
	// PollInterval is how often the feed is read without a notification.
	PollInterval time.Duration
	// BatchSize is how many changes one read takes.
	BatchSize int
	// SubscriberBuffer is how many items a subscriber may lag before the
	// follower waits for it.
	SubscriberBuffer int
	// DispatchBudget is how long one dispatch may wait in total for
	// subscribers with full buffers before dropping them.
	DispatchBudget time.Duration
}

// Follower reads the change feed in order and hands each change to every
// subscriber. A subscriber that falls SubscriberBuffer items behind and does
// not catch up within the dispatch budget is dropped (its channel closed)
// instead of stalling the others.
type Follower struct {
	feed store.ChangeFeed
	opts Options

	mu     sync.Mutex
	subs   map[*Subscription]struct{}
	rv     int64         // every change up to rv has been handed out
	synced bool          // rv has been read from the registry
	ready  chan struct{} // closed once synced
}

// New returns a Follower over feed; Run starts it.
func New(feed store.ChangeFeed, opts Options) *Follower {
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 1000
	}
	if opts.SubscriberBuffer <= 0 {
		opts.SubscriberBuffer = 1000
	}
	if opts.DispatchBudget <= 0 {
		opts.DispatchBudget = 250 * time.Millisecond
	}
	return &Follower{feed: feed, opts: opts, subs: map[*Subscription]struct{}{}, ready: make(chan struct{})}
}

// Run follows the feed until ctx ends, starting at the registry's current
// resourceVersion.
func (f *Follower) Run(ctx context.Context) {
	notes, err := f.feed.Notifications(ctx)
	if err != nil {
		klog.ErrorS(err, "Registry notifications unavailable; following the change feed by polling only", "interval", f.opts.PollInterval)
	}
	ticker := time.NewTicker(f.opts.PollInterval)
	defer ticker.Stop()
	defer f.closeAll()
	for {
		if err := f.catchUp(ctx); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "Reading the registry change feed failed; retrying", "resourceVersion", f.resourceVersion())
		}
		select {
		case <-ctx.Done():
			return
		case <-notes:
		case <-ticker.C:
		}
	}
}

// WaitSynced blocks until the follower knows the registry's resourceVersion.
func (f *Follower) WaitSynced(ctx context.Context) error {
	f.mu.Lock()
	ready := f.ready
	f.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// catchUp reads and dispatches changes until the feed has nothing newer.
func (f *Follower) catchUp(ctx context.Context) error {
	for {
		if !f.isSynced() {
			// Start at the present: older history is read by the
			// subscribers that need it (see Changes).
			_, readAt, err := f.feed.Changes(ctx, maxInt64, 1)
			if err != nil {
				return err
			}
			f.dispatch(nil, readAt)
			continue
		}
		from := f.resourceVersion()
		changes, readAt, err := f.feed.Changes(ctx, from, f.opts.BatchSize)
		if errors.Is(err, store.ErrCompacted) {
			// Compaction overtook a follower that fell behind (e.g. while
			// the database was down): its subscribers can no longer be
			// served gap-free, so drop them; they re-watch and resume or
			// get 410.
			klog.InfoS("Change feed compacted past the follower; dropping watchers", "resourceVersion", from)
			f.reset()
			continue
		}
		if err != nil {
			return err
		}
		if len(changes) == f.opts.BatchSize {
			// Truncated: progress reaches only the last change read.
			f.dispatch(changes, changes[len(changes)-1].ResourceVersion)
			continue
		}
		f.dispatch(changes, readAt)
		return nil
	}
}

const maxInt64 = int64(^uint64(0) >> 1)

// dispatch hands out changes above f.rv in order, then progress up to upTo.
func (f *Follower) dispatch(changes []store.Change, upTo int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	budget := f.opts.DispatchBudget
	before := f.rv
	for i := range changes {
		c := &changes[i]
		if c.ResourceVersion <= f.rv {
			continue
		}
		f.send(Item{Change: c, ResourceVersion: c.ResourceVersion}, &budget)
		f.rv = c.ResourceVersion
	}
	f.rv = max(f.rv, upTo)
	if f.rv > before {
		f.send(Item{ResourceVersion: f.rv}, &budget)
	}
	if !f.synced {
		f.synced = true
		close(f.ready)
	}
}

// send hands an item to every subscriber; f.mu is held. A subscriber with a
// full buffer is waited for while the dispatch's budget lasts, so a burst
// larger than the buffer does not drop watchers that keep reading, and is
// dropped once the budget is spent, so one stuck watcher stalls the others
// for a bounded time only (as kube-apiserver's cacher does).
func (f *Follower) send(it Item, budget *time.Duration) {
	for s := range f.subs {
		if it.Change != nil && it.Change.Kind != s.kind {
			continue
		}
		select {
		case s.ch <- it:
			continue
		default:
		}
		if *budget > 0 {
			start := time.Now()
			t := time.NewTimer(*budget)
			select {
			case s.ch <- it:
				t.Stop()
				*budget -= time.Since(start)
				continue
			case <-t.C:
				*budget = 0
			}
		}
		klog.V(2).InfoS("Dropping a watcher that fell behind", "kind", s.kind, "buffer", cap(s.ch))
		s.dropped = true
		delete(f.subs, s)
		close(s.ch)
	}
}

func (f *Follower) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs {
		delete(f.subs, s)
		close(s.ch)
	}
}

// reset drops every subscriber and restarts from the registry's present.
func (f *Follower) reset() {
	f.closeAll()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced = false
	f.ready = make(chan struct{})
}

func (f *Follower) resourceVersion() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rv
}

func (f *Follower) isSynced() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.synced
}

// Subscription receives, in order, every change of one kind with a version
// above From, interleaved with progress marks. C is closed when the
// subscription is dropped for lagging, the follower stops, or Close is called.
type Subscription struct {
	C    <-chan Item
	From int64

	ch      chan Item
	kind    store.Kind
	dropped bool
	f       *Follower
}

// Subscribe registers a subscriber for kind. Changes up to From are not
// delivered: a watcher that needs older ones reads them with Changes.
func (f *Follower) Subscribe(kind store.Kind) *Subscription {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan Item, f.opts.SubscriberBuffer)
	s := &Subscription{C: ch, From: f.rv, ch: ch, kind: kind, f: f}
	f.subs[s] = struct{}{}
	return s
}

// Dropped tells, once C is closed, whether the subscriber was dropped for lagging.
func (s *Subscription) Dropped() bool {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	return s.dropped
}

// Close unregisters the subscription.
func (s *Subscription) Close() {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if _, ok := s.f.subs[s]; ok {
		delete(s.f.subs, s)
		close(s.ch)
	}
}

// Changes reads history directly from the feed, for a watcher resuming
// below its subscription's From.
func (f *Follower) Changes(ctx context.Context, after int64, limit int) ([]store.Change, int64, error) {
	return f.feed.Changes(ctx, after, limit)
}
