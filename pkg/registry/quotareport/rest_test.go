package quotareport

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// fakeAuthorizer allows the permissions in allowed ("verb resource
// namespace/name") and records what it was asked.
type fakeAuthorizer struct {
	allowed map[string]bool
	asked   []string
}

func (f *fakeAuthorizer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	p := a.GetVerb() + " " + a.GetResource() + " " + a.GetNamespace() + "/" + a.GetName()
	f.asked = append(f.asked, p)
	if f.allowed[p] {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// The fleet the tests ask about: big has 10 schedulable cores, 40Gi and
// 110 pods, its quotas commit 8 cores (2 of them team-a's, whose quota
// also limits pods to 20) and 30Gi; small has 8 cores and 16Gi, commits 6
// cores and no memory, has no team-a, and is stale (its heartbeat is an
// hour old).
var (
	now   = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	fleet = map[string]store.ClusterCapacity{
		"big": {ClusterID: "big", Mirroring: store.MemberSynced, CompleteAsOf: now.Add(-time.Minute),
			Schedulable: store.CapacitySums{Allocatable: store.Quantities{CPUMillis: 10_000, MemoryBytes: 40 << 30, Pods: 110},
				Requested: store.Quantities{CPUMillis: 3_000, MemoryBytes: 8 << 30, Pods: 12}},
			Committed: store.QuotaCommitment{Hard: map[string]string{"requests.cpu": "8", "requests.memory": "32212254720", "pods": "20"}}},
		"small": {ClusterID: "small", Mirroring: store.MemberSynced, CompleteAsOf: now.Add(-time.Hour),
			Schedulable: store.CapacitySums{Allocatable: store.Quantities{CPUMillis: 8_000, MemoryBytes: 16 << 30, Pods: 110}},
			Committed:   store.QuotaCommitment{Hard: map[string]string{"requests.cpu": "6"}}},
	}
	teamA = store.ClusterNamespace{ClusterID: "big", Namespace: store.Namespace{Name: "team-a"},
		Quotas: []store.Quota{{Name: "compute", Hard: map[string]string{"requests.cpu": "2", "pods": "20"}},
			{Name: "best-effort", Hard: map[string]string{"pods": "5"}, Scopes: []string{"BestEffort"}}}}
)

func newTestREST(authz authorizer.UnconditionalAuthorizer, policy Policy) (*REST, *[]store.UsageQuery) {
	var asked []store.UsageQuery
	reg := Registry{
		Members: store.Source[store.ClusterCapacity]{
			Get: func(_ context.Context, _, name string) (*store.ClusterCapacity, error) {
				if cc, ok := fleet[name]; ok {
					return &cc, nil
				}
				return nil, store.ErrNotFound
			},
			List: func(context.Context, store.ListOptions) (*store.Page[store.ClusterCapacity], error) {
				return &store.Page[store.ClusterCapacity]{Items: []store.ClusterCapacity{fleet["big"], fleet["small"]}}, nil
			},
		},
		Namespaces: store.Source[store.ClusterNamespace]{
			List: func(_ context.Context, opts store.ListOptions) (*store.Page[store.ClusterNamespace], error) {
				if len(opts.Fields) == 1 && opts.Fields[0].Value == "team-a" {
					return &store.Page[store.ClusterNamespace]{Items: []store.ClusterNamespace{teamA}}, nil
				}
				return &store.Page[store.ClusterNamespace]{}, nil
			},
		},
		History: func(_ context.Context, q store.UsageQuery) (*store.UsageHistory, error) {
			asked = append(asked, q)
			if q.ClusterID == "big" && q.Namespace == "team-a" {
				return &store.UsageHistory{Samples: 100, CPU: store.UsageStats{P95: 1_500_000_000}, Memory: store.UsageStats{P95: 3 << 30}}, nil
			}
			return nil, store.ErrNotFound
		},
	}
	r := NewREST(reg, authz, policy, registry.Limits{}, 7*24*time.Hour, registry.MemberStaleness{StaleAfter: 5 * time.Minute, Now: func() time.Time { return now }})
	r.now = func() time.Time { return now }
	return r, &asked
}

var everything = map[string]bool{
	"list clustercapacities /": true, "list clusternamespaces team-a/": true,
	"get clustercapacities /big": true, "get clustercapacities /small": true,
	"get clusternamespaces team-a/big": true, "get clusternamespaces team-a/small": true,
}

func q(s string) resource.Quantity { return resource.MustParse(s) }

// TestAnswer: the proposal replaces what team-a's quotas promise (its
// unscoped quota's 2 cores and 20 pods; the scoped one bounds only
// best-effort pods), judged against each member's allocatable under the
// policy (requests.memory at 90 %, requests.cpu at 130 %): big's CPU fits at
// 100 % (8 − 2 + 4 of 10 cores) but its memory would reach 95 %; small,
// stale, fits. A member where the quota fits comes first, stale or not.
func TestAnswer(t *testing.T) {
	r, asked := newTestREST(&fakeAuthorizer{allowed: everything}, Policy{"requests.memory": 90, "requests.cpu": 130})
	ctx := request.WithUser(t.Context(), &user.DefaultInfo{Name: "alice"})
	out, err := r.Create(ctx, &platform.QuotaReport{Spec: platform.QuotaReportSpec{Namespace: "team-a",
		Hard: map[string]resource.Quantity{"cpu": q("4"), "requests.memory": q("8Gi"), "pods": q("10")}}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs := out.(*platform.QuotaReport).Status.Clusters
	if len(cs) != 2 || cs[0].Cluster != "small" || cs[1].Cluster != "big" {
		t.Fatalf("clusters %+v, want small (fits) then big (exceeds)", cs)
	}
	small, big := cs[0], cs[1]
	res := func(c platform.QuotaClusterAnswer, name string) platform.QuotaResourceAnswer {
		for _, r := range c.Resources {
			if r.Name == name {
				return r
			}
		}
		t.Fatalf("%s has no answer for %s: %+v", c.Cluster, name, c.Resources)
		return platform.QuotaResourceAnswer{}
	}
	cpu := res(big, "requests.cpu")
	if cpu.Current == nil || cpu.Current.Cmp(q("2")) != 0 || cpu.CommittedBefore.Cmp(q("8")) != 0 || cpu.CommittedAfter.Cmp(q("10")) != 0 ||
		*cpu.PercentAfter != 100 || *cpu.MaxPercent != 130 || !cpu.Fits || cpu.Allocatable.Cmp(q("10")) != 0 || cpu.Requested.Cmp(q("3")) != 0 {
		t.Errorf("big requests.cpu %+v: want 2 now, 8 before, 10 after of 10 (100 %% of a 130 %% bound), fits", cpu)
	}
	// 30Gi − 0 (team-a's quota does not limit memory) + 8Gi = 38Gi of 40Gi: 95 %, past 90.
	mem := res(big, "requests.memory")
	if mem.Current != nil || mem.CommittedAfter.Cmp(q("38Gi")) != 0 || *mem.PercentAfter != 95 || mem.Fits {
		t.Errorf("big requests.memory %+v: want none now, 38Gi after, 95 %%, past the 90 %% bound", mem)
	}
	if big.Verdict != platform.QuotaExceedsPolicy || !strings.Contains(big.Reason, "requests.memory: 95% of the schedulable allocatable after, more than 90%") {
		t.Errorf("big %s %q, want ExceedsPolicy naming requests.memory", big.Verdict, big.Reason)
	}
	pods := res(big, "pods")
	if pods.Current == nil || pods.Current.Cmp(q("20")) != 0 || pods.CommittedAfter.Cmp(q("10")) != 0 || !pods.Fits {
		t.Errorf("big pods %+v: want 20 now (the unscoped quota's; the scoped 5 bounds only best-effort pods), 10 after", pods)
	}
	if big.UsageP95 == nil || big.UsageP95.CPU.Cmp(q("1500m")) != 0 || big.UsageP95.Memory.Cmp(q("3Gi")) != 0 || big.Stale {
		t.Errorf("big usage %+v, stale %v: want p95 1500m and 3Gi, current", big.UsageP95, big.Stale)
	}
	// small: 6 + 4 = 10 cores of 8, 125 % — within 130; 8Gi of 16Gi memory
	// 50 %; pods under the default 100; it is stale and has no team-a (no usage).
	scpu := res(small, "requests.cpu")
	if scpu.Current != nil || scpu.CommittedAfter.Cmp(q("10")) != 0 || *scpu.PercentAfter != 125 || *scpu.MaxPercent != 130 || !scpu.Fits {
		t.Errorf("small requests.cpu %+v: want 10 after, 125 %% within 130", scpu)
	}
	if p := res(small, "pods"); p.MaxPercent == nil || *p.MaxPercent != DefaultMaxPercent || *p.PercentAfter != 10 {
		t.Errorf("small pods %+v: want 10 of 110 (10 %%) under the default bound", p)
	}
	if small.Verdict != platform.QuotaFits || !small.Stale || small.Mirroring != platform.MirroringStale || small.UsageP95 != nil {
		t.Errorf("small: %s stale %v (%s) usage %+v; want Fits, stale, no usage", small.Verdict, small.Stale, small.Mirroring, small.UsageP95)
	}
	if len(*asked) != 2 || !(*asked)[0].Since.Equal(now.Add(-7*24*time.Hour)) {
		t.Errorf("history asked %+v, want each member's team-a over a week", *asked)
	}
}

// TestBest: members where the quota fits come first, current before
// stale, then the most room left.
func TestBest(t *testing.T) {
	pct := func(v int64) *int64 { return &v }
	cs := []platform.QuotaClusterAnswer{
		{Cluster: "a", Verdict: platform.QuotaExceedsPolicy, Resources: []platform.QuotaResourceAnswer{{PercentAfter: pct(10)}}},
		{Cluster: "b", Verdict: platform.QuotaFits, Stale: true, Resources: []platform.QuotaResourceAnswer{{PercentAfter: pct(10)}}},
		{Cluster: "c", Verdict: platform.QuotaFits, Resources: []platform.QuotaResourceAnswer{{PercentAfter: pct(90)}, {PercentAfter: pct(20)}}},
		{Cluster: "d", Verdict: platform.QuotaFits, Resources: []platform.QuotaResourceAnswer{{PercentAfter: pct(50)}}},
	}
	sortBest(cs)
	var got []string
	for _, c := range cs {
		got = append(got, c.Cluster)
	}
	if strings.Join(got, ",") != "d,c,b,a" {
		t.Errorf("order %v, want d (50 %%), c (90 %%), b (stale), a (exceeds)", got)
	}
}

// TestRefused: bad questions are 400s naming the field, before anyone is
// asked; questions whose answer the caller may not read are 403s naming
// the permission, the same whether the namespace exists or not.
func TestRefused(t *testing.T) {
	hard := map[string]resource.Quantity{"requests.cpu": q("4")}
	for _, tc := range []struct {
		name    string
		local   string
		spec    platform.QuotaReportSpec
		allowed map[string]bool
		code    int32
		want    string
	}{
		{name: "no namespace", spec: platform.QuotaReportSpec{Hard: hard}, code: 400, want: "spec.namespace: Required value"},
		{name: "no hard", spec: platform.QuotaReportSpec{Namespace: "team-a"}, code: 400, want: "spec.hard: Required value"},
		{name: "a PVC's resource", spec: platform.QuotaReportSpec{Namespace: "team-a", Hard: map[string]resource.Quantity{"requests.storage": q("1Ti")}},
			code: 400, want: "spec.hard[requests.storage]: Unsupported value"},
		{name: "an object count", spec: platform.QuotaReportSpec{Namespace: "team-a", Hard: map[string]resource.Quantity{"services": q("4")}},
			code: 400, want: "spec.hard[services]: Unsupported value"},
		{name: "cpu twice", spec: platform.QuotaReportSpec{Namespace: "team-a", Hard: map[string]resource.Quantity{"cpu": q("4"), "requests.cpu": q("2")}},
			code: 400, want: "spec.hard[requests.cpu]: Duplicate value"},
		{name: "negative", spec: platform.QuotaReportSpec{Namespace: "team-a", Hard: map[string]resource.Quantity{"requests.memory": q("-1Gi")}},
			code: 400, want: "spec.hard[requests.memory]: Invalid value: \"-1Gi\": must not be negative"},
		{name: "absurd", spec: platform.QuotaReportSpec{Namespace: "team-a", Hard: map[string]resource.Quantity{"requests.cpu": q("1e18")}},
			code: 400, want: "spec.hard[requests.cpu]: Invalid value: \"1e18\": larger than any member could back"},
		{name: "a cluster twice", spec: platform.QuotaReportSpec{Namespace: "team-a", Hard: hard, Clusters: []string{"big", "big"}},
			code: 400, want: "spec.clusters[1]: Duplicate value"},
		{name: "a window beyond retention", spec: platform.QuotaReportSpec{Namespace: "team-a", Hard: hard, Window: &metav1.Duration{Duration: 30 * 24 * time.Hour}},
			code: 400, want: "spec.window: Invalid value: \"720h0m0s\": longer than the usage history the server keeps"},
		{name: "local, another namespace", local: "team-a", spec: platform.QuotaReportSpec{Namespace: "team-b", Hard: hard},
			code: 400, want: `create the report in "team-b"`},
		{name: "every member, without list", spec: platform.QuotaReportSpec{Namespace: "team-a", Hard: hard},
			allowed: map[string]bool{"get clustercapacities /big": true}, code: 403, want: `cannot list resource "clustercapacities"`},
		{name: "a member, without its namespace", spec: platform.QuotaReportSpec{Namespace: "team-b", Hard: hard, Clusters: []string{"big"}},
			allowed: everything, code: 403, want: `cannot get resource "clusternamespaces" in API group "platform.example.io" in the namespace "team-b" (name "big")`},
		{name: "a member, without its namespace that does not exist", spec: platform.QuotaReportSpec{Namespace: "nope", Hard: hard, Clusters: []string{"big"}},
			allowed: everything, code: 403, want: `in the namespace "nope" (name "big")`},
		{name: "an unknown member", spec: platform.QuotaReportSpec{Namespace: "team-a", Hard: hard, Clusters: []string{"gone"}},
			allowed: map[string]bool{"get clustercapacities /gone": true, "get clusternamespaces team-a/gone": true}, code: 404, want: `clustercapacities.platform.example.io "gone" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			authz := &fakeAuthorizer{allowed: tc.allowed}
			r, asked := newTestREST(authz, nil)
			ctx := request.WithUser(t.Context(), &user.DefaultInfo{Name: "alice"})
			var err error
			if tc.local != "" {
				_, err = r.Local().Create(request.WithNamespace(ctx, tc.local), &platform.LocalQuotaReport{ObjectMeta: metav1.ObjectMeta{Namespace: tc.local}, Spec: tc.spec}, nil, nil)
			} else {
				_, err = r.Create(ctx, &platform.QuotaReport{Spec: tc.spec}, nil, nil)
			}
			var status apierrors.APIStatus
			if !apierrorsAs(err, &status) || status.Status().Code != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v; want %d saying %q", err, tc.code, tc.want)
			}
			if tc.code == 400 && len(authz.asked) > 0 {
				t.Errorf("a bad question asked the authorizer %v", authz.asked)
			}
			if tc.code != 404 && len(*asked) > 0 {
				t.Errorf("a refused question read the history: %+v", *asked)
			}
		})
	}
}

func apierrorsAs(err error, status *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	if ok {
		*status = s
	}
	return ok
}
