package writes_test

import (
	"errors"
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

func TestAggregates(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	const c = "prod-1"
	terminal := pod("a", "done", "n1", 999, 999)
	terminal.Phase = "Succeeded"
	mustApply(t, s, ctx, store.Batch{
		ClusterID:  c,
		Nodes:      []store.Node{node("n1", 4000, 8<<30), node("n2", 2000, 4<<30)},
		Namespaces: []store.Namespace{namespace("a"), namespace("b")},
		Pods: []store.Pod{
			pod("a", "p1", "n1", 500, 1<<30),
			pod("a", "p2", "n1", 250, 1<<20),
			pod("b", "p3", "n2", 1000, 2<<30),
			pod("b", "pending", "", 100, 1<<20),
			pod("b", "p6", "n2", 10, 10),
			terminal,
		},
		Quotas: []store.Quota{{Namespace: "a", Name: "compute", Hard: map[string]string{"requests.cpu": "2"}, Used: map[string]string{"requests.cpu": "750m"}}},
	})

	type want struct {
		cpu, mem, pods int64
	}
	checkNode := func(step, name string, w want) {
		t.Helper()
		n := getNode(t, s, ctx, c, name)
		if got := (want{n.Requested.CPUMillis, n.Requested.MemoryBytes, n.Requested.Pods}); got != w {
			t.Errorf("%s: node %s requested %+v, want %+v", step, name, got, w)
		}
	}
	checkNS := func(step, name string, w want) {
		t.Helper()
		n := getNamespace(t, s, ctx, c, name)
		if got := (want{n.Requested.CPUMillis, n.Requested.MemoryBytes, n.PodCount}); got != w {
			t.Errorf("%s: namespace %s requested %+v, want %+v", step, name, got, w)
		}
	}

	checkNode("initial", "n1", want{750, 1<<30 + 1<<20, 2})
	checkNode("initial", "n2", want{1010, 2<<30 + 10, 2})
	checkNS("initial", "a", want{750, 1<<30 + 1<<20, 2})
	checkNS("initial (unscheduled pod counts)", "b", want{1110, 2<<30 + 1<<20 + 10, 3})
	n1 := getNode(t, s, ctx, c, "n1")
	if n1.Node.Allocatable.CPUMillis != 3920 || n1.Node.Capacity.Pods != 110 || !n1.Schedulable || n1.Usage != nil {
		t.Errorf("node n1 = %+v", n1)
	}
	a := getNamespace(t, s, ctx, c, "a")
	if len(a.Quotas) != 1 || a.Quotas[0].Name != "compute" || a.Quotas[0].Namespace != "a" || a.Quotas[0].Hard["requests.cpu"] != "2" || a.Quotas[0].Used["requests.cpu"] != "750m" {
		t.Errorf("namespace a quotas = %+v", a.Quotas)
	}

	// p1 moves from n1 to n2: both nodes change.
	mustApply(t, s, ctx, store.Batch{ClusterID: c, Pods: []store.Pod{pod("a", "p1", "n2", 500, 1<<30)}})
	checkNode("moved", "n1", want{250, 1 << 20, 1})
	checkNode("moved", "n2", want{1510, 3<<30 + 10, 3})
	checkNS("moved", "a", want{750, 1<<30 + 1<<20, 2})

	// p3 deleted.
	mustApply(t, s, ctx, store.Batch{ClusterID: c, Deleted: store.Keys{store.ResourcePods: {{Namespace: "b", Name: "p3"}}}})
	checkNode("pod deleted", "n2", want{510, 1<<30 + 10, 2})
	checkNS("pod deleted", "b", want{110, 1<<20 + 10, 2})

	// The pending pod is scheduled onto n1.
	mustApply(t, s, ctx, store.Batch{ClusterID: c, Pods: []store.Pod{pod("b", "pending", "n1", 100, 1<<20)}})
	checkNode("scheduled", "n1", want{350, 2 << 20, 2})
	checkNS("scheduled", "b", want{110, 1<<20 + 10, 2})

	// Quota deleted.
	mustApply(t, s, ctx, store.Batch{ClusterID: c, Deleted: store.Keys{store.ResourceResourceQuotas: {{Namespace: "a", Name: "compute"}}}})
	if q := getNamespace(t, s, ctx, c, "a").Quotas; len(q) != 0 {
		t.Errorf("quotas after delete = %+v", q)
	}

	// Namespace b deleted: its view row goes; its pods stay until their own
	// deletions arrive (Kubernetes deletes them first), then n1 and n2 drop them.
	mustApply(t, s, ctx, store.Batch{ClusterID: c, Deleted: store.Keys{store.ResourceNamespaces: {{Name: "b"}}}})
	if _, err := s.GetClusterNamespace(ctx, "b", c); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted namespace: got %v, want ErrNotFound", err)
	}
	checkNode("namespace deleted, pods not yet", "n1", want{350, 2 << 20, 2})
	checkNode("namespace deleted, pods not yet", "n2", want{510, 1<<30 + 10, 2})
	mustApply(t, s, ctx, store.Batch{ClusterID: c, Deleted: store.Keys{store.ResourcePods: {{Namespace: "b", Name: "pending"}, {Namespace: "b", Name: "p6"}}}})
	checkNode("pods of the deleted namespace deleted", "n1", want{250, 1 << 20, 1})
	checkNode("pods of the deleted namespace deleted", "n2", want{500, 1 << 30, 1})

	// Pods that arrive before their namespace and node are counted once those appear.
	mustApply(t, s, ctx, store.Batch{ClusterID: c, Pods: []store.Pod{pod("late", "x", "n3", 7, 7)}})
	mustApply(t, s, ctx, store.Batch{ClusterID: c, Namespaces: []store.Namespace{namespace("late")}, Nodes: []store.Node{node("n3", 1000, 1<<30)}})
	checkNode("late node", "n3", want{7, 7, 1})
	checkNS("late namespace", "late", want{7, 7, 1})
}

