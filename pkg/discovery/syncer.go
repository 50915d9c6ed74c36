package discovery

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// listPageSize is the limit of each list page.
const listPageSize = 500

// listedEvent is the event type objects of a list are counted under.
const listedEvent watch.EventType = "LISTED"

// shortWatch: a watch the server ends this soon without an event is
// re-opened only after a backoff, so a member (or proxy) that closes
// watches at once is not hammered in a tight loop.
const shortWatch = time.Second

// earlyClosesUnreachable is how many watches in a row ended at once without
// an event before the member counts as unreachable: a proxy or load
// balancer in front of a stopped API server accepts the connection and
// closes it, which client-go's Watch answers with a watch that ends at
// once and no error. One such close is a server ending its watches (a
// restart); a run of them is a member that answers nothing.
const earlyClosesUnreachable = 3

// syncerParams configure the mirror of one member resource.
type syncerParams struct {
	Cluster  string
	Resource *memberResource
	// Client is the member's.
	Client kubernetes.Interface
	Store  batchStore
	Sync   SyncConfig
	Clock  clock.Clock
	// Settled is closed once the resource first synced or first failed;
	// Awaits are the Settled of the resources its relists wait for
	// (memberResource.after). Both may be nil.
	Settled *firstSync
	Awaits  []*firstSync
	// Relists bounds the replica's relists at once (nil: no limit).
	Relists *relistSlots
}

// syncer mirrors one member resource into the registry: list (or resume from
// the persisted cursor), then watch, committing each batch of changes and the
// cursor it reaches in one Apply.
type syncer struct {
	syncerParams
	logger klog.Logger

	mu       sync.Mutex
	synced   bool
	pending  int       // events received and not yet committed
	lastBeat time.Time // last sign of life: an event received or a commit attempt finished
	// lastChange is when a batch that changed something last committed.
	lastChange time.Time
	// completeAsOf is the member time up to which the registry holds
	// every change of the resource: the asOf of the newest batch
	// committed with its cursor (or found to have nothing to commit).
	completeAsOf time.Time
	// notServed: the member does not serve the (optional) resource, so
	// it holds back no member's completeness.
	notServed bool
	committed string // the cursor of the last commit
	// unreachable: the last member request failed (unreachable, refused)
	// and nothing has been received since.
	unreachable bool
	// stuck: the last commit attempt failed.
	stuck bool

	// unservedAs is the state of an optional resource the member does not
	// serve, as this run last committed it ("" while served or not known);
	// run's own.
	unservedAs store.APIState
}

func newSyncer(p syncerParams) *syncer {
	return &syncer{syncerParams: p, lastBeat: p.Clock.Now()}
}

func (s *syncer) resource() string { return string(s.Resource.name) }

