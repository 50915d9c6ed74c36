package registry

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry/feed"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// WatchSpec is what the shared watch logic needs to know of one kind.
type WatchSpec struct {
	Kind     store.Kind
	Resource schema.GroupResource
	Fields   Fields
	// Convert builds the internal API object of a change and, when the
	// change has one, of the state before it.
	Convert func(c *store.Change) (obj, prev runtime.Object)
	// Stream reads the current objects matching opts (no limit) in keyset
	// pages of up to pageSize objects, each from a snapshot of its own
	// (see store.StreamPage).
	Stream func(ctx context.Context, opts store.ListOptions, pageSize int, yield func(ObjectPage) error) error
	// ListKey returns the list key (Stream's order) of a change's object.
	ListKey func(c *store.Change) store.ListKey
	// NewObject returns an empty object of the kind, for bookmarks.
	NewObject func() runtime.Object
	// Attrs returns the labels and field-selector values of an object
	// (keyed amounts for any key, see Kind.FieldValues).
	Attrs func(obj runtime.Object) (labels.Set, fields.Fields)
	// Key returns the key fields of a change's object, read from the
	// change without converting it, so a watch can skip changes it cannot
	// want before anything is converted.
	Key func(c *store.Change) ChangeKey
}

// ChangeKey is what identifies a change's object, for routing.
type ChangeKey struct {
	Namespace string // "" for cluster-scoped kinds
	Name      string // the API object's name
	Cluster   string
}

// WatchConfig is what every watch of the server shares.
type WatchConfig struct {
	Follower *feed.Follower
	// BookmarkInterval is how often a watch that allows bookmarks gets one.
	BookmarkInterval time.Duration
	// Draining is set once the server shuts down: new watches are refused
	// with 429, which clients retry (on another replica, or on this one
	// once restarted), instead of being accepted and cut off within a
	// second, which client-go answers with a relist.
	Draining *atomic.Bool
	// Limits bound what a list or watch of the server may ask (selectors,
	// page size); zero fields are their defaults.
	Limits Limits
}

const (
	// followerSyncTimeout bounds how long a watch waits for the change feed
	// to start (just after start-up) before answering 503.
	followerSyncTimeout = 5 * time.Second
)

