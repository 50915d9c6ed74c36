package changelog_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/registrytest"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

func TestCompact(t *testing.T) {
	t.Parallel()
	s, b := registrytest.Setup(t, postgres.Options{})
	ctx := b.Ctx

	// Enough entries for several compaction batches.
	var nodes []store.Node
	for i := range 2500 {
		nodes = append(nodes, pgtesting.Node(fmt.Sprintf("n%04d", i), 1000, 1<<30))
	}
	registrytest.MustApply(t, s, ctx, store.Batch{ClusterID: "old", Nodes: nodes})
	old := registrytest.RegistryRV(t, s, ctx)
	cut := time.Now() // after every commit so far
	// The writes below start (and take their commit time) once the
	// database's clock has passed the cut.
	registrytest.Poll(t, "the database clock past the cut", func() bool {
		n, err := registrytest.QueryExec(t, b, `SELECT 1 WHERE clock_timestamp() > $1`, cut)
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	registrytest.MustApply(t, s, ctx, store.Batch{ClusterID: "new", Nodes: []store.Node{pgtesting.Node("n1", 1000, 1<<30)}})
	registrytest.MustApply(t, s, ctx, store.Batch{ClusterID: "old", Deleted: store.Keys{store.ResourceNodes: {{Name: "n0000"}}}})
	now := registrytest.RegistryRV(t, s, ctx)

	if h, err := s.Compact(ctx, cut.Add(-time.Hour)); err != nil || h != 0 {
		t.Fatalf("Compact(before everything) = %d, %v; want horizon 0", h, err)
	}
	horizon, err := s.Compact(ctx, cut)
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	if horizon != old {
		t.Fatalf("Compact horizon %d, want %d (the last entry committed before the cut)", horizon, old)
	}
	if _, _, err := s.Changes(ctx, store.ChangeFilter{}, horizon-1, 10); !errors.Is(err, store.ErrCompacted) {
		t.Errorf("Changes below the horizon: %v, want ErrCompacted", err)
	}
	if _, _, err := s.Changes(ctx, store.ChangeFilter{}, 0, 10); !errors.Is(err, store.ErrCompacted) {
		t.Errorf("Changes(0) after compaction: %v, want ErrCompacted", err)
	}
	changes, readAt, err := s.Changes(ctx, store.ChangeFilter{}, horizon, 10)
	if err != nil {
		t.Fatalf("Changes at the horizon: %v", err)
	}
	var got []string
	for _, c := range changes {
		got = append(got, string(c.Type)+" "+registrytest.ChangeKey(c))
	}
	want := []string{"ADDED node/new/n1", "ADDED cc/new/new", "DELETED node/old/n0000", "MODIFIED cc/old/old"}
	if !slices.Equal(got, want) || readAt != now {
		t.Errorf("Changes at the horizon = %q read at %d, want %q at %d", got, readAt, want, now)
	}

	// Compacting everything leaves the present resumable.
	horizon, err = s.Compact(ctx, time.Now().Add(time.Hour))
	if err != nil || horizon != now {
		t.Fatalf("Compact(everything) = %d, %v; want %d", horizon, err, now)
	}
	if changes, readAt, err := s.Changes(ctx, store.ChangeFilter{}, now, 10); err != nil || len(changes) != 0 || readAt != now {
		t.Errorf("Changes at the present after full compaction = %v at %d, %v", changes, readAt, err)
	}
	registrytest.MustApply(t, s, ctx, store.Batch{ClusterID: "new", Deleted: store.Keys{store.ResourceNodes: {{Name: "n1"}}}})
	if changes, _, err := s.Changes(ctx, store.ChangeFilter{}, now, 10); err != nil || len(changes) != 2 || changes[0].Type != store.ChangeDeleted || changes[1].Kind != store.KindClusterCapacity {
		t.Errorf("Changes after a write following full compaction = %v, %v; want the node DELETED, then its ClusterCapacity", changes, err)
	}
}

// TestChangeFeedHistoryStartsAtMigration: versions taken before the change
// log existed cannot be resumed from.
func TestChangeFeedHistoryStartsAtMigration(t *testing.T) {
	t.Parallel()
	s, b := registrytest.Setup(t, postgres.Options{})
	ctx := b.Ctx
	registrytest.MustApply(t, s, ctx, store.Batch{ClusterID: "c", Nodes: []store.Node{pgtesting.Node("n1", 1000, 1)}})
	// Revert down to before 002_change_feed (the migrations after it too).
	if err := s.MigrateDownTo(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// A write of a server from before the change log (this code expects it).
	if _, err := registrytest.QueryExec(t, b, `
		WITH v AS (SELECT nextval('registry_resource_version') AS rv)
		INSERT INTO cluster_node (cluster_id, name, resource_version) SELECT 'c', 'n2', rv FROM v`); err != nil {
		t.Fatal(err)
	}
	if _, err := registrytest.QueryExec(t, b, `UPDATE registry_state SET resource_version = (SELECT max(resource_version) FROM cluster_node)`); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// 002 started the history at n2's version, the registry's then; 009
	// summed member c into its ClusterCapacity, the one change after it.
	at002 := registrytest.GetNode(t, s, ctx, "c", "n2").ResourceVersion
	rv := registrytest.RegistryRV(t, s, ctx)
	if _, _, err := s.Changes(ctx, store.ChangeFilter{}, at002-1, 10); !errors.Is(err, store.ErrCompacted) {
		t.Errorf("Changes before the migration's version: %v, want ErrCompacted", err)
	}
	changes, readAt, err := s.Changes(ctx, store.ChangeFilter{}, at002, 10)
	if err != nil || len(changes) != 1 || changes[0].Type != store.ChangeAdded || changes[0].Kind != store.KindClusterCapacity ||
		registrytest.AsCapacity(changes[0].Object).Nodes != 2 || readAt != rv {
		t.Errorf("Changes at the migration's version = %+v at %d (registry %d), %v; want member c's ClusterCapacity ADDED with 2 nodes", changes, readAt, rv, err)
	}
}