// run mirrors the resource until ctx ends.
func (s *syncer) run(ctx context.Context) {
	s.logger = klog.FromContext(ctx).WithValues("cluster", s.Cluster, "resource", s.resource())
	ctx = klog.NewContext(ctx, s.logger)
	defer synced.WithLabelValues(s.Cluster, s.resource()).Set(0)
	s.unservedAs = ""
	defer forgetUnserved(s.Cluster, s.Resource.name)

	cursor, ok := s.loadCursor(ctx)
	if !ok {
		return
	}
	reason := "initial"
	if cursor != "" {
		s.logger.Info("Resuming member watch from the persisted cursor, without listing", "resourceVersion", cursor)
		resumes.WithLabelValues(s.Cluster, s.resource()).Inc()
	}
	backoff := s.Sync.Backoff
	earlyCloses := 0 // watches in a row the member ended at once without an event
	for ctx.Err() == nil {
		if cursor == "" {
			rv, err := s.relist(ctx, reason)
			s.setPending(0)
			if st, ok := s.unservedState(err); ok {
				s.unserved(ctx, st, "list", err)
				reason, backoff = "recheck", s.Sync.Backoff
				continue
			}
			if err != nil {
				s.failed("list", err)
				s.sleep(ctx, backoff.Step())
				continue
			}
			s.served()
			cursor, backoff = rv, s.Sync.Backoff
		}
		next, received, opened, err := s.watch(ctx, cursor)
		s.setPending(0) // what was not committed will be received again
		cursor = next
		if received {
			backoff = s.Sync.Backoff
		}
		early := err == nil && !received && s.Clock.Since(opened) < shortWatch
		if !early {
			earlyCloses = 0
		}
		switch {
		case ctx.Err() != nil:
		case early:
			earlyCloses++
			s.logger.Info("Member ended the watch at once without an event; watching again after a backoff",
				"resourceVersion", cursor, "after", s.Clock.Since(opened).Round(time.Millisecond), "inARow", earlyCloses)
			errorsTotal.WithLabelValues(s.Cluster, s.resource(), "watch_closed_early").Inc()
			if earlyCloses == earlyClosesUnreachable {
				s.logger.Error(nil, "Member keeps ending watches at once without an event (a proxy in front of a stopped API server?); reporting it unreachable until an event arrives",
					"inARow", earlyCloses)
				s.setUnreachable()
			}
			s.sleep(ctx, backoff.Step())
		case err == nil:
			// The server ended the watch (its timeout): watch again from the cursor.
		case isExpired(err):
			s.logger.Info("Member cursor expired (410); relisting and deleting rows the list no longer has",
				"resourceVersion", cursor, "err", err.Error())
			expired.WithLabelValues(s.Cluster, s.resource()).Inc()
			cursor, reason = "", "expired"
		case isTooLargeResourceVersion(err):
			// The member is behind our cursor: restored from a backup, or
			// rebuilt under the same cluster id. Waiting would never help;
			// like client-go's reflector, relist and reconcile.
			s.logger.Info("Member does not have the cursor's resourceVersion (restored or rebuilt?); relisting and deleting rows the list no longer has",
				"resourceVersion", cursor, "err", err.Error())
			cursor, reason = "", "too_large"
		default:
			if st, ok := s.unservedState(err); ok {
				s.unserved(ctx, st, "watch", err)
				cursor, reason, backoff = "", "recheck", s.Sync.Backoff
				continue
			}
			s.failed("watch", err)
			s.sleep(ctx, backoff.Step())
		}
	}
}

// unservedState reports whether err is a member saying that it does not
// serve an optional resource: 404, the API is not enabled there (or the
// member's Kubernetes is older than the API), or 403, discovery's
// credentials may not read it. Either answer of another resource is a
// failure.
func (s *syncer) unservedState(err error) (store.APIState, bool) {
	switch {
	case err == nil || !s.Resource.optional:
		return "", false
	case apierrors.IsNotFound(err):
		return store.APIAbsent, true
	case apierrors.IsForbidden(err):
		return store.APIForbidden, true
	}
	return "", false
}

// unserved handles an optional resource the member does not serve (st,
// from err of op): the first time (or when the state changes) one fenced
// batch deletes its rows and records st for the member's views, with a
// log line (a missing RBAC rule at Error level); the resource counts as
// synced and the member as reached, so the member is not shown failing for
// it. It then waits Sync.UnservedRecheck before the caller lists again; a
// list that succeeds then records the resource served (its Replace).
func (s *syncer) unserved(ctx context.Context, st store.APIState, op string, err error) {
	s.reached()
	reason := "api_absent"
	if st == store.APIForbidden {
		reason = "forbidden"
	}
	errorsTotal.WithLabelValues(s.Cluster, s.resource(), reason).Inc()
	if st == s.unservedAs {
		s.logger.V(4).Info("Member still does not serve this optional resource", "state", st, "op", op, "err", err.Error())
	} else {
		p := newPending(s.Resource, "")
		p.unserved, p.asOf = st, s.Clock.Now()
		if cerr := s.commit(ctx, p); cerr != nil {
			// ctx ended, or the member is no longer this replica's (and
			// ctx ends with it).
			s.sleep(ctx, s.Sync.Backoff.Step())
			return
		}
		s.unservedAs = st
		setUnserved(s.Cluster, s.Resource.name, st)
		if st == store.APIForbidden {
			s.logger.Error(err, "Member cluster forbids discovery to read this optional resource; not mirroring it and showing the API as Forbidden on the member's ClusterCapacity. "+
				"Discovery's identity there needs get, list and watch on "+s.Resource.group+" "+optionalResourcesOf(s.Resource.group)+
				" (the shipped discovery ClusterRole has the rule); asking again periodically",
				"op", op, "recheckInterval", s.Sync.UnservedRecheck)
		} else {
			s.logger.Info("Member cluster does not serve this optional resource (404: its API is not enabled there, or its Kubernetes is older); not mirroring it and showing the API as Absent on the member's ClusterCapacity; asking again periodically",
				"op", op, "recheckInterval", s.Sync.UnservedRecheck, "err", err.Error())
		}
	}
	s.markSynced()
	s.sleep(ctx, s.Sync.UnservedRecheck)
}

