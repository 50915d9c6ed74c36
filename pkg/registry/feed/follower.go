// Package feed tails the registry's change feed once per process and fans
// the changes out to every watch the server serves. It is woken by the
// feed's notifications and polls as a fallback, so a missed notification
// delays events by at most one poll interval and never loses them. It keeps
// the most recent changes in memory (the window), so a watch resuming
// within it reads nothing from the database. It reads only the kinds it has
// watchers of (and, for a while, had), so a replica nobody watches a kind
// through pays nothing for that kind's changes.
package feed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// ErrNotSynced: the follower does not know where the feed is (starting, or
// restarting after compaction overtook it); subscribing now could skip
// changes. Retry shortly.
var ErrNotSynced = errors.New("the registry change feed is not in sync yet")

// Item is what a subscription receives: a change, or progress saying every
// change up to ResourceVersion has been delivered.
type Item struct {
	Change *store.Change
	// ResourceVersion is the change's version, or the progress mark.
	ResourceVersion int64
	// Memo is shared by every subscriber that receives the change (and by
	// resumes served from the window), so work done for a change —
	// converting it, encoding it — is done once, not once per watcher.
	Memo *Memo
}

// Memo holds one value computed on first use.
type Memo struct {
	once sync.Once
	v    any
}

// Do returns the memo's value, computing it with f the first time.
func (m *Memo) Do(f func() any) any {
	m.once.Do(func() { m.v = f() })
	return m.v
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
	// WindowChanges and WindowBytes bound the window of recent changes
	// kept in memory (bytes as store.Change's Size estimates them).
	WindowChanges int
	WindowBytes   int
	// ReadTimeout bounds each read of the feed, so a database that stops
	// answering without closing its connections (a paused host, a storage
	// stall, a failover that left the old primary's sockets open) fails the
	// read, and the next one reconnects, instead of freezing every watch.
	ReadTimeout time.Duration
	// Now is the clock of the freshness the follower reports; default time.Now.
	Now func() time.Time
	// HistoryReads bounds the history queries (History) running at once,
	// so resuming watches cannot pile queries on the database; more wait
	// for a turn. Default DefaultHistoryReads.
	HistoryReads int
	// KindLinger is how long the follower goes on reading a kind after its
	// last watcher left (or after the follower started), so the watches
	// that come back soon — client-go's after each watch timeout, every
	// watcher after a restart — resume from memory. Default
	// DefaultKindLinger.
	KindLinger time.Duration
}

// DefaultKindLinger is Options.KindLinger's default: client-go re-watches
// at once after a watch ends, and within seconds after a replica restarts.
const DefaultKindLinger = 30 * time.Second

// DefaultHistoryReads is Options.HistoryReads's default: a few of the
// pool's connections, the rest left to lists, gets and the follower.
const DefaultHistoryReads = 4

// DefaultReadTimeout is Options.ReadTimeout's default: a read of up to a
// batch of changes takes milliseconds; ten seconds is a database that does
// not answer.
const DefaultReadTimeout = 10 * time.Second

// LatestSeen is what a feed may offer besides store.ChangeFeed: the highest
// resourceVersion known to exist, so the follower can report how many
// versions it is behind.
type LatestSeen interface {
	LatestSeen() int64
}

// Follower reads the change feed in order and hands each change to every
// subscriber that can want it. A subscriber that falls SubscriberBuffer
// items behind and does not catch up within the dispatch budget is dropped
// (its channel closed) instead of stalling the others.
type Follower struct {
	feed    store.ChangeFeed
	opts    Options
	history *historyReader

	mu     sync.Mutex
	subs   map[*Subscription]struct{}
	rv     int64         // every change up to rv has been handed out
	synced bool          // rv has been read from the registry
	ready  chan struct{} // closed once synced
	moved  chan struct{} // closed (and replaced) when rv moves on
	// waiting counts the WaitFor calls waiting for rv to move on.
	waiting int
	window  window
	fresh   freshness
	// kinds are the kinds the follower reads, and no others; readGen moves
	// when one is added, so a read in flight without it is not dispatched
	// (its subscriber would miss the kind's changes in it).
	kinds   map[store.Kind]*kindState
	readGen uint64
}

