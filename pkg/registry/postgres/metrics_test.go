package postgres_test

import (
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

func TestNodeMetrics(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.ctx
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	sample := func(node string, at time.Duration, cpu int64) store.NodeMetricsSample {
		return store.NodeMetricsSample{ClusterID: "c", Node: node, CPUNanoCores: cpu, MemoryBytes: cpu * 10, ObservedAt: t0.Add(at), Window: 15 * time.Second}
	}
	// Samples may arrive before discovery records the node.
	n, err := s.InsertNodeMetrics(ctx, []store.NodeMetricsSample{sample("n1", 0, 100), sample("n1", 0, 100), sample("n2", 0, 5)})
	if err != nil || n != 2 {
		t.Fatalf("InsertNodeMetrics = %d, %v; want 2 new rows", n, err)
	}
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Nodes: []store.Node{node("n1", 1000, 1), node("n2", 1000, 1)}})
	assertUsage(t, s, b, "n1", 100, t0)

	rv := getNode(t, s, ctx, "c", "n1").ResourceVersion
	steps := []struct {
		name     string
		samples  []store.NodeMetricsSample
		wantNew  int64
		wantCPU  int64
		wantAt   time.Time
		wantBump bool
	}{
		{name: "newer sample", samples: []store.NodeMetricsSample{sample("n1", time.Minute, 200)}, wantNew: 1, wantCPU: 200, wantAt: t0.Add(time.Minute), wantBump: true},
		{name: "duplicate", samples: []store.NodeMetricsSample{sample("n1", time.Minute, 200)}, wantNew: 0, wantCPU: 200, wantAt: t0.Add(time.Minute)},
		{name: "older sample", samples: []store.NodeMetricsSample{sample("n1", 30*time.Second, 150)}, wantNew: 1, wantCPU: 200, wantAt: t0.Add(time.Minute)},
	}
	for _, step := range steps {
		n, err := s.InsertNodeMetrics(ctx, step.samples)
		if err != nil || n != step.wantNew {
			t.Fatalf("%s: InsertNodeMetrics = %d, %v; want %d", step.name, n, err, step.wantNew)
		}
		assertUsage(t, s, b, "n1", step.wantCPU, step.wantAt)
		now := getNode(t, s, ctx, "c", "n1").ResourceVersion
		if bumped := now != rv; bumped != step.wantBump {
			t.Errorf("%s: node RV %d → %d, want bumped=%v", step.name, rv, now, step.wantBump)
		}
		rv = now
	}

	// Prune keeps each node's latest sample even when it is old.
	pruned, err := s.PruneNodeMetrics(ctx, t0.Add(time.Hour))
	if err != nil || pruned != 2 {
		t.Fatalf("PruneNodeMetrics = %d, %v; want 2 (n1's two older samples)", pruned, err)
	}
	assertUsage(t, s, b, "n1", 200, t0.Add(time.Minute))
	assertUsage(t, s, b, "n2", 5, t0)
	if pruned, err := s.PruneNodeMetrics(ctx, t0.Add(time.Hour)); err != nil || pruned != 0 {
		t.Fatalf("second prune = %d, %v; want 0", pruned, err)
	}
}

func assertUsage(t *testing.T, s *postgres.Store, b testBundle, node string, cpu int64, at time.Time) {
	t.Helper()
	n := getNode(t, s, b.ctx, "c", node)
	if n.Usage == nil {
		t.Fatalf("%s: no usage", node)
	}
	if n.Usage.CPUNanoCores != cpu || n.Usage.MemoryBytes != cpu*10 || !n.Usage.Timestamp.Equal(at) || n.Usage.Window != 15*time.Second {
		t.Errorf("%s usage = %+v, want cpu %d at %s", node, *n.Usage, cpu, at)
	}
}