// served notes a committed list of the resource: an optional resource the
// member did not serve is served now.
func (s *syncer) served() {
	if s.unservedAs == "" {
		return
	}
	s.logger.Info("Member cluster serves this optional resource now; mirroring it", "was", s.unservedAs)
	s.unservedAs = ""
	forgetUnserved(s.Cluster, s.Resource.name)
}

// optionalResourcesOf names the optional member resources of an API
// group, as an RBAC rule lists them: "resourceslices, resourceclaims".
func optionalResourcesOf(group string) string {
	var names []string
	for _, r := range memberResources {
		if r.optional && r.group == group {
			names = append(names, string(r.name))
		}
	}
	return strings.Join(names, ", ")
}

// loadCursor reads the persisted cursor, retrying while the registry is
// unavailable; ok is false when ctx ended first.
func (s *syncer) loadCursor(ctx context.Context) (string, bool) {
	backoff := s.Sync.Backoff
	for {
		cursor, err := s.Store.Cursor(ctx, s.Cluster, s.Resource.name)
		if err == nil {
			s.setCommitted(cursor)
			return cursor, true
		}
		if ctx.Err() != nil {
			return "", false
		}
		s.failed("read cursor", storeError{err})
		if !s.sleep(ctx, backoff.Step()) {
			return "", false
		}
	}
}

// relist lists the resource page by page, converting each page as it comes,
// and commits it in chunks of BatchSize objects, so memory and each commit
// stay bounded however large the member (a chunk of pods takes no commit
// ticket at all): the chunks upsert
// what was listed, and the last one carries the keys of the others, Replace
// (rows the list did not have are deleted) and the list's resourceVersion,
// which it returns. A relist cut short commits no cursor and starts over.
//
// The member keeps a continue token only for a while (kube-apiserver: until
// etcd compacts, 5 minutes by default). When commits slow the list past
// that (a loaded registry syncing a fleet), the list starts over and, that
// time, fetches every page before committing, holding the converted
// records only (a few hundred bytes an object), so it cannot outlast the
// token again; listing again with chunked commits could (the fleet
// benchmark saw members relist for 15 minutes without ever finishing).
func (s *syncer) relist(ctx context.Context, reason string) (string, error) {
	logger := s.logger
	if reason == "recheck" {
		// Every Sync.UnservedRecheck while unserved; its change is logged.
		logger = s.logger.V(4)
	}
	if !s.awaitFirstSyncs(ctx) {
		return "", ctx.Err()
	}
	// After the wait above: a relist holding a slot never waits for
	// another one, so the slots cannot deadlock.
	release, ok := s.Relists.acquire(ctx, len(s.Awaits) > 0)
	if !ok {
		return "", ctx.Err()
	}
	defer release()
	logger.Info("Listing member resource", "reason", reason)
	start := s.Clock.Now()
	p := newPending(s.Resource, "")
	p.replace, p.asOf = true, start
	var listed int
	opts := metav1.ListOptions{Limit: listPageSize}
	listRV := ""
	fetchFirst := false
	for {
		list, err := s.listPage(ctx, opts)
		if err != nil {
			if opts.Continue != "" && isExpired(err) {
				s.logger.Info("List continue token expired; listing again from the start, fetching every page before committing")
				p = newPending(s.Resource, "")
				p.replace, p.asOf, opts.Continue, listRV, listed, fetchFirst = true, s.Clock.Now(), "", "", 0, true
				continue
			}
			return "", fmt.Errorf("list: %w", err)
		}
		s.reached()
		lm, err := meta.ListAccessor(list)
		if err != nil {
			return "", decodeError{fmt.Errorf("list: %w", err)}
		}
		if listRV == "" {
			listRV = lm.GetResourceVersion() // later pages report the first page's
		}
		now := s.Clock.Now()
		if err := meta.EachListItem(list, func(obj runtime.Object) error {
			s.absorb(p, listedEvent, obj, now)
			return nil
		}); err != nil {
			return "", decodeError{fmt.Errorf("list: %w", err)}
		}
		s.setPending(p.events)
		if lm.GetContinue() == "" {
			break
		}
		opts.Continue = lm.GetContinue()
		if !fetchFirst && len(p.changes) >= s.Sync.BatchSize {
			chunk := p.takeChunk()
			if err := s.commit(ctx, chunk); err != nil {
				return "", err
			}
			// Committed, quarantined objects left out.
			p.present = append(p.present, chunk.keys()...)
			listed += len(chunk.changes)
		}
	}
	p.cursor = listRV // not the items' own (older) versions
	relists.WithLabelValues(s.Cluster, s.resource(), reason).Inc()
	if err := s.commit(ctx, p); err != nil {
		return "", err
	}
	s.logger.Info("Listed member resource", "objects", listed+len(p.changes), "resourceVersion", p.cursor,
		"took", s.Clock.Since(start).Round(time.Millisecond))
	s.markSynced()
	return p.cursor, nil
}

