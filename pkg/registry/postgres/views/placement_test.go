package views_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/registrytest"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// simNode is a node as kube-scheduler's filters see it.
type simNode struct {
	member, name  string
	labels        map[string]string
	unschedulable bool
	taints        []corev1.Taint
	free          map[string]int64 // allocatable minus requested, per resource; "pods" the pods left
}

// simulate places replicas of q one at a time, as kube-scheduler does,
// on a node chosen at random among those that pass its filters (node
// affinity, unschedulable, taints, resources, topology spread), and
// returns how many it placed per member and how many nodes could take
// one at the start. It is written from the scheduler's rules, not from
// the registry's SQL.
func simulate(rng *rand.Rand, nodes []simNode, q store.PlacementQuery) (map[string]int64, map[string]int64) {
	want := map[string]int64{"pods": 1, "cpu": q.CPUMillis, "memory": q.MemoryBytes}
	maps.Copy(want, q.Other)
	for d, v := range q.Devices {
		want["device/"+d] = v
	}
	var tolerations []corev1.Toleration
	for _, t := range q.Tolerations {
		tolerations = append(tolerations, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	tolerated := func(taint corev1.Taint) bool {
		return slices.ContainsFunc(tolerations, func(t corev1.Toleration) bool { return t.ToleratesTaint(klog.Background(), &taint, false) })
	}
	matches := func(n *simNode) bool {
		if len(q.Nodes) == 0 {
			return true
		}
		for _, term := range q.Nodes {
			ok := (len(term.Labels) > 0 || len(term.Names) > 0 || len(term.NotNames) > 0) &&
				labels.NewSelector().Add(term.Labels...).Matches(labels.Set(n.labels)) &&
				(len(term.Names) == 0 || slices.Contains(term.Names, n.name)) && !slices.Contains(term.NotNames, n.name)
			if ok {
				return true
			}
		}
		return false
	}
	passes := func(n *simNode) bool { // the filters but resources and spread
		if n.unschedulable && !tolerated(corev1.Taint{Key: "node.kubernetes.io/unschedulable", Effect: corev1.TaintEffectNoSchedule}) {
			return false
		}
		for _, t := range n.taints {
			if (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) && !tolerated(t) {
				return false
			}
		}
		return true
	}
	room := func(n *simNode) bool {
		for r, v := range want {
			if v > 0 && n.free[r] < v {
				return false
			}
		}
		return true
	}
	placed, roomy := map[string]int64{}, map[string]int64{}
	byMember := map[string][]*simNode{}
	for i := range nodes {
		n := &nodes[i]
		_, hasKey := n.labels[q.SpreadKey]
		if matches(n) && (q.SpreadKey == "" || hasKey) {
			byMember[n.member] = append(byMember[n.member], n)
			if passes(n) && room(n) {
				roomy[n.member]++
			}
		}
	}
	for member, eligible := range byMember {
		counts := map[string]int64{} // replicas per domain, over every eligible node's domain
		for _, n := range eligible {
			counts[n.labels[q.SpreadKey]] += 0
		}
		for {
			least := int64(-1)
			for _, c := range counts {
				if least < 0 || c < least {
					least = c
				}
			}
			var candidates []*simNode
			for _, n := range eligible {
				if passes(n) && room(n) && (q.SpreadKey == "" || counts[n.labels[q.SpreadKey]]+1-least <= q.MaxSkew) {
					candidates = append(candidates, n)
				}
			}
			if len(candidates) == 0 {
				break
			}
			n := candidates[rng.IntN(len(candidates))]
			for r, v := range want {
				n.free[r] -= v
			}
			counts[n.labels[q.SpreadKey]]++
			placed[member]++
		}
	}
	return placed, roomy
}

// TestPlacement compares the registry's answer with the simulation on
// random members: nodes of mixed sizes, labels, taints, cordons, readiness,
// pods, extended resources and devices, and random pod shapes.
func TestPlacement(t *testing.T) {
	t.Parallel()
	s, b := registrytest.Setup(t, postgres.Options{})
	ctx := b.Ctx
	rng := rand.New(rand.NewPCG(1, 2))
	zones := []string{"a", "b", "c"}
	taints := []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoExecute}, {Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}
	var sim []simNode
	var exactCPU int64 // a schedulable node's free CPU: a request of all of it fits once there
	members := []string{"m1", "m2", "m3"}
	for _, m := range members {
		batch := store.Batch{ClusterID: m, Namespaces: []store.Namespace{pgtesting.Namespace("ns")}}
		for i := range 6 + rng.IntN(8) {
			n := pgtesting.Node(fmt.Sprintf("n%d", i), int64(1000*(1+rng.IntN(8))), int64(1<<30*(1+rng.IntN(16))))
			n.Allocatable.Pods = int64(3 + rng.IntN(20))
			n.Labels["pool"] = []string{"general", "gpu", "db"}[rng.IntN(3)]
			n.Labels["gen"] = strconv.Itoa(rng.IntN(5))
			if rng.IntN(5) > 0 { // some nodes have no zone
				n.Labels["topology.kubernetes.io/zone"] = zones[rng.IntN(len(zones))]
			}
			n.Unschedulable = rng.IntN(8) == 0
			n.Ready = rng.IntN(6) > 0 // kube-scheduler checks a not-ready node's taints, not its condition
			sn := simNode{member: m, name: n.Name, labels: n.Labels, unschedulable: n.Unschedulable,
				free: map[string]int64{"pods": n.Allocatable.Pods, "cpu": n.Allocatable.CPUMillis, "memory": n.Allocatable.MemoryBytes}}
			for _, t := range taints {
				if rng.IntN(4) == 0 {
					n.Taints = append(n.Taints, store.Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
					sn.taints = append(sn.taints, t)
				}
			}
			if n.Labels["pool"] == "gpu" {
				n.Allocatable.Other = map[string]int64{"nvidia.com/gpu": int64(rng.IntN(9))}
				sn.free["nvidia.com/gpu"] = n.Allocatable.Other["nvidia.com/gpu"]
				slices := int64(rng.IntN(5))
				batch.Slices = append(batch.Slices, pgtesting.ResourceSlice(n.Name+"-gpus", n.Name, 1, int(slices)))
				sn.free["device/"+pgtesting.GPUDriver] = slices
			}
			for j := range rng.IntN(4) {
				p := pgtesting.Pod("ns", fmt.Sprintf("%s-p%d", n.Name, j), n.Name, int64(100*rng.IntN(20)), int64(1<<28*rng.IntN(8)))
				if n.Labels["pool"] == "gpu" && rng.IntN(2) == 0 {
					p.OtherRequests = map[string]int64{"nvidia.com/gpu": 1}
					sn.free["nvidia.com/gpu"]--
				}
				batch.Pods = append(batch.Pods, p)
				sn.free["pods"]--
				sn.free["cpu"] -= p.CPURequestMillis
				sn.free["memory"] -= p.MemoryRequestBytes
			}
			hard := slices.ContainsFunc(sn.taints, func(t corev1.Taint) bool { return t.Effect != corev1.TaintEffectPreferNoSchedule })
			if exactCPU == 0 && n.Ready && !n.Unschedulable && !hard && sn.free["pods"] > 0 && sn.free["cpu"] > 0 {
				exactCPU = sn.free["cpu"]
			}
			batch.Nodes = append(batch.Nodes, n)
			sim = append(sim, sn)
		}
		registrytest.MustApply(t, s, ctx, batch)
	}
	f, err := s.ClaimMember(ctx, "m2", "replica-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RecordMemberState(ctx, f, store.MemberStatus{State: store.MemberLagging}); err != nil {
		t.Fatal(err)
	}

	req := func(key string, op selection.Operator, values ...string) labels.Requirement {
		r, err := labels.NewRequirement(key, op, values)
		if err != nil {
			t.Fatal(err)
		}
		return *r
	}
	shapes := []struct {
		name string
		q    store.PlacementQuery
	}{
		{"cpu-heavy", store.PlacementQuery{CPUMillis: 1500, MemoryBytes: 256 << 20}},
		{"memory-heavy", store.PlacementQuery{CPUMillis: 100, MemoryBytes: 3 << 30}},
		{"no requests", store.PlacementQuery{}},
		{"gpu, tolerating the gpu taint", store.PlacementQuery{CPUMillis: 500, Other: map[string]int64{"nvidia.com/gpu": 2},
			Tolerations: []store.Toleration{{Key: "gpu", Operator: "Equal", Value: "true", Effect: "NoSchedule"}}}},
		{"dra devices", store.PlacementQuery{CPUMillis: 200, Devices: map[string]int64{pgtesting.GPUDriver: 2},
			Tolerations: []store.Toleration{{Key: "gpu", Operator: "Exists"}}}},
		{"tolerating everything", store.PlacementQuery{CPUMillis: 700, Tolerations: []store.Toleration{{Operator: "Exists"}}}},
		{"node selector", store.PlacementQuery{CPUMillis: 250, Nodes: []store.NodeTerm{{Labels: labels.Requirements{req("pool", selection.Equals, "general")}}}}},
		{"affinity terms, gt and notin", store.PlacementQuery{MemoryBytes: 1 << 30, Nodes: []store.NodeTerm{
			{Labels: labels.Requirements{req("gen", selection.GreaterThan, "2"), req("pool", selection.NotIn, "db")}},
			{Labels: labels.Requirements{req("pool", selection.In, "db")}, NotNames: []string{"n0", "n1"}},
			{}}}},
		{"node names", store.PlacementQuery{CPUMillis: 100, Nodes: []store.NodeTerm{{Names: []string{"n2", "n3", "n4"}}}}},
		{"zone spread", store.PlacementQuery{CPUMillis: 300, SpreadKey: "topology.kubernetes.io/zone", MaxSkew: 1}},
		{"zone spread, skew 3, selector", store.PlacementQuery{CPUMillis: 200, MemoryBytes: 512 << 20, SpreadKey: "topology.kubernetes.io/zone", MaxSkew: 3,
			Nodes: []store.NodeTerm{{Labels: labels.Requirements{req("pool", selection.NotEquals, "gpu")}}}}},
		{"hostname spread", store.PlacementQuery{CPUMillis: 100, SpreadKey: "kubernetes.io/hostname", MaxSkew: 2,
			Tolerations: []store.Toleration{{Operator: "Exists", Effect: "NoSchedule"}}}},
		{"cordon tolerated", store.PlacementQuery{CPUMillis: 400, Tolerations: []store.Toleration{{Key: "node.kubernetes.io/unschedulable", Operator: "Exists"}}}},
		{"all of a node's free cpu", store.PlacementQuery{CPUMillis: exactCPU}},
	}
	for _, shape := range shapes {
		t.Run(shape.name, func(t *testing.T) {
			got, err := s.Placement(ctx, shape.q)
			if err != nil {
				t.Fatal(err)
			}
			placed, roomy := simulate(rng, cloneFree(sim), shape.q)
			if len(got) != len(members) {
				t.Fatalf("answered %d members, want %d: %+v", len(got), len(members), got)
			}
			t.Logf("the simulation placed %v, nodes with room %v", placed, roomy)
			for _, g := range got {
				if g.Fits != placed[g.ClusterID] || g.Nodes != roomy[g.ClusterID] {
					t.Errorf("%s: fits %d on %d nodes, the simulation placed %d, %d nodes had room", g.ClusterID, g.Fits, g.Nodes, placed[g.ClusterID], roomy[g.ClusterID])
				}
				if wantState := map[string]store.MemberState{"m2": store.MemberLagging}[g.ClusterID]; g.Mirroring != wantState || (wantState != "") == g.MirroringSince.IsZero() {
					t.Errorf("%s: mirroring %q since %v, want %q", g.ClusterID, g.Mirroring, g.MirroringSince, wantState)
				}
			}
		})
	}

	t.Run("members named or selected", func(t *testing.T) {
		got, err := s.Placement(ctx, store.PlacementQuery{Clusters: []string{"m3", "m1", "absent"}})
		if err != nil || len(got) != 2 || got[0].ClusterID != "m1" || got[1].ClusterID != "m3" {
			t.Errorf("named m3, m1 and absent: %+v, %v; want m1 and m3", got, err)
		}
		got, err = s.Placement(ctx, store.PlacementQuery{Members: labels.Requirements{req(postgres.ClusterLabel, selection.NotIn, "m1", "m3")}})
		if err != nil || len(got) != 1 || got[0].ClusterID != "m2" {
			t.Errorf("selected all but m1 and m3: %+v, %v; want m2", got, err)
		}
	})
}

// cloneFree copies the nodes' free amounts, which a simulation consumes.
func cloneFree(nodes []simNode) []simNode {
	out := slices.Clone(nodes)
	for i := range out {
		out[i].free = maps.Clone(nodes[i].free)
	}
	return out
}
