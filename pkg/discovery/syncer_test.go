package discovery

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// recordingStore is a store.Writer that keeps every applied batch.
type recordingStore struct {
	mu      sync.Mutex
	cursor  string
	batches []store.Batch
	states  []store.MemberState // the states reported, each change once
	// statuses are the reports.
	statuses []store.MemberStatus
}

func (s *recordingStore) Apply(_ context.Context, b store.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, b)
	return nil
}

func (s *recordingStore) Cursor(context.Context, string, store.Resource) (string, error) {
	return s.cursor, nil
}
func (s *recordingStore) ReconcileMembers(context.Context, store.MembersView) (store.MembersReconciled, error) {
	return store.MembersReconciled{}, nil
}
func (s *recordingStore) CheckMemberIdentity(context.Context, store.Fence, string) (bool, error) {
	return false, nil
}
func (s *recordingStore) ClaimMember(_ context.Context, id, _ string) (store.Fence, error) {
	return store.Fence{ClusterID: id, Epoch: 1}, nil
}
func (s *recordingStore) Clusters(context.Context) ([]string, error) { return nil, nil }
func (s *recordingStore) RecordNodeMetrics(context.Context, store.Fence, []store.NodeMetricsSample, store.UsageReporting) (store.MetricsRecorded, error) {
	return store.MetricsRecorded{}, nil
}
func (s *recordingStore) RecordNamespaceMetrics(context.Context, store.Fence, []store.NamespaceMetricsSample, store.UsageReporting) (int64, error) {
	return 0, nil
}
func (s *recordingStore) MaintainNodeMetrics(context.Context, store.MetricsMaintenance) (store.MetricsMaintained, error) {
	return store.MetricsMaintained{}, nil
}
func (s *recordingStore) RecordMemberState(_ context.Context, _ store.Fence, st store.MemberStatus) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.statuses) == 0 || s.statuses[len(s.statuses)-1].State != st.State {
		s.states = append(s.states, st.State)
	}
	s.statuses = append(s.statuses, st)
	return nil
}

func (s *recordingStore) snapshot() []store.Batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]store.Batch(nil), s.batches...)
}

// fakeMember serves namespaces: a list of two at resourceVersion 100, and
// watches the test feeds.
type fakeMember struct {
	client  *fake.Clientset
	mu      sync.Mutex
	lists   int
	watches []string // resourceVersion of each watch
	watcher chan *watch.FakeWatcher
}

func newFakeMember() *fakeMember {
	m := &fakeMember{client: fake.NewClientset(), watcher: make(chan *watch.FakeWatcher, 10)}
	m.client.PrependReactor("list", "namespaces", func(clienttesting.Action) (bool, runtime.Object, error) {
		m.mu.Lock()
		m.lists++
		m.mu.Unlock()
		return true, &corev1.NamespaceList{
			ListMeta: metav1.ListMeta{ResourceVersion: "100"},
			Items:    []corev1.Namespace{namespace("a", "90"), namespace("b", "95")},
		}, nil
	})
	m.client.PrependWatchReactor("namespaces", func(a clienttesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFakeWithChanSize(5000, false)
		m.mu.Lock()
		m.watches = append(m.watches, a.(clienttesting.WatchActionImpl).ListOptions.ResourceVersion)
		m.mu.Unlock()
		m.watcher <- w
		return true, w, nil
	})
	return m
}

func namespace(name, rv string) corev1.Namespace {
	return corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv, Labels: map[string]string{"rv": rv}},
		Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
}

func startSyncer(t *testing.T, m *fakeMember, st *recordingStore) {
	t.Helper()
	startSyncerWith(t, m, st, wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 1 << 30})
}

func startSyncerWith(t *testing.T, m *fakeMember, st *recordingStore, backoff wait.Backoff) {
	t.Helper()
	runSyncer(t, m, st, func(p *syncerParams) { p.Sync.Backoff = backoff })
}

