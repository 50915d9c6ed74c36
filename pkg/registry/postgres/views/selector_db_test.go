package views_test

import (
	"maps"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/example/platform-apiserver/pkg/registry/clusternamespace"
	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/registrytest"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestLabelSelectors evaluates selectors in SQL and compares the result with
// labels.Selector.Matches on the same objects.
func TestLabelSelectors(t *testing.T) {
	t.Parallel()
	s, b := registrytest.Setup(t, postgres.Options{})
	ctx := b.Ctx
	objects := map[string]map[string]string{
		"c1.a": {"app": "web", "tier": "front", "size": "3"},
		"c1.b": {"app": "db", "size": "10"},
		"c1.c": {"app": "web", "size": "big"},
		"c2.a": {"tier": "back", "size": "-1"},
		"c2.b": {"app": "it's \"quoted\"", "size": "99999999999999999999"},
		"3.a":  {},
	}
	for key, l := range objects {
		cluster, name, _ := strings.Cut(key, ".")
		n := pgtesting.Node(name, 1000, 1<<30)
		n.Labels = l
		registrytest.MustApply(t, s, ctx, store.Batch{ClusterID: cluster, Nodes: []store.Node{n}})
	}
	selectors := []string{
		"", "app=web", "app==db", "app!=web", "app in (web,db)", "app notin (web)", "app", "!app",
		"size>3", "size<10", "size<0", "size>0", "app=web,size>2", "tier,!app",
		"app in (web,db,x)", "app notin (web,db)", "tier notin (front,back)", "app notin (web,x),tier", "app in (db),tier notin (x,y)",
		postgres.ClusterLabel + "=c1", postgres.ClusterLabel + "!=c1", postgres.ClusterLabel + " in (c2,3)",
		postgres.ClusterLabel + " notin (c2)", postgres.ClusterLabel, "!" + postgres.ClusterLabel,
		postgres.ClusterLabel + ">2", postgres.ClusterLabel + "=c1,app=web",
	}
	for _, sel := range selectors {
		t.Run(sel, func(t *testing.T) {
			parsed, err := labels.Parse(sel)
			if err != nil {
				t.Fatal(err)
			}
			reqs, _ := parsed.Requirements()
			var want []string
			for key, l := range objects {
				withCluster := labels.Set{}
				maps.Copy(withCluster, l)
				withCluster[postgres.ClusterLabel], _, _ = strings.Cut(key, ".")
				if parsed.Matches(withCluster) {
					want = append(want, key)
				}
			}
			got := registrytest.ListNodes(t, s, ctx, store.ListOptions{Labels: reqs}).Items
			if g, w := sortedKeys(registrytest.NodeKeys(got)), sortedKeys(strings.Join(want, ",")); g != w {
				t.Errorf("selector %q: got %s, want %s", sel, g, w)
			}
		})
	}
}

func sortedKeys(csv string) string {
	if csv == "" {
		return ""
	}
	parts := strings.Split(csv, ",")
	for i := range parts {
		for j := i + 1; j < len(parts); j++ {
			if parts[j] < parts[i] {
				parts[i], parts[j] = parts[j], parts[i]
			}
		}
	}
	return strings.Join(parts, ",")
}

func TestFieldSelectors(t *testing.T) {
	t.Parallel()
	s, b := registrytest.Setup(t, postgres.Options{})
	ctx := b.Ctx
	ready := pgtesting.Node("ready", 1000, 1)
	cordoned := pgtesting.Node("cordoned", 1000, 1)
	cordoned.Unschedulable = true
	noSchedule := pgtesting.Node("noschedule", 1000, 1)
	noSchedule.Taints = []store.Taint{{Key: "dedicated", Value: "gpu", Effect: "NoSchedule"}}
	noExecute := pgtesting.Node("noexecute", 1000, 1)
	noExecute.Taints = []store.Taint{{Key: "x", Effect: "PreferNoSchedule"}, {Key: "y", Effect: "NoExecute"}}
	prefer := pgtesting.Node("prefer", 1000, 1)
	prefer.Taints = []store.Taint{{Key: "x", Effect: "PreferNoSchedule"}}
	notReady := pgtesting.Node("notready", 1000, 1)
	notReady.Ready = false
	registrytest.MustApply(t, s, ctx, store.Batch{ClusterID: "c1", Nodes: []store.Node{ready, cordoned, noSchedule, noExecute, prefer, notReady},
		Namespaces: []store.Namespace{pgtesting.Namespace("a"), {Name: "b", Phase: "Terminating"}}})
	registrytest.MustApply(t, s, ctx, store.Batch{ClusterID: "c2", Nodes: []store.Node{ready}, Namespaces: []store.Namespace{pgtesting.Namespace("a")}})

	eq, ne := selection.Equals, selection.NotEquals
	nodeTests := []struct {
		name   string
		fields []store.FieldRequirement
		want   string
	}{
		{name: "schedulable", fields: []store.FieldRequirement{{Field: nodecapacity.Kind.MustField("status.schedulable"), Op: eq, Value: "true"}}, want: "c1.prefer,c1.ready,c2.ready"},
		{name: "unschedulable", fields: []store.FieldRequirement{{Field: nodecapacity.Kind.MustField("status.schedulable"), Op: eq, Value: "false"}}, want: "c1.cordoned,c1.noexecute,c1.noschedule,c1.notready"},
		{name: "schedulable != true", fields: []store.FieldRequirement{{Field: nodecapacity.Kind.MustField("status.schedulable"), Op: ne, Value: "true"}}, want: "c1.cordoned,c1.noexecute,c1.noschedule,c1.notready"},
		{name: "metadata.name", fields: []store.FieldRequirement{{Field: nodecapacity.Kind.MustField("metadata.name"), Op: eq, Value: "c2.ready"}}, want: "c2.ready"},
		{name: "metadata.name without dot", fields: []store.FieldRequirement{{Field: nodecapacity.Kind.MustField("metadata.name"), Op: eq, Value: "ready"}}, want: ""},
		{name: "metadata.name != without dot", fields: []store.FieldRequirement{{Field: nodecapacity.Kind.MustField("metadata.name"), Op: ne, Value: "ready"}, {Field: nodecapacity.Kind.MustField("status.cluster"), Op: eq, Value: "c2"}}, want: "c2.ready"},
		{name: "nodeName", fields: []store.FieldRequirement{{Field: nodecapacity.Kind.MustField("status.nodeName"), Op: eq, Value: "ready"}}, want: "c1.ready,c2.ready"},
		{name: "cluster and not schedulable", fields: []store.FieldRequirement{{Field: nodecapacity.Kind.MustField("status.cluster"), Op: ne, Value: "c1"}, {Field: nodecapacity.Kind.MustField("status.schedulable"), Op: eq, Value: "false"}}, want: ""},
	}
	for _, tc := range nodeTests {
		t.Run("nodes/"+tc.name, func(t *testing.T) {
			got := registrytest.NodeKeys(registrytest.ListNodes(t, s, ctx, store.ListOptions{Fields: tc.fields}).Items)
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
	nsTests := []struct {
		name   string
		fields []store.FieldRequirement
		want   string
	}{
		{name: "namespace", fields: []store.FieldRequirement{{Field: clusternamespace.Kind.MustField("metadata.namespace"), Op: eq, Value: "a"}}, want: "a/c1,a/c2"},
		{name: "name is cluster", fields: []store.FieldRequirement{{Field: clusternamespace.Kind.MustField("metadata.name"), Op: eq, Value: "c2"}}, want: "a/c2"},
		{name: "phase", fields: []store.FieldRequirement{{Field: clusternamespace.Kind.MustField("status.phase"), Op: eq, Value: "Terminating"}}, want: "b/c1"},
		{name: "cluster", fields: []store.FieldRequirement{{Field: clusternamespace.Kind.MustField("status.cluster"), Op: ne, Value: "c2"}}, want: "a/c1,b/c1"},
	}
	for _, tc := range nsTests {
		t.Run("namespaces/"+tc.name, func(t *testing.T) {
			p, err := s.ClusterNamespaces().List(ctx, store.ListOptions{Fields: tc.fields})
			if err != nil {
				t.Fatal(err)
			}
			if got := registrytest.NamespaceKeys(p.Items); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
	// A field a kind cannot select never reaches the store: the kind's
	// declaration refuses it (pkg/registry's TestKindFieldSelectors).
	for _, bad := range []store.FieldRequirement{
		{Field: nodecapacity.Kind.MustField("status.schedulable"), Op: eq, Value: "yes"},
		{Field: nodecapacity.Kind.MustField("status.cluster"), Op: selection.In, Value: "x"},
	} {
		if _, err := s.NodeCapacities().List(ctx, store.ListOptions{Fields: []store.FieldRequirement{bad}}); err == nil {
			t.Errorf("field %+v: want an error", bad)
		}
	}
}
