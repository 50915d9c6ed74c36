package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

func TestResourceVersion(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	const c = "prod-1"
	batch := store.Batch{
		ClusterID:  c,
		Nodes:      []store.Node{node("n1", 1000, 1<<30), node("n2", 1000, 1<<30)},
		Namespaces: []store.Namespace{namespace("a"), namespace("b")},
		Pods:       []store.Pod{pod("a", "p1", "n1", 100, 1)},
		Quotas:     []store.Quota{{Namespace: "a", Name: "q", Hard: map[string]string{"pods": "10"}}},
	}
	mustApply(t, s, ctx, batch)
	rv1 := registryRV(t, s, ctx)
	if rv1 == 0 {
		t.Fatal("registry RV is 0 after a write")
	}
	assertListRVCoversItems(t, s, ctx)
	n1 := getNode(t, s, ctx, c, "n1").ResourceVersion
	if n1 > rv1 {
		t.Fatalf("node RV %d > registry RV %d", n1, rv1)
	}

	// Re-applying the same batch changes nothing.
	mustApply(t, s, ctx, batch)
	if rv := registryRV(t, s, ctx); rv != rv1 {
		t.Fatalf("no-op apply moved registry RV %d → %d", rv1, rv)
	}
	if rv := getNode(t, s, ctx, c, "n1").ResourceVersion; rv != n1 {
		t.Fatalf("no-op apply moved node RV %d → %d", n1, rv)
	}

	// Each kind of change bumps exactly the affected rows, past every earlier version.
	steps := []struct {
		name    string
		batch   store.Batch
		changed []string // "node/<name>" or "ns/<name>"
	}{
		{name: "node label", batch: store.Batch{ClusterID: c, Nodes: []store.Node{withLabel(node("n2", 1000, 1<<30), "zone", "b")}}, changed: []string{"node/n2"}},
		{name: "pod moved", batch: store.Batch{ClusterID: c, Pods: []store.Pod{pod("a", "p1", "n2", 100, 1)}}, changed: []string{"node/n1", "node/n2"}},
		{name: "pod request", batch: store.Batch{ClusterID: c, Pods: []store.Pod{pod("a", "p1", "n2", 200, 1)}}, changed: []string{"node/n2", "ns/a"}},
		{name: "quota used", batch: store.Batch{ClusterID: c, Quotas: []store.Quota{{Namespace: "a", Name: "q", Hard: map[string]string{"pods": "10"}, Used: map[string]string{"pods": "1"}}}}, changed: []string{"ns/a"}},
		{name: "namespace phase", batch: store.Batch{ClusterID: c, Namespaces: []store.Namespace{{Name: "b", UID: "uid-b", Phase: "Terminating", Labels: map[string]string{"team": "b"}, CreatedAt: namespace("b").CreatedAt}}}, changed: []string{"ns/b"}},
		{name: "cursor only", batch: store.Batch{ClusterID: c, Cursors: map[store.Resource]string{store.ResourcePods: "9"}}},
	}
	for _, step := range steps {
		before := snapshotRVs(t, s, ctx)
		prev := registryRV(t, s, ctx)
		mustApply(t, s, ctx, step.batch)
		after := snapshotRVs(t, s, ctx)
		now := registryRV(t, s, ctx)
		changed := map[string]bool{}
		for _, k := range step.changed {
			changed[k] = true
		}
		for k, rv := range after {
			switch {
			case changed[k] && rv <= prev:
				t.Errorf("%s: %s RV %d not above previous registry RV %d", step.name, k, rv, prev)
			case !changed[k] && rv != before[k]:
				t.Errorf("%s: unchanged %s RV moved %d → %d", step.name, k, before[k], rv)
			}
		}
		if len(step.changed) == 0 && now != prev {
			t.Errorf("%s: registry RV moved %d → %d without a view change", step.name, prev, now)
		}
		if len(step.changed) > 0 && now <= prev {
			t.Errorf("%s: registry RV %d did not increase from %d", step.name, now, prev)
		}
		assertListRVCoversItems(t, s, ctx)
	}

	// Deletions advance the registry RV too.
	prev := registryRV(t, s, ctx)
	mustApply(t, s, ctx, store.Batch{ClusterID: c, Deleted: store.Keys{store.ResourceNodes: {{Name: "n1"}}}})
	if now := registryRV(t, s, ctx); now <= prev {
		t.Errorf("delete: registry RV %d did not increase from %d", now, prev)
	}
}

