package postgres_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/selection"

	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestUnschedulableReason: the registry's unschedulable_reason column
// (migration 008) agrees with store.Node.UnschedulableReason and with
// schedulable for every combination of ready, cordoned and taint effect,
// selects by reason, and follows a node's changes into the change feed.
func TestUnschedulableReason(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	var nodes []store.Node
	for _, ready := range []bool{true, false} {
		for _, cordoned := range []bool{true, false} {
			for _, effect := range []string{"", "NoSchedule", "NoExecute", "PreferNoSchedule"} {
				n := node(fmt.Sprintf("r%t-c%t-%s", ready, cordoned, effect), 1000, 1<<30)
				n.Ready, n.Unschedulable = ready, cordoned
				if effect != "" {
					n.Taints = []store.Taint{{Key: "k", Effect: effect}}
				}
				nodes = append(nodes, n)
			}
		}
	}
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Nodes: nodes})

	byReason := map[string][]string{}
	for _, n := range nodes {
		got := getNode(t, s, ctx, "c", n.Name)
		if want := n.UnschedulableReason(); got.UnschedulableReason != want {
			t.Errorf("%s: registry reason %q, Go reason %q", n.Name, got.UnschedulableReason, want)
		}
		if got.Schedulable != (got.UnschedulableReason == "") {
			t.Errorf("%s: schedulable %t with reason %q", n.Name, got.Schedulable, got.UnschedulableReason)
		}
		byReason[got.UnschedulableReason] = append(byReason[got.UnschedulableReason], "c."+n.Name)
	}
	for _, reason := range []string{"", store.ReasonNotReady, store.ReasonCordoned, store.ReasonTainted} {
		req := store.FieldRequirement{Field: nodecapacity.Kind.MustField("status.unschedulableReason"), Op: selection.Equals, Value: reason}
		if err := req.ValidateValue(); err != nil {
			t.Fatal(err)
		}
		got := nodeKeys(listNodes(t, s, ctx, store.ListOptions{Fields: []store.FieldRequirement{req}}).Items)
		want := byReason[reason]
		slices.Sort(want)
		if got != strings.Join(want, ",") || len(want) == 0 {
			t.Errorf("status.unschedulableReason=%q: got %s, want %s (not empty)", reason, got, strings.Join(want, ","))
		}
	}

	// Cordoning a Ready node: one MODIFIED entry whose states carry both reasons.
	before := registryRV(t, s, ctx)
	cordon := node("rtrue-cfalse-", 1000, 1<<30)
	cordon.Unschedulable = true
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Nodes: []store.Node{cordon}})
	all, _, err := s.Changes(ctx, store.ChangeFilter{}, before, 10)
	if err != nil {
		t.Fatal(err)
	}
	var changes []store.Change // the ClusterCapacity of c changes too
	for _, c := range all {
		if c.Kind == store.KindNodeCapacity {
			changes = append(changes, c)
		}
	}
	if len(changes) != 1 || asNode(changes[0].Prev) == nil ||
		asNode(changes[0].Prev).UnschedulableReason != "" || asNode(changes[0].Object).UnschedulableReason != store.ReasonCordoned {
		t.Errorf("cordon: changes %+v, want one from \"\" to Cordoned", changes)
	}
}
