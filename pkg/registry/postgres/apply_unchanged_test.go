package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestUnchangedRowsTakeNoWriterLock: the batch's namespaces and nodes are
// compared with the member's rows before the writer lock, so a relist that
// changes no view row commits while another transaction holds that lock,
// and one that changes a node writes that node alone under it.
func TestUnchangedRowsTakeNoWriterLock(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.ctx
	relist := func(cpu int64) store.Batch {
		batch := store.Batch{ClusterID: "c", Replace: []store.Resource{store.ResourceNamespaces, store.ResourceNodes, store.ResourcePods}}
		batch.Namespaces = []store.Namespace{namespace("team-a"), namespace("team-b")}
		for i := range 20 {
			batch.Nodes = append(batch.Nodes, node(nodeNameN(i), 4000, 16*gib))
		}
		batch.Nodes[3] = node(nodeNameN(3), cpu, 16*gib)
		batch.Pods = []store.Pod{{Namespace: "team-a", Name: "p", UID: "p", NodeName: nodeNameN(0), Phase: "Running", CPURequestMillis: 100}}
		return batch
	}
	mustApply(t, s, ctx, relist(4000))
	rv, changes := registryRV(t, s, ctx), countRows(t, b, `SELECT count(*) FROM registry_change`)

	// Hold the writer lock, as a long write of another member would.
	conn, err := pgx.Connect(ctx, b.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `SELECT resource_version FROM registry_state FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

	unchanged, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := s.Apply(unchanged, relist(4000)); err != nil {
		t.Fatalf("a relist that changes nothing, while the writer lock is held: %v; want it committed without the lock", err)
	}
	changed, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.Apply(changed, relist(3000)); !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a relist that changes a node, while the writer lock is held: %v; want it to wait for the lock", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, ctx, relist(3000))
	if got := countRows(t, b, `SELECT count(*) FROM registry_change`) - changes; got != 2 {
		t.Errorf("the relist that changed one node logged %d changes, want 2 (the node, its member's ClusterCapacity)", got)
	}
	if got := countRows(t, b, `SELECT count(*) FROM registry_change WHERE resource_version > $1 AND kind = 'NodeCapacity' AND name = $2`, rv, nodeNameN(3)); got != 1 {
		t.Errorf("%d changes of %s, want 1", got, nodeNameN(3))
	}
	if n := getNode(t, s, ctx, "c", nodeNameN(0)); n.Requested.CPUMillis != 100 {
		t.Errorf("%s requests %dm after the relists, want its pod's 100m", nodeNameN(0), n.Requested.CPUMillis)
	}
}