// listPage lists one page, within Sync.ListTimeout.
func (s *syncer) listPage(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if s.Sync.ListTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Sync.ListTimeout)
		defer cancel()
	}
	return s.Resource.list(ctx, s.Client, opts)
}

// watch follows the resource from cursor and commits batches as they fill
// or age. It returns the cursor of the last commit, whether any event
// arrived, when the watch was open (zero if it never opened: client-go's
// Watch may retry for seconds before it answers) and why it ended (nil when
// the server closed it).
func (s *syncer) watch(ctx context.Context, cursor string) (string, bool, time.Time, error) {
	timeout := int64(s.Sync.WatchTimeout.Seconds() * (1 + rand.Float64()))
	w, err := s.Resource.watch(ctx, s.Client, metav1.ListOptions{
		ResourceVersion:     cursor,
		AllowWatchBookmarks: true,
		TimeoutSeconds:      &timeout,
	})
	if err != nil {
		return cursor, false, time.Time{}, fmt.Errorf("watch from resourceVersion %q: %w", cursor, err)
	}
	// Reached once the watch delivers an event or stays open: a watch that
	// opens and ends at once may be a proxy answering for a stopped server.
	opened := s.Clock.Now()
	defer w.Stop()

	p := newPending(s.Resource, cursor)
	received := false
	var flush <-chan time.Time
	// A watch that stays open for a batch delay without an error is in sync.
	settled := s.Clock.After(s.Sync.BatchDelay)
	commit := func() error {
		flush = nil
		if err := s.commit(ctx, p); err != nil {
			return err
		}
		p = newPending(s.Resource, p.cursor)
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return s.committedCursor(), received, opened, ctx.Err()
		case <-settled:
			settled = nil
			s.reached()
			s.markSynced()
		case <-flush:
			if err := commit(); err != nil {
				return s.committedCursor(), received, opened, err
			}
		case ev, ok := <-w.ResultChan():
			if !ok {
				err := commit()
				return s.committedCursor(), received, opened, err
			}
			if ev.Type == watch.Error {
				if err := commit(); err != nil {
					return s.committedCursor(), received, opened, err
				}
				return s.committedCursor(), received, opened, watchError(ev.Object)
			}
			if !received {
				received = true
				s.reached()
			}
			now := s.Clock.Now()
			s.absorb(p, ev.Type, ev.Object, now)
			p.asOf = now // events arrive in order: everything up to now is in p
			s.setPending(p.events)
			switch {
			case p.events >= s.Sync.BatchSize:
				if err := commit(); err != nil {
					return s.committedCursor(), received, opened, err
				}
			case flush == nil:
				flush = s.Clock.After(s.Sync.BatchDelay)
			}
		}
	}
}

// absorb converts one event's object into the pending batch and advances its cursor.
func (s *syncer) absorb(p *pending, t watch.EventType, obj runtime.Object, now time.Time) {
	s.beat()
	acc, err := meta.Accessor(obj)
	if err != nil {
		s.failed("decode event", decodeError{fmt.Errorf("%s event: %w", t, err)})
		return
	}
	if rv := acc.GetResourceVersion(); rv != "" {
		p.cursor = rv
	}
	key := store.ObjectKey{Namespace: acc.GetNamespace(), Name: acc.GetName()}
	switch t {
	case watch.Bookmark:
		p.count(string(t), now)
	case watch.Deleted:
		p.add(string(t), change{key: key}, now)
	default:
		rec, issues, err := s.Resource.convert(obj)
		if err != nil {
			s.failed("convert", decodeError{fmt.Errorf("%s %s: %w", t, key, err)})
			return
		}
		for _, is := range issues {
			s.logger.Error(nil, "Member object has a value that cannot be mirrored as is; recording it without",
				"object", klog.KRef(key.Namespace, key.Name), "field", is.Field, "value", is.Value, "problem", is.Reason)
			errorsTotal.WithLabelValues(s.Cluster, s.resource(), "conversion").Inc()
		}
		p.add(string(t), change{key: key, rec: rec}, now)
	}
}

