package nodecapacity_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/feed"
	"github.com/example/platform-apiserver/pkg/registry/feed/feedtest"
	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// stack is a NodeCapacity REST over an in-memory feed and a real follower.
type stack struct {
	mem  *feedtest.MemFeed
	f    *feed.Follower
	rest *nodecapacity.REST
}

func newStack(t *testing.T, opts feed.Options, bookmarks time.Duration) *stack {
	t.Helper()
	mem := feedtest.New()
	opts.PollInterval = 5 * time.Millisecond
	f := feed.New(mem, opts)
	go f.Run(t.Context())
	if err := f.WaitSynced(t.Context()); err != nil {
		t.Fatal(err)
	}
	return &stack{mem: mem, f: f, rest: nodecapacity.NewREST(mem.NodeCapacities(), registry.WatchConfig{Follower: f, BookmarkInterval: bookmarks}, nil)}
}

func nc(cluster, name string, lbls map[string]string) store.NodeCapacity {
	return store.NodeCapacity{ClusterID: cluster, Node: store.Node{Name: name, UID: "uid-" + name, Labels: lbls,
		Allocatable: store.Quantities{CPUMillis: 1000, MemoryBytes: 1 << 30, Pods: 110}, Ready: true}}
}

func (s *stack) watch(t *testing.T, opts metainternalversion.ListOptions) watch.Interface {
	t.Helper()
	w, err := s.rest.Watch(t.Context(), &opts)
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	t.Cleanup(w.Stop)
	return w
}

// event is what a test checks of a watch event.
type event struct {
	typ  watch.EventType
	name string
	rv   string
	team string
}

func (e event) String() string { return fmt.Sprintf("%s %s@%s team=%s", e.typ, e.name, e.rv, e.team) }

func describe(t *testing.T, ev watch.Event) event {
	t.Helper()
	obj := ev.Object
	if co, ok := obj.(runtime.CacheableObject); ok {
		obj = co.GetObject()
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatalf("event %s object %T: %v", ev.Type, ev.Object, err)
	}
	return event{typ: ev.Type, name: m.GetName(), rv: m.GetResourceVersion(), team: m.GetLabels()["team"]}
}

// next reads n events (bookmarks included when withBookmarks).
func next(t *testing.T, w watch.Interface, n int, withBookmarks bool) []event {
	t.Helper()
	var out []event
	timeout := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %v", out)
			}
			if ev.Type == watch.Error {
				t.Fatalf("error event %v after %v", ev.Object, out)
			}
			if ev.Type == watch.Bookmark && !withBookmarks {
				continue
			}
			out = append(out, describe(t, ev))
		case <-timeout:
			t.Fatalf("timed out after %v, want %d events", out, n)
		}
	}
	return out
}

func same(t *testing.T, what string, got []event, want ...string) {
	t.Helper()
	var g []string
	for _, e := range got {
		g = append(g, e.String())
	}
	if strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n got %s\nwant %s", what, strings.Join(g, "; "), strings.Join(want, "; "))
	}
}

func rv(v int64) string { return fmt.Sprint(v) }

// TestWatchSelectorTransitions: an object that starts matching is ADDED,
// one that stops is DELETED with its last matching state at the version
// of the change, deletions of matching objects are DELETED.
func TestWatchSelectorTransitions(t *testing.T) {
	s := newStack(t, feed.Options{}, 0)
	w := s.watch(t, metainternalversion.ListOptions{ResourceVersion: rv(s.mem.ResourceVersion()), LabelSelector: labels.SelectorFromSet(labels.Set{"team": "blue"})})
	r1 := s.mem.Put(nc("c", "a", map[string]string{"team": "blue"}))
	s.mem.Put(nc("c", "b", map[string]string{"team": "red"}))
	r3 := s.mem.Put(nc("c", "a", map[string]string{"team": "red"}))
	r4 := s.mem.Put(nc("c", "b", map[string]string{"team": "blue"}))
	r5 := s.mem.Put(nc("c", "b", map[string]string{"team": "blue", "x": "y"}))
	r6 := s.mem.Delete("c", "b")
	same(t, "label transitions", next(t, w, 5, false),
		"ADDED c.a@"+rv(r1)+" team=blue",
		"DELETED c.a@"+rv(r3)+" team=blue", // last matching state, at the change's version
		"ADDED c.b@"+rv(r4)+" team=blue",
		"MODIFIED c.b@"+rv(r5)+" team=blue",
		"DELETED c.b@"+rv(r6)+" team=blue")
}