func TestGetNotFound(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	if _, err := s.GetNodeCapacity(b.Ctx, "c", "missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetNodeCapacity: got %v, want ErrNotFound", err)
	}
	if _, err := s.GetClusterNamespace(b.Ctx, "missing", "c"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetClusterNamespace: got %v, want ErrNotFound", err)
	}
}

func TestReplace(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	const c = "prod-1"
	mustApply(t, s, ctx, store.Batch{
		ClusterID:  c,
		Nodes:      []store.Node{node("n1", 1000, 1<<30), node("n2", 1000, 1<<30)},
		Namespaces: []store.Namespace{namespace("a"), namespace("b"), namespace("c")},
		Pods:       []store.Pod{pod("a", "p1", "n1", 100, 1), pod("a", "p2", "n2", 200, 2), pod("c", "p3", "n2", 300, 3)},
		Quotas:     []store.Quota{{Namespace: "a", Name: "q1"}, {Namespace: "a", Name: "q2"}},
	})
	// Another cluster's rows are not touched by a relist of prod-1.
	mustApply(t, s, ctx, store.Batch{ClusterID: "other", Nodes: []store.Node{node("n9", 1, 1)}, Namespaces: []store.Namespace{namespace("a")}})

	mustApply(t, s, ctx, store.Batch{
		ClusterID:  c,
		Replace:    []store.Resource{store.ResourceNodes, store.ResourceNamespaces, store.ResourcePods, store.ResourceResourceQuotas},
		Nodes:      []store.Node{node("n1", 1000, 1<<30)},
		Namespaces: []store.Namespace{namespace("a"), namespace("b")},
		Pods:       []store.Pod{pod("a", "p1", "n1", 100, 1)},
		Quotas:     []store.Quota{{Namespace: "a", Name: "q2"}},
	})
	nodes := listNodes(t, s, ctx, store.ListOptions{})
	if got := nodeKeys(nodes.Items); got != "other.n9,prod-1.n1" {
		t.Errorf("nodes after replace: %s", got)
	}
	nss, err := s.ClusterNamespaces().List(ctx, store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := namespaceKeys(nss.Items); got != "a/other,a/prod-1,b/prod-1" {
		t.Errorf("namespaces after replace: %s", got)
	}
	a := getNamespace(t, s, ctx, c, "a")
	if a.PodCount != 1 || a.Requested.CPUMillis != 100 || len(a.Quotas) != 1 || a.Quotas[0].Name != "q2" {
		t.Errorf("namespace a after replace: %+v", a)
	}
	// An empty relist of pods removes them all.
	mustApply(t, s, ctx, store.Batch{ClusterID: c, Replace: []store.Resource{store.ResourcePods}})
	if n := getNode(t, s, ctx, c, "n1"); n.Requested.Pods != 0 {
		t.Errorf("n1 after empty pod relist: %+v", n.Requested)
	}
}

func TestCursors(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	mustApply(t, s, ctx, store.Batch{ClusterID: "c1", Cursors: map[store.Resource]string{store.ResourcePods: "100", store.ResourceNodes: "7"}})
	mustApply(t, s, ctx, store.Batch{ClusterID: "c1", Cursors: map[store.Resource]string{store.ResourcePods: "101"}})

	// A second store on the same database (a restarted process) sees them.
	reopened, err := postgres.Open(ctx, b.DSN, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer reopened.Close()
	tests := []struct {
		name    string
		cluster string
		r       store.Resource
		want    string
	}{
		{name: "updated", cluster: "c1", r: store.ResourcePods, want: "101"},
		{name: "kept", cluster: "c1", r: store.ResourceNodes, want: "7"},
		{name: "never written", cluster: "c1", r: store.ResourceNamespaces, want: ""},
		{name: "other cluster", cluster: "c2", r: store.ResourcePods, want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := reopened.Cursor(ctx, tc.cluster, tc.r)
			if err != nil || got != tc.want {
				t.Fatalf("Cursor = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestClaimRelistsQuotasWithoutScopes: a member with a quota whose scopes
// are not recorded (NULL: mirrored by a release before migration 030)
// loses its resourcequotas cursor when claimed, so the new owner relists
// them; the other cursors stay, and once the scopes are written a claim
// keeps the cursor.
func TestClaimRelistsQuotasWithoutScopes(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	quotas := []store.Quota{{Namespace: "a", Name: "q", Hard: map[string]string{"pods": "3"}, Scopes: []string{"BestEffort"}}}
	cursors := map[store.Resource]string{store.ResourceResourceQuotas: "50", store.ResourcePods: "60"}
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Namespaces: []store.Namespace{namespace("a")}, Quotas: quotas, Cursors: cursors})
	mustApply(t, s, ctx, store.Batch{ClusterID: "other", Namespaces: []store.Namespace{namespace("a")}, Quotas: quotas, Cursors: cursors})
	if _, err := b.Connect(t).Exec(ctx, `UPDATE cluster_resource_quota SET scopes = NULL WHERE cluster_id = 'c'`); err != nil {
		t.Fatal(err)
	}
	cursor := func(cluster string, r store.Resource) string {
		t.Helper()
		got, err := s.Cursor(ctx, cluster, r)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	fence, err := s.ClaimMember(ctx, "c", "replica-a")
	if err != nil {
		t.Fatal(err)
	}
	if got := cursor("c", store.ResourceResourceQuotas); got != "" {
		t.Errorf("quotas cursor after a claim with scopes unknown: %q, want none (a relist)", got)
	}
	if got, other := cursor("c", store.ResourcePods), cursor("other", store.ResourceResourceQuotas); got != "60" || other != "50" {
		t.Errorf("pods cursor %q, the other member's quotas cursor %q: want both kept", got, other)
	}
	// The relist writes the scopes; the next claim keeps the cursor.
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Epoch: fence.Epoch, Quotas: quotas, Replace: []store.Resource{store.ResourceResourceQuotas},
		Cursors: map[store.Resource]string{store.ResourceResourceQuotas: "70"}})
	if _, err := s.ClaimMember(ctx, "c", "replica-b"); err != nil {
		t.Fatal(err)
	}
	if got := cursor("c", store.ResourceResourceQuotas); got != "70" {
		t.Errorf("quotas cursor after the relist and a claim: %q, want 70", got)
	}
	if ns := getNamespace(t, s, ctx, "c", "a"); len(ns.Quotas) != 1 || len(ns.Quotas[0].Scopes) != 1 {
		t.Errorf("namespace a's quotas after the relist: %+v, want its scope", ns.Quotas)
	}
}

// TestRemoveMember: a removal deletes the member's rows and cursors, not
// another member's, and what comes back when it is listed anew starts
// afresh.
func TestRemoveMember(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	for _, c := range []string{"c1", "c2"} {
		mustApply(t, s, ctx, store.Batch{
			ClusterID:  c,
			Nodes:      []store.Node{node("n1", 1000, 1)},
			Namespaces: []store.Namespace{namespace("a")},
			Pods:       []store.Pod{pod("a", "p", "n1", 1, 1)},
			Cursors:    map[store.Resource]string{store.ResourcePods: "5"},
		})
	}
	before := registryRV(t, s, ctx)
	removeMember(t, s, ctx, "c1")
	if after := registryRV(t, s, ctx); after <= before {
		t.Errorf("registry RV %d after the removal, want > %d", after, before)
	}
	if got := nodeKeys(listNodes(t, s, ctx, store.ListOptions{}).Items); got != "c2.n1" {
		t.Errorf("nodes: %s", got)
	}
	if _, err := s.GetClusterNamespace(ctx, "a", "c1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("namespace of the removed member: %v", err)
	}
	if rv, _ := s.Cursor(ctx, "c1", store.ResourcePods); rv != "" {
		t.Errorf("cursor of the removed member: %q", rv)
	}
	if rv, _ := s.Cursor(ctx, "c2", store.ResourcePods); rv != "5" {
		t.Errorf("cursor of kept cluster: %q", rv)
	}
	// A pod of the removed member no longer counts when it comes back.
	relist(t, s, ctx, "c1")
	f, err := s.ClaimMember(ctx, "c1", "replica-a")
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, ctx, store.Batch{ClusterID: "c1", Epoch: f.Epoch, Nodes: []store.Node{node("n1", 1000, 1)}})
	if n := getNode(t, s, ctx, "c1", "n1"); n.Requested.Pods != 0 {
		t.Errorf("re-added node counts old pods: %+v", n.Requested)
	}
}