// Watch serves a Kubernetes watch of one kind from the change feed with the
// semantics of kube-apiserver: resourceVersion "" or "0" start with ADDED
// events for the current objects (unless sendInitialEvents=false), an exact
// resourceVersion resumes after it (410 when compacted), sendInitialEvents
// ends the initial events with a bookmark annotated
// k8s.io/initial-events-end, selectors filter, and an object that stops
// matching is sent as DELETED.
func Watch(ctx context.Context, cfg WatchConfig, spec WatchSpec, options *metainternalversion.ListOptions) (watch.Interface, error) {
	if options == nil {
		options = &metainternalversion.ListOptions{}
	}
	if cfg.Draining != nil && cfg.Draining.Load() {
		return nil, apierrors.NewTooManyRequests("this platform-apiserver is shutting down; retry the watch", 1)
	}
	storeOpts, nothing, err := StoreListOptions(ctx, options, spec.Fields, cfg.Limits)
	if err != nil {
		return nil, err
	}
	storeOpts.Limit, storeOpts.Continue = 0, ""

	w := &watcher{
		cfg:       cfg,
		spec:      spec,
		result:    make(chan watch.Event),
		bookmarks: options.AllowWatchBookmarks,
		nothing:   nothing,
		labels:    options.LabelSelector,
		fields:    options.FieldSelector,
	}
	w.namespace, _ = genericapirequest.NamespaceFrom(ctx)
	if w.labels == nil {
		w.labels = labels.Everything()
	}
	if w.fields == nil {
		w.fields = fields.Everything()
	}
	// Values as the list compares them (a keyed amount's 1Gi as 1073741824);
	// StoreListOptions has checked them.
	if w.fields, err = w.fields.Transform(spec.Fields.convert); err != nil {
		return nil, err
	}

	rv := options.ResourceVersion
	w.initial = rv == "" || rv == "0"
	if options.SendInitialEvents != nil {
		w.initial = *options.SendInitialEvents
		w.initialEndBookmark = w.initial
	}
	after := int64(-1) // -1: from the subscription on
	from := int64(0)   // the version the watch must not start before
	if rv != "" && rv != "0" {
		if from, err = ParseResourceVersion(rv); err != nil {
			return nil, err
		}
		if !w.initial {
			after = from
		}
	}
	start := "now"
	switch {
	case w.initial:
		start = "initial"
	case after >= 0:
		start = "resume"
	}
	watchRequests.WithLabelValues(string(spec.Kind), start).Inc()
	w.sub, err = subscribe(ctx, cfg.Follower, spec.Kind, after, w.route)
	if err != nil {
		return nil, err
	}
	if from > w.sub.From {
		// Beyond what the feed has reached (another replica served it, or
		// it does not exist yet): wait, subscribed, as kube-apiserver's
		// watch cache does, rather than claim it in bookmarks.
		if err := awaitResourceVersion(ctx, cfg.Follower, from); err != nil {
			w.sub.Close()
			return nil, err
		}
	}
	w.cursor = w.sub.From
	if after >= 0 {
		w.cursor = after
		if w.sub.Backlog == nil && after < w.sub.From {
			// Fail now, not mid-stream, when history is gone.
			changes, reach, err := cfg.Follower.History(ctx, w.historyFilter(), after)
			if err != nil {
				w.sub.Close()
				return nil, watchError(err, after)
			}
			w.history = &historyBatch{changes, reach}
		}
	}

	w.done = make(chan struct{})
	if w.initial && !nothing {
		w.pages, err = w.streamInitial(ctx, storeOpts, options)
		if err != nil {
			close(w.done)
			w.sub.Close()
			if _, ok := err.(apierrors.APIStatus); ok {
				return nil, err
			}
			return nil, APIError(err, spec.Resource, "")
		}
	}

	pw := watch.NewProxyWatcher(w.result)
	go w.run(ctx, pw.StopChan())
	return pw, nil
}

// subscribe subscribes to the follower, waiting a little while it is not in
// sync (starting, or restarting after compaction overtook it): a
// subscription then could skip changes, so it answers 429 rather than risk
// a silent gap — the status client-go retries a watch on (a 503 would make
// it relist).
func subscribe(ctx context.Context, f *feed.Follower, kind store.Kind, after int64, route func(*store.Change) bool) (*feed.Subscription, error) {
	ctx, cancel := context.WithTimeout(ctx, followerSyncTimeout)
	defer cancel()
	for {
		if err := f.WaitSynced(ctx); err != nil {
			return nil, apierrors.NewTooManyRequests("the registry change feed is not in sync yet (starting, or the database is unreachable or not migrated); retry the watch", 1)
		}
		sub, err := f.Subscribe(kind, after, route)
		if !errors.Is(err, feed.ErrNotSynced) {
			return sub, err
		}
	}
}

// tooLargeWait is how long a read from a resourceVersion the change feed
// has not reached waits for it: kube-apiserver's watch cache blockTimeout.
const tooLargeWait = 3 * time.Second

// awaitResourceVersion waits up to tooLargeWait for the change feed to
// reach rv, answering kube-apiserver's 504 "Too large resource version"
// (Retry-After: 1) when it does not.
func awaitResourceVersion(ctx context.Context, f *feed.Follower, rv int64) error {
	wctx, cancel := context.WithTimeout(ctx, tooLargeWait)
	defer cancel()
	cur, err := f.WaitFor(wctx, rv)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err() // the client gave up
	default:
		return tooLargeResourceVersion(rv, cur)
	}
}

func watchError(err error, from int64) error {
	if errors.Is(err, store.ErrCompacted) {
		return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%v)", from, err))
	}
	return APIError(err, schema.GroupResource{}, "")
}

