package writes_test

import (
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestWriteMetrics: a committed Apply counts its changed objects by kind and
// observes its wait for its turn to commit and its hold; the pool reports its connections.
// Not parallel: the counters are process-wide.
func TestWriteMetrics(t *testing.T) {
	s, b := setup(t, postgres.Options{})
	s.RegisterMetrics()
	ctx := b.Ctx
	gather := func() (nodes, namespaces, holds float64, poolSeries int) {
		t.Helper()
		mfs, err := legacyregistry.DefaultGatherer.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				switch mf.GetName() {
				case "platform_registry_objects_changed_total":
					for _, l := range m.GetLabel() {
						switch {
						case l.GetName() == "kind" && l.GetValue() == "NodeCapacity":
							nodes = m.GetCounter().GetValue()
						case l.GetName() == "kind" && l.GetValue() == "ClusterNamespace":
							namespaces = m.GetCounter().GetValue()
						}
					}
				case "platform_registry_writer_lock_hold_seconds":
					holds += float64(m.GetHistogram().GetSampleCount())
				case "platform_registry_pool_connections":
					poolSeries++
				}
			}
		}
		return nodes, namespaces, holds, poolSeries
	}
	n0, ns0, h0, _ := gather()
	mustApply(t, s, ctx, store.Batch{ClusterID: "c",
		Nodes:      []store.Node{node("n1", 1000, 1<<30), node("n2", 1000, 1<<30), node("n3", 1000, 1<<30)},
		Namespaces: []store.Namespace{{Name: "a", Phase: "Active"}},
	})
	n1, ns1, h1, series := gather()
	if n1-n0 != 3 || ns1-ns0 != 1 || h1-h0 != 1 {
		t.Errorf("after one Apply of 3 nodes and 1 namespace: +%v NodeCapacity, +%v ClusterNamespace, +%v lock holds; want 3, 1, 1",
			n1-n0, ns1-ns0, h1-h0)
	}
	if series != 4*4 {
		t.Errorf("platform_registry_pool_connections has %d series, want 16 (acquired, idle, constructing, max of the reads, writes, feed and health pools)", series)
	}
}
