package postgres_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestMigrateToOtherResources: a registry at the schema before migration
// 015 keeps its rows through it, discovery's node and pod cursors are
// forgotten (so both relist and fill the new columns) and the others kept,
// and ClusterCapacity sums other resources from then on.
func TestMigrateToOtherResources(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	mustApply(t, s, ctx, store.Batch{ClusterID: "a",
		Nodes:      []store.Node{node("n1", 4000, 8<<30), node("n2", 2000, 4<<30)},
		Namespaces: []store.Namespace{namespace("x")},
		Pods:       []store.Pod{pod("x", "p1", "n1", 500, 1<<30)}})
	if err := s.MigrateDownTo(ctx, 14); err != nil {
		t.Fatalf("MigrateDownTo(14): %v", err)
	}
	conn, err := pgx.Connect(ctx, b.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, `INSERT INTO discovery_cursor (cluster_id, resource, resource_version, updated_at)
		VALUES ('a', 'nodes', '10', now()), ('a', 'pods', '11', now()), ('a', 'namespaces', '12', now()), ('a', 'resourcequotas', '13', now())`); err != nil {
		t.Fatal(err)
	}
	var nodes, pods int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM cluster_node), (SELECT count(*) FROM cluster_pod)`).Scan(&nodes, &pods); err != nil || nodes != 2 || pods != 1 {
		t.Fatalf("at schema 014: %d nodes, %d pods, %v; want 2 and 1", nodes, pods, err)
	}

	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if n := getNode(t, s, ctx, "a", "n1"); n.Requested.CPUMillis != 500 || n.Requested.Pods != 1 || n.Node.Allocatable.Other != nil {
		t.Errorf("n1 after migration 015: %+v; want its requests kept and no other resources yet", n)
	}
	rows, err := conn.Query(ctx, `SELECT resource FROM discovery_cursor WHERE cluster_id = 'a' ORDER BY resource`)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"namespaces", "resourcequotas"}; !reflect.DeepEqual(kept, want) {
		t.Errorf("cursors after migration 015: %v, want %v (nodes and pods relist)", kept, want)
	}
	checkCapacity(t, s, b, "a", "after migration 015")
	// JIT would compile the trigger's statement on every node write of a
	// large member, seconds each (migration 015's comment).
	var config []string
	if err := conn.QueryRow(ctx, `SELECT proconfig FROM pg_proc WHERE proname = 'cluster_capacity_add_nodes'`).Scan(&config); err != nil || !slices.Contains(config, "jit=off") {
		t.Errorf("cluster_capacity_add_nodes settings %v, %v; want jit=off", config, err)
	}

	p2 := pod("x", "p2", "g1", 100, 1<<20)
	p2.OtherRequests = map[string]int64{"nvidia.com/gpu": 3}
	mustApply(t, s, ctx, store.Batch{ClusterID: "a", Nodes: []store.Node{gpuNode("g1", 8)}, Pods: []store.Pod{p2}})
	checkCapacity(t, s, b, "a", "a GPU node after migration 015")
	if c := mustCapacity(t, s, ctx, "a"); c.MaxFree == nil || c.MaxFree.Other["nvidia.com/gpu"] != 5 || c.NodesWith["nvidia.com/gpu"] != 1 {
		t.Errorf("ClusterCapacity after a GPU node: %+v; want 5 GPUs free on one node", c)
	}
}