// runSyncer runs a namespaces syncer of member m into st until the test
// ends, with the tests' parameters as tune leaves them.
func runSyncer(t *testing.T, m *fakeMember, st batchStore, tune func(*syncerParams)) *syncer {
	t.Helper()
	RegisterMetrics()
	p := syncerParams{
		Cluster: "c1", Resource: mustResource(t, store.ResourceNamespaces), Client: m.client, Store: st,
		Sync: SyncConfig{
			BatchSize: 1000, BatchDelay: 20 * time.Millisecond,
			Backoff:      wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 1 << 30},
			ApplyTimeout: time.Second, WatchTimeout: time.Minute, UnservedRecheck: time.Minute,
		},
		Clock: clock.RealClock{},
	}
	if tune != nil {
		tune(&p)
	}
	s := newSyncer(p)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); s.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

func mustResource(t *testing.T, name store.Resource) *memberResource {
	t.Helper()
	for i := range memberResources {
		if memberResources[i].name == name {
			return &memberResources[i]
		}
	}
	t.Fatalf("no member resource %q", name)
	return nil
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func nextWatcher(t *testing.T, m *fakeMember) *watch.FakeWatcher {
	t.Helper()
	select {
	case w := <-m.watcher:
		return w
	case <-time.After(10 * time.Second):
		t.Fatal("no watch started")
		return nil
	}
}

func TestSyncerListThenBatchedWatch(t *testing.T) {
	m, st := newFakeMember(), &recordingStore{}
	startSyncer(t, m, st)
	w := nextWatcher(t, m)

	batches := st.snapshot()
	if len(batches) != 1 || len(batches[0].Namespaces) != 2 || batches[0].Cursors[store.ResourceNamespaces] != "100" ||
		len(batches[0].Replace) != 1 {
		t.Fatalf("initial list commit = %+v, want both namespaces, Replace and cursor 100", batches)
	}
	if m.watches[0] != "100" {
		t.Errorf("watch from %q, want the list's resourceVersion 100", m.watches[0])
	}

	// A burst of 3000 events on ten namespaces, then a deletion.
	const events = 3000
	for i := range events {
		ns := namespace(fmt.Sprintf("ns-%d", i%10), strconv.Itoa(101+i))
		w.Modify(&ns)
	}
	gone := namespace("a", strconv.Itoa(101+events))
	w.Delete(&gone)
	last := strconv.Itoa(101 + events)
	waitFor(t, "the burst committed", func() bool {
		b := st.snapshot()
		return b[len(b)-1].Cursors[store.ResourceNamespaces] == last
	})
	burst := st.snapshot()[1:]
	if len(burst) > 5 {
		t.Errorf("%d transactions for %d events, want a handful", len(burst), events+1)
	}
	final := map[string]string{}
	deleted := false
	for _, b := range burst {
		for _, ns := range b.Namespaces {
			if seen := final[ns.Name]; seen != "" && seen == ns.Labels["rv"] {
				t.Errorf("namespace %s written twice at the same version", ns.Name)
			}
			final[ns.Name] = ns.Labels["rv"]
		}
		for _, k := range b.Deleted[store.ResourceNamespaces] {
			deleted = deleted || k.Name == "a"
		}
		if len(b.Replace) != 0 {
			t.Errorf("a watch batch carries Replace %v", b.Replace)
		}
	}
	if !deleted {
		t.Error("the DELETED event did not delete")
	}
	if final["ns-9"] != strconv.Itoa(100+events) {
		t.Errorf("ns-9 ends at %q, want its last event's version %d", final["ns-9"], 100+events)
	}
}

func TestSyncerResumesFromCursor(t *testing.T) {
	m, st := newFakeMember(), &recordingStore{cursor: "500"}
	startSyncer(t, m, st)
	w := nextWatcher(t, m)
	if m.watches[0] != "500" || m.lists != 0 {
		t.Fatalf("watches %v after %d lists, want a watch from the cursor 500 and no list", m.watches, m.lists)
	}
	w.Action(watch.Bookmark, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "600"}})
	waitFor(t, "the bookmark moved the cursor", func() bool {
		b := st.snapshot()
		return len(b) == 1 && b[0].Cursors[store.ResourceNamespaces] == "600" && len(b[0].Namespaces) == 0
	})
}

