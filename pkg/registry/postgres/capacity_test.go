package postgres_test

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// sumCapacity computes a member's ClusterCapacity values from its
// NodeCapacities and ClusterNamespaces, independently of the registry.
func sumCapacity(nodes []store.NodeCapacity, nss []store.ClusterNamespace) store.ClusterCapacity {
	var c store.ClusterCapacity
	add := func(s *store.CapacitySums, n *store.NodeCapacity) {
		s.Allocatable.CPUMillis += n.Node.Allocatable.CPUMillis
		s.Allocatable.MemoryBytes += n.Node.Allocatable.MemoryBytes
		s.Allocatable.Pods += n.Node.Allocatable.Pods
		s.Requested.CPUMillis += n.Requested.CPUMillis
		s.Requested.MemoryBytes += n.Requested.MemoryBytes
		s.Requested.Pods += n.Requested.Pods
		addOther(&s.Allocatable.Other, n.Node.Allocatable.Other)
		addOther(&s.Requested.Other, n.Requested.Other)
		if n.Usage != nil {
			s.UsageCPUNanoCores += n.Usage.CPUNanoCores
			s.UsageMemoryBytes += n.Usage.MemoryBytes
			s.UsageNodes++
		}
	}
	for i := range nodes {
		n := &nodes[i]
		c.Nodes++
		if n.Node.Ready {
			c.NodesReady++
		}
		if n.Node.Unschedulable {
			c.NodesCordoned++
		}
		for _, t := range n.Node.Taints {
			if t.Effect == "NoSchedule" || t.Effect == "NoExecute" {
				c.NodesTainted++
				break
			}
		}
		add(&c.All, n)
		for name := range n.Node.Allocatable.Other {
			addOther(&c.NodesWith, map[string]int64{name: 1})
		}
		if !n.Schedulable {
			continue
		}
		c.NodesSchedulable++
		add(&c.Schedulable, n)
		free := store.Quantities{CPUMillis: n.Node.Allocatable.CPUMillis - n.Requested.CPUMillis, MemoryBytes: n.Node.Allocatable.MemoryBytes - n.Requested.MemoryBytes}
		if c.MaxFree == nil {
			c.MaxFree = &store.Quantities{CPUMillis: free.CPUMillis, MemoryBytes: free.MemoryBytes}
		}
		c.MaxFree.CPUMillis = max(c.MaxFree.CPUMillis, free.CPUMillis)
		c.MaxFree.MemoryBytes = max(c.MaxFree.MemoryBytes, free.MemoryBytes)
		for name, v := range n.Node.Allocatable.Other {
			if c.MaxFree.Other == nil {
				c.MaxFree.Other = map[string]int64{}
			}
			if f, seen := c.MaxFree.Other[name]; !seen || v-n.Requested.Other[name] > f {
				c.MaxFree.Other[name] = v - n.Requested.Other[name]
			}
		}
	}
	c.HasRoom = c.MaxFree != nil && c.MaxFree.CPUMillis > 0 && c.MaxFree.MemoryBytes > 0
	for _, ns := range nss {
		c.Namespaces++
		c.Pods += ns.PodCount
	}
	return c
}

// addOther adds other resources into *sum, as the registry does: a sum of
// zero is left out, and an empty sum is nil.
func addOther(sum *map[string]int64, add map[string]int64) {
	for name, v := range add {
		if *sum == nil {
			*sum = map[string]int64{}
		}
		(*sum)[name] += v
		if (*sum)[name] == 0 {
			delete(*sum, name)
		}
	}
	if len(*sum) == 0 {
		*sum = nil
	}
}

// capacityValues drops what sumCapacity does not compute.
func capacityValues(c store.ClusterCapacity) store.ClusterCapacity {
	c.ClusterID, c.Labels, c.HasRoomSince, c.FirstSeen, c.ResourceVersion = "", nil, time.Time{}, time.Time{}, 0
	c.Mirroring, c.MirroringSince = "", time.Time{}
	return c
}

