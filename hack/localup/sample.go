package main

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

// seedSampleData writes two small sample clusters into the registry through
// the store's Writer — the same path discovery takes — so `make run` shows
// computed views: requests summed over pods, one cordoned node, one tainted,
// one NotReady, one without a metrics sample, and a quota.
func seedSampleData(ctx context.Context, dsn string) error {
	reg, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		return err
	}
	defer reg.Close()
	if err := reg.Migrate(ctx); err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Second)
	for _, b := range []store.Batch{sampleCluster("prod-1", now, 4), sampleCluster("staging", now, 2)} {
		if err := reg.Apply(ctx, b); err != nil {
			return fmt.Errorf("writing sample cluster %s: %w", b.ClusterID, err)
		}
	}
	var samples []store.NodeMetricsSample
	for i := 0; i < 3; i++ { // node 4 of prod-1 has no sample: usage unknown
		samples = append(samples, store.NodeMetricsSample{
			ClusterID: "prod-1", Node: fmt.Sprintf("node-%d", i+1),
			CPUNanoCores: int64(900+400*i) * 1_000_000, MemoryBytes: int64(3+2*i) * gi,
			ObservedAt: now, Window: 30 * time.Second,
		})
	}
	_, err = reg.InsertNodeMetrics(ctx, samples)
	return err
}

func sampleCluster(id string, now time.Time, nodes int) store.Batch {
	b := store.Batch{ClusterID: id}
	for _, ns := range []string{"default", "team-a", "team-b"} {
		b.Namespaces = append(b.Namespaces, store.Namespace{
			Name: ns, UID: id + "-" + ns, Phase: "Active", CreatedAt: now.Add(-72 * time.Hour),
			Labels: map[string]string{"kubernetes.io/metadata.name": ns},
		})
	}
	for i := 1; i <= nodes; i++ {
		name := fmt.Sprintf("node-%d", i)
		n := store.Node{
			Name: name, UID: id + "-" + name, CreatedAt: now.Add(-24 * time.Hour),
			Labels:      map[string]string{"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": fmt.Sprintf("zone-%c", 'a'+i%2)},
			Capacity:    store.Resources{CPUMillis: 4000, MemoryBytes: 16 * gi, Pods: 110},
			Allocatable: store.Resources{CPUMillis: 3920, MemoryBytes: 15 * gi, Pods: 110},
			Ready:       true,
			Conditions:  []store.NodeCondition{{Type: "Ready", Status: "True", Reason: "KubeletReady", LastTransitionTime: now.Add(-time.Hour)}},
		}
		switch i {
		case 2:
			n.Unschedulable = true // cordoned
		case 3:
			n.Taints = []store.Taint{{Key: "dedicated", Value: "gpu", Effect: "NoSchedule"}}
		case 4:
			n.Ready = false
			n.Conditions[0].Status, n.Conditions[0].Reason = "False", "KubeletNotReady"
		}
		b.Nodes = append(b.Nodes, n)
		for p := 0; p < i+1; p++ {
			ns := []string{"team-a", "team-b"}[p%2]
			b.Pods = append(b.Pods, store.Pod{
				Namespace: ns, Name: fmt.Sprintf("%s-web-%d", name, p), UID: fmt.Sprintf("%s-%s-%d", id, name, p),
				NodeName: name, Phase: "Running", CPURequestMillis: 500, MemoryRequestBytes: 768 * mi,
			})
		}
	}
	b.Pods = append(b.Pods, store.Pod{Namespace: "team-a", Name: "pending-job", UID: id + "-pending", Phase: "Pending", CPURequestMillis: 2000, MemoryRequestBytes: 4 * gi})
	b.Quotas = []store.Quota{{
		Namespace: "team-a", Name: "compute",
		Hard: map[string]string{"requests.cpu": "8", "requests.memory": "16Gi", "pods": "20"},
		Used: map[string]string{"requests.cpu": "5500m", "requests.memory": "10Gi", "pods": "8"},
	}}
	return b
}
