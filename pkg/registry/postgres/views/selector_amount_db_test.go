package views_test

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/registrytest"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestAmountFieldSelectors evaluates NodeCapacity's keyed amount selectors
// (status.available.other.<resource name>, ...) in SQL and compares the
// result with what a watch matches in memory on the same objects, and with
// the nodes each should select.
func TestAmountFieldSelectors(t *testing.T) {
	t.Parallel()
	s, b := registrytest.Setup(t, postgres.Options{})
	ctx := b.Ctx
	withOther := func(name string, other map[string]int64) store.Node {
		n := pgtesting.Node(name, 4000, 8<<30)
		n.Allocatable.Other = other
		return n
	}
	requesting := func(name, nodeName string, other map[string]int64) store.Pod {
		p := pgtesting.Pod("a", name, nodeName, 100, 1<<20)
		p.OtherRequests = other
		return p
	}
	done := requesting("done", "gpu", map[string]int64{"nvidia.com/gpu": 8})
	done.Phase = "Succeeded" // terminal: requests nothing
	registrytest.MustApply(t, s, ctx, store.Batch{ClusterID: "c1", Namespaces: []store.Namespace{pgtesting.Namespace("a")},
		Nodes: []store.Node{
			withOther("full", map[string]int64{"nvidia.com/gpu": 8}),
			withOther("gpu", map[string]int64{"nvidia.com/gpu": 8, "ephemeral-storage": 100 << 30}),
			pgtesting.Node("cpu", 4000, 8<<30),
			withOther("huge", map[string]int64{"hugepages-2Mi": 1 << 30, "ephemeral-storage": 100 << 30}),
			withOther("over", map[string]int64{"nvidia.com/gpu": 1}),
		},
		Pods: []store.Pod{
			requesting("p1", "full", map[string]int64{"nvidia.com/gpu": 6}),
			requesting("p2", "full", map[string]int64{"nvidia.com/gpu": 2}),
			requesting("p3", "gpu", map[string]int64{"nvidia.com/gpu": 3, "ephemeral-storage": 1 << 30}),
			done,
			requesting("p4", "huge", map[string]int64{"hugepages-2Mi": 512 << 20}),
			requesting("p5", "over", map[string]int64{"nvidia.com/gpu": 2}), // bound past the scheduler: -1 free
			requesting("p6", "cpu", map[string]int64{"example.com/fpga": 1}),
		}})
	registrytest.MustApply(t, s, ctx, store.Batch{ClusterID: "c2", Nodes: []store.Node{withOther("gpu", map[string]int64{"nvidia.com/gpu": 1})}})

	const free = "status.available.other.nvidia.com/gpu"
	for sel, want := range map[string]string{
		free + "!=0":                   "c1.gpu,c1.over,c2.gpu",
		free + "=0":                    "c1.cpu,c1.full,c1.huge",
		free + "==5":                   "c1.gpu",
		free + "=-1":                   "c1.over",
		free + "!=0,status.cluster=c1": "c1.gpu,c1.over",
		"status.allocatable.other.nvidia.com/gpu=8":         "c1.full,c1.gpu",
		"status.requested.other.nvidia.com/gpu!=0":          "c1.full,c1.gpu,c1.over",
		"status.requested.other.nvidia.com/gpu=3":           "c1.gpu", // the terminal pod's 8 not counted
		"status.allocatable.other.hugepages-2Mi=1Gi":        "c1.huge",
		"status.allocatable.other.hugepages-2Mi=1073741824": "c1.huge",
		"status.available.other.hugepages-2Mi=512Mi":        "c1.huge",
		"status.available.other.ephemeral-storage=99Gi":     "c1.gpu",
		"status.allocatable.other.ephemeral-storage=100Gi":  "c1.gpu,c1.huge",
		"status.available.other.example.com/fpga=-1":        "c1.cpu", // requested, never allocatable
		"status.available.other.example.com/none=0":         "c1.cpu,c1.full,c1.gpu,c1.huge,c1.over,c2.gpu",
		"status.available.other.example.com/none!=0":        "",
	} {
		t.Run(sel, func(t *testing.T) {
			parsed := fields.ParseSelectorOrDie(sel)
			var opts store.ListOptions
			for _, r := range parsed.Requirements() {
				req, err := nodecapacity.Kind.FieldTable().Requirement(r.Field, r.Operator, r.Value)
				if err != nil {
					t.Fatal(err)
				}
				opts.Fields = append(opts.Fields, req)
			}
			got := registrytest.NodeKeys(registrytest.ListNodes(t, s, ctx, opts).Items)
			if got != want {
				t.Errorf("registry: %s, want %s", got, want)
			}
			// A watch matches the normalized selector against the objects.
			normalized, err := parsed.Transform(fields.TransformFunc(nodecapacity.Kind.Declaration().FieldLabelConversion))
			if err != nil {
				t.Fatal(err)
			}
			var matched []string
			for _, nc := range registrytest.ListNodes(t, s, ctx, store.ListOptions{}).Items {
				o := nodecapacity.ToObject(&nc)
				if normalized.Matches(nodecapacity.Kind.FieldValues(&o)) {
					matched = append(matched, o.Name)
				}
			}
			if m := strings.Join(matched, ","); m != got {
				t.Errorf("in memory (watch): %s, registry %s", m, got)
			}
		})
	}

	// The key is a bind parameter, whatever it holds; a value that is not
	// normalized to a whole number never reaches SQL.
	field := nodecapacity.Kind.MustField("status.available.other.")
	injected := store.FieldRequirement{Field: field, Op: selection.Equals, Key: "x'); DROP TABLE cluster_node; --", Value: "0"}
	if got := registrytest.NodeKeys(registrytest.ListNodes(t, s, ctx, store.ListOptions{Fields: []store.FieldRequirement{injected}}).Items); got != "c1.cpu,c1.full,c1.gpu,c1.huge,c1.over,c2.gpu" {
		t.Errorf("a key no node lists: %s, want every node", got)
	}
	for _, bad := range []store.FieldRequirement{
		{Field: field, Op: selection.Equals, Key: "nvidia.com/gpu", Value: "1Gi"},
		{Field: field, Op: selection.Equals, Value: "1"},
	} {
		if _, err := s.NodeCapacities().List(ctx, store.ListOptions{Fields: []store.FieldRequirement{bad}}); !errors.Is(err, store.ErrInvalidSelector) {
			t.Errorf("%+v: %v, want an invalid selector", bad, err)
		}
	}
}