func TestSyncerRelistsAfterExpired(t *testing.T) {
	m, st := newFakeMember(), &recordingStore{cursor: "500"}
	startSyncer(t, m, st)
	w := nextWatcher(t, m)
	gone := apierrors.NewResourceExpired("too old resource version: 500 (700)")
	w.Error(&gone.ErrStatus)

	nextWatcher(t, m)
	b := st.snapshot()
	if m.lists != 1 || len(b) != 1 || len(b[0].Replace) != 1 || b[0].Replace[0] != store.ResourceNamespaces ||
		b[0].Cursors[store.ResourceNamespaces] != "100" {
		t.Fatalf("after 410: %d lists, batches %+v; want one relist committed with Replace at 100", m.lists, b)
	}
	if m.watches[1] != "100" {
		t.Errorf("re-watch from %q, want 100", m.watches[1])
	}
}

// TestSyncerRelistsWhenTheMemberIsBehind: a member restored from a backup
// answers the persisted cursor with "too large resourceVersion"; the syncer
// relists and reconciles instead of retrying forever.
func TestSyncerRelistsWhenTheMemberIsBehind(t *testing.T) {
	m, st := newFakeMember(), &recordingStore{cursor: "5000"}
	tooLarge := &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: 504, Reason: metav1.StatusReasonTimeout,
		Message: "Too large resource version: 5000, current: 100",
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}},
	}}
	m.client.PrependWatchReactor("namespaces", func(a clienttesting.Action) (bool, watch.Interface, error) {
		if a.(clienttesting.WatchActionImpl).ListOptions.ResourceVersion == "5000" {
			return true, nil, tooLarge
		}
		return false, nil, nil
	})
	startSyncer(t, m, st)
	nextWatcher(t, m)
	b := st.snapshot()
	if m.lists != 1 || len(b) != 1 || len(b[0].Replace) != 1 || b[0].Cursors[store.ResourceNamespaces] != "100" {
		t.Fatalf("after too large resourceVersion: %d lists, batches %+v; want one relist committed with Replace at 100", m.lists, b)
	}
}

// TestSyncerBacksOffShortWatches: a member that ends every watch at once is
// re-watched after a backoff, not in a tight loop.
func TestSyncerBacksOffShortWatches(t *testing.T) {
	m, st := newFakeMember(), &recordingStore{cursor: "500"}
	RegisterMetrics()
	before := errorCount(t, "watch_closed_early")
	startSyncerWith(t, m, st, wait.Backoff{Duration: 200 * time.Millisecond, Factor: 1, Steps: 1 << 30})
	start := time.Now()
	for range 3 {
		nextWatcher(t, m).Stop() // the server closes the watch without an event
	}
	nextWatcher(t, m)
	if took := time.Since(start); took < 600*time.Millisecond {
		t.Errorf("4 watches in %s after 3 closed at once; want a 200ms backoff after each", took)
	}
	if got := errorCount(t, "watch_closed_early") - before; got != 3 {
		t.Errorf("watch_closed_early counted %v times, want 3", got)
	}
}

// TestSyncerEarlyClosesMeanUnreachable: a proxy in front of a stopped API
// server accepts each watch and closes it (client-go answers a watch that
// ends at once, no error). Two such closes in a row are a server ending its
// watches; the third makes the member unreachable, and the first event of
// a watch that works again makes it reachable.
func TestSyncerEarlyClosesMeanUnreachable(t *testing.T) {
	m, st := newFakeMember(), &recordingStore{cursor: "500"}
	s := runSyncer(t, m, st, nil)
	unreachable := func() bool { return s.status().unreachable }
	for i := range earlyClosesUnreachable {
		w := nextWatcher(t, m)
		if unreachable() {
			t.Fatalf("unreachable after %d early closes, want only after %d", i, earlyClosesUnreachable)
		}
		w.Stop()
	}
	waitFor(t, "the member unreachable after the third early close", func() bool { return unreachable() })
	w := nextWatcher(t, m)
	if !unreachable() {
		t.Fatal("reachable again by a watch that has delivered nothing yet")
	}
	w.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "c", ResourceVersion: "501"}})
	waitFor(t, "the member reachable after an event", func() bool { return !unreachable() })
}

