package changelog_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/registrytest"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestChangeFeed checks the entries each kind of write produces: their type,
// their previous state, and that each is what a get returns right after the
// commit.
func TestChangeFeed(t *testing.T) {
	t.Parallel()
	s, b := registrytest.Setup(t, postgres.Options{})
	ctx := b.Ctx
	const c = "prod-1"
	initial := store.Batch{
		ClusterID:  c,
		Nodes:      []store.Node{pgtesting.Node("n1", 4000, 8<<30), pgtesting.Node("n2", 2000, 4<<30), pgtesting.Node("n3", 1000, 1<<30)},
		Namespaces: []store.Namespace{pgtesting.Namespace("a"), pgtesting.Namespace("b")},
		Pods:       []store.Pod{pgtesting.Pod("a", "p1", "n1", 500, 1<<30)},
		Quotas:     []store.Quota{{Namespace: "a", Name: "q", Hard: map[string]string{"pods": "10"}}},
	}
	sample := store.NodeMetricsSample{ClusterID: c, Node: "n1", CPUNanoCores: 12345, MemoryBytes: 1 << 28,
		ObservedAt: time.Date(2025, 6, 1, 12, 0, 0, 123456000, time.UTC), Window: 15500 * time.Millisecond}
	steps := []struct {
		name  string
		write func() error
		want  []string // "<type> <key>", in any order
	}{
		{name: "add (insert and aggregates in one commit)", write: func() error { return s.Apply(ctx, initial) },
			want: []string{"ADDED node/prod-1/n1", "ADDED node/prod-1/n2", "ADDED node/prod-1/n3", "ADDED ns/prod-1/a", "ADDED ns/prod-1/b", "ADDED cc/prod-1/prod-1"}},
		{name: "no-op apply", write: func() error { return s.Apply(ctx, initial) }},
		{name: "cursor only", write: func() error {
			return s.Apply(ctx, store.Batch{ClusterID: c, Cursors: map[store.Resource]string{store.ResourcePods: "7"}})
		}},
		{name: "pod added (aggregates only)", write: func() error {
			return s.Apply(ctx, store.Batch{ClusterID: c, Pods: []store.Pod{pgtesting.Pod("b", "p2", "n2", 250, 1<<20)}})
		}, want: []string{"MODIFIED node/prod-1/n2", "MODIFIED ns/prod-1/b", "MODIFIED cc/prod-1/prod-1"}},
		{name: "quota used (aggregates only; the member's committed quota moves)", write: func() error {
			return s.Apply(ctx, store.Batch{ClusterID: c, Quotas: []store.Quota{{Namespace: "a", Name: "q", Hard: map[string]string{"pods": "10"}, Used: map[string]string{"pods": "1"}}}})
		}, want: []string{"MODIFIED ns/prod-1/a", "MODIFIED cc/prod-1/prod-1"}},
		{name: "quota of objects (aggregates only; nothing committed on pods)", write: func() error {
			return s.Apply(ctx, store.Batch{ClusterID: c, Quotas: []store.Quota{{Namespace: "a", Name: "objects", Hard: map[string]string{"count/configmaps": "10"}}}})
		}, want: []string{"MODIFIED ns/prod-1/a"}},
		{name: "metrics sample", write: func() error {
			_, err := s.RecordNodeMetrics(ctx, store.Fence{ClusterID: c}, []store.NodeMetricsSample{sample}, registrytest.ReportEvery)
			return err
		},
			want: []string{"MODIFIED node/prod-1/n1", "MODIFIED cc/prod-1/prod-1"}},
		{name: "duplicate metrics sample", write: func() error {
			_, err := s.RecordNodeMetrics(ctx, store.Fence{ClusterID: c}, []store.NodeMetricsSample{sample}, registrytest.ReportEvery)
			return err
		}},
		{name: "node cordoned and tainted, pod moved onto it", write: func() error {
			n := registrytest.WithLabel(pgtesting.Node("n2", 2000, 4<<30), "zone", "b")
			n.Unschedulable = true
			n.Taints = []store.Taint{{Key: "k", Effect: "NoSchedule"}}
			return s.Apply(ctx, store.Batch{ClusterID: c, Nodes: []store.Node{n}, Pods: []store.Pod{pgtesting.Pod("a", "p1", "n2", 500, 1<<30)}})
		}, want: []string{"MODIFIED node/prod-1/n1", "MODIFIED node/prod-1/n2", "MODIFIED cc/prod-1/prod-1"}},
		{name: "node deleted", write: func() error {
			return s.Apply(ctx, store.Batch{ClusterID: c, Deleted: store.Keys{store.ResourceNodes: {{Name: "n1"}}}})
		}, want: []string{"DELETED node/prod-1/n1", "MODIFIED cc/prod-1/prod-1"}},
		{name: "namespace deleted with its pods", write: func() error {
			return s.Apply(ctx, store.Batch{ClusterID: c, Deleted: store.Keys{store.ResourceNamespaces: {{Name: "b"}}, store.ResourcePods: {{Namespace: "b", Name: "p2"}}}})
		}, want: []string{"DELETED ns/prod-1/b", "MODIFIED node/prod-1/n2", "MODIFIED cc/prod-1/prod-1"}},
		{name: "deleted and re-added in one batch", write: func() error {
			return s.Apply(ctx, store.Batch{ClusterID: c, Deleted: store.Keys{store.ResourceNodes: {{Name: "n3"}}}, Nodes: []store.Node{registrytest.WithLabel(pgtesting.Node("n3", 1000, 1<<30), "x", "y")}})
		}, want: []string{"DELETED node/prod-1/n3", "ADDED node/prod-1/n3", "MODIFIED cc/prod-1/prod-1"}},
		{name: "relist (Replace) drops absent rows", write: func() error {
			return s.Apply(ctx, store.Batch{ClusterID: c, Replace: []store.Resource{store.ResourceNodes}, Nodes: []store.Node{registrytest.WithLabel(pgtesting.Node("n3", 1000, 1<<30), "x", "y")}})
		}, want: []string{"DELETED node/prod-1/n2", "MODIFIED cc/prod-1/prod-1"}},
		{name: "member removed", write: func() error {
			_, err := s.ReconcileMembers(ctx, store.MembersView{Unconfigured: []string{c}})
			return err
		},
			want: []string{"DELETED node/prod-1/n3", "DELETED ns/prod-1/a", "DELETED cc/prod-1/prod-1"}},
	}

	state := map[string]any{}
	var after int64
	var live []store.Change // every change as read right after its commit
	for _, step := range steps {
		before := viewState(t, s, ctx)
		if err := step.write(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		changes, readAt, err := s.Changes(ctx, store.ChangeFilter{}, after, 100)
		if err != nil {
			t.Fatalf("%s: Changes(%d): %v", step.name, after, err)
		}
		if rv := registrytest.RegistryRV(t, s, ctx); readAt != rv {
			t.Errorf("%s: Changes read at %d, registry RV %d", step.name, readAt, rv)
		}
		var got []string
		for i, ch := range changes {
			got = append(got, string(ch.Type)+" "+registrytest.ChangeKey(ch))
			if ch.ResourceVersion <= after || ch.ResourceVersion > readAt || (i > 0 && ch.ResourceVersion <= changes[i-1].ResourceVersion) {
				t.Errorf("%s: change RVs %v out of order or outside (%d, %d]", step.name, rvs(changes), after, readAt)
			}
			key := strings.SplitN(registrytest.ChangeKey(ch), "/", 3)
			current := getView(t, s, ctx, ch.Kind, key[1], key[2])
			switch {
			case ch.Type == store.ChangeDeleted && i == len(changes)-1 || ch.Type == store.ChangeDeleted && registrytest.ChangeKey(changes[i+1]) != registrytest.ChangeKey(ch):
				if current != nil {
					t.Errorf("%s: %s deleted but get returns %+v", step.name, registrytest.ChangeKey(ch), current)
				}
			case ch.Type != store.ChangeDeleted && !reflect.DeepEqual(changeObject(ch), current):
				t.Errorf("%s: %s %s decodes to\n%+v\nget returns\n%+v", step.name, ch.Type, registrytest.ChangeKey(ch), changeObject(ch), current)
			}
			if ch.Type != store.ChangeAdded && !reflect.DeepEqual(changePrev(ch), before[registrytest.ChangeKey(ch)]) {
				t.Errorf("%s: %s %s prev\n%+v\nwant the state before the commit\n%+v", step.name, ch.Type, registrytest.ChangeKey(ch), changePrev(ch), before[registrytest.ChangeKey(ch)])
			}
		}
		if !registrytest.SameSet(got, step.want) {
			t.Errorf("%s: changes %q, want %q", step.name, got, step.want)
		}
		replay(t, state, changes)
		live = append(live, changes...)
		after = readAt
	}
	if len(state) != 0 {
		t.Errorf("replayed state after the removal: %v", state)
	}

	// Read again once every row was changed later or deleted, the history
	// is what was read right after each commit: an entry stores the state
	// before it, and the state after it comes from the live row then and
	// from the next entry now.
	changes, _, err := s.Changes(ctx, store.ChangeFilter{}, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(withoutSizes(changes), withoutSizes(live)) {
		t.Errorf("the history read at the end:\n%+v\nwant what was read after each commit:\n%+v", withoutSizes(changes), withoutSizes(live))
	}
	// The usage sample round-trips through the log exactly (sub-second time, fractional window).
	for _, ch := range changes {
		if ch.Type == store.ChangeDeleted && ch.Kind == store.KindNodeCapacity && registrytest.AsNode(ch.Object).Node.Name == "n1" {
			u := registrytest.AsNode(ch.Object).Usage
			if u == nil || u.CPUNanoCores != 12345 || !u.Timestamp.Equal(sample.ObservedAt) || u.Window != sample.Window {
				t.Errorf("n1 tombstone usage %+v, want the sample %+v", u, sample)
			}
		}
	}
}

func TestChangesLimit(t *testing.T) {
	t.Parallel()
	s, b := registrytest.Setup(t, postgres.Options{})
	ctx := b.Ctx
	nodes := []store.Node{pgtesting.Node("n1", 1000, 1), pgtesting.Node("n2", 1000, 1), pgtesting.Node("n3", 1000, 1)}
	registrytest.MustApply(t, s, ctx, store.Batch{ClusterID: "c", Nodes: nodes, Namespaces: []store.Namespace{pgtesting.Namespace("a"), pgtesting.Namespace("b")}})
	all, readAt, err := s.Changes(ctx, store.ChangeFilter{}, 0, 100)
	if err != nil || len(all) != 6 {
		t.Fatalf("Changes = %d changes, %v; want 6 (3 nodes, 2 namespaces, their ClusterCapacity)", len(all), err)
	}
	for _, limit := range []int{1, 2, 4} {
		var got []int64
		for after := int64(0); ; {
			page, at, err := s.Changes(ctx, store.ChangeFilter{}, after, limit)
			if err != nil {
				t.Fatal(err)
			}
			if at != readAt || len(page) > limit {
				t.Fatalf("limit %d: %d changes read at %d", limit, len(page), at)
			}
			got = append(got, rvs(page)...)
			if len(page) < limit {
				break
			}
			after = page[len(page)-1].ResourceVersion
		}
		if !slices.Equal(got, rvs(all)) {
			t.Errorf("limit %d: paged RVs %v, want %v", limit, got, rvs(all))
		}
	}
	if page, at, err := s.Changes(ctx, store.ChangeFilter{}, 0, 0); err != nil || len(page) != 0 || at != readAt {
		t.Errorf("Changes(limit 0) = %d changes at %d, %v; want none at %d", len(page), at, err, readAt)
	}
	if page, at, err := s.Changes(ctx, store.ChangeFilter{}, 1<<62, 10); err != nil || len(page) != 0 || at != readAt {
		t.Errorf("Changes(after the present) = %d changes at %d, %v; want none at %d", len(page), at, err, readAt)
	}
}

func rvs(changes []store.Change) []int64 {
	out := make([]int64, len(changes))
	for i, c := range changes {
		out[i] = c.ResourceVersion
	}
	return out
}

// TestChangesFiltered: a filtered read returns only the kind's (and the
// member's) changes, counts only them against the limit, and a short
// result reaches the snapshot's version, as an unfiltered one does.
func TestChangesFiltered(t *testing.T) {
	t.Parallel()
	s, b := registrytest.Setup(t, postgres.Options{})
	ctx := b.Ctx
	from := registrytest.RegistryRV(t, s, ctx)
	for _, c := range []string{"a", "b"} {
		registrytest.MustApply(t, s, ctx, store.Batch{ClusterID: c,
			Nodes:      []store.Node{pgtesting.Node("n1", 1000, 1<<30), pgtesting.Node("n2", 1000, 1<<30), pgtesting.Node("n3", 1000, 1<<30)},
			Namespaces: []store.Namespace{pgtesting.Namespace("x")}})
	}
	present := registrytest.RegistryRV(t, s, ctx)
	keys := func(changes []store.Change) []string {
		var out []string
		for _, c := range changes {
			out = append(out, string(c.Kind)+"/"+c.ClusterID)
		}
		return out
	}
	for _, tc := range []struct {
		filter store.ChangeFilter
		limit  int
		want   []string
		reach  bool // the result reaches the present
	}{
		{store.ChangeFilter{Kind: store.KindNodeCapacity, ClusterID: "b"}, 10, []string{"NodeCapacity/b", "NodeCapacity/b", "NodeCapacity/b"}, true},
		{store.ChangeFilter{Kind: store.KindNodeCapacity}, 4, []string{"NodeCapacity/a", "NodeCapacity/a", "NodeCapacity/a", "NodeCapacity/b"}, false},
		{store.ChangeFilter{Kind: store.KindClusterNamespace}, 10, []string{"ClusterNamespace/a", "ClusterNamespace/b"}, true},
		{store.ChangeFilter{Kind: store.KindClusterCapacity, ClusterID: "none"}, 10, nil, true},
	} {
		changes, readAt, err := s.Changes(ctx, tc.filter, from, tc.limit)
		if err != nil {
			t.Fatalf("%+v: %v", tc.filter, err)
		}
		got := keys(changes)
		slices.Sort(got)
		want := slices.Clone(tc.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%+v limit %d: %v, want %v", tc.filter, tc.limit, keys(changes), tc.want)
		}
		if readAt != present {
			t.Errorf("%+v: read at %d, want the present %d", tc.filter, readAt, present)
		}
		if short := len(changes) < tc.limit; short != tc.reach {
			t.Errorf("%+v limit %d: %d changes, short of the limit %v, want %v", tc.filter, tc.limit, len(changes), short, tc.reach)
		}
	}
}

// withoutSizes returns changes with their Size (an estimate of the bytes
// read, which depends on where the state was read from) cleared.
func withoutSizes(changes []store.Change) []store.Change {
	out := slices.Clone(changes)
	for i := range out {
		out[i].Size = 0
	}
	return out
}

// TestChangesInconsistentLog: an entry whose state after it is nowhere (its
// successor lost, the live row moved on) fails the read with an error that
// says so, instead of a change without an object.
func TestChangesInconsistentLog(t *testing.T) {
	t.Parallel()
	s, b := registrytest.Setup(t, postgres.Options{})
	ctx := b.Ctx
	registrytest.MustApply(t, s, ctx, store.Batch{ClusterID: "a", Nodes: []store.Node{pgtesting.Node("n1", 4000, 8<<30)}})
	registrytest.MustApply(t, s, ctx, store.Batch{ClusterID: "a", Nodes: []store.Node{pgtesting.Node("n1", 8000, 8<<30)}})
	if n, err := registrytest.QueryExec(t, b, `DELETE FROM registry_change WHERE kind = 'NodeCapacity' AND type = 'MODIFIED'`); err != nil || n != 1 {
		t.Fatalf("delete the MODIFIED entry: %d, %v", n, err)
	}
	_, _, err := s.Changes(ctx, store.ChangeFilter{Kind: store.KindNodeCapacity}, 0, 10)
	if err == nil || !strings.Contains(err.Error(), "has no state after it") {
		t.Fatalf("Changes over an entry whose successor is gone: %v, want an error naming the inconsistency", err)
	}
}
