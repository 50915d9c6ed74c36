package bench

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// placementMembers is the fleet BenchmarkPlacement asks: the seed's member
// under this many cluster ids, as BenchmarkFleet's default.
const placementMembers = 20

// placementShape is the question: 2 CPUs and 4Gi per replica, any node
// that is not tainted or cordoned.
var placementShape = v1alpha1.PlacementReportSpec{Requests: map[string]resource.Quantity{
	"cpu": resource.MustParse("2"), "memory": resource.MustParse("4Gi")}}

// BenchmarkPlacement answers "how many replicas of this shape fit on each
// member" over the seed under placementMembers cluster ids: by one
// PlacementReport (placement/report, also with a zone spread), and as a
// client would without it, listing every NodeCapacity and computing the
// answer (placement/list-and-compute, checked against the report's).
func BenchmarkPlacement(b *testing.B) {
	e := benchEnv(b, envOptions{name: "placement", prepare: seedPlacementFleet})
	ask := func(ctx context.Context, spec v1alpha1.PlacementReportSpec) (*v1alpha1.PlacementReport, error) {
		r, err := e.platform.PlatformV1alpha1().PlacementReports().Create(ctx, &v1alpha1.PlacementReport{Spec: spec}, metav1.CreateOptions{})
		if err == nil && len(r.Status.Clusters) != placementMembers {
			err = fmt.Errorf("answered %d members, want %d", len(r.Status.Clusters), placementMembers)
		}
		return r, err
	}
	want, err := ask(b.Context(), placementShape)
	must(b, err)
	summary.printf("placement (the list-and-compute side is checked against the report's answer)", "%d replicas fit over %d members of %d nodes", want.Status.Fits, len(want.Status.Clusters), nodeCount)
	spread := placementShape
	spread.TopologySpread = &v1alpha1.TopologySpread{TopologyKey: "topology.kubernetes.io/zone", MaxSkew: 1}
	reports := func(suffix string) {
		b.Run("placement/report"+suffix, func(b *testing.B) {
			benchLatency(b, func(ctx context.Context) error { _, err := ask(ctx, placementShape); return err })
		})
		b.Run("placement/report-zone-spread"+suffix, func(b *testing.B) {
			benchLatency(b, func(ctx context.Context) error { _, err := ask(ctx, spread); return err })
		})
	}
	reports("") // as seeded: the rows' pages not yet vacuumed, so not all-visible
	b.Run("placement/list-and-compute", func(b *testing.B) {
		benchLatency(b, func(ctx context.Context) error {
			fits, err := e.fitsFromList(ctx)
			if err != nil {
				return err
			}
			for _, c := range want.Status.Clusters {
				if fits[c.Cluster] != c.Fits {
					return fmt.Errorf("member %s: the list computes %d replicas, the report %d", c.Cluster, fits[c.Cluster], c.Fits)
				}
			}
			return nil
		})
	})
	// What autovacuum leaves a registry in between bursts of writes: the
	// schedulable nodes' room is then read from the free-CPU index alone.
	_, err = e.db.Exec(b.Context(), "VACUUM (ANALYZE) cluster_node")
	must(b, err)
	reports("-vacuumed")
}

// fitsFromList lists every NodeCapacity and computes, per member, the
// replicas of placementShape that fit: on each node without a NoSchedule
// or NoExecute taint and not cordoned, the fewest that CPU, memory and the
// pod count leave room for.
func (e *env) fitsFromList(ctx context.Context) (map[string]int64, error) {
	cpu, mem := placementShape.Requests["cpu"], placementShape.Requests["memory"]
	fits := map[string]int64{}
	opts := metav1.ListOptions{Limit: nodeCount}
	for {
		list, err := e.platform.PlatformV1alpha1().NodeCapacities().List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for _, nc := range list.Items {
			st := &nc.Status
			if st.Unschedulable || slices.ContainsFunc(st.Taints, func(t v1alpha1.Taint) bool { return t.Effect == "NoSchedule" || t.Effect == "NoExecute" }) {
				continue
			}
			n := min((st.Allocatable.CPU.MilliValue()-st.Requested.CPU.MilliValue())/cpu.MilliValue(),
				(st.Allocatable.Memory.Value()-st.Requested.Memory.Value())/mem.Value(),
				st.Allocatable.Pods-st.Requested.Pods)
			fits[st.Cluster] += max(n, 0)
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return fits, nil
		}
	}
}

// seedPlacementFleet writes the seed's member under placementMembers
// cluster ids, each Synced, as discovery would.
func seedPlacementFleet(ctx context.Context, e *env) error {
	if err := e.registry.Migrate(ctx); err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Second)
	for m := range placementMembers {
		id := fmt.Sprintf("member-%02d", m)
		batch := registryBatch(now)
		batch.ClusterID = id
		if err := e.registry.Apply(ctx, batch); err != nil {
			return fmt.Errorf("apply member %s: %w", id, err)
		}
		f, err := e.registry.ClaimMember(ctx, id, "bench")
		if err != nil {
			return err
		}
		if err := e.registry.RecordMemberState(ctx, f, store.MemberStatus{State: store.MemberSynced, LastChange: now}); err != nil {
			return err
		}
	}
	return nil
}
