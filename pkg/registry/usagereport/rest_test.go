package usagereport

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// fakeAuthorizer allows the permissions in allowed ("verb resource
// namespace/name", "" for a cluster-scoped name) and records what it was asked.
type fakeAuthorizer struct {
	allowed map[string]bool
	err     error
	asked   []string
}

func permission(a authorizer.Attributes) string {
	return a.GetVerb() + " " + a.GetResource() + " " + a.GetNamespace() + "/" + a.GetName()
}

func (f *fakeAuthorizer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	p := permission(a)
	f.asked = append(f.asked, a.GetUser().GetName()+": "+p)
	if a.GetAPIGroup() != platform.GroupName || !a.IsResourceRequest() {
		return authorizer.DecisionDeny, "", nil
	}
	if f.err != nil {
		return authorizer.DecisionNoOpinion, "", f.err
	}
	if f.allowed[p] {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// fakeHistory knows member prod-1, its node n1 and its namespace team-a.
type fakeHistory struct{ asked []store.UsageQuery }

func (f *fakeHistory) UsageHistory(_ context.Context, q store.UsageQuery) (*store.UsageHistory, error) {
	f.asked = append(f.asked, q)
	if q.ClusterID != "prod-1" || (q.Node != "" && q.Node != "n1") || (q.Namespace != "" && q.Namespace != "team-a") {
		return nil, store.ErrNotFound
	}
	h := &store.UsageHistory{Nodes: 1, Samples: 12, From: time.Now().Add(-time.Hour), To: time.Now(),
		CPU: store.UsageStats{Average: 1e9, Max: 2e9}, Memory: store.UsageStats{Average: 1 << 30, Max: 2 << 30}}
	if q.Recommend != nil {
		h.Recommendation = &store.UsageRecommendation{
			Requests: store.UsageAmounts{CPU: 1_250_000_000, Memory: 3 << 30}, Quota: store.UsageAmounts{CPU: 2e9, Memory: 4 << 30},
			CPUCovered: 0.96498, MemoryCovered: 0.99}
	}
	if q.Step > 0 {
		h.Series = []store.UsageBucket{{Start: time.Unix(3600, 0), Samples: 12,
			CPU: store.UsageStats{Average: 914995400, P95: 1_000_500_000, Max: 2e9}, Memory: store.UsageStats{Average: 1707116258, P95: 1 << 30, Max: 2 << 30}}}
	}
	return h, nil
}

// teamA is the namespace record every report of team-a in prod-1 reads:
// its pods request 4 CPUs and 8Gi; its two quotas limit requests.cpu to
// 10 and cpu to 6 (the least binds), and requests.memory to 16Gi.
func teamA(_ context.Context, namespace, cluster string) (*store.ClusterNamespace, error) {
	if namespace != "team-a" || cluster != "prod-1" {
		return nil, store.ErrNotFound
	}
	return &store.ClusterNamespace{ClusterID: cluster, Namespace: store.Namespace{Name: namespace},
		Requested: store.Quantities{CPUMillis: 4000, MemoryBytes: 8 << 30},
		Quotas: []store.Quota{{Name: "compute", Hard: map[string]string{"requests.cpu": "10", "requests.memory": "16Gi"}},
			{Name: "cap", Hard: map[string]string{"cpu": "6", "pods": "20"}}}}, nil
}

func hour() metav1.Duration { return metav1.Duration{Duration: time.Hour} }

// TestAuthorization is the decision table: each question needs its one
// permission; without it the answer is 403 naming it, for targets that
// exist and ones that do not alike, and the history is never asked.
func TestAuthorization(t *testing.T) {
	// What alice may read: team-a's ClusterNamespace of prod-1 and of the
	// unknown prod-9, node n1 and the unknown n9, member prod-1 and prod-9.
	alice := map[string]bool{
		"get clusternamespaces team-a/prod-1": true, "get clusternamespaces team-a/prod-9": true,
		"get nodecapacities /prod-1.n1": true, "get nodecapacities /prod-1.n9": true,
		"get clustercapacities /prod-1": true, "get clustercapacities /prod-9": true,
	}
	for _, tc := range []struct {
		name    string
		local   string // the LocalUsageReport's namespace; "" for a UsageReport
		spec    platform.UsageReportSpec
		allowed map[string]bool
		want    int    // HTTP status
		needs   string // the permission asked, as fakeAuthorizer writes it
		message string // in the 403
	}{
		{name: "namespace allowed", spec: platform.UsageReportSpec{Cluster: "prod-1", Namespace: "team-a", Window: hour()},
			allowed: alice, want: 201, needs: "get clusternamespaces team-a/prod-1"},
		{name: "namespace allowed, unknown member", spec: platform.UsageReportSpec{Cluster: "prod-9", Namespace: "team-a", Window: hour()},
			allowed: alice, want: 404, needs: "get clusternamespaces team-a/prod-9"},
		{name: "namespace denied", spec: platform.UsageReportSpec{Cluster: "prod-1", Namespace: "team-b", Window: hour()},
			want: 403, needs: "get clusternamespaces team-b/prod-1",
			message: `usagereports.platform.example.io is forbidden: User "alice" cannot get resource "clusternamespaces" in API group "platform.example.io" in the namespace "team-b" (name "prod-1"), which a report of a namespace's usage needs`},
		{name: "namespace denied, unknown namespace", spec: platform.UsageReportSpec{Cluster: "prod-1", Namespace: "nope", Window: hour()},
			want: 403, needs: "get clusternamespaces nope/prod-1",
			message: `usagereports.platform.example.io is forbidden: User "alice" cannot get resource "clusternamespaces" in API group "platform.example.io" in the namespace "nope" (name "prod-1"), which a report of a namespace's usage needs`},
		{name: "node allowed", spec: platform.UsageReportSpec{Cluster: "prod-1", NodeName: "n1", Window: hour()},
			allowed: alice, want: 201, needs: "get nodecapacities /prod-1.n1"},
		{name: "node allowed, unknown node", spec: platform.UsageReportSpec{Cluster: "prod-1", NodeName: "n9", Window: hour()},
			allowed: alice, want: 404, needs: "get nodecapacities /prod-1.n9"},
		{name: "node denied", spec: platform.UsageReportSpec{Cluster: "prod-1", NodeName: "n1", Window: hour()},
			allowed: map[string]bool{"get nodecapacities /prod-1.n2": true}, want: 403, needs: "get nodecapacities /prod-1.n1",
			message: `User "alice" cannot get resource "nodecapacities" in API group "platform.example.io" at the cluster scope (name "prod-1.n1"), which a report of a node's usage needs`},
		{name: "node denied, unknown node", spec: platform.UsageReportSpec{Cluster: "prod-1", NodeName: "n9", Window: hour()},
			want: 403, needs: "get nodecapacities /prod-1.n9",
			message: `User "alice" cannot get resource "nodecapacities" in API group "platform.example.io" at the cluster scope (name "prod-1.n9")`},
		{name: "selection allowed", spec: platform.UsageReportSpec{Cluster: "prod-1", NodeSelector: "pool=gpu", Window: hour()},
			allowed: map[string]bool{"list nodecapacities /": true}, want: 201, needs: "list nodecapacities /"},
		{name: "selection denied to who may get every node by name", spec: platform.UsageReportSpec{Cluster: "prod-1", NodeSelector: "pool=gpu", Window: hour()},
			allowed: alice, want: 403, needs: "list nodecapacities /",
			message: `User "alice" cannot list resource "nodecapacities" in API group "platform.example.io" at the cluster scope, which a report of the usage of the nodes a selector matches needs`},
		{name: "member allowed", spec: platform.UsageReportSpec{Cluster: "prod-1", Window: hour()},
			allowed: alice, want: 201, needs: "get clustercapacities /prod-1"},
		{name: "member allowed, unknown member", spec: platform.UsageReportSpec{Cluster: "prod-9", Window: hour()},
			allowed: alice, want: 404, needs: "get clustercapacities /prod-9"},
		{name: "member denied to who may read its namespaces and nodes", spec: platform.UsageReportSpec{Cluster: "prod-1", Window: hour()},
			allowed: map[string]bool{"get clusternamespaces team-a/prod-1": true, "list nodecapacities /": true}, want: 403, needs: "get clustercapacities /prod-1",
			message: `User "alice" cannot get resource "clustercapacities" in API group "platform.example.io" at the cluster scope (name "prod-1"), which a report of a member cluster's usage needs`},
		{name: "member denied, unknown member", spec: platform.UsageReportSpec{Cluster: "prod-9", Window: hour()},
			want: 403, needs: "get clustercapacities /prod-9",
			message: `User "alice" cannot get resource "clustercapacities" in API group "platform.example.io" at the cluster scope (name "prod-9")`},
		{name: "local allowed", local: "team-a", spec: platform.UsageReportSpec{Cluster: "prod-1", Window: hour()},
			allowed: alice, want: 201, needs: "get clusternamespaces team-a/prod-1"},
		{name: "local allowed, spec.namespace its own", local: "team-a", spec: platform.UsageReportSpec{Cluster: "prod-1", Namespace: "team-a", Window: hour()},
			allowed: alice, want: 201, needs: "get clusternamespaces team-a/prod-1"},
		{name: "local allowed, unknown member", local: "team-a", spec: platform.UsageReportSpec{Cluster: "prod-9", Window: hour()},
			allowed: alice, want: 404, needs: "get clusternamespaces team-a/prod-9"},
		{name: "local denied", local: "team-b", spec: platform.UsageReportSpec{Cluster: "prod-1", Window: hour()},
			allowed: alice, want: 403, needs: "get clusternamespaces team-b/prod-1",
			message: `localusagereports.platform.example.io is forbidden: User "alice" cannot get resource "clusternamespaces" in API group "platform.example.io" in the namespace "team-b" (name "prod-1")`},
		{name: "local denied, unknown namespace", local: "nope", spec: platform.UsageReportSpec{Cluster: "prod-1", Window: hour()},
			allowed: alice, want: 403, needs: "get clusternamespaces nope/prod-1",
			message: `localusagereports.platform.example.io is forbidden: User "alice" cannot get resource "clusternamespaces" in API group "platform.example.io" in the namespace "nope" (name "prod-1")`},
		// Bad questions are refused before anyone is asked.
		{name: "local with another spec.namespace", local: "team-a", spec: platform.UsageReportSpec{Cluster: "prod-1", Namespace: "team-b", Window: hour()},
			allowed: alice, want: 400, message: `create the report in "team-b"`},
		{name: "local with a node", local: "team-a", spec: platform.UsageReportSpec{Cluster: "prod-1", NodeName: "n1", Window: hour()},
			allowed: alice, want: 400, message: "spec.nodeName: Forbidden: a LocalUsageReport asks a namespace's usage"},
		{name: "local with a selector", local: "team-a", spec: platform.UsageReportSpec{Cluster: "prod-1", NodeSelector: "pool=gpu", Window: hour()},
			allowed: alice, want: 400, message: "spec.nodeSelector: Forbidden"},
		{name: "no cluster", spec: platform.UsageReportSpec{Window: hour()}, allowed: alice, want: 400, message: "spec.cluster: Required"},
		{name: "NUL in the namespace", spec: platform.UsageReportSpec{Cluster: "prod-1", Namespace: "team\x00a", Window: hour()},
			allowed: alice, want: 400, message: "spec.namespace"},
		{name: "invalid UTF-8 in the cluster", local: "team-a", spec: platform.UsageReportSpec{Cluster: "prod\xff", Window: hour()},
			allowed: alice, want: 400, message: "not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			authz, history := &fakeAuthorizer{allowed: tc.allowed}, &fakeHistory{}
			r := NewREST(history, teamA, authz, 24*time.Hour)
			ctx := request.WithUser(t.Context(), &user.DefaultInfo{Name: "alice", Groups: []string{"team-a"}})
			var obj runtime.Object
			var err error
			if tc.local != "" {
				ctx = request.WithNamespace(ctx, tc.local)
				obj, err = r.Local().Create(ctx, &platform.LocalUsageReport{ObjectMeta: metav1.ObjectMeta{Namespace: tc.local}, Spec: tc.spec}, nil, nil)
			} else {
				obj, err = r.Create(ctx, &platform.UsageReport{Spec: tc.spec}, nil, nil)
			}
			got := 201
			if err != nil {
				var status apierrors.APIStatus
				if !errors.As(err, &status) {
					t.Fatalf("error %v is no API status", err)
				}
				got = int(status.Status().Code)
			}
			if got != tc.want || (tc.message != "" && !strings.Contains(err.Error(), tc.message)) {
				t.Fatalf("got %d %v; want %d saying %q", got, err, tc.want, tc.message)
			}
			if tc.needs != "" && (len(authz.asked) != 1 || authz.asked[0] != "alice: "+tc.needs) {
				t.Errorf("asked the authorizer %q; want once %q", authz.asked, tc.needs)
			}
			if tc.needs == "" && len(authz.asked) > 0 {
				t.Errorf("a bad question asked the authorizer %q", authz.asked)
			}
			if asked := len(history.asked) > 0; asked != (tc.want == 201 || tc.want == 404) {
				t.Errorf("history asked %v for a %d", history.asked, tc.want)
			}
			if tc.want == 201 {
				if st := reportStatus(obj); st.Samples != 12 || st.CPU == nil {
					t.Errorf("status %+v, want the history's", st)
				}
			}
			if tc.local != "" && len(history.asked) > 0 && (history.asked[0].Namespace != tc.local || history.asked[0].Node != "" || history.asked[0].Labels != nil) {
				t.Errorf("a LocalUsageReport in %s asked the history %+v", tc.local, history.asked[0])
			}
		})
	}
}

func reportStatus(obj runtime.Object) platform.UsageReportStatus {
	switch o := obj.(type) {
	case *platform.UsageReport:
		return o.Status
	case *platform.LocalUsageReport:
		return o.Status
	}
	return platform.UsageReportStatus{}
}

// TestAuthorizerFailure: an authorizer that fails denies, as the generic
// server's filter does (500), and the history is not asked.
func TestAuthorizerFailure(t *testing.T) {
	history := &fakeHistory{}
	r := NewREST(history, teamA, &fakeAuthorizer{err: errors.New("webhook unreachable")}, 24*time.Hour)
	ctx := request.WithUser(t.Context(), &user.DefaultInfo{Name: "alice"})
	_, err := r.Create(ctx, &platform.UsageReport{Spec: platform.UsageReportSpec{Cluster: "prod-1", Window: hour()}}, nil, nil)
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "webhook unreachable") || len(history.asked) > 0 {
		t.Fatalf("got %v (history asked %v); want 500 saying why, history not asked", err, history.asked)
	}
	if _, err := r.Create(t.Context(), &platform.UsageReport{Spec: platform.UsageReportSpec{Cluster: "prod-1", Window: hour()}}, nil, nil); !apierrors.IsInternalError(err) {
		t.Fatalf("without a user: %v, want 500", err)
	}
}