// rejectingStore rejects, like PostgreSQL would a value it cannot store,
// every batch that carries one of the poison namespaces.
type rejectingStore struct {
	recordingStore
	poison map[string]bool
}

func (s *rejectingStore) Apply(ctx context.Context, b store.Batch) error {
	for _, ns := range b.Namespaces {
		if s.poison[ns.Name] {
			return fmt.Errorf("apply: %w: invalid byte sequence", store.ErrRejected)
		}
	}
	return s.recordingStore.Apply(ctx, b)
}

// TestSyncerQuarantinesRejectedObjects: objects the registry rejects are
// isolated and left out, and the rest of the relist and of later watch
// batches commits with its cursor; the member is not frozen.
func TestSyncerQuarantinesRejectedObjects(t *testing.T) {
	m := newFakeMember()
	st := &rejectingStore{poison: map[string]bool{"b": true, "ns-7": true}}
	RegisterMetrics()
	before, err := testutil.GetCounterMetricValue(quarantined.WithLabelValues("c1", "namespaces"))
	if err != nil {
		t.Fatal(err)
	}
	runSyncer(t, m, st, nil)

	w := nextWatcher(t, m)
	for i := range 10 {
		ns := namespace(fmt.Sprintf("ns-%d", i), strconv.Itoa(200+i))
		w.Add(&ns)
	}
	waitFor(t, "the watch batch committed", func() bool {
		b := st.snapshot()
		return len(b) > 0 && b[len(b)-1].Cursors[store.ResourceNamespaces] == "209"
	})
	written := map[string]bool{}
	for _, b := range st.snapshot() {
		for _, ns := range b.Namespaces {
			written[ns.Name] = true
		}
	}
	for _, name := range []string{"a", "ns-0", "ns-6", "ns-8", "ns-9"} {
		if !written[name] {
			t.Errorf("namespace %s was not committed", name)
		}
	}
	if written["b"] || written["ns-7"] {
		t.Errorf("a rejected namespace was committed: %v", written)
	}
	if got, _ := testutil.GetCounterMetricValue(quarantined.WithLabelValues("c1", "namespaces")); got-before != 2 {
		t.Errorf("quarantined %v objects, want 2", got-before)
	}
}

// TestSyncerRelistsInChunks: a list larger than a batch commits in chunks
// of at most BatchSize objects marked Chunk, without cursor or Replace; the
// last batch carries Replace, the keys of the chunks before it, and the
// cursor.
func TestSyncerRelistsInChunks(t *testing.T) {
	const total = 2300 // 5 pages of 500
	m, st := newFakeMember(), &recordingStore{}
	m.client.PrependReactor("list", "namespaces", func(a clienttesting.Action) (bool, runtime.Object, error) {
		opts := a.(clienttesting.ListActionImpl).ListOptions
		from := 0
		if opts.Continue != "" {
			from, _ = strconv.Atoi(opts.Continue)
		}
		list := &corev1.NamespaceList{ListMeta: metav1.ListMeta{ResourceVersion: "7000"}}
		for i := from; i < min(from+int(opts.Limit), total); i++ {
			list.Items = append(list.Items, namespace(fmt.Sprintf("ns-%04d", i), "10"))
		}
		if next := from + int(opts.Limit); next < total {
			list.Continue = strconv.Itoa(next)
		}
		return true, list, nil
	})
	startSyncer(t, m, st)
	nextWatcher(t, m)
	batches := st.snapshot()
	seen := map[string]bool{}
	for i, b := range batches {
		last := i == len(batches)-1
		if len(b.Namespaces) > 1000 {
			t.Errorf("batch %d holds %d namespaces, more than the batch size", i, len(b.Namespaces))
		}
		if got := len(b.Replace) == 1 && b.Cursors[store.ResourceNamespaces] == "7000"; got != last || b.Chunk == last {
			t.Errorf("batch %d: Replace %v, cursor %q, Chunk %t; want Replace and the cursor on the last batch only, Chunk on the others", i, b.Replace, b.Cursors[store.ResourceNamespaces], b.Chunk)
		}
		if last && len(b.Present) != len(seen) {
			t.Errorf("last batch carries %d present keys, want the %d the chunks before it wrote", len(b.Present), len(seen))
		}
		for _, ns := range b.Namespaces {
			seen[ns.Name] = true
		}
	}
	if len(batches) < 3 || len(seen) != total {
		t.Errorf("%d batches wrote %d namespaces, want %d in chunks", len(batches), len(seen), total)
	}
}