// TestClusterCapacity: each member's ClusterCapacity equals the sum over
// its NodeCapacities and ClusterNamespaces after every kind of write, at
// every resourceVersion of the change feed (the row is stamped after the
// nodes it sums), changes only when its values do, and goes with the member.
func TestClusterCapacity(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	start := registryRV(t, s, ctx)
	tainted := node("t1", 2000, 4<<30)
	tainted.Taints = []store.Taint{{Key: "k", Effect: "NoExecute"}}
	steps := []struct {
		name  string
		write func() error
		// cc: whether member a's ClusterCapacity changes
		cc bool
	}{
		{"nodes, namespaces and pods", func() error {
			return s.Apply(ctx, store.Batch{ClusterID: "a",
				Nodes:      []store.Node{node("n1", 4000, 8<<30), node("n2", 8000, 16<<30), tainted, node("n4", 500, 1<<30)},
				Namespaces: []store.Namespace{namespace("x"), namespace("y")},
				Pods:       []store.Pod{pod("x", "p1", "n2", 3000, 2<<30), pod("x", "p2", "n1", 500, 1<<30), pod("y", "pending", "", 100, 1<<20)}})
		}, true},
		{"another member", func() error {
			return s.Apply(ctx, store.Batch{ClusterID: "b", Nodes: []store.Node{node("m1", 1000, 1<<30)}, Namespaces: []store.Namespace{namespace("x")}})
		}, false},
		{"label only", func() error {
			return s.Apply(ctx, store.Batch{ClusterID: "a", Nodes: []store.Node{withLabel(node("n1", 4000, 8<<30), "zone", "z")}})
		}, false},
		{"usage reported", func() error {
			_, err := s.RecordNodeMetrics(ctx, store.Fence{ClusterID: "a"}, []store.NodeMetricsSample{
				{ClusterID: "a", Node: "n1", CPUNanoCores: 1_500_000_000, MemoryBytes: 3 << 30, ObservedAt: time.Now(), Window: 30 * time.Second},
				{ClusterID: "a", Node: "t1", CPUNanoCores: 100_000_000, MemoryBytes: 1 << 30, ObservedAt: time.Now(), Window: 30 * time.Second}}, reportEvery)
			return err
		}, true},
		{"cordon the freest node", func() error {
			n := node("n2", 8000, 16<<30)
			n.Unschedulable = true
			return s.Apply(ctx, store.Batch{ClusterID: "a", Nodes: []store.Node{n}})
		}, true},
		{"a node deleted alone", func() error {
			return s.Apply(ctx, store.Batch{ClusterID: "a", Deleted: store.Keys{store.ResourceNodes: {{Name: "n4"}}}})
		}, true},
		{"pod churn: one moves, one ends, one starts", func() error {
			done := pod("x", "p2", "n1", 500, 1<<30)
			done.Phase = "Succeeded"
			return s.Apply(ctx, store.Batch{ClusterID: "a", Pods: []store.Pod{pod("x", "p1", "n1", 3000, 2<<30), done, pod("y", "p3", "t1", 200, 1<<28)}})
		}, true},
		{"pods deleted", func() error {
			return s.Apply(ctx, store.Batch{ClusterID: "a", Deleted: store.Keys{store.ResourcePods: {{Namespace: "x", Name: "p1"}, {Namespace: "x", Name: "p2"}}}})
		}, true},
		{"GPU nodes and the pods that request them", func() error {
			g1, g2 := gpuNode("g1", 8), gpuNode("g2", 4)
			g2.Allocatable.Other["hugepages-2Mi"] = 1 << 30
			p1, p2 := pod("x", "gpu-1", "g1", 100, 1<<20), pod("x", "gpu-2", "g2", 100, 1<<20)
			p1.OtherRequests = map[string]int64{"nvidia.com/gpu": 6, "ephemeral-storage": 1 << 30}
			p2.OtherRequests = map[string]int64{"nvidia.com/gpu": 1, "hugepages-2Mi": 512 << 20}
			return s.Apply(ctx, store.Batch{ClusterID: "a", Nodes: []store.Node{g1, g2}, Pods: []store.Pod{p1, p2}})
		}, true},
		{"the freest GPU node cordoned", func() error {
			g2 := gpuNode("g2", 4)
			g2.Allocatable.Other["hugepages-2Mi"] = 1 << 30
			g2.Unschedulable = true
			return s.Apply(ctx, store.Batch{ClusterID: "a", Nodes: []store.Node{g2}})
		}, true},
		{"a GPU pod ends, one starts on the other node", func() error {
			done := pod("x", "gpu-1", "g1", 100, 1<<20)
			done.Phase = "Failed"
			p3 := pod("x", "gpu-3", "g2", 100, 1<<20)
			p3.OtherRequests = map[string]int64{"nvidia.com/gpu": 3}
			return s.Apply(ctx, store.Batch{ClusterID: "a", Pods: []store.Pod{done, p3}})
		}, true},
		{"a GPU node deleted", func() error {
			return s.Apply(ctx, store.Batch{ClusterID: "a", Deleted: store.Keys{store.ResourceNodes: {{Name: "g2"}}}})
		}, true},
		{"uncordon, untaint and delete the largest", func() error {
			return s.Apply(ctx, store.Batch{ClusterID: "a", Nodes: []store.Node{node("n2", 8000, 16<<30), node("t1", 2000, 4<<30)}, Deleted: store.Keys{store.ResourceNodes: {{Name: "n1"}}}})
		}, true},
		{"the last schedulable node goes NotReady", func() error {
			n2, t1, g1 := node("n2", 8000, 16<<30), node("t1", 2000, 4<<30), gpuNode("g1", 8)
			n2.Ready, t1.Ready, g1.Ready = false, false, false
			return s.Apply(ctx, store.Batch{ClusterID: "a", Nodes: []store.Node{n2, t1, g1}})
		}, true},
		{"namespace deleted", func() error {
			return s.Apply(ctx, store.Batch{ClusterID: "a", Deleted: store.Keys{store.ResourceNamespaces: {{Name: "y"}}, store.ResourcePods: {{Namespace: "y", Name: "pending"}, {Namespace: "y", Name: "p3"}}}})
		}, true},
		{"usage expired", func() error {
			_, err := s.MaintainNodeMetrics(ctx, store.MetricsMaintenance{Now: time.Now(), RetainAfter: time.Now().Add(-time.Hour), UnknownBefore: time.Now().Add(time.Minute), Interval: time.Nanosecond})
			return err
		}, true},
	}
	for i, step := range steps {
		before := registryRV(t, s, ctx)
		if err := step.write(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		checkCapacity(t, s, b, "a", step.name)
		if i > 0 {
			checkCapacity(t, s, b, "b", step.name)
		}
		changes, _, err := s.Changes(ctx, store.ChangeFilter{}, before, 1000)
		if err != nil {
			t.Fatal(err)
		}
		changed := false
		for _, c := range changes {
			changed = changed || c.Kind == store.KindClusterCapacity && asCapacity(c.Object).ClusterID == "a"
		}
		if changed != step.cc {
			t.Errorf("%s: ClusterCapacity a changed = %t, want %t", step.name, changed, step.cc)
		}
	}
	if c, err := s.GetClusterCapacity(ctx, "a"); err != nil || c.HasRoom || c.MaxFree != nil || c.NodesSchedulable != 0 {
		t.Errorf("no schedulable node left: %+v, %v; want no room and no max free", c, err)
	}

	// The feed, replayed: at each ClusterCapacity change, it equals the sum
	// over the NodeCapacities and ClusterNamespaces replayed so far.
	changes, _, err := s.Changes(ctx, store.ChangeFilter{}, start, 10000)
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]map[string]store.NodeCapacity{}
	nss := map[string]map[string]store.ClusterNamespace{}
	checked := 0
	for _, c := range changes {
		switch c.Kind {
		case store.KindNodeCapacity:
			n := asNode(c.Object)
			if nodes[n.ClusterID] == nil {
				nodes[n.ClusterID] = map[string]store.NodeCapacity{}
			}
			if c.Type == store.ChangeDeleted {
				delete(nodes[n.ClusterID], n.Node.Name)
			} else {
				nodes[n.ClusterID][n.Node.Name] = *n
			}
		case store.KindClusterNamespace:
			n := asNamespace(c.Object)
			if nss[n.ClusterID] == nil {
				nss[n.ClusterID] = map[string]store.ClusterNamespace{}
			}
			if c.Type == store.ChangeDeleted {
				delete(nss[n.ClusterID], n.Namespace.Name)
			} else {
				nss[n.ClusterID][n.Namespace.Name] = *n
			}
		case store.KindClusterCapacity:
			checked++
			var nl []store.NodeCapacity
			for _, n := range nodes[asCapacity(c.Object).ClusterID] {
				nl = append(nl, n)
			}
			var cl []store.ClusterNamespace
			for _, n := range nss[asCapacity(c.Object).ClusterID] {
				cl = append(cl, n)
			}
			if want, got := sumCapacity(nl, cl), capacityValues(*asCapacity(c.Object)); !reflect.DeepEqual(got, want) {
				t.Errorf("feed at %d: ClusterCapacity %s\n%+v\nsum of what the feed showed so far\n%+v", c.ResourceVersion, asCapacity(c.Object).ClusterID, got, want)
			}
		}
	}
	if checked < 10 {
		t.Errorf("checked %d ClusterCapacity changes, want one per changing step", checked)
	}

	removeMember(t, s, ctx, "a")
	if _, err := s.GetClusterCapacity(ctx, "a"); err == nil {
		t.Error("ClusterCapacity a after its removal: want not found")
	}
	checkCapacity(t, s, b, "b", "member a removed")
}