// TestWatchResumeBoundary: a resume gets exactly the changes after its
// version, from the window or the history, then live ones — no gap, no
// duplicate; a resume below the history gets 410.
func TestWatchResumeBoundary(t *testing.T) {
	feed.RegisterMetrics()
	s := newStack(t, feed.Options{WindowChanges: 3}, 0)
	type put struct {
		name string
		rv   int64
	}
	var puts []put
	for i := range 6 {
		name := fmt.Sprint("n", i)
		puts = append(puts, put{name, s.mem.Put(nc("c", name, nil))})
	}
	waitFollower(t, s, puts[5].rv)
	for _, tc := range []struct {
		name    string
		after   int64
		history bool
	}{
		{"within", puts[3].rv, false},
		{"below", puts[0].rv, true},
	} {
		before := metricValue(t, "platform_watch_history_reads_total", "source", "database")
		w := s.watch(t, metainternalversion.ListOptions{ResourceVersion: rv(tc.after)})
		live := put{"live-" + tc.name, 0}
		live.rv = s.mem.Put(nc("c", live.name, nil))
		var want []string
		for _, p := range append(puts, live) {
			if p.rv > tc.after {
				want = append(want, fmt.Sprintf("ADDED c.%s@%d team=", p.name, p.rv))
			}
		}
		same(t, "resume "+tc.name+" the window", next(t, w, len(want), false), want...)
		if read := metricValue(t, "platform_watch_history_reads_total", "source", "database") > before; read != tc.history {
			t.Errorf("resume %s the window: read the history = %v, want %v", tc.name, read, tc.history)
		}
		puts = append(puts, live)
		waitFollower(t, s, live.rv)
	}

	rvs := []int64{puts[0].rv, puts[1].rv, puts[2].rv}
	s.mem.CompactTo(rvs[2])
	_, err := s.rest.Watch(t.Context(), &metainternalversion.ListOptions{ResourceVersion: rv(rvs[0])})
	if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Errorf("resume below the compacted history: %v, want 410", err)
	}
}

// TestWatchInitialEventsAndBookmarks: sendInitialEvents gives the state,
// then the annotated bookmark, then changes; periodic bookmarks carry the
// version seen.
func TestWatchInitialEventsAndBookmarks(t *testing.T) {
	s := newStack(t, feed.Options{}, 50*time.Millisecond)
	for i := range 1200 { // more than a page of initial state
		s.mem.Put(nc("c", fmt.Sprintf("n%04d", i), nil))
	}
	at := s.mem.ResourceVersion()
	yes := true
	w := s.watch(t, metainternalversion.ListOptions{SendInitialEvents: &yes, AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	added := 0
	timeout := time.After(10 * time.Second)
	for done := false; !done; {
		select {
		case ev := <-w.ResultChan():
			switch ev.Type {
			case watch.Added:
				added++
			case watch.Bookmark:
				m, _ := meta.Accessor(ev.Object)
				if m.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
					continue // a periodic bookmark sent before the end: keep reading
				}
				if m.GetResourceVersion() != rv(at) {
					t.Errorf("initial-events-end bookmark at %s, want %d", m.GetResourceVersion(), at)
				}
				done = true
			default:
				t.Fatalf("unexpected %s during initial events", ev.Type)
			}
		case <-timeout:
			t.Fatalf("no initial-events-end bookmark; %d ADDED", added)
		}
	}
	if added != 1200 {
		t.Errorf("%d initial ADDED events, want 1200", added)
	}
	later := s.mem.Put(nc("c", "later", nil))
	var sawChange, sawBookmark bool
	for !sawChange || !sawBookmark {
		e := next(t, w, 1, true)[0]
		switch {
		case e.typ == watch.Added && e.name == "c.later" && e.rv == rv(later):
			sawChange = true
		case e.typ == watch.Bookmark && sawChange && e.rv == rv(later):
			sawBookmark = true // a periodic bookmark at the version seen
		case e.typ != watch.Bookmark:
			t.Fatalf("unexpected event %s after the initial events", e)
		}
	}
}

// TestWatchBehindEndsCleanly: a watcher that stops reading during a burst is
// closed without an error event, so client-go resumes instead of relisting.
func TestWatchBehindEndsCleanly(t *testing.T) {
	s := newStack(t, feed.Options{SubscriberBuffer: 10, DispatchBudget: 20 * time.Millisecond}, 0)
	w := s.watch(t, metainternalversion.ListOptions{ResourceVersion: rv(s.mem.ResourceVersion())})
	var last int64
	for i := range 200 {
		last = s.mem.Put(nc("c", fmt.Sprint("n", i), nil))
	}
	// Once the follower has handed out the burst, it has given up on the
	// watcher (it waits at most its dispatch budget).
	if _, err := s.f.WaitFor(t.Context(), last); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return // closed, no error event: the client resumes
			}
			if ev.Type == watch.Error {
				t.Fatalf("a watcher that fell behind got an error event %v; want the stream closed", ev.Object)
			}
		case <-timeout:
			t.Fatal("a watcher that fell behind was not closed")
		}
	}
}