type watcher struct {
	cfg       WatchConfig
	spec      WatchSpec
	sub       *feed.Subscription
	result    chan watch.Event
	namespace string
	labels    labels.Selector
	fields    fields.Selector
	nothing   bool

	initial            bool
	initialEndBookmark bool
	bookmarks          bool
	// pages delivers the initial state (nil without initial events).
	pages <-chan initialPage
	// snaps are the initial pages read, until the watch has considered
	// every change up to initialEnd, the last page's version: only then is
	// what it sent consistent (at its cursor), so bookmarks wait for it.
	snaps      snapshots
	initialEnd int64
	// done is closed when run ends.
	done chan struct{}
	// cursor: every change up to it has been considered for this watch.
	cursor int64
	// history is the first history read of a resume, made before the
	// watch started so that a compacted resourceVersion is its answer.
	history *historyBatch
}

// historyBatch is what one History read returned.
type historyBatch struct {
	changes []store.Change
	reach   int64
}

func (w *watcher) run(ctx context.Context, stop <-chan struct{}) {
	defer close(w.result)
	defer w.sub.Close()
	defer close(w.done)

	if w.pages != nil {
		ok, subClosed := w.sendInitial(ctx, stop)
		if !ok || subClosed {
			return
		}
	}
	if !w.replayBacklog(stop) || !w.replayHistory(ctx, stop) {
		return
	}
	// Initialized (if not yet, at its first page): a watch without initial
	// events once its backlog and history are out.
	utilflowcontrol.WatchInitialized(ctx)

	var tick <-chan time.Time
	if w.bookmarks && w.cfg.BookmarkInterval > 0 {
		t := time.NewTicker(w.cfg.BookmarkInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-tick:
			if w.snaps != nil {
				continue // not consistent at the cursor yet
			}
			if !w.emit(stop, w.bookmark(false)) {
				return
			}
		case it, ok := <-w.sub.C:
			if !ok {
				// Dropped for falling behind (or the feed restarted): end
				// the stream without an error event, as kube-apiserver's
				// cacher does, so the client resumes from the last
				// resourceVersion it received instead of relisting.
				return
			}
			if !w.handle(stop, it) {
				return
			}
		}
	}
}

// handle considers one item of the subscription: a change the initial
// pages already reflect is skipped.
func (w *watcher) handle(stop <-chan struct{}, it feed.Item) bool {
	if it.ResourceVersion <= w.cursor {
		return true
	}
	w.cursor = it.ResourceVersion
	if c := it.Change; c != nil && !w.reflected(c) && !w.consider(stop, c, it.Memo) {
		return false
	}
	return w.endInitial(stop)
}

// reflected reports whether the initial pages already show change c.
func (w *watcher) reflected(c *store.Change) bool {
	return w.snaps != nil && w.snaps.reflects(w.spec.ListKey(c), c.ResourceVersion)
}

// endInitial ends the initial state once every change up to the last
// initial page's version has been considered: each object is then at its
// state at the cursor (its page's, plus the later changes sent), so the
// initial-events-end bookmark, when asked for, goes out now.
func (w *watcher) endInitial(stop <-chan struct{}) bool {
	if w.snaps == nil || w.cursor < w.initialEnd {
		return true
	}
	w.snaps = nil
	if w.initialEndBookmark && w.bookmarks {
		return w.emit(stop, w.bookmark(true))
	}
	return true
}

