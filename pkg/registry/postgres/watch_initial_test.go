package postgres_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/feed"
	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestWatchInitialPagesUnderChurn: a watch's initial state is read in
// keyset pages, each in a short transaction of its own, while writers
// change, create and delete nodes in ranges already sent and not yet read.
// While the client stalls no transaction stays open; the state the watch
// delivered up to its initial-events-end bookmark is exactly the registry's
// at the bookmark's version (replayed from the change log); and the watch
// ends equal to a fresh list. With and without a label selector, which
// churn makes nodes enter and leave.
func TestWatchInitialPagesUnderChurn(t *testing.T) {
	for _, tc := range []struct {
		name     string
		selector string
	}{
		{name: "every node"},
		{name: "label selector", selector: "parity=even"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sel, err := labels.Parse(tc.selector)
			if err != nil {
				t.Fatal(err)
			}
			testInitialPagesUnderChurn(t, sel)
		})
	}
}

// churnClusters are cluster ids whose keys interleave differently as
// tuples and as joined strings ("c" < "c-1" < "c1").
var churnClusters = []string{"c", "c-1", "c1"}

const churnNodesPerCluster = 400

func testInitialPagesUnderChurn(t *testing.T, sel labels.Selector) {
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	ch := newChurn(t, s)
	start := registryRV(t, s, ctx)

	fctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop) // before the store closes
	f := feed.New(s, feed.Options{PollInterval: 20 * time.Millisecond})
	go f.Run(fctx)
	if err := f.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	rest := nodecapacity.NewREST(s.NodeCapacities(), registry.WatchConfig{Follower: f, BookmarkInterval: 50 * time.Millisecond}, nil)
	w, err := rest.Watch(ctx, &metainternalversion.ListOptions{
		LabelSelector: sel, SendInitialEvents: new(true), AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	// The initial state, read slowly: a churn round every 50 events, and
	// once a stall as long as a slow client's.
	state := map[string]string{} // name → resourceVersion
	firstSeen := map[string]string{}
	var endRV int64
	for events := 0; endRV == 0; events++ {
		ev := nextEvent(t, w)
		if ev.Type == watch.Bookmark {
			if ev.annotations[metav1.InitialEventsAnnotationKey] == "true" {
				endRV = ev.rv
			}
			continue
		}
		apply(state, ev)
		if _, ok := firstSeen[ev.name]; !ok {
			firstSeen[ev.name] = strconv.FormatInt(ev.rv, 10)
		}
		if events%50 == 49 {
			ch.round(t)
		}
		if events == 300 {
			noLongTransactions(t, b.DSN)
		}
	}
	want := replayNodes(t, s, endRV, sel)
	if !maps.Equal(state, want) {
		t.Errorf("state at the initial-events-end bookmark (%d) differs from the registry's then:\n%s", endRV, mapDiff(state, want))
	}
	// The pages really were read at different versions: some node that
	// existed before the watch was first sent (from its page: without a
	// selector, a seeded node's first event is its page's) at a version
	// written since.
	later := 0
	for name, rv := range firstSeen {
		if v, _ := strconv.ParseInt(rv, 10, 64); ch.seeded[name] && v > start {
			later++
		}
	}
	if later == 0 && sel.Empty() {
		t.Errorf("every seeded node was first sent at a version before the watch began: the initial pages were one snapshot")
	}

	// Afterwards the watch follows the registry: equal to a fresh list.
	ch.round(t)
	final := listAll(t, s, sel)
	for latest := int64(0); latest < final.ResourceVersion; {
		ev := nextEvent(t, w)
		if ev.Type == watch.Bookmark {
			latest = ev.rv
			continue
		}
		apply(state, ev)
	}
	if got := pageState(final); !maps.Equal(state, got) {
		t.Errorf("watch state differs from a list at %d:\n%s", final.ResourceVersion, mapDiff(state, got))
	}
}

// initialChurn writes nodes across the key space of churnClusters.
type initialChurn struct {
	s      *postgres.Store
	rnd    *rand.Rand
	names  map[string][]string // live node names by cluster
	seeded map[string]bool     // API names of the nodes written before the watch
	next   int
}

func newChurn(t *testing.T, s *postgres.Store) *initialChurn {
	ch := &initialChurn{s: s, rnd: rand.New(rand.NewPCG(1, 2)), names: map[string][]string{}, seeded: map[string]bool{}}
	for _, c := range churnClusters {
		var nodes []store.Node
		for i := range churnNodesPerCluster {
			n := churnNode(fmt.Sprintf("n%03d", i), i)
			nodes = append(nodes, n)
			ch.names[c] = append(ch.names[c], n.Name)
			ch.seeded[c+"."+n.Name] = true
		}
		mustApply(t, s, t.Context(), store.Batch{ClusterID: c, Nodes: nodes})
	}
	return ch
}

func churnNode(name string, gen int) store.Node {
	n := node(name, 4000, 16<<30)
	n.Labels["parity"] = map[bool]string{true: "even", false: "odd"}[gen%2 == 0]
	n.Labels["gen"] = strconv.Itoa(gen)
	return n
}

// round, in every cluster: relabels three nodes (which flips their parity),
// creates or relabels one more and deletes another, all distinct.
func (ch *initialChurn) round(t *testing.T) {
	t.Helper()
	for _, c := range churnClusters {
		names := ch.names[c]
		picked := map[string]bool{}
		pick := func() string {
			for {
				if n := names[ch.rnd.IntN(len(names))]; !picked[n] {
					picked[n] = true
					return n
				}
			}
		}
		b := store.Batch{ClusterID: c}
		for range 3 {
			ch.next++
			b.Nodes = append(b.Nodes, churnNode(pick(), ch.next))
		}
		created := fmt.Sprintf("m%03d", ch.rnd.IntN(1000))
		if !picked[created] {
			picked[created] = true
			ch.next++
			b.Nodes = append(b.Nodes, churnNode(created, ch.next))
		}
		gone := pick()
		b.Deleted = store.Keys{store.ResourceNodes: {{Name: gone}}}
		mustApply(t, ch.s, t.Context(), b)
		live := []string{created}
		for _, n := range names {
			if n != gone && n != created {
				live = append(live, n)
			}
		}
		ch.names[c] = live
	}
}

// noLongTransactions: while the watch's client stalls, no session of the
// registry's database stays in a transaction (or in a query) for long.
func noLongTransactions(t *testing.T, dsn string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	time.Sleep(1500 * time.Millisecond) // time passing on purpose: the client stalls, as a slow reader does
	var open int
	var states []string
	err = conn.QueryRow(t.Context(), `SELECT count(*), coalesce(array_agg(state || ' ' || coalesce(wait_event, '')), '{}')
		FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
		AND xact_start < now() - interval '1 second'`).Scan(&open, &states)
	if err != nil {
		t.Fatal(err)
	}
	if open > 0 {
		t.Errorf("%d sessions in a transaction for more than a second while the watch's client stalled: %v", open, states)
	}
}

// watchEvent is what the test reads of an event.
type watchEvent struct {
	Type        watch.EventType
	name        string
	rv          int64
	annotations map[string]string
}

func nextEvent(t *testing.T, w watch.Interface) watchEvent {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("the watch ended")
		}
		if ev.Type == watch.Error {
			t.Fatalf("error event: %v", ev.Object)
		}
		obj := ev.Object
		if co, ok := obj.(runtime.CacheableObject); ok {
			obj = co.GetObject()
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		rv, err := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
		if err != nil {
			t.Fatalf("%s event's resourceVersion: %v", ev.Type, err)
		}
		return watchEvent{Type: ev.Type, name: m.GetName(), rv: rv, annotations: m.GetAnnotations()}
	case <-time.After(30 * time.Second):
		t.Fatal("no event for 30 s")
	}
	return watchEvent{}
}