// TestWatchConvertsOnceAndRoutesByKey: two watchers share one conversion
// per change; a watcher of one cluster (by the cluster label) causes no
// conversion of another cluster's changes.
func TestWatchConvertsOnceAndRoutesByKey(t *testing.T) {
	registry.RegisterMetrics()
	s := newStack(t, feed.Options{}, 0)
	conversions := func() float64 {
		return metricValue(t, "platform_watch_conversions_total", "kind", string(store.KindNodeCapacity))
	}
	from := rv(s.mem.ResourceVersion())
	onlyA := labels.SelectorFromSet(labels.Set{platform.ClusterLabel: "a"})
	w1 := s.watch(t, metainternalversion.ListOptions{ResourceVersion: from, LabelSelector: onlyA})
	w2 := s.watch(t, metainternalversion.ListOptions{ResourceVersion: from, LabelSelector: onlyA})
	before := conversions()
	for i := range 50 {
		s.mem.Put(nc("b", fmt.Sprint("n", i), nil))
	}
	s.mem.Put(nc("a", "mine", nil))
	for _, w := range []watch.Interface{w1, w2} {
		same(t, "cluster-a watcher", next(t, w, 1, false), fmt.Sprintf("ADDED a.mine@%d team=", s.mem.ResourceVersion()))
	}
	if got := conversions() - before; got != 1 {
		t.Errorf("%v conversions for 51 changes seen by two cluster-a watchers, want 1 (a's change, once)", got)
	}
}

// TestWatchRejectsWhatListRejects: a field value the registry cannot
// compare is a 400 on watch as on list.
func TestWatchRejectsWhatListRejects(t *testing.T) {
	s := newStack(t, feed.Options{}, 0)
	sel := fields.OneTermEqualSelector("status.schedulable", "yes")
	_, werr := s.rest.Watch(t.Context(), &metainternalversion.ListOptions{FieldSelector: sel})
	_, lerr := s.rest.List(t.Context(), &metainternalversion.ListOptions{FieldSelector: sel})
	if !apierrors.IsBadRequest(werr) || !apierrors.IsBadRequest(lerr) || werr.Error() != lerr.Error() {
		t.Errorf("status.schedulable=yes: watch %v, list %v; want the same 400", werr, lerr)
	}
}

// waitFollower waits until a watch from now would start after rv.
func waitFollower(t *testing.T, s *stack, rv int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		sub, err := s.f.Subscribe(store.KindNodeCapacity, -1, nil)
		if err == nil {
			from := sub.From
			sub.Close()
			if from >= rv {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("follower did not reach %d", rv)
}

// metricValue reads a counter of the legacy registry by one label.
func metricValue(t *testing.T, name, label, value string) float64 {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