// sendInitial sends the initial state as ADDED events, page by page, while
// a pump keeps draining the subscription; then what the pump drained that
// the pages do not reflect, and the initial-events-end bookmark once the
// watch has considered every change up to the last page's version (see
// endInitial). ok is false when the watch must end; subClosed tells that
// the subscription was dropped meanwhile (the client then resumes from
// what it got).
func (w *watcher) sendInitial(ctx context.Context, stop <-chan struct{}) (ok, subClosed bool) {
	p := startPump(w.sub.C, initialPumpLimit)
	stopped := false
	stopPump := func() ([]feed.Item, bool) {
		stopped = true
		return p.stop()
	}
	defer func() {
		if !stopped {
			p.stop()
		}
	}()
	first := true
	for pg := range w.pages {
		if pg.err != nil {
			if ctx.Err() == nil {
				var status apierrors.APIStatus
				if errors.As(APIError(pg.err, w.spec.Resource, ""), &status) {
					w.emit(stop, watch.Event{Type: watch.Error, Object: new(status.Status())})
				}
			}
			return false, false
		}
		if first {
			// Every change up to the first page's version is in every page.
			w.cursor, first = pg.ResourceVersion, false
			// Initialized: priority and fairness frees the watch's seat
			// once its first page is read, as kube-apiserver's cacher
			// once it handed its events to its buffer; a slow client
			// does not hold it while it reads. Later pages are read as
			// the client takes them, each in a short read of its own.
			utilflowcontrol.WatchInitialized(ctx)
		}
		w.snaps = append(w.snaps, snapshot{last: pg.Last, open: pg.Final, rv: pg.ResourceVersion})
		w.initialEnd = pg.ResourceVersion
		for _, obj := range pg.Objects {
			if !w.emit(stop, watch.Event{Type: watch.Added, Object: obj}) {
				return false, false
			}
		}
	}
	if ctx.Err() != nil {
		return false, false
	}
	if !w.endInitial(stop) {
		return false, false
	}
	pending, closed := stopPump()
	for _, it := range pending {
		if !w.handle(stop, it) {
			return false, false
		}
	}
	return true, closed
}

// replayBacklog delivers the changes between the cursor and the
// subscription's start that the follower's window held.
func (w *watcher) replayBacklog(stop <-chan struct{}) bool {
	for _, it := range w.sub.Backlog {
		if it.ResourceVersion <= w.cursor {
			continue
		}
		if w.sub.Wants(it.Change) && !w.consider(stop, it.Change, it.Memo) {
			return false
		}
		w.cursor = it.ResourceVersion
	}
	if w.sub.Backlog != nil {
		w.cursor = max(w.cursor, w.sub.From)
	}
	return true
}

// replayHistory delivers changes between the cursor and the subscription's
// start, read from the database, so a resumed watch has no gap.
func (w *watcher) replayHistory(ctx context.Context, stop <-chan struct{}) bool {
	for w.cursor < w.sub.From {
		b, err := w.readHistory(ctx)
		changes, reach := b.changes, b.reach
		if err != nil {
			if ctx.Err() == nil {
				var status apierrors.APIStatus
				if errors.As(watchError(err, w.cursor), &status) {
					w.emit(stop, watch.Event{Type: watch.Error, Object: new(status.Status())})
				}
			}
			return false
		}
		for i := range changes {
			c := &changes[i]
			if c.ResourceVersion > w.sub.From {
				return true // the subscription delivers the rest
			}
			w.cursor = c.ResourceVersion
			if w.route(c) && !w.consider(stop, c, nil) {
				return false
			}
		}
		if reach <= w.cursor {
			break // the feed holds nothing newer for this watch
		}
		w.cursor = min(reach, w.sub.From) // the subscription delivers what is after From
	}
	w.cursor = max(w.cursor, w.sub.From)
	return true
}

// readHistory returns the changes after the cursor: the batch read before
// the watch started, then from the follower.
func (w *watcher) readHistory(ctx context.Context) (historyBatch, error) {
	if b := w.history; b != nil {
		w.history = nil
		return *b, nil
	}
	changes, reach, err := w.cfg.Follower.History(ctx, w.historyFilter(), w.cursor)
	return historyBatch{changes, reach}, err
}

// historyFilter selects, in the database, the changes a history read of
// this watch needs: its kind, and its member when it selects one.
func (w *watcher) historyFilter() store.ChangeFilter {
	f := store.ChangeFilter{Kind: w.spec.Kind}
	if v, ok := w.labels.RequiresExactMatch(platform.ClusterLabel); ok {
		f.ClusterID = v
	}
	return f
}

