package placementreport

import (
	"context"
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

// TestAuthorization: named fakeRegistry need get on each ClusterCapacity, a
// selector or the whole fleet list; refusals are 403s naming the
// permission, before the registry is asked.
func TestAuthorization(t *testing.T) {
	perms := allow{"get clustercapacities/a": true}
	for _, tc := range []struct {
		spec platform.PlacementReportSpec
		want string // "" allowed
	}{
		{platform.PlacementReportSpec{Clusters: []string{"a"}}, ""},
		{platform.PlacementReportSpec{Clusters: []string{"a", "b"}}, `cannot get resource "clustercapacities" in API group "platform.example.io" at the cluster scope (name "b")`},
		{platform.PlacementReportSpec{}, `cannot list resource "clustercapacities"`},
		{platform.PlacementReportSpec{ClusterSelector: "env=prod"}, `cannot list resource "clustercapacities"`},
	} {
		m := &fakeRegistry{fits: []store.MemberFit{{ClusterID: "a"}}}
		_, err := NewREST(m, perms, registry.Limits{}, registry.MemberStaleness{}).Create(ctxAs("tenant"), &platform.PlacementReport{Spec: tc.spec}, nil, nil)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v, want an answer", tc.spec, err)
		case tc.want != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: %v, want a 403 with %q", tc.spec, err, tc.want)
		case tc.want != "" && len(m.asked) > 0:
			t.Errorf("%+v: refused, yet the registry was asked", tc.spec)
		}
	}
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
	r := NewREST(m, allow{"list clustercapacities/": true, "get clustercapacities/x": true}, registry.Limits{},
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