func TestSyncerForbiddenRetries(t *testing.T) {
	m, st := newFakeMember(), &recordingStore{}
	calls := 0
	m.client.PrependReactor("list", "namespaces", func(clienttesting.Action) (bool, runtime.Object, error) {
		calls++
		if calls <= 3 {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "", fmt.Errorf("no RBAC"))
		}
		return false, nil, nil // fall through to the list above
	})
	RegisterMetrics()
	before := errorCount(t, "forbidden")
	startSyncer(t, m, st)
	nextWatcher(t, m)
	if got := errorCount(t, "forbidden") - before; got != 3 {
		t.Errorf("forbidden errors counted = %v, want 3", got)
	}
	if len(st.snapshot()) != 1 {
		t.Errorf("want the list committed once access was granted")
	}
}

func errorCount(t *testing.T, reason string) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(errorsTotal.WithLabelValues("c1", "namespaces", reason))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSyncerRelistOutlastingItsContinueToken: the member's continue token
// expires in the middle of a relist whose chunk commits made it slow; the
// list starts over and, that time, fetches every page before it commits,
// so it ends (one commit with every object, Replace and the cursor).
func TestSyncerRelistOutlastingItsContinueToken(t *testing.T) {
	m := &fakeMember{client: fake.NewClientset(), watcher: make(chan *watch.FakeWatcher, 10)}
	var expired bool
	m.client.PrependReactor("list", "namespaces", func(a clienttesting.Action) (bool, runtime.Object, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.lists++
		switch a.(clienttesting.ListActionImpl).ListOptions.Continue {
		case "":
			return true, &corev1.NamespaceList{ListMeta: metav1.ListMeta{ResourceVersion: "100", Continue: "page-2"},
				Items: []corev1.Namespace{namespace("a", "90"), namespace("b", "95")}}, nil
		case "page-2":
			if !expired {
				expired = true
				return true, nil, apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result.")
			}
			return true, &corev1.NamespaceList{ListMeta: metav1.ListMeta{ResourceVersion: "100"},
				Items: []corev1.Namespace{namespace("c", "97")}}, nil
		}
		return true, nil, fmt.Errorf("unexpected continue token")
	})
	m.client.PrependWatchReactor("namespaces", func(clienttesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFakeWithChanSize(10, false)
		m.watcher <- w
		return true, w, nil
	})
	st := &recordingStore{}
	runSyncer(t, m, st, func(p *syncerParams) { p.Sync.BatchSize = 1 })
	nextWatcher(t, m)

	batches := st.snapshot()
	// The first pass committed its first page as a chunk (batch size 1);
	// after the expiry, one commit carries the whole list.
	if len(batches) != 2 {
		t.Fatalf("%d commits, want 2 (the first pass's chunk, then the whole relist): %+v", len(batches), batches)
	}
	last := batches[1]
	var names []string
	for _, ns := range last.Namespaces {
		names = append(names, ns.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"a", "b", "c"}) || last.Cursors[store.ResourceNamespaces] != "100" || len(last.Replace) != 1 {
		t.Errorf("the relist after the expiry committed %v with cursor %q and Replace %v, want a, b, c at 100 replacing namespaces",
			names, last.Cursors[store.ResourceNamespaces], last.Replace)
	}
}