// route reports whether a change can concern this watch, from its key
// alone: the namespace, the cluster label and the name it selects on.
func (w *watcher) route(c *store.Change) bool {
	k := w.spec.Key(c)
	if w.namespace != "" && k.Namespace != w.namespace {
		return false
	}
	if v, ok := w.labels.RequiresExactMatch(platform.ClusterLabel); ok && v != k.Cluster {
		return false
	}
	if v, ok := w.fields.RequiresExactMatch("metadata.name"); ok && v != k.Name {
		return false
	}
	return true
}

// converted is a change turned into API objects, shared by every watch
// that receives it; obj and prev are wrapped so that each encoding of an
// event is done once (see cachedObject), and must not be modified.
type converted struct {
	obj, prev runtime.Object
}

// convert returns the change's objects, converting it at most once per
// memo (nil: for this watch only).
func (w *watcher) convert(c *store.Change, memo *feed.Memo) converted {
	do := func() any {
		conversions.WithLabelValues(string(c.Kind)).Inc()
		obj, prev := w.spec.Convert(c)
		out := converted{obj: newCachedObject(obj)}
		if prev != nil {
			out.prev = newCachedObject(prev)
		}
		return out
	}
	if memo == nil {
		return do().(converted)
	}
	return memo.Do(do).(converted)
}

// consider turns a change into the event this watch should see, if any.
func (w *watcher) consider(stop <-chan struct{}, c *store.Change, memo *feed.Memo) bool {
	if w.nothing {
		return true
	}
	conv := w.convert(c, memo)
	now := w.matches(conv.obj)
	before := conv.prev != nil && w.matches(conv.prev)
	var ev watch.Event
	switch {
	case c.Type == store.ChangeDeleted && now:
		ev = watch.Event{Type: watch.Deleted, Object: conv.obj}
	case c.Type == store.ChangeDeleted:
		return true
	case now && before:
		ev = watch.Event{Type: watch.Modified, Object: conv.obj}
	case now:
		ev = watch.Event{Type: watch.Added, Object: conv.obj}
	case before:
		// Stopped matching: Kubernetes sends DELETED with the last state
		// that matched, at the version of this change (a copy: the shared
		// object is not ours to change).
		prev := unwrap(conv.prev).DeepCopyObject()
		if m, err := meta.Accessor(prev); err == nil {
			m.SetResourceVersion(fmt.Sprint(c.ResourceVersion))
		}
		ev = watch.Event{Type: watch.Deleted, Object: prev}
	default:
		return true
	}
	return w.emit(stop, ev)
}

func (w *watcher) matches(obj runtime.Object) bool {
	l, f := w.spec.Attrs(unwrap(obj))
	if w.namespace != "" && f.Get("metadata.namespace") != w.namespace {
		return false
	}
	return w.labels.Matches(l) && w.fields.Matches(f)
}

func (w *watcher) bookmark(initialEnd bool) watch.Event {
	obj := w.spec.NewObject()
	if m, err := meta.Accessor(obj); err == nil {
		m.SetResourceVersion(fmt.Sprint(w.cursor))
		if initialEnd {
			m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		}
	}
	return watch.Event{Type: watch.Bookmark, Object: obj}
}

// emit sends ev unless the client has gone; it reports whether to go on.
func (w *watcher) emit(stop <-chan struct{}, ev watch.Event) bool {
	select {
	case w.result <- ev:
		return true
	case <-stop:
		return false
	}
}

// ConvertChange adapts a change's records (current and previous, as Rs) to
// WatchSpec.Convert.
func ConvertChange[R, O any, P APIObject[O]](toObject func(*R) O) func(*store.Change) (runtime.Object, runtime.Object) {
	return func(c *store.Change) (runtime.Object, runtime.Object) {
		cur, prev := store.Records[R](c)
		obj := toObject(cur)
		if prev == nil {
			return P(&obj), nil
		}
		p := toObject(prev)
		return P(&obj), P(&p)
	}
}
