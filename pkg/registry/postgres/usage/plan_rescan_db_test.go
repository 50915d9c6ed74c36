package usage

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
	"github.com/example/platform-apiserver/pkg/registry/postgres/schema"
	"github.com/example/platform-apiserver/pkg/registry/postgres/writes"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestQuietScrapePlansNoRescanOfTheScrape: recording the scrape of a quiet
// member, whose usage has not moved for longer than the unknown-after age,
// looks its nodes and namespaces up in the scrape by hash, not with a
// nested loop over the scrape per row (metrics_usage_absent and
// namespace_usage_absent as NOT EXISTS were one: 1.1 s for a 5,000-node
// scrape, in every scrape of such a member).
func TestQuietScrapePlansNoRescanOfTheScrape(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := pgtesting.MigratedPool(t, schema.Migrate, schema.SetWriteProtocol)
	engine := writes.New(pool)
	s := NewRecorder(engine, pool)
	const n = 500
	b := store.Batch{ClusterID: "quiet"}
	for i := range n {
		name := fmt.Sprintf("o-%04d", i)
		b.Nodes = append(b.Nodes, store.Node{Name: name, UID: "node" + name, Allocatable: store.Quantities{CPUMillis: 4000, MemoryBytes: 1 << 34}})
		b.Namespaces = append(b.Namespaces, store.Namespace{Name: name, UID: "ns" + name})
	}
	if err := engine.Apply(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE cluster_node, cluster_namespace"); err != nil {
		t.Fatal(err)
	}
	policy := store.UsageReporting{Threshold: 0.05, UnknownAfter: 5 * time.Minute}
	first := time.Now().Add(-20 * time.Minute).Truncate(time.Second)
	scrape := func(at time.Time) ([]store.NodeMetricsSample, []store.NamespaceMetricsSample) {
		var nodes []store.NodeMetricsSample
		var namespaces []store.NamespaceMetricsSample
		for i := range n {
			name := fmt.Sprintf("o-%04d", i)
			nodes = append(nodes, store.NodeMetricsSample{ClusterID: "quiet", Node: name, CPUNanoCores: 1e9, MemoryBytes: 1 << 30, ObservedAt: at, Window: 20 * time.Second})
			namespaces = append(namespaces, store.NamespaceMetricsSample{ClusterID: "quiet", Namespace: name, CPUNanoCores: 1e9, MemoryBytes: 1 << 30, Pods: 3, ObservedAt: at})
		}
		return nodes, namespaces
	}
	nodes, namespaces := scrape(first)
	if _, err := s.RecordNodeMetrics(ctx, store.Fence{ClusterID: "quiet"}, nodes, policy); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordNamespaceMetrics(ctx, store.Fence{ClusterID: "quiet"}, namespaces, policy); err != nil {
		t.Fatal(err)
	}

	// The same usage a quarter of an hour later.
	at := first.Add(15 * time.Minute)
	nodes, namespaces = scrape(at)
	if err := EnsurePartitions(ctx, pool, at, at); err != nil {
		t.Fatal(err)
	}
	nodeParam, err := sampleRows(nodes)
	if err != nil {
		t.Fatal(err)
	}
	var rows []namespaceSampleRow
	for _, m := range namespaces {
		rows = append(rows, namespaceSampleRow{Namespace: m.Namespace, CPUNanoCores: m.CPUNanoCores, MemoryBytes: m.MemoryBytes, Pods: m.Pods, ObservedAt: m.ObservedAt})
	}
	namespaceParam, err := writes.JSONRows(rows)
	if err != nil {
		t.Fatal(err)
	}
	if loops := pgtesting.Rescans(t, ctx, pool, sqlRecordMetrics, nodeParam, policy.Threshold, policy.Period.Seconds(), "quiet", unknownCut(at, policy)); len(loops) > 0 {
		t.Errorf("metrics_record: %s", strings.Join(loops, "; "))
	}
	if loops := pgtesting.Rescans(t, ctx, pool, sqlNamespaceUsageDue, "quiet", namespaceParam, policy.Threshold, policy.Period.Seconds(), unknownAfterSeconds(policy)); len(loops) > 0 {
		t.Errorf("namespace_usage_due_names: %s", strings.Join(loops, "; "))
	}
	// And the scrape reports nothing: a quiet member stays quiet.
	recorded, err := s.RecordNodeMetrics(ctx, store.Fence{ClusterID: "quiet"}, nodes, policy)
	if err != nil {
		t.Fatal(err)
	}
	if recorded.Reported != 0 {
		t.Errorf("a quiet scrape reported %d nodes", recorded.Reported)
	}
	if reported, err := s.RecordNamespaceMetrics(ctx, store.Fence{ClusterID: "quiet"}, namespaces, policy); err != nil || reported != 0 {
		t.Errorf("a quiet scrape reported %d namespaces (%v)", reported, err)
	}
}