// A relist waits for the first sync of the member rows its view rows
// aggregate (nodes: pods), so those are written once with their aggregates;
// it goes on once they synced, or failed, or after firstSyncWait.
func TestSyncerRelistWaitsForTheRowsItAggregates(t *testing.T) {
	lists := func(m *fakeMember) int {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.lists
	}
	t.Run("until they synced", func(t *testing.T) {
		m, st := newFakeMember(), &recordingStore{}
		pods, own := newFirstSync(), newFirstSync()
		runSyncer(t, m, st, func(p *syncerParams) { p.Awaits, p.Settled = []*firstSync{pods}, own })
		time.Sleep(100 * time.Millisecond)
		if n := lists(m); n != 0 {
			t.Fatalf("listed %d times before the rows it aggregates synced, want 0", n)
		}
		pods.settle()
		nextWatcher(t, m) // listed, committed, watching
		if n := len(st.snapshot()); n != 1 {
			t.Errorf("%d batches committed, want the relist's 1", n)
		}
		select {
		case <-own.done:
		default:
			t.Error("the syncer synced and did not settle its own first sync")
		}
	})
	t.Run("at most firstSyncWait", func(t *testing.T) {
		m, st := newFakeMember(), &recordingStore{}
		fc := testingclock.NewFakeClock(time.Now())
		runSyncer(t, m, st, func(p *syncerParams) { p.Awaits, p.Clock = []*firstSync{newFirstSync()}, fc })
		waitFor(t, "the relist waiting", fc.HasWaiters)
		fc.Step(firstSyncWait - time.Second)
		time.Sleep(50 * time.Millisecond)
		if n := lists(m); n != 0 {
			t.Fatalf("listed %d times before firstSyncWait, want 0", n)
		}
		fc.Step(time.Second)
		waitFor(t, "the list after firstSyncWait", func() bool { return lists(m) == 1 })
	})
	t.Run("a failure settles", func(t *testing.T) {
		m, st := newFakeMember(), &recordingStore{}
		m.client.PrependReactor("list", "namespaces", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "", fmt.Errorf("no RBAC"))
		})
		own := newFirstSync()
		runSyncer(t, m, st, func(p *syncerParams) { p.Settled = own })
		select {
		case <-own.done:
		case <-time.After(10 * time.Second):
			t.Fatal("a syncer whose list keeps failing never settled its first sync: the resources waiting for it would wait firstSyncWait")
		}
	})
}

// TestSyncerRelistTakesASlot: a relist waits while the replica's relist
// slots are all taken, and lists once one is released.
func TestSyncerRelistTakesASlot(t *testing.T) {
	m, st := newFakeMember(), &recordingStore{}
	slots := newRelistSlots(1, clock.RealClock{})
	release, ok := slots.acquire(t.Context(), false) // another member's relist
	if !ok {
		t.Fatal("no slot")
	}
	runSyncer(t, m, st, func(p *syncerParams) { p.Relists = slots })
	time.Sleep(100 * time.Millisecond)
	m.mu.Lock()
	lists := m.lists
	m.mu.Unlock()
	if lists != 0 {
		t.Fatalf("listed %d times while every relist slot was taken, want 0", lists)
	}
	release()
	nextWatcher(t, m) // listed, committed, watching
	if n := len(st.snapshot()); n != 1 {
		t.Errorf("%d batches committed, want the relist's 1", n)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, ok := slots.acquire(ctx, false); !ok {
		t.Error("the relist kept its slot after it ended")
	}
}