// gpuNode is a node with gpus nvidia.com/gpu and 100Gi of ephemeral storage.
func gpuNode(name string, gpus int64) store.Node {
	n := node(name, 16000, 64<<30)
	n.Capacity.Other = map[string]int64{"nvidia.com/gpu": gpus, "ephemeral-storage": 100 << 30}
	n.Allocatable.Other = map[string]int64{"nvidia.com/gpu": gpus, "ephemeral-storage": 95 << 30}
	return n
}

func checkCapacity(t *testing.T, s *postgres.Store, b testBundle, cluster, step string) {
	t.Helper()
	sel := []store.FieldRequirement{{Field: store.FieldColumns{Path: "status.cluster", Columns: []string{"cluster_id"}}, Op: "=", Value: cluster}}
	nodes := listNodes(t, s, b.Ctx, store.ListOptions{Fields: sel}).Items
	nss, err := s.ClusterNamespaces().List(b.Ctx, store.ListOptions{Fields: sel})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetClusterCapacity(b.Ctx, cluster)
	if err != nil {
		t.Fatalf("%s: GetClusterCapacity(%s): %v", step, cluster, err)
	}
	if want := sumCapacity(nodes, nss.Items); !reflect.DeepEqual(capacityValues(*got), want) {
		t.Errorf("%s: ClusterCapacity %s\n%+v\nwant the sum over its nodes and namespaces\n%+v", step, cluster, capacityValues(*got), want)
	}
}

