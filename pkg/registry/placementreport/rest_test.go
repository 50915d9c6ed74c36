package placementreport

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// allow allows the "verb resource/name" permissions it holds.
type allow map[string]bool

func (a allow) Authorize(_ context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if a[attrs.GetVerb()+" "+attrs.GetResource()+"/"+attrs.GetName()] {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// fakeRegistry answers with fixed fits and records whether it was asked.
type fakeRegistry struct {
	fits  []store.MemberFit
	asked []store.PlacementQuery
}

func (m *fakeRegistry) Placement(_ context.Context, q store.PlacementQuery) ([]store.MemberFit, error) {
	m.asked = append(m.asked, q)
	return m.fits, nil
}

func ctxAs(name string) context.Context {
	return request.WithUser(context.Background(), &user.DefaultInfo{Name: name})
}

func q(s string) resource.Quantity { return resource.MustParse(s) }

// TestBadRequests: each malformed spec is a 400 that names the field and
// says how to fix it, and the registry is not asked.
func TestBadRequests(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec platform.PlacementReportSpec
		want string
	}{
		{"pods requested", platform.PlacementReportSpec{Requests: map[string]resource.Quantity{"pods": q("1")}}, "spec.requests[pods]: Forbidden: each replica is one pod"},
		{"negative", platform.PlacementReportSpec{Requests: map[string]resource.Quantity{"cpu": q("-1")}}, "spec.requests[cpu]: Invalid value: \"-1\": must not be negative"},
		{"cpu out of range", platform.PlacementReportSpec{Requests: map[string]resource.Quantity{"cpu": q("1e16")}}, "spec.requests[cpu]: Invalid value: \"10e15\": out of range"},
		{"memory out of range", platform.PlacementReportSpec{Requests: map[string]resource.Quantity{"memory": q("1e30")}}, "spec.requests[memory]: Invalid value: \"1e30\": out of range"},
		{"fractional gpu", platform.PlacementReportSpec{Requests: map[string]resource.Quantity{"nvidia.com/gpu": q("500m")}}, "extended resource is requested in whole units"},
		{"bad resource name", platform.PlacementReportSpec{Requests: map[string]resource.Quantity{"a b": q("1")}}, "spec.requests[a b]: Invalid value"},
		{"device count", platform.PlacementReportSpec{Devices: []platform.DeviceRequest{{Driver: "gpu.example.com"}}}, "spec.devices[0].count: Invalid value: 0: must be at least 1"},
		{"device driver", platform.PlacementReportSpec{Devices: []platform.DeviceRequest{{Driver: "GPU!", Count: 1}}}, "spec.devices[0].driver"},
		{"replicas", platform.PlacementReportSpec{Replicas: -1}, "spec.replicas"},
		{"selector value", platform.PlacementReportSpec{NodeSelector: map[string]string{"pool": "a b"}}, "spec.nodeSelector[pool]"},
		{"affinity operator", platform.PlacementReportSpec{NodeAffinity: []platform.NodeSelectorTerm{{MatchExpressions: []platform.NodeSelectorRequirement{{Key: "zone", Operator: "Near"}}}}},
			`spec.nodeAffinity[0].matchExpressions[0].operator: Unsupported value: "Near"`},
		{"affinity gt", platform.PlacementReportSpec{NodeAffinity: []platform.NodeSelectorTerm{{MatchExpressions: []platform.NodeSelectorRequirement{{Key: "gen", Operator: "Gt", Values: []string{"x"}}}}}},
			"spec.nodeAffinity[0].matchExpressions[0]"},
		{"match field", platform.PlacementReportSpec{NodeAffinity: []platform.NodeSelectorTerm{{MatchFields: []platform.NodeSelectorRequirement{{Key: "spec.podCIDR", Operator: "In", Values: []string{"x"}}}}}},
			`spec.nodeAffinity[0].matchFields[0].key: Unsupported value: "spec.podCIDR"`},
		{"toleration without key", platform.PlacementReportSpec{Tolerations: []platform.Toleration{{Value: "x"}}}, "only with operator Exists"},
		{"toleration exists with value", platform.PlacementReportSpec{Tolerations: []platform.Toleration{{Key: "k", Operator: "Exists", Value: "v"}}}, "must be empty when operator is Exists"},
		{"toleration effect", platform.PlacementReportSpec{Tolerations: []platform.Toleration{{Operator: "Exists", Effect: "Never"}}}, `spec.tolerations[0].effect: Unsupported value: "Never"`},
		{"spread skew", platform.PlacementReportSpec{TopologySpread: &platform.TopologySpread{TopologyKey: "zone"}}, "spec.topologySpread.maxSkew"},
		{"spread key", platform.PlacementReportSpec{TopologySpread: &platform.TopologySpread{MaxSkew: 1}}, "spec.topologySpread.topologyKey"},
		{"both member choices", platform.PlacementReportSpec{Clusters: []string{"a"}, ClusterSelector: "env=prod"}, "set spec.clusters or spec.clusterSelector, not both"},
		{"duplicate member", platform.PlacementReportSpec{Clusters: []string{"a", "a"}}, `spec.clusters[1]: Duplicate value: "a"`},
		{"bad member selector", platform.PlacementReportSpec{ClusterSelector: "env in (prod"}, "spec.clusterSelector"},
		{"NUL", platform.PlacementReportSpec{Clusters: []string{"a\x00"}}, "NUL"},
		{"too many tolerations", platform.PlacementReportSpec{Tolerations: make([]platform.Toleration, 100_000)},
			"spec.tolerations: Too many: 100000: must have at most 100 items (this server's --max-query-tolerations)"},
		{"too many requests", platform.PlacementReportSpec{Requests: manyRequests(100_000)},
			"spec.requests: Too many: 100000: must have at most 32 items (this server's --max-query-resources)"},
		{"too many devices", platform.PlacementReportSpec{Devices: make([]platform.DeviceRequest, 33)}, "spec.devices: Too many: 33"},
		{"too many affinity terms", platform.PlacementReportSpec{NodeAffinity: make([]platform.NodeSelectorTerm, 10_000)},
			"spec.nodeAffinity: Too many: 10000: must have at most 8 items (this server's --max-query-affinity-terms)"},
		{"too many names in a term", platform.PlacementReportSpec{NodeAffinity: []platform.NodeSelectorTerm{{MatchFields: []platform.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: "In", Values: make([]string, 1001)}}}}}, "spec.nodeAffinity[0].matchFields[0].values: Too many: 1001"},
		{"too many expressions in a term", platform.PlacementReportSpec{NodeAffinity: []platform.NodeSelectorTerm{{MatchExpressions: make([]platform.NodeSelectorRequirement, 101)}}},
			"spec.nodeAffinity[0].matchExpressions: Too many: 101"},
		{"too many node selector labels", platform.PlacementReportSpec{NodeSelector: manyLabels(101)}, "spec.nodeSelector: Too many: 101"},
		{"too many members", platform.PlacementReportSpec{Clusters: make([]string, 1001)}, "spec.clusters: Too many: 1001: must have at most 1000 items (this server's --max-query-clusters)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &fakeRegistry{}
			r := NewREST(m, allow{"list clustercapacities/": true, "get clustercapacities/a": true}, registry.Limits{}, registry.MemberStaleness{})
			_, err := r.Create(ctxAs("admin"), &platform.PlacementReport{Spec: tc.spec}, nil, nil)
			if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want a 400 with %q", err, tc.want)
			}
			if len(m.asked) > 0 {
				t.Errorf("the registry was asked a malformed question: %+v", m.asked)
			}
		})
	}
}

