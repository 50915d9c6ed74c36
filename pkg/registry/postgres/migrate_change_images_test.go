package postgres_test

import (
	"reflect"
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestMigrateChangeImages: the change log's entries (ADDED, MODIFIED,
// DELETED, of every kind; rows modified several times, one of them then
// deleted) read the same after migrations 022 (deltas), 021 (each state
// stored once) and 019 (images in one value) are reverted and applied
// again, which converts them both ways, and the feed goes on after it.
func TestMigrateChangeImages(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	start := registryRV(t, s, ctx)
	mustApply(t, s, ctx, store.Batch{ClusterID: "a",
		Nodes:      []store.Node{node("n1", 4000, 8<<30), node("n2", 2000, 4<<30)},
		Namespaces: []store.Namespace{namespace("x")},
		Pods:       []store.Pod{pod("x", "p1", "n1", 500, 1<<30)}})
	mustApply(t, s, ctx, store.Batch{ClusterID: "a", Nodes: []store.Node{node("n1", 8000, 8<<30), node("n2", 3000, 4<<30)}})
	mustApply(t, s, ctx, store.Batch{ClusterID: "a", Nodes: []store.Node{node("n1", 8000, 16<<30)}})
	mustApply(t, s, ctx, store.Batch{ClusterID: "a", Nodes: []store.Node{node("n2", 3000, 8<<30)}})
	mustApply(t, s, ctx, store.Batch{ClusterID: "a", Deleted: store.Keys{store.ResourceNodes: {{Name: "n2"}}}})
	read := func(what string) []store.Change {
		t.Helper()
		changes, _, err := s.Changes(ctx, store.ChangeFilter{}, start, 1000)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return changes
	}
	before := read("before")
	types := map[store.ChangeType]int{}
	for _, c := range before {
		types[c.Type]++
	}
	if types[store.ChangeAdded] == 0 || types[store.ChangeModified] == 0 || types[store.ChangeDeleted] == 0 {
		t.Fatalf("changes %v: want ADDED, MODIFIED and DELETED among them", types)
	}

	if err := s.MigrateDownTo(ctx, 18); err != nil {
		t.Fatalf("MigrateDownTo(18): %v", err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if after := read("after migrations 022, 021 and 019 were reverted and applied"); !reflect.DeepEqual(after, before) {
		t.Errorf("changes after migrations 022, 021 and 019 were reverted and applied:\n%+v\nwant\n%+v", after, before)
	}
	rv := registryRV(t, s, ctx)
	mustApply(t, s, ctx, store.Batch{ClusterID: "a", Nodes: []store.Node{node("n1", 16000, 8<<30)}})
	changes, _, err := s.Changes(ctx, store.ChangeFilter{Kind: store.KindNodeCapacity}, rv, 10)
	if err != nil || len(changes) != 1 || changes[0].Type != store.ChangeModified || changes[0].Prev == nil {
		t.Fatalf("a node change after the migration: %+v, %v; want one MODIFIED with its previous state", changes, err)
	}
}