// TestClusterCapacitySaturates: sums of quantities the registry stores
// (any int64) may exceed int64; they are kept exact and read as its bound.
func TestClusterCapacitySaturates(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	big := func(name string) store.Node {
		n := node(name, 1000, 1<<30)
		n.Allocatable.MemoryBytes, n.Allocatable.Pods = math.MaxInt64-1, math.MinInt64
		return n
	}
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Nodes: []store.Node{big("a"), big("b")}})
	c, err := s.GetClusterCapacity(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if c.All.Allocatable.MemoryBytes != math.MaxInt64 || c.All.Allocatable.Pods != math.MinInt64 || c.MaxFree == nil || c.MaxFree.MemoryBytes != math.MaxInt64-1 {
		t.Errorf("sums %+v, largest free %+v; want memory at MaxInt64, pods at MinInt64, one node's memory free", c.All.Allocatable, c.MaxFree)
	}
	// Exact underneath: removing one node leaves the other's values.
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Deleted: store.Keys{store.ResourceNodes: {{Name: "b"}}}})
	if c, err = s.GetClusterCapacity(ctx, "c"); err != nil || c.All.Allocatable.MemoryBytes != math.MaxInt64-1 || c.All.Allocatable.Pods != math.MinInt64 {
		t.Errorf("after deleting one: %+v, %v", c.All.Allocatable, err)
	}
}