// TestAuthorization: named members need get on each ClusterCapacity (or
// list, one check for them all), a selector or the whole fleet list; a
// question about nodes needs list nodecapacities, and only a caller who may
// list them is told how many nodes have room; refusals are 403s naming the
// permission, before the registry is asked.
func TestAuthorization(t *testing.T) {
	tenant := allow{"get clustercapacities/a": true}
	fleet := allow{"list clustercapacities/": true}
	nodes := allow{"get clustercapacities/a": true, "list nodecapacities/": true}
	name := []platform.NodeSelectorTerm{{MatchFields: []platform.NodeSelectorRequirement{{Key: "metadata.name", Operator: "In", Values: []string{"kwok-node-0"}}}}}
	for _, tc := range []struct {
		name      string
		perms     allow
		spec      platform.PlacementReportSpec
		want      string // "" allowed
		wantNodes bool
	}{
		{"a member", tenant, platform.PlacementReportSpec{Clusters: []string{"a"}}, "", false},
		{"a member the caller may not read", tenant, platform.PlacementReportSpec{Clusters: []string{"a", "b"}},
			`cannot get resource "clustercapacities" in API group "platform.example.io" at the cluster scope (name "b")`, false},
		{"every member", tenant, platform.PlacementReportSpec{}, `cannot list resource "clustercapacities"`, false},
		{"a selector's members", tenant, platform.PlacementReportSpec{ClusterSelector: "env=prod"}, `cannot list resource "clustercapacities"`, false},
		{"named members, the caller may list them", fleet, platform.PlacementReportSpec{Clusters: []string{"a", "b", "c"}}, "", false},
		{"a node's name", tenant, platform.PlacementReportSpec{Clusters: []string{"a"}, NodeAffinity: name},
			`cannot list resource "nodecapacities" in API group "platform.example.io" at the cluster scope, which a placement report that asks about nodes (spec.nodeAffinity) needs`, false},
		{"labels and taints", tenant, platform.PlacementReportSpec{Clusters: []string{"a"}, NodeSelector: map[string]string{"pool": "gpu"},
			Tolerations: []platform.Toleration{{Operator: "Exists"}}}, "asks about nodes (spec.nodeSelector, spec.tolerations)", false},
		{"a spread", tenant, platform.PlacementReportSpec{Clusters: []string{"a"}, TopologySpread: &platform.TopologySpread{TopologyKey: "zone", MaxSkew: 1}},
			"asks about nodes (spec.topologySpread)", false},
		{"devices", tenant, platform.PlacementReportSpec{Clusters: []string{"a"}, Devices: []platform.DeviceRequest{{Driver: "gpu.example.com", Count: 1}}},
			"asks about nodes (spec.devices)", false},
		{"a node's name, the caller may list nodes", nodes, platform.PlacementReportSpec{Clusters: []string{"a"}, NodeAffinity: name}, "", true},
		{"requests, the caller may list nodes", nodes, platform.PlacementReportSpec{Clusters: []string{"a"}, Requests: map[string]resource.Quantity{"cpu": q("1")}}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &fakeRegistry{fits: []store.MemberFit{{ClusterID: "a", Fits: 2, Nodes: 1}, {ClusterID: "b"}, {ClusterID: "c"}}}
			out, err := NewREST(m, tc.perms, registry.Limits{}, registry.MemberStaleness{}).Create(ctxAs("tenant"), &platform.PlacementReport{Spec: tc.spec}, nil, nil)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("%v, want an answer", err)
			case tc.want != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("%v, want a 403 with %q", err, tc.want)
			case tc.want != "" && len(m.asked) > 0:
				t.Fatalf("refused, yet the registry was asked")
			case tc.want != "":
				return
			}
			for _, c := range out.(*platform.PlacementReport).Status.Clusters {
				if (c.Nodes != nil) != tc.wantNodes {
					t.Errorf("%s: nodes %v, want it answered %v", c.Cluster, c.Nodes, tc.wantNodes)
				}
			}
		})
	}
}

