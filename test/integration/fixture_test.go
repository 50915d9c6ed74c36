package integration

import (
	"context"
	"fmt"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

const (
	gi = int64(1) << 30
	mi = int64(1) << 20
)

var fixtureTime = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// Cluster prod-1 has four nodes in different states; prod-2 has 20 plain
// nodes so lists span several pages.
//
//	prod-1.n1  ready; pods 500m/1Gi, 500m/1Gi, 250m/512Mi → 1250m, 2.5Gi, 3 pods
//	prod-1.n2  cordoned
//	prod-1.n3  tainted NoSchedule
//	prod-1.n4  NotReady
//	team-a of prod-1 also holds an unscheduled pod (2000m/4Gi) and a quota.
func writeFixture(ctx context.Context, reg *postgres.Store) error {
	if err := reg.Apply(ctx, prod1()); err != nil {
		return fmt.Errorf("prod-1: %w", err)
	}
	if err := reg.Apply(ctx, prod2()); err != nil {
		return fmt.Errorf("prod-2: %w", err)
	}
	_, err := reg.RecordNodeMetrics(ctx, store.Fence{ClusterID: "prod-1"}, []store.NodeMetricsSample{{
		ClusterID: "prod-1", Node: "n1", CPUNanoCores: 1_234_000_000, MemoryBytes: 3 * gi,
		ObservedAt: fixtureTime, Window: 30 * time.Second,
	}}, store.UsageReporting{Threshold: 0.05, Period: 5 * time.Minute})
	return err
}

func node(name string) store.Node {
	return store.Node{
		Name: name, UID: "uid-" + name, CreatedAt: fixtureTime,
		Labels:      map[string]string{"kubernetes.io/hostname": name},
		Capacity:    store.Quantities{CPUMillis: 4000, MemoryBytes: 16 * gi, Pods: 110},
		Allocatable: store.Quantities{CPUMillis: 3920, MemoryBytes: 15 * gi, Pods: 110},
		Ready:       true,
		Conditions:  []store.NodeCondition{{Type: "Ready", Status: "True", Reason: "KubeletReady", LastTransitionTime: fixtureTime}},
	}
}

func prod1() store.Batch {
	n1, n2, n3, n4 := node("n1"), node("n2"), node("n3"), node("n4")
	n1.Labels["pool"] = "big"
	n2.Unschedulable = true
	n3.Taints = []store.Taint{{Key: "dedicated", Value: "gpu", Effect: "NoSchedule"}}
	n4.Ready = false
	n4.Conditions[0].Status = "False"
	return store.Batch{
		ClusterID: "prod-1",
		Namespaces: []store.Namespace{
			{Name: "team-a", UID: "uid-team-a", Phase: "Active", CreatedAt: fixtureTime, Labels: map[string]string{"tenant": "a"}},
			{Name: "team-b", UID: "uid-team-b", Phase: "Terminating", CreatedAt: fixtureTime, Labels: map[string]string{"tenant": "b"}},
		},
		Nodes: []store.Node{n1, n2, n3, n4},
		Pods: []store.Pod{
			{Namespace: "team-a", Name: "web-1", UID: "p1", NodeName: "n1", Phase: "Running", CPURequestMillis: 500, MemoryRequestBytes: gi},
			{Namespace: "team-a", Name: "web-2", UID: "p2", NodeName: "n1", Phase: "Running", CPURequestMillis: 500, MemoryRequestBytes: gi},
			{Namespace: "team-b", Name: "db-1", UID: "p3", NodeName: "n1", Phase: "Running", CPURequestMillis: 250, MemoryRequestBytes: 512 * mi},
			{Namespace: "team-a", Name: "job-1", UID: "p4", Phase: "Pending", CPURequestMillis: 2000, MemoryRequestBytes: 4 * gi},
		},
		Quotas: []store.Quota{{
			Namespace: "team-a", Name: "compute",
			Hard: map[string]string{"requests.cpu": "4", "pods": "10"},
			Used: map[string]string{"requests.cpu": "3", "pods": "3"},
		}},
	}
}

func prod2() store.Batch {
	b := store.Batch{ClusterID: "prod-2", Namespaces: []store.Namespace{
		{Name: "team-a", UID: "uid2-team-a", Phase: "Active", CreatedAt: fixtureTime},
	}}
	for i := range 20 {
		n := node(fmt.Sprintf("m%02d", i))
		if i%4 == 0 {
			n.Labels["pool"] = "big"
		}
		b.Nodes = append(b.Nodes, n)
	}
	return b
}

// Expected counts derived from the fixture.
const (
	fixtureNodes          = 24 // 4 in prod-1, 20 in prod-2
	fixtureBigPool        = 6  // prod-1.n1 and every fourth prod-2 node
	fixtureUnschedulable  = 3  // prod-1 n2, n3, n4
	fixtureClusterNSTeamA = 2  // team-a in prod-1 and prod-2
)