// kindState is what the follower knows of a kind it reads.
type kindState struct {
	// from: the window holds every change of the kind after max(from,
	// window.floor), the version at which the follower began reading it.
	from      int64
	subs      int
	idleSince time.Time // since when it has had no subscriber
}

// freshness is when the follower last read the registry; f.mu guards it.
type freshness struct {
	running  bool
	started  time.Time // Run began
	lastRead time.Time // the last read that completed
	// caughtUp is the last time a read reached the registry's present
	// (every change up to it handed out).
	caughtUp time.Time
	lastErr  error // of the last read, nil if it completed
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
	if opts.WindowChanges <= 0 {
		opts.WindowChanges = 10000
	}
	if opts.WindowBytes <= 0 {
		opts.WindowBytes = 64 << 20
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = DefaultReadTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.HistoryReads <= 0 {
		opts.HistoryReads = DefaultHistoryReads
	}
	if opts.KindLinger <= 0 {
		opts.KindLinger = DefaultKindLinger
	}
	f := &Follower{feed: feed, opts: opts, subs: map[*Subscription]struct{}{}, ready: make(chan struct{}), moved: make(chan struct{}),
		history: newHistoryReader(feed, opts.HistoryReads), kinds: map[store.Kind]*kindState{}}
	f.window = window{maxItems: opts.WindowChanges, maxBytes: opts.WindowBytes}
	return f
}

// Run follows the feed until ctx ends, starting at the registry's current
// resourceVersion.
func (f *Follower) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	notes, err := f.feed.Notifications(ctx)
	if err != nil {
		logger.Error(err, "Registry notifications unavailable; following the change feed by polling only", "interval", f.opts.PollInterval)
	}
	ticker := time.NewTicker(f.opts.PollInterval)
	defer ticker.Stop()
	defer f.closeAll()
	f.mu.Lock()
	f.fresh.running, f.fresh.started = true, f.opts.Now()
	f.mu.Unlock()
	go wait.UntilWithContext(ctx, f.reportLag, time.Second)
	for {
		if err := f.catchUp(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Reading the registry change feed failed; retrying", "resourceVersion", f.resourceVersion())
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
	case <-ready: // preferred over a deadline that passed meanwhile
		return nil
	default:
	}
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
			return f.start(ctx)
		}
		from, kinds, gen := f.plan()
		if len(kinds) == 0 {
			// Nobody to read for: learn only where the feed is, so a
			// watch from now starts there.
			_, readAt, err := f.read(ctx, maxInt64, 1, store.ChangeFilter{})
			if err != nil {
				return err
			}
			f.skipTo(readAt, gen)
			return nil
		}
		changes, readAt, err := f.read(ctx, from, f.opts.BatchSize, store.ChangeFilter{Kinds: kinds})
		if errors.Is(err, store.ErrCompacted) {
			// Compaction overtook a follower that fell behind (e.g. while
			// the database was down), or a failover lost versions it had
			// passed on: its subscribers can no longer be served gap-free,
			// so drop them; they re-watch and resume or get 410.
			klog.FromContext(ctx).Info("The change feed no longer holds the follower's position; dropping watchers", "resourceVersion", from, "reason", err)
			f.reset()
			continue
		}
		if err != nil {
			return err
		}
		// Truncated, progress reaches only the last change read.
		truncated := len(changes) == f.opts.BatchSize
		if truncated {
			readAt = changes[len(changes)-1].ResourceVersion
		}
		if !f.dispatch(ctx, changes, readAt, gen) || truncated {
			continue // a kind was added meanwhile (read again with it), or more to read
		}
		return nil
	}
}