// TestRecordMemberState: a member's mirroring state shows on its
// ClusterCapacity (created for a member without rows), takes a version only
// when it changes, and is fenced.
func TestRecordMemberState(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	f, err := s.ClaimMember(ctx, "m", "replica-1")
	if err != nil {
		t.Fatal(err)
	}
	before := registryRV(t, s, ctx)
	if err := s.RecordMemberState(ctx, f, store.MemberStatus{State: store.MemberUnreachable}); err != nil {
		t.Fatal(err)
	}
	c, err := s.GetClusterCapacity(ctx, "m")
	if err != nil || c.Mirroring != store.MemberUnreachable || c.MirroringSince.IsZero() || c.Nodes != 0 {
		t.Fatalf("after an Unreachable report: %+v, %v", c, err)
	}
	changes, _, err := s.Changes(ctx, store.ChangeFilter{}, before, 10)
	if err != nil || len(changes) != 1 || changes[0].Type != store.ChangeAdded || asCapacity(changes[0].Object).Mirroring != store.MemberUnreachable {
		t.Errorf("changes %+v, %v; want the ClusterCapacity ADDED", changes, err)
	}
	rv := registryRV(t, s, ctx)
	if err := s.RecordMemberState(ctx, f, store.MemberStatus{State: store.MemberUnreachable}); err != nil || registryRV(t, s, ctx) != rv {
		t.Errorf("the same state again: %v, registry %d → %d; want no change", err, rv, registryRV(t, s, ctx))
	}
	if err := s.RecordMemberState(ctx, f, store.MemberStatus{State: store.MemberSynced}); err != nil {
		t.Fatal(err)
	}
	if c2 := mustCapacity(t, s, ctx, "m"); c2.Mirroring != store.MemberSynced || c2.ResourceVersion <= rv {
		t.Errorf("after Synced: %+v", c2)
	}
	// The last change mirrored: a later one restamps, the same or an
	// earlier one does not, and the state stays with its since.
	since := mustCapacity(t, s, ctx, "m").MirroringSince
	changed := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i, step := range []struct {
		at      time.Time
		restamp bool
	}{{changed, true}, {changed, false}, {changed.Add(-time.Minute), false}, {changed.Add(time.Minute), true}} {
		rv := registryRV(t, s, ctx)
		if err := s.RecordMemberState(ctx, f, store.MemberStatus{State: store.MemberSynced, LastChange: step.at}); err != nil {
			t.Fatal(err)
		}
		c := mustCapacity(t, s, ctx, "m")
		if (c.ResourceVersion > rv) != step.restamp || !c.MirroringSince.Equal(since) || c.Mirroring != store.MemberSynced {
			t.Errorf("step %d, last change %s: %+v (registry was at %d); want restamped %v, state and since kept", i, step.at, c, rv, step.restamp)
		}
	}
	if c := mustCapacity(t, s, ctx, "m"); !c.LastChange.Equal(changed.Add(time.Minute)) {
		t.Errorf("last change %s, want %s", c.LastChange, changed.Add(time.Minute))
	}
	// The mirror heartbeat alike: a later one restamps, an earlier one
	// does not move it back, and the change feed carries it.
	rv = registryRV(t, s, ctx)
	for _, at := range []time.Time{changed, changed.Add(-time.Minute)} {
		if err := s.RecordMemberState(ctx, f, store.MemberStatus{State: store.MemberSynced, CompleteAsOf: at}); err != nil {
			t.Fatal(err)
		}
	}
	if c := mustCapacity(t, s, ctx, "m"); !c.CompleteAsOf.Equal(changed) || !c.LastChange.Equal(changed.Add(time.Minute)) {
		t.Errorf("complete as of %s, last change %s; want %s and the last change kept", c.CompleteAsOf, c.LastChange, changed)
	}
	changes, _, err = s.Changes(ctx, store.ChangeFilter{}, rv, 10)
	if err != nil || len(changes) != 1 || !asCapacity(changes[0].Object).CompleteAsOf.Equal(changed) {
		t.Errorf("changes %+v, %v; want one MODIFIED with the heartbeat", changes, err)
	}
	// The sums start from the reported row.
	mustApply(t, s, ctx, store.Batch{ClusterID: "m", Epoch: f.Epoch, Failovers: f.Failovers, Nodes: []store.Node{node("n1", 1000, 1<<30)}})
	if c2 := mustCapacity(t, s, ctx, "m"); c2.Nodes != 1 || c2.Mirroring != store.MemberSynced {
		t.Errorf("after a node: %+v", c2)
	}
	if _, err := s.ClaimMember(ctx, "m", "replica-2"); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordMemberState(ctx, f, store.MemberStatus{State: store.MemberLagging}); !errors.Is(err, store.ErrFenced) {
		t.Errorf("a report of the former owner: %v, want ErrFenced", err)
	}
}
