package writes_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/writes"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestUnchangedRowsTakeNoTicket: the batch's namespaces and nodes are
// compared with the member's rows before it takes a commit ticket, so a
// relist that changes no view row takes none and commits while an earlier
// ticket is open, and one that changes a node waits for that ticket and
// writes that node alone under its own.
func TestUnchangedRowsTakeNoTicket(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
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

	release := holdEarlierTicket(t, b)
	unchanged, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := s.Apply(unchanged, relist(4000)); err != nil {
		t.Fatalf("a relist that changes nothing, while an earlier ticket is open: %v; want it committed without waiting", err)
	}
	changed, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.Apply(changed, relist(3000)); !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a relist that changes a node, while an earlier ticket is open: %v; want it to wait for that ticket", err)
	}
	release()
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

// holdEarlierTicket takes a commit ticket from a connection of its own, as
// a long views section of another member would, until release is called:
// every later writer that stamps a version waits for it before publishing.
func holdEarlierTicket(t *testing.T, b testBundle) (release func()) {
	t.Helper()
	tx := holdLock(t, b, `SELECT registry_take_ticket()`)
	return func() {
		if err := tx.Rollback(b.Ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRelistAfterAnInterruptedOneStampsItsChunks: a relist whose chunk
// committed and whose last batch never came (its commit timed out, its
// replica stopped or handed the member over) leaves the aggregates that
// chunk changed to a last batch; the next relist's last batch computes
// them, even committed in one batch that finds those pods unchanged. Seen
// at 1,000 members (docs/benchmarks.md, run W): namespaces showed no pods
// for good.
func TestRelistAfterAnInterruptedOneStampsItsChunks(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Namespaces: []store.Namespace{namespace("team-a"), namespace("team-b")},
		Nodes: []store.Node{node(nodeNameN(0), 4000, 16*gib), node(nodeNameN(1), 4000, 16*gib)}})
	pod := func(ns, name, node string) store.Pod {
		return store.Pod{Namespace: ns, Name: name, UID: name, NodeName: node, Phase: "Running", CPURequestMillis: 100}
	}
	interrupted := []store.Pod{pod("team-a", "a0", nodeNameN(0)), pod("team-a", "a1", nodeNameN(0))}
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Pods: interrupted, Chunk: true})
	// The next relist, in one batch: the chunk's pods unchanged, one more.
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Replace: []store.Resource{store.ResourcePods},
		Pods: append(interrupted, pod("team-b", "b0", nodeNameN(1)))})
	for name, want := range map[string]int64{nodeNameN(0): 2, nodeNameN(1): 1} {
		if n := getNode(t, s, ctx, "c", name); n.Requested.Pods != want || n.Requested.CPUMillis != 100*want {
			t.Errorf("%s counts %d pods and %dm, want %d and %dm", name, n.Requested.Pods, n.Requested.CPUMillis, want, 100*want)
		}
	}
	for name, want := range map[string]int64{"team-a": 2, "team-b": 1} {
		if ns := getNamespace(t, s, ctx, "c", name); ns.PodCount != want {
			t.Errorf("%s counts %d pods, want %d", name, ns.PodCount, want)
		}
	}
}

// TestChunkedRelistStampsAggregatesOnce: a relist committed in chunks leaves
// the aggregates its pods change to its last batch, which stamps each node
// and namespace once however many chunks moved it; the same relist again,
// changing nothing, takes no commit ticket in any of its batches.
func TestChunkedRelistStampsAggregatesOnce(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Namespaces: []store.Namespace{namespace("team-a")},
		Nodes: []store.Node{node(nodeNameN(0), 4000, 16*gib), node(nodeNameN(1), 4000, 16*gib)}})
	pod := func(i int, node string) store.Pod {
		name := fmt.Sprintf("p%d", i)
		return store.Pod{Namespace: "team-a", Name: name, UID: name, NodeName: node, Phase: "Running", CPURequestMillis: 100}
	}
	// Three chunks: each moves node 0, the second and the last node 1 too.
	chunks := [][]store.Pod{
		{pod(0, nodeNameN(0)), pod(1, nodeNameN(0))},
		{pod(2, nodeNameN(0)), pod(3, nodeNameN(1))},
		{pod(4, nodeNameN(0)), pod(5, nodeNameN(1))},
	}
	relist := func(check func(last bool)) {
		var present []store.ObjectKey
		for i, pods := range chunks {
			batch := store.Batch{ClusterID: "c", Pods: pods, Chunk: i < len(chunks)-1}
			if !batch.Chunk {
				batch.Replace, batch.Present = []store.Resource{store.ResourcePods}, present
			}
			mustApply(t, s, ctx, batch)
			for _, p := range pods {
				present = append(present, store.ObjectKey{Namespace: p.Namespace, Name: p.Name})
			}
			check(!batch.Chunk)
		}
	}
	rv := registryRV(t, s, ctx)
	relist(func(last bool) {
		if n := getNode(t, s, ctx, "c", nodeNameN(0)); !last && n.Requested.Pods != 0 {
			t.Errorf("after a chunk, %s counts %d pods; want its aggregates left to the relist's last batch", nodeNameN(0), n.Requested.Pods)
		}
	})
	for name, want := range map[string]int64{nodeNameN(0): 4, nodeNameN(1): 2} {
		if n := getNode(t, s, ctx, "c", name); n.Requested.Pods != want || n.Requested.CPUMillis != 100*want {
			t.Errorf("after the relist %s counts %d pods and %dm, want %d and %dm", name, n.Requested.Pods, n.Requested.CPUMillis, want, 100*want)
		}
	}
	if ns := getNamespace(t, s, ctx, "c", "team-a"); ns.PodCount != 6 {
		t.Errorf("after the relist team-a counts %d pods, want 6", ns.PodCount)
	}
	for _, kind := range []string{"NodeCapacity", "ClusterNamespace"} {
		entries := countRows(t, b, `SELECT count(*) FROM registry_change WHERE resource_version > $1 AND kind = $2`, rv, kind)
		if want := map[string]int64{"NodeCapacity": 2, "ClusterNamespace": 1}[kind]; entries != want {
			t.Errorf("the relist logged %d %s changes, want %d: one per row it changed", entries, kind, want)
		}
	}

	release := holdEarlierTicket(t, b)
	defer release()
	unchanged, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	ctx = unchanged
	relist(func(bool) {})
}

