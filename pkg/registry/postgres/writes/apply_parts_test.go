package writes_test

import (
	"context"
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/writes"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestLargeBatchStampsItsViewRowsInParts: a relist's last batch of more
// nodes than ViewRowsPerCommit over a member's rows commits them in transactions
// of at most ViewRowsPerCommit changes, deletes the nodes it does not list, and
// saves its cursor; the same relist again takes no commit ticket.
func TestLargeBatchStampsItsViewRowsInParts(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	const kept, gone, added = writes.ViewRowsPerCommit + 50, 100, writes.ViewRowsPerCommit + 30
	var before []store.Node
	for i := range kept + gone {
		before = append(before, node(nodeNameN(i), 4000, 16*gib))
	}
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Nodes: before})

	relist := func(cursor string) {
		t.Helper()
		var nodes []store.Node
		for i := range kept {
			nodes = append(nodes, node(nodeNameN(i), 8000, 16*gib)) // every kept node changes
		}
		for i := range added {
			nodes = append(nodes, node(nodeNameN(kept+gone+i), 4000, 16*gib))
		}
		mustApply(t, s, ctx, store.Batch{ClusterID: "c", Nodes: nodes, Replace: []store.Resource{store.ResourceNodes},
			Cursors: map[store.Resource]string{store.ResourceNodes: cursor}})
		if got, err := s.Cursor(ctx, "c", store.ResourceNodes); err != nil || got != cursor {
			t.Errorf("nodes cursor after the relist: %q, %v; want %q", got, err, cursor)
		}
	}
	rv := registryRV(t, s, ctx)
	relist("100")
	if n := countRows(t, b, `SELECT count(*) FROM cluster_node WHERE cluster_id = 'c'`); n != kept+added {
		t.Errorf("%d nodes after the relist, want %d", n, kept+added)
	}
	if n := countRows(t, b, `SELECT count(*) FROM cluster_node WHERE cluster_id = 'c' AND capacity_cpu_millis = 8000`); n != kept {
		t.Errorf("%d nodes updated by the relist, want %d", n, kept)
	}
	changes := `SELECT count(*) FROM registry_change WHERE resource_version > $1 AND kind = 'NodeCapacity'`
	if n := countRows(t, b, changes, rv); n != kept+gone+added {
		t.Errorf("the relist logged %d node changes, want %d", n, kept+gone+added)
	}
	if n := countRows(t, b, `SELECT max(n) FROM (SELECT count(*) n FROM registry_change
		WHERE resource_version > $1 AND kind = 'NodeCapacity' GROUP BY committed_at) t`, rv); n > writes.ViewRowsPerCommit+gone {
		t.Errorf("one transaction of the relist stamped %d nodes, want at most %d and the deletions (%d)", n, writes.ViewRowsPerCommit, gone)
	}
	if n := countRows(t, b, `SELECT count(DISTINCT committed_at) FROM registry_change WHERE resource_version > $1 AND kind = 'NodeCapacity'`, rv); n < commitsInParts(kept+added) {
		t.Errorf("the relist's %d nodes were stamped in %d transactions, want at least %d", kept+added, n, commitsInParts(kept+added))
	}

	release := holdEarlierTicket(t, b)
	defer release()
	unchanged, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	ctx = unchanged
	rv = registryRV(t, s, ctx)
	relist("200")
	if n := countRows(t, b, changes, rv); n != 0 {
		t.Errorf("a relist that changed nothing logged %d node changes", n)
	}
}

// TestLargeBatchInterruptedBetweenParts: a large batch whose last part
// fails (a pod PostgreSQL cannot store) leaves the parts committed before
// it, saves no cursor, and when written again commits the rest: the rows
// committed already take no new version.
func TestLargeBatchInterruptedBetweenParts(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	const nodes = 2*writes.ViewRowsPerCommit + 20
	batch := store.Batch{ClusterID: "c", Cursors: map[store.Resource]string{store.ResourceNodes: "7"}}
	for i := range nodes {
		batch.Nodes = append(batch.Nodes, node(nodeNameN(i), 4000, 16*gib))
	}
	bad := batch
	bad.Pods = []store.Pod{{Namespace: "x", Name: "bad\x00name", UID: "u"}}
	if err := s.Apply(ctx, bad); err == nil {
		t.Fatal("a batch with a pod named with a NUL byte was applied")
	}
	committed := countRows(t, b, `SELECT count(*) FROM cluster_node WHERE cluster_id = 'c'`)
	if committed == 0 || committed >= nodes {
		t.Errorf("%d of %d nodes committed before the batch failed, want the parts before its last", committed, nodes)
	}
	if got, err := s.Cursor(ctx, "c", store.ResourceNodes); err != nil || got != "" {
		t.Errorf("nodes cursor after the failed batch: %q, %v; want none", got, err)
	}
	rv := registryRV(t, s, ctx)
	mustApply(t, s, ctx, batch)
	if n := countRows(t, b, `SELECT count(*) FROM cluster_node WHERE cluster_id = 'c'`); n != nodes {
		t.Errorf("%d nodes after the batch was written again, want %d", n, nodes)
	}
	if n := countRows(t, b, `SELECT count(*) FROM registry_change WHERE resource_version > $1 AND kind = 'NodeCapacity'`, rv); n != nodes-committed {
		t.Errorf("writing the batch again logged %d node changes, want %d: only the rows not committed before", n, nodes-committed)
	}
	if got, err := s.Cursor(ctx, "c", store.ResourceNodes); err != nil || got != "7" {
		t.Errorf("nodes cursor after the batch was written again: %q, %v; want 7", got, err)
	}
}
