package postgres_test

import (
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestWriteSlots: a relist's batch takes a free write slot, and waits while
// every one of the registry's write slots is held (by other replicas'
// relists, here by test sessions),
// a small batch of another member commits meanwhile, and the relist
// commits once a slot is free.
func TestWriteSlots(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.ctx
	relist := store.Batch{ClusterID: "relisting", Nodes: []store.Node{node("n0", 4000, 8<<30)}, Replace: []store.Resource{store.ResourceNodes}}
	// Seven of the eight slots held: a relist takes the last.
	_ = holdLock(t, b, `SELECT pg_advisory_xact_lock($1, s) FROM generate_series(0, 6) AS s`, postgres.WriteSlotClass)
	mustApply(t, s, ctx, relist)
	slots := holdLock(t, b, `SELECT pg_advisory_xact_lock($1, 7)`, postgres.WriteSlotClass)
	relisted := make(chan error, 1)
	go func() {
		relisted <- s.Apply(ctx, store.Batch{ClusterID: "relisting", Nodes: []store.Node{node("n1", 4000, 8<<30)},
			Replace: []store.Resource{store.ResourceNodes}})
	}()
	mustApply(t, s, ctx, store.Batch{ClusterID: "small", Nodes: []store.Node{node("n1", 4000, 8<<30)}})
	select {
	case err := <-relisted:
		t.Fatalf("a relist committed (%v) while every write slot was held", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := slots.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-relisted:
		if err != nil {
			t.Fatalf("relist once the slots were free: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the relist did not commit within 10s of the write slots being freed")
	}
	if n := getNode(t, s, ctx, "relisting", "n1"); n == nil {
		t.Error("the relist's node is not in the registry")
	}
}