// TestRelistStampsAggregatesInParts: a relist's last batch of pods commits
// its rows, then restamps the aggregates of the member's namespaces in
// transactions of at most ViewRowsPerCommit, each namespace once, then its cursor;
// a relist that changes nothing takes no commit ticket and still saves its
// cursor.
func TestRelistStampsAggregatesInParts(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	const namespaces = 2*writes.ViewRowsPerCommit + 100
	batch := store.Batch{ClusterID: "c", Nodes: []store.Node{node(nodeNameN(0), 4000, 16*gib)}}
	var pods []store.Pod
	for i := range namespaces {
		ns := fmt.Sprintf("ns-%04d", i)
		batch.Namespaces = append(batch.Namespaces, namespace(ns))
		pods = append(pods, store.Pod{Namespace: ns, Name: "p", UID: ns, NodeName: nodeNameN(0), Phase: "Running", CPURequestMillis: 1})
	}
	mustApply(t, s, ctx, batch)
	relist := func(cursor string) {
		t.Helper()
		half := len(pods) / 2
		mustApply(t, s, ctx, store.Batch{ClusterID: "c", Pods: pods[:half], Chunk: true})
		var present []store.ObjectKey
		for _, p := range pods[:half] {
			present = append(present, store.ObjectKey{Namespace: p.Namespace, Name: p.Name})
		}
		mustApply(t, s, ctx, store.Batch{ClusterID: "c", Pods: pods[half:], Replace: []store.Resource{store.ResourcePods},
			Present: present, Cursors: map[store.Resource]string{store.ResourcePods: cursor}})
		if got, err := s.Cursor(ctx, "c", store.ResourcePods); err != nil || got != cursor {
			t.Errorf("pods cursor after the relist: %q, %v; want %q", got, err, cursor)
		}
	}
	rv0 := registryRV(t, s, ctx)
	relist("100")
	if n := countRows(t, b, `SELECT count(*) FROM registry_change WHERE resource_version > $1 AND kind = 'ClusterNamespace'`, rv0); n != namespaces {
		t.Errorf("%d namespace changes after the relist, want one for each of the %d", n, namespaces)
	}
	if n := countRows(t, b, `SELECT count(DISTINCT committed_at) FROM registry_change WHERE resource_version > $1 AND kind = 'ClusterNamespace'`, rv0); n != commitsInParts(namespaces) {
		t.Errorf("the relist stamped its %d namespaces in %d transactions, want %d of at most %d", namespaces, n, commitsInParts(namespaces), writes.ViewRowsPerCommit)
	}
	for _, i := range []int{0, writes.ViewRowsPerCommit, namespaces - 1} {
		if ns := getNamespace(t, s, ctx, "c", batch.Namespaces[i].Name); ns.PodCount != 1 {
			t.Errorf("%s counts %d pods, want 1", batch.Namespaces[i].Name, ns.PodCount)
		}
	}
	if n := getNode(t, s, ctx, "c", nodeNameN(0)); n.Requested.Pods != namespaces {
		t.Errorf("the node counts %d pods, want %d", n.Requested.Pods, namespaces)
	}
	rv := registryRV(t, s, ctx)
	relist("200")
	if now := registryRV(t, s, ctx); now != rv {
		t.Errorf("a relist that changed nothing moved the registry from %d to %d", rv, now)
	}
}