func manyRequests(n int) map[string]resource.Quantity {
	r := make(map[string]resource.Quantity, n)
	for i := range n {
		r["example.com/r"+strconv.Itoa(i)] = q("1")
	}
	return r
}

func manyLabels(n int) map[string]string {
	l := make(map[string]string, n)
	for i := range n {
		l["k"+strconv.Itoa(i)] = "v"
	}
	return l
}

// TestAnswer: the query the registry gets, members best first, fitsAll,
// every member's data age from its heartbeat (a Synced member whose
// heartbeat is past the bound stale, as Stale), a member without a
// heartbeat aged from when it left Synced, and a 404 for a named member the
// registry does not hold.
func TestAnswer(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	m := &fakeRegistry{fits: []store.MemberFit{
		{ClusterID: "a", Fits: 3, Nodes: 2, Mirroring: store.MemberSynced, CompleteAsOf: now.Add(-4 * time.Minute)},
		{ClusterID: "b", Fits: 7, Nodes: 4, Mirroring: store.MemberUnreachable, MirroringSince: now.Add(-90 * time.Second)},
		{ClusterID: "c", Fits: 7, Nodes: 3, Mirroring: store.MemberSynced, CompleteAsOf: now.Add(-70500 * time.Millisecond)},
		{ClusterID: "d", Fits: 0, Mirroring: ""},
	}}
	r := NewREST(m, allow{"list clustercapacities/": true, "get clustercapacities/x": true, "list nodecapacities/": true}, registry.Limits{},
		registry.MemberStaleness{StaleAfter: 3 * time.Minute, Now: func() time.Time { return now }})
	spec := platform.PlacementReportSpec{Replicas: 5,
		Requests:       map[string]resource.Quantity{"cpu": q("1500m"), "memory": q("1Gi"), "nvidia.com/gpu": q("1"), "ephemeral-storage": q("0")},
		NodeSelector:   map[string]string{"pool": "gpu"},
		NodeAffinity:   []platform.NodeSelectorTerm{{MatchExpressions: []platform.NodeSelectorRequirement{{Key: "zone", Operator: "In", Values: []string{"a"}}}}, {}},
		TopologySpread: &platform.TopologySpread{TopologyKey: "zone", MaxSkew: 2},
		Tolerations:    []platform.Toleration{{Operator: "Exists"}},
	}
	out, err := r.Create(ctxAs("admin"), &platform.PlacementReport{Spec: spec}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := m.asked[0]
	if got.CPUMillis != 1500 || got.MemoryBytes != 1<<30 || len(got.Other) != 1 || got.Other["nvidia.com/gpu"] != 1 ||
		len(got.Nodes) != 2 || got.Nodes[0].Labels.String() != "pool=gpu, zone in (a)" || len(got.Nodes[1].Labels) != 0 ||
		got.SpreadKey != "zone" || got.MaxSkew != 2 || len(got.Tolerations) != 1 {
		t.Errorf("query %+v", got)
	}
	st := out.(*platform.PlacementReport).Status
	var order []string
	for _, c := range st.Clusters {
		order = append(order, c.Cluster)
	}
	if st.Fits != 17 || strings.Join(order, ",") != "c,b,a,d" {
		t.Errorf("fits %d in order %v, want 17 in c,b,a,d", st.Fits, order)
	}
	for _, c := range st.Clusters {
		wantAll := map[string]bool{"b": true, "c": true}[c.Cluster]
		if c.FitsAll == nil || *c.FitsAll != wantAll {
			t.Errorf("%s: fitsAll %v, want %v", c.Cluster, c.FitsAll, wantAll)
		}
		if want := map[string]int64{"a": 2, "b": 4, "c": 3}[c.Cluster]; c.Nodes == nil || *c.Nodes != want {
			t.Errorf("%s: nodes %v, want %d (the caller may list nodecapacities)", c.Cluster, c.Nodes, want)
		}
		switch c.Cluster {
		case "b":
			if !c.Stale || c.DataAge == nil || c.DataAge.Duration != 90*time.Second {
				t.Errorf("b: stale %v, data age %v; want stale for 1m30s", c.Stale, c.DataAge)
			}
		case "d":
			if !c.Stale || c.DataAge != nil {
				t.Errorf("d (no state reported): stale %v, data age %v; want stale, age unknown", c.Stale, c.DataAge)
			}
		case "a":
			if !c.Stale || c.Mirroring != platform.MirroringStale || c.DataAge == nil || c.DataAge.Duration != 4*time.Minute {
				t.Errorf("a (Synced, heartbeat 4m old, bound 3m): stale %v as %s, data age %v; want stale as Stale for 4m0s", c.Stale, c.Mirroring, c.DataAge)
			}
		case "c":
			if c.Stale || c.Mirroring != platform.MirroringSynced || c.DataAge == nil || c.DataAge.Duration != 70*time.Second {
				t.Errorf("c (Synced, heartbeat 70.5s old): stale %v as %s, data age %v; want current, Synced, 1m10s", c.Stale, c.Mirroring, c.DataAge)
			}
		default:
			if c.Stale || c.DataAge != nil {
				t.Errorf("%s: stale %v, data age %v; want current", c.Cluster, c.Stale, c.DataAge)
			}
		}
	}
	_, err = r.Create(ctxAs("admin"), &platform.PlacementReport{Spec: platform.PlacementReportSpec{Clusters: []string{"x"}}}, nil, nil)
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `clustercapacities.platform.example.io "x" not found`) {
		t.Errorf("unknown member: %v, want 404", err)
	}
}