// plan returns where the next read starts, the kinds it reads (ending the
// reading of kinds idle for KindLinger), and the read generation.
func (f *Follower) plan() (int64, []store.Kind, uint64) {
	now := f.opts.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	kinds := make([]store.Kind, 0, len(f.kinds))
	for k, ks := range f.kinds {
		if ks.subs == 0 && now.Sub(ks.idleSince) >= f.opts.KindLinger {
			delete(f.kinds, k)
			continue
		}
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	return f.rv, kinds, f.readGen
}

// skipTo moves the follower to readAt without reading the changes before
// it, unless a kind began to be read since the plan of generation gen.
// With no kind read there is no subscriber, and the window keeps nothing.
func (f *Follower) skipTo(readAt int64, gen uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if gen != f.readGen || readAt <= f.rv || !f.synced {
		return
	}
	f.rv = readAt
	f.window.reset(readAt)
	f.wakeLocked()
}

// start finds the registry's present and fills the window with the most
// recent history before it, so watches resuming right after a restart of
// this process are served from memory.
func (f *Follower) start(ctx context.Context) error {
	_, readAt, err := f.read(ctx, maxInt64, 1, store.ChangeFilter{})
	if err != nil {
		return err
	}
	recent, floor := f.recentHistory(ctx, readAt)
	now := f.opts.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rv = readAt
	f.window.reset(floor)
	// The kinds in the window are read on for KindLinger, for the
	// watchers of the process before this one.
	f.kinds = map[store.Kind]*kindState{}
	f.readGen++
	for i := range recent {
		f.window.add(Item{Change: &recent[i], ResourceVersion: recent[i].ResourceVersion, Memo: &Memo{}})
		if k := recent[i].Kind; f.kinds[k] == nil {
			f.kinds[k] = &kindState{from: floor, idleSince: now}
		}
	}
	f.synced = true
	close(f.ready)
	f.wakeLocked()
	return nil
}

// recentHistory reads up to a window of the changes before upTo; floor is
// the version after which the result holds every change. Versions are not
// dense, so it starts a window's count of versions back; when that is
// compacted or fails, the window starts empty at upTo.
func (f *Follower) recentHistory(ctx context.Context, upTo int64) ([]store.Change, int64) {
	after := max(upTo-int64(f.opts.WindowChanges), 0)
	var out []store.Change
	for from := after; from < upTo; {
		changes, _, err := f.read(ctx, from, f.opts.BatchSize, store.ChangeFilter{})
		if err != nil {
			return nil, upTo
		}
		for _, c := range changes {
			if c.ResourceVersion <= upTo {
				out = append(out, c)
			}
		}
		if len(changes) < f.opts.BatchSize || changes[len(changes)-1].ResourceVersion >= upTo {
			break
		}
		from = changes[len(changes)-1].ResourceVersion
	}
	return out, after
}

const maxInt64 = int64(^uint64(0) >> 1)

// read reads the feed within the read timeout and records the outcome. A
// read short of limit reached the registry's present (a read from maxInt64
// asks only for it).
func (f *Follower) read(ctx context.Context, after int64, limit int, filter store.ChangeFilter) ([]store.Change, int64, error) {
	rctx, cancel := context.WithTimeout(ctx, f.opts.ReadTimeout)
	defer cancel()
	changes, readAt, err := f.feed.Changes(rctx, filter, after, limit)
	if err != nil && errors.Is(rctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		err = fmt.Errorf("no answer within %s (--watch-feed-read-timeout): %w", f.opts.ReadTimeout, err)
	}
	now := f.opts.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fresh.lastErr = err
	if err != nil {
		if ctx.Err() == nil {
			feedReadFailures.Inc()
		}
		return nil, 0, err
	}
	f.fresh.lastRead = now
	countRead(changes)
	if len(changes) < limit || after == maxInt64 {
		f.fresh.caughtUp = now
	}
	feedLastRead.Set(float64(now.UnixNano()) / 1e9)
	return changes, readAt, nil
}

// countRead counts the changes a read returned, by kind.
func countRead(changes []store.Change) {
	for i := 0; i < len(changes); {
		j := i + 1
		for j < len(changes) && changes[j].Kind == changes[i].Kind {
			j++
		}
		feedChangesRead.WithLabelValues(string(changes[i].Kind)).Add(float64(j - i))
		i = j
	}
}

// CheckFresh fails when the follower has not completed a read of the
// registry within maxAge (or is not running): its watches would be
// silently stale. The error says since when, and the last read's error.
func (f *Follower) CheckFresh(maxAge time.Duration) error {
	now := f.opts.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	fr := f.fresh
	switch {
	case !fr.running:
		return errors.New("the change feed follower is not running (it starts once the registry's migrations are applied)")
	case fr.lastRead.IsZero() && now.Sub(fr.started) > maxAge:
		return withCause(fmt.Sprintf("the change feed has not read the registry since it started %s ago (limit %s)",
			now.Sub(fr.started).Round(time.Second), maxAge), fr.lastErr)
	case !fr.lastRead.IsZero() && now.Sub(fr.lastRead) > maxAge:
		return withCause(fmt.Sprintf("the change feed last read the registry %s ago (limit %s), at resourceVersion %d; watches get no new events",
			now.Sub(fr.lastRead).Round(time.Second), maxAge, f.rv), fr.lastErr)
	}
	return nil
}

// withCause is msg with the error that caused it, when there is one (a read
// still waiting has none yet).
func withCause(msg string, cause error) error {
	if cause == nil {
		return errors.New(msg)
	}
	return fmt.Errorf("%s: %w", msg, cause)
}

// reportLag sets the lag gauges: seconds since the follower last reached
// the registry's present, and versions between where it is and the latest
// the process has seen exist.
func (f *Follower) reportLag(context.Context) {
	now := f.opts.Now()
	f.mu.Lock()
	since, rv := f.fresh.caughtUp, f.rv
	if since.IsZero() {
		since = f.fresh.started
	}
	f.mu.Unlock()
	feedLagSeconds.Set(max(now.Sub(since).Seconds(), 0))
	if ls, ok := f.feed.(LatestSeen); ok {
		feedLagVersions.Set(float64(max(ls.LatestSeen()-rv, 0)))
	}
}

// dispatch hands out changes above f.rv in order, then progress up to upTo,
// and reports false if it stopped because a kind began to be read since the
// plan of generation gen: the changes after f.rv are then read again with
// it. The lock is taken per change, not for the batch, so subscribing and
// closing are not held up by a large dispatch to many watchers.
func (f *Follower) dispatch(ctx context.Context, changes []store.Change, upTo int64, gen uint64) bool {
	budget := f.opts.DispatchBudget
	f.mu.Lock()
	before := f.rv
	f.mu.Unlock()
	for i := range changes {
		c := &changes[i]
		f.mu.Lock()
		if gen != f.readGen {
			f.mu.Unlock()
			return false
		}
		if c.ResourceVersion > f.rv && f.synced {
			it := Item{Change: c, ResourceVersion: c.ResourceVersion, Memo: &Memo{}}
			f.window.add(it)
			f.send(ctx, it, &budget)
			f.rv = c.ResourceVersion
		}
		f.mu.Unlock()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if gen != f.readGen {
		return false
	}
	if !f.synced {
		return true
	}
	f.rv = max(f.rv, upTo)
	if f.rv > before {
		f.send(ctx, Item{ResourceVersion: f.rv}, &budget)
		f.wakeLocked()
	}
	return true
}

// wakeLocked wakes WaitFor's callers; f.mu is held.
func (f *Follower) wakeLocked() {
	close(f.moved)
	f.moved = make(chan struct{})
}

// WaitFor blocks until every change up to rv has been handed out (the
// follower has reached rv) or ctx ends, and returns the follower's
// resourceVersion: a watch from a version the follower has not reached
// waits for it rather than claim it in bookmarks.
func (f *Follower) WaitFor(ctx context.Context, rv int64) (int64, error) {
	for {
		f.mu.Lock()
		cur, synced, moved := f.rv, f.synced, f.moved
		f.mu.Unlock()
		if synced && cur >= rv {
			return cur, nil
		}
		if err := f.await(ctx, moved); err != nil {
			return cur, err
		}
	}
}

// await waits for moved to close or ctx to end, counted in Waiting.
func (f *Follower) await(ctx context.Context, moved <-chan struct{}) error {
	f.mu.Lock()
	f.waiting++
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.waiting--
		f.mu.Unlock()
	}()
	select {
	case <-moved:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Waiting is how many WaitFor calls are waiting for the follower to move
// on (reads from a version it has not reached).
func (f *Follower) Waiting() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waiting
}

// send hands an item to every subscriber that can want it; f.mu is held. A
// subscriber with a full buffer is waited for while the dispatch's budget
// lasts, so a burst larger than the buffer does not drop watchers that keep
// reading, and is dropped once the budget is spent, so one stuck watcher
// stalls the others for a bounded time only (as kube-apiserver's cacher
// does).
func (f *Follower) send(ctx context.Context, it Item, budget *time.Duration) {
	for s := range f.subs {
		if it.Change != nil && !s.Wants(it.Change) {
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
		klog.FromContext(ctx).V(2).Info("Closing a watcher that fell behind; its client resumes from its last resourceVersion", "kind", s.kind, "buffer", cap(s.ch))
		droppedTotal.Inc()
		s.dropped = true
		f.unsubscribeLocked(s)
	}
}

// unsubscribeLocked removes and closes a subscription; f.mu is held.
func (f *Follower) unsubscribeLocked(s *Subscription) {
	delete(f.subs, s)
	close(s.ch)
	if ks := f.kinds[s.kind]; ks != nil {
		if ks.subs--; ks.subs == 0 {
			ks.idleSince = f.opts.Now()
		}
	}
}

func (f *Follower) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closeAllLocked()
}

func (f *Follower) closeAllLocked() {
	for s := range f.subs {
		f.unsubscribeLocked(s)
	}
}

// reset drops every subscriber and the window, and restarts from the
// registry's present. Until then Subscribe fails with ErrNotSynced; both
// happen under one lock, so no subscription can slip in between at the old
// position and miss the changes the restart skips.
func (f *Follower) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closeAllLocked()
	f.synced = false
	f.ready = make(chan struct{})
	f.window.reset(f.rv)
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
// above From that its route admits, interleaved with progress marks. C is
// closed when the subscription is dropped for lagging, the follower stops
// or resets, or Close is called.
type Subscription struct {
	C    <-chan Item
	From int64
	// Backlog holds the changes between the version the subscriber asked
	// to start after and From, from the window — of every kind: a shared,
	// read-only view the subscriber filters with Wants — or nil when the
	// window does not reach back that far (then they are read with
	// Changes).
	Backlog []Item

	ch      chan Item
	kind    store.Kind
	route   func(*store.Change) bool
	dropped bool
	f       *Follower
}

// Wants reports whether the subscription admits a change (its kind and route).
func (s *Subscription) Wants(c *store.Change) bool {
	return c.Kind == s.kind && (s.route == nil || s.route(c))
}

// Subscribe registers a subscriber for the changes of kind after `after`
// that route admits (nil: all; route sees only the change's key fields
// and must not convert it). Changes up to From come from Backlog when the
// window reaches back to after; else the subscriber reads them with
// Changes. after < 0 subscribes from now on (no backlog). It fails with ErrNotSynced while the follower does not know the
// feed's position.
func (f *Follower) Subscribe(kind store.Kind, after int64, route func(*store.Change) bool) (*Subscription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.synced {
		return nil, ErrNotSynced
	}
	ks := f.kinds[kind]
	if ks == nil {
		// Read from here on; the window holds none of the kind's changes
		// before, so a resume from earlier reads them with Changes.
		ks = &kindState{from: f.rv}
		f.kinds[kind] = ks
		f.readGen++
	}
	ks.subs++
	ch := make(chan Item, f.opts.SubscriberBuffer)
	s := &Subscription{C: ch, From: f.rv, ch: ch, kind: kind, route: route, f: f}
	if after >= 0 && after >= max(f.window.floor, ks.from) {
		// No copy (a thousand resuming watchers would make a thousand):
		// the window never changes the items it holds, only drops them
		// from its front, so the view stays valid after it moves on.
		b := f.window.since(after)
		if b == nil {
			b = []Item{}
		}
		s.Backlog = slices.Clip(b)
		historyReads.WithLabelValues("memory").Inc()
	}
	f.subs[s] = struct{}{}
	return s, nil
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
		s.f.unsubscribeLocked(s)
	}
}

// History reads the changes filter matches after `after` from the feed,
// for a watcher resuming below the window, and reach: every such change up
// to reach has been returned. Resumes of one filter share queries, and at
// most Options.HistoryReads queries run at once (history.go).
func (f *Follower) History(ctx context.Context, filter store.ChangeFilter, after int64) ([]store.Change, int64, error) {
	changes, reach, err := f.history.read(ctx, filter, after)
	if err != nil {
		return nil, 0, fmt.Errorf("read change history after %d: %w", after, err)
	}
	return changes, reach, nil
}