// TestStep: a step is whole hours within the window, in at most
// MaxUsageBuckets buckets, or a 400 saying what to ask instead; asked, it
// reaches the history and the buckets come back in canonical quantities.
func TestStep(t *testing.T) {
	authz := &fakeAuthorizer{allowed: map[string]bool{"get clustercapacities /prod-1": true}}
	r := NewREST(&fakeHistory{}, teamA, authz, 90*24*time.Hour)
	ctx := request.WithUser(t.Context(), &user.DefaultInfo{Name: "alice"})
	d := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	for _, tc := range []struct {
		window time.Duration
		step   *metav1.Duration
		want   string // in the 400; "" for an answer
	}{
		{window: 6 * time.Hour, step: d(time.Hour)},
		{window: 7 * 24 * time.Hour, step: d(24 * time.Hour)},
		{window: 90 * time.Minute, step: d(2 * time.Hour)}, // the hours a 90m window overlaps: up to 3
		{window: 6 * time.Hour, step: d(30 * time.Minute), want: "spec.step: Invalid value: \"30m0s\": must be whole hours"},
		{window: 6 * time.Hour, step: d(90 * time.Minute), want: "must be whole hours"},
		{window: 6 * time.Hour, step: d(-time.Hour), want: "must be whole hours"},
		{window: 6 * time.Hour, step: d(0), want: "must be whole hours"},
		{window: 6 * time.Hour, step: d(24 * time.Hour), want: "longer than the 7h0m0s the window covers: ask a step of at most 7h0m0s"},
		{window: 60 * 24 * time.Hour, step: d(time.Hour), want: "cuts the window into up to 1442 buckets, more than 1000: ask a step of at least 2h0m0s"},
	} {
		history := &fakeHistory{}
		r.history = history
		obj, err := r.Create(ctx, &platform.UsageReport{Spec: platform.UsageReportSpec{Cluster: "prod-1", Window: metav1.Duration{Duration: tc.window}, Step: tc.step}}, nil, nil)
		if tc.want != "" {
			if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), tc.want) || len(history.asked) > 0 {
				t.Errorf("window %s step %s: %v (history asked %v); want a 400 saying %q", tc.window, tc.step.Duration, err, history.asked, tc.want)
			}
			continue
		}
		if err != nil || len(history.asked) != 1 || history.asked[0].Step != tc.step.Duration {
			t.Fatalf("window %s step %s: %v, history asked %+v; want it asked with the step", tc.window, tc.step.Duration, err, history.asked)
		}
		series := reportStatus(obj).Series
		if len(series) != 1 || !series[0].Start.Equal(&metav1.Time{Time: time.Unix(3600, 0)}) || series[0].Samples != 12 {
			t.Fatalf("series %+v, want the history's bucket", series)
		}
		for what, q := range map[string]struct {
			got  resource.Quantity
			want string
		}{
			"cpu average": {series[0].CPU.Average, "915m"}, "cpu p95": {series[0].CPU.P95, "1001m"}, "cpu max": {series[0].CPU.Max, "2"},
			"memory average": {series[0].Memory.Average, "1628Mi"}, "memory p95": {series[0].Memory.P95, "1Gi"}, "memory max": {series[0].Memory.Max, "2Gi"},
		} {
			if q.got.String() != q.want {
				t.Errorf("%s %s, want %s", what, q.got.String(), q.want)
			}
		}
	}
}

// TestStatusSaysUpToWhenSamplesAreComplete: a report carries the member's
// usage heartbeat, with or without samples in its window.
func TestStatusSaysUpToWhenSamplesAreComplete(t *testing.T) {
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	for _, h := range []store.UsageHistory{{SamplesAsOf: at}, {SamplesAsOf: at, Samples: 3, From: at.Add(-time.Hour), To: at}} {
		if s := status(&h); s.SamplesCompleteAsOf == nil || !s.SamplesCompleteAsOf.Time.Equal(at) {
			t.Errorf("%d samples: complete as of %v, want %s", h.Samples, s.SamplesCompleteAsOf, at)
		}
	}
	if s := status(&store.UsageHistory{}); s.SamplesCompleteAsOf != nil {
		t.Errorf("no heartbeat: complete as of %v, want unset", s.SamplesCompleteAsOf)
	}
}