// snapshotRVs maps "node/<name>" and "ns/<name>" to resource versions.
func snapshotRVs(t *testing.T, s *postgres.Store, ctx context.Context) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, n := range listNodes(t, s, ctx, store.ListOptions{}).Items {
		out["node/"+n.Node.Name] = n.ResourceVersion
	}
	nss, err := s.ClusterNamespaces().List(ctx, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nss.Items {
		out["ns/"+n.Namespace.Name] = n.ResourceVersion
	}
	return out
}

func assertListRVCoversItems(t *testing.T, s *postgres.Store, ctx context.Context) {
	t.Helper()
	nodes := listNodes(t, s, ctx, store.ListOptions{})
	for _, n := range nodes.Items {
		if n.ResourceVersion > nodes.ResourceVersion {
			t.Errorf("node %s RV %d > list RV %d", n.Node.Name, n.ResourceVersion, nodes.ResourceVersion)
		}
	}
	nss, err := s.ClusterNamespaces().List(ctx, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nss.Items {
		if n.ResourceVersion > nss.ResourceVersion {
			t.Errorf("namespace %s RV %d > list RV %d", n.Namespace.Name, n.ResourceVersion, nss.ResourceVersion)
		}
	}
}

// TestConcurrentApply runs writers in parallel with readers and checks that
// resourceVersions are distinct and commit-ordered: whatever a list at
// version R shows, every later state agrees on for rows at or below R.
func TestConcurrentApply(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	const writers, rounds, nodesPer = 6, 8, 4

	type snapshot struct {
		rv   int64
		rows map[string]int64
	}
	stop := make(chan struct{})
	snaps := make(chan []snapshot, 1)
	readerErr := make(chan error, 1)
	go func() {
		var out []snapshot
		defer func() { snaps <- out }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			p, err := s.NodeCapacities().List(ctx, store.ListOptions{})
			if err != nil {
				readerErr <- err
				return
			}
			rows := map[string]int64{}
			for _, n := range p.Items {
				rows[n.ClusterID+"."+n.Node.Name] = n.ResourceVersion
			}
			out = append(out, snapshot{rv: p.ResourceVersion, rows: rows})
		}
	}()

	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			cluster := fmt.Sprintf("c%d", w)
			for r := range rounds {
				var nodes []store.Node
				for i := range nodesPer {
					nodes = append(nodes, withLabel(node(fmt.Sprintf("n%d", i), 1000, 1<<30), "round", fmt.Sprint(r)))
				}
				if err := s.Apply(ctx, store.Batch{ClusterID: cluster, Nodes: nodes}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent Apply: %v", err)
		}
	}
	close(stop)
	history := <-snaps
	select {
	case err := <-readerErr:
		t.Fatalf("concurrent list: %v", err)
	default:
	}

	final := listNodes(t, s, ctx, store.ListOptions{})
	if len(final.Items) != writers*nodesPer {
		t.Fatalf("%d nodes, want %d", len(final.Items), writers*nodesPer)
	}
	seen := map[int64]string{}
	var maxRV int64
	for _, n := range final.Items {
		key := n.ClusterID + "." + n.Node.Name
		if other, dup := seen[n.ResourceVersion]; dup {
			t.Errorf("%s and %s share RV %d", key, other, n.ResourceVersion)
		}
		seen[n.ResourceVersion] = key
		maxRV = max(maxRV, n.ResourceVersion)
	}
	if final.ResourceVersion != maxRV {
		t.Errorf("registry RV %d, want the highest row RV %d", final.ResourceVersion, maxRV)
	}
	finalRows := map[string]int64{}
	for _, n := range final.Items {
		finalRows[n.ClusterID+"."+n.Node.Name] = n.ResourceVersion
	}
	for _, snap := range history {
		for key, rv := range finalRows {
			if rv <= snap.rv && snap.rows[key] != rv {
				t.Fatalf("list at RV %d showed %s at RV %d, but it was later seen at RV %d <= %d: a lower version committed after a higher one",
					snap.rv, key, snap.rows[key], rv, snap.rv)
			}
		}
		for key, rv := range snap.rows {
			if rv > snap.rv {
				t.Fatalf("list at RV %d holds %s at higher RV %d", snap.rv, key, rv)
			}
		}
	}
	t.Logf("checked %d concurrent list snapshots", len(history))
}