// commit applies the pending batch, retrying with backoff until it commits
// or ctx ends (the batch is never dropped: its events are still pending).
// When the registry rejects the data itself, retrying cannot help: the
// objects it rejects are isolated, quarantined (logged, counted, left out)
// and the rest commits.
func (s *syncer) commit(ctx context.Context, p *pending) error {
	if !p.dirty(s.committedCursor()) {
		s.completed(p) // a bookmark at the committed cursor: nothing is missing
		return nil
	}
	b := p.batch(s.Cluster)
	backoff := s.Sync.Backoff
	defer s.setStuck(false)
	for {
		start := s.Clock.Now()
		err := s.apply(ctx, b)
		if err == nil {
			s.committedBatch(p, start)
			return nil
		}
		s.beat()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, store.ErrFenced) || errors.Is(err, store.ErrRewound) {
			// The worker stops: another replica mirrors the member now, or
			// it claims the member again after a failover of the registry.
			return err
		}
		s.failed("commit", storeError{err})
		if errors.Is(err, store.ErrRejected) {
			if bad, ierr := s.isolateRejected(ctx, p, p.keys()); ierr == nil && len(bad) > 0 {
				s.quarantine(p, bad)
				b = p.batch(s.Cluster)
				continue
			}
		}
		s.setStuck(true)
		if !s.sleep(ctx, backoff.Step()) {
			return ctx.Err()
		}
	}
}

func (s *syncer) apply(ctx context.Context, b store.Batch) error {
	actx, cancel := context.WithTimeout(ctx, s.Sync.ApplyTimeout)
	defer cancel()
	return s.Store.Apply(actx, b)
}

// isolateRejected finds the objects among keys the registry rejects, by
// bisection: each half is applied on its own (without the relist's Replace
// and without the cursor; the full batch writes the same rows again), so a
// bad object costs about 2·log2(n) trial commits. It fails on any other error.
func (s *syncer) isolateRejected(ctx context.Context, p *pending, keys []store.ObjectKey) ([]store.ObjectKey, error) {
	trial := newPending(p.resource, "")
	for _, k := range keys {
		trial.changes[k] = p.changes[k]
	}
	err := s.apply(ctx, trial.batch(s.Cluster))
	switch {
	case err == nil:
		return nil, nil
	case !errors.Is(err, store.ErrRejected):
		return nil, err
	case len(keys) == 1:
		return keys, nil
	}
	left, err := s.isolateRejected(ctx, p, keys[:len(keys)/2])
	if err != nil {
		return nil, err
	}
	right, err := s.isolateRejected(ctx, p, keys[len(keys)/2:])
	return append(left, right...), err
}

// quarantine leaves objects the registry rejects out of the batch, with a
// log line and a metric saying which. They are mirrored again once a later
// event of theirs can be stored.
func (s *syncer) quarantine(p *pending, bad []store.ObjectKey) {
	for _, k := range bad {
		s.logger.Error(nil, "The registry rejects this member object; leaving it out (quarantined) so the rest of the batch commits",
			"object", klog.KRef(k.Namespace, k.Name))
		quarantined.WithLabelValues(s.Cluster, s.resource()).Inc()
		delete(p.changes, k)
	}
}

func (s *syncer) committedBatch(p *pending, start time.Time) {
	now := s.Clock.Now()
	applyDuration.WithLabelValues(s.Cluster, s.resource()).Observe(now.Sub(start).Seconds())
	batchSize.WithLabelValues(s.Cluster, s.resource()).Observe(float64(p.events))
	lag := commitLag.WithLabelValues(s.Cluster, s.resource())
	for _, t := range p.received {
		lag.Observe(now.Sub(t).Seconds())
	}
	for t, n := range p.byType {
		eventsApplied.WithLabelValues(s.Cluster, s.resource(), t).Add(float64(n))
	}
	s.mu.Lock()
	s.pending = 0
	s.lastBeat = now
	if p.cursor != "" || p.unserved != "" { // a relist's chunk reaches no cursor; unserved clears it
		s.committed = p.cursor
	}
	if len(p.changes) > 0 {
		s.lastChange = now
	}
	s.mu.Unlock()
	s.completed(p)
	s.logger.V(4).Info("Committed batch", "events", p.events, "objects", len(p.changes), "resourceVersion", p.cursor)
}