func apply(state map[string]string, ev watchEvent) {
	if ev.Type == watch.Deleted {
		delete(state, ev.name)
		return
	}
	state[ev.name] = strconv.FormatInt(ev.rv, 10)
}

// replayNodes is the registry's state at version at, from the change log:
// name → resourceVersion of the nodes sel matched then.
func replayNodes(t *testing.T, s *postgres.Store, at int64, sel labels.Selector) map[string]string {
	t.Helper()
	state := map[string]string{}
	for after := int64(0); after < at; {
		changes, readAt, err := s.Changes(t.Context(), store.ChangeFilter{}, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(changes) == 0 {
			if readAt < at {
				t.Fatalf("the change log ends at %d, before %d", readAt, at)
			}
			break
		}
		for _, c := range changes {
			after = c.ResourceVersion
			if c.ResourceVersion > at {
				break
			}
			if c.Kind != store.KindNodeCapacity {
				continue
			}
			n := asNode(c.Object)
			name := n.ClusterID + "." + n.Node.Name
			if c.Type == store.ChangeDeleted || !sel.Matches(labels.Set(n.Node.Labels)) {
				delete(state, name)
				continue
			}
			state[name] = strconv.FormatInt(n.ResourceVersion, 10)
		}
	}
	return state
}

func listAll(t *testing.T, s *postgres.Store, sel labels.Selector) *store.Page[store.NodeCapacity] {
	t.Helper()
	reqs, _ := sel.Requirements()
	return listNodes(t, s, t.Context(), store.ListOptions{Labels: reqs})
}

func pageState(p *store.Page[store.NodeCapacity]) map[string]string {
	state := map[string]string{}
	for _, n := range p.Items {
		state[n.ClusterID+"."+n.Node.Name] = strconv.FormatInt(n.ResourceVersion, 10)
	}
	return state
}

func mapDiff(got, want map[string]string) string {
	var out string
	for k, v := range want {
		if got[k] != v {
			out += fmt.Sprintf("  %s: got %q, want %q\n", k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			out += fmt.Sprintf("  %s: got %q, want none\n", k, v)
		}
	}
	return out
}