// completed records that the registry holds every change of the resource
// up to p.asOf; a chunk or a batch without a cursor says nothing.
func (s *syncer) completed(p *pending) {
	if p.chunk || p.asOf.IsZero() || p.cursor == "" && p.unserved == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notServed = p.unserved != ""
	if p.asOf.After(s.completeAsOf) {
		s.completeAsOf = p.asOf
	}
}

// failed logs and counts an error; a member refusing access gets a hint.
func (s *syncer) failed(op string, err error) {
	s.Settled.settle() // the resources waiting for it go on
	reason := errorReason(err)
	errorsTotal.WithLabelValues(s.Cluster, s.resource(), reason).Inc()
	switch reason {
	case "member_unavailable", "forbidden", "unauthorized":
		s.setUnreachable()
	}
	switch reason {
	case "forbidden", "unauthorized":
		s.logger.Error(err, "Member cluster refused access; discovery's identity needs get, list and watch on this resource there. Retrying with backoff",
			"op", op, "reason", reason)
	default:
		s.logger.Error(err, "Discovery failed; retrying with backoff", "op", op, "reason", reason)
	}
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func (s *syncer) sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-s.Clock.After(d):
		return true
	}
}

func (s *syncer) beat() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastBeat = s.Clock.Now()
}

// reached records that the member answered.
func (s *syncer) reached() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unreachable = false
}

func (s *syncer) setUnreachable() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unreachable = true
}

func (s *syncer) setStuck(v bool) {
	s.mu.Lock()
	s.stuck = v
	s.mu.Unlock()
	g := stuck.WithLabelValues(s.Cluster, s.resource())
	if v {
		g.Set(1)
	} else {
		g.Set(0)
	}
}

func (s *syncer) setPending(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = n
}

func (s *syncer) markSynced() {
	s.mu.Lock()
	s.synced = true
	s.mu.Unlock()
	synced.WithLabelValues(s.Cluster, s.resource()).Set(1)
	s.Settled.settle()
}

// firstSyncWait bounds how long a relist waits for other resources' first
// sync: past it, a member row relist that neither syncs nor fails (a hung
// list) no longer holds up the view rows.
const firstSyncWait = 10 * time.Minute

// firstSync is closed once a resource of the worker first synced or failed.
type firstSync struct {
	once sync.Once
	done chan struct{}
}

func newFirstSync() *firstSync { return &firstSync{done: make(chan struct{})} }

func (f *firstSync) settle() {
	if f != nil {
		f.once.Do(func() { close(f.done) })
	}
}

// awaitFirstSyncs waits, before a relist, until the member rows the
// resource's view rows aggregate (pods for nodes; pods and quotas for
// namespaces) first synced or failed, at most firstSyncWait; it reports
// false if ctx ended first. A node written before its pods gets aggregates
// of none, and the pods' relist then stamps it again: on a member's first
// sync, every node and namespace twice (a change-log entry and a views section
// each) instead of once. Later relists find the rows synced and do
// not wait.
func (s *syncer) awaitFirstSyncs(ctx context.Context) bool {
	var timeout <-chan time.Time
	for _, f := range s.Awaits {
		select {
		case <-f.done:
			continue
		default:
		}
		if timeout == nil {
			s.logger.V(2).Info("Waiting for the member rows this resource's rows aggregate to sync first", "atMost", firstSyncWait)
			timeout = s.Clock.After(firstSyncWait)
		}
		select {
		case <-f.done:
		case <-timeout:
			return true
		case <-ctx.Done():
			return false
		}
	}
	return true
}

func (s *syncer) setCommitted(cursor string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.committed = cursor
}

func (s *syncer) committedCursor() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committed
}

// status is a syncer's health at a glance.
type status struct {
	synced     bool
	pending    int
	lastBeat   time.Time
	lastChange time.Time
	// completeAsOf is the syncer's; zero if notServed.
	completeAsOf time.Time
	notServed    bool
	unreachable  bool
	stuck        bool
}

func (s *syncer) status() status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return status{synced: s.synced, pending: s.pending, lastBeat: s.lastBeat, lastChange: s.lastChange,
		completeAsOf: s.completeAsOf, notServed: s.notServed, unreachable: s.unreachable, stuck: s.stuck}
}
