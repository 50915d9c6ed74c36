package usagereport

import (
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestRecommend: spec.recommend asks the history to size requests with
// its percentile and headroom (defaults 95 and 15, over a week or the
// whole retention if shorter), and answers them next to the namespace's
// requests and binding quota now, with what right-sizing frees; a bad
// recommend is a 400 naming the field, before anything is asked.
func TestRecommend(t *testing.T) {
	authz := &fakeAuthorizer{allowed: map[string]bool{"get clusternamespaces team-a/prod-1": true, "get clustercapacities /prod-1": true}}
	ctx := request.WithUser(t.Context(), &user.DefaultInfo{Name: "alice"})
	i32 := func(v int32) *int32 { return &v }
	for _, tc := range []struct {
		name      string
		retention time.Duration
		local     bool
		spec      platform.UsageReportSpec
		want      string // in the 400; "" for an answer
		since     time.Duration
		p, h      float64
	}{
		{name: "defaults", retention: 30 * 24 * time.Hour, spec: platform.UsageReportSpec{Cluster: "prod-1", Namespace: "team-a", Recommend: &platform.RecommendOptions{}},
			since: 7 * 24 * time.Hour, p: 0.95, h: 0.15},
		{name: "a retention shorter than a week", retention: 48 * time.Hour, spec: platform.UsageReportSpec{Cluster: "prod-1", Namespace: "team-a", Recommend: &platform.RecommendOptions{}},
			since: 48 * time.Hour, p: 0.95, h: 0.15},
		{name: "chosen", retention: 30 * 24 * time.Hour, spec: platform.UsageReportSpec{Cluster: "prod-1", Namespace: "team-a", Window: metav1.Duration{Duration: 72 * time.Hour},
			Recommend: &platform.RecommendOptions{Percentile: 99, HeadroomPercent: i32(0)}}, since: 72 * time.Hour, p: 0.99, h: 0},
		{name: "local", retention: 30 * 24 * time.Hour, local: true, spec: platform.UsageReportSpec{Cluster: "prod-1", Recommend: &platform.RecommendOptions{}},
			since: 7 * 24 * time.Hour, p: 0.95, h: 0.15},
		{name: "no namespace", retention: 30 * 24 * time.Hour, spec: platform.UsageReportSpec{Cluster: "prod-1", Recommend: &platform.RecommendOptions{}},
			want: "spec.namespace: Required value: spec.recommend sizes one namespace's requests"},
		{name: "a low percentile", retention: 30 * 24 * time.Hour, spec: platform.UsageReportSpec{Cluster: "prod-1", Namespace: "team-a", Recommend: &platform.RecommendOptions{Percentile: 40}},
			want: "spec.recommend.percentile: Invalid value: 40: must be 50–100"},
		{name: "a percentile over 100", retention: 30 * 24 * time.Hour, spec: platform.UsageReportSpec{Cluster: "prod-1", Namespace: "team-a", Recommend: &platform.RecommendOptions{Percentile: 101}},
			want: "spec.recommend.percentile"},
		{name: "a negative headroom", retention: 30 * 24 * time.Hour, spec: platform.UsageReportSpec{Cluster: "prod-1", Namespace: "team-a", Recommend: &platform.RecommendOptions{HeadroomPercent: i32(-5)}},
			want: "spec.recommend.headroomPercent: Invalid value: -5: must be 0–100"},
		{name: "a window beyond retention", retention: 24 * time.Hour, spec: platform.UsageReportSpec{Cluster: "prod-1", Namespace: "team-a", Window: metav1.Duration{Duration: 7 * 24 * time.Hour}, Recommend: &platform.RecommendOptions{}},
			want: "spec.window: Invalid value: \"168h0m0s\": longer than the usage history the server keeps (24h0m0s, --metrics-retention)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			history := &fakeHistory{}
			r := NewREST(history, teamA, authz, tc.retention)
			now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
			r.now = func() time.Time { return now }
			var st platform.UsageReportStatus
			var err error
			if tc.local {
				var out any
				out, err = r.Local().Create(request.WithNamespace(ctx, "team-a"), &platform.LocalUsageReport{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a"}, Spec: tc.spec}, nil, nil)
				if err == nil {
					st = out.(*platform.LocalUsageReport).Status
				}
			} else {
				var out any
				out, err = r.Create(ctx, &platform.UsageReport{Spec: tc.spec}, nil, nil)
				if err == nil {
					st = out.(*platform.UsageReport).Status
				}
			}
			if tc.want != "" {
				if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), tc.want) || len(history.asked) > 0 {
					t.Fatalf("%v (history asked %v); want a 400 saying %q", err, history.asked, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			q := history.asked[0]
			if q.Namespace != "team-a" || !q.Since.Equal(now.Add(-tc.since)) || q.Recommend == nil || *q.Recommend != (store.RecommendQuery{Percentile: tc.p, Headroom: tc.h}) {
				t.Errorf("asked the history %+v (recommend %+v); want team-a since %s, percentile %g, headroom %g", q, q.Recommend, tc.since, tc.p, tc.h)
			}
			rec := st.Recommendation
			if rec == nil {
				t.Fatal("no recommendation")
			}
			eq := func(what string, got resource.Quantity, want string) {
				t.Helper()
				if got.Cmp(resource.MustParse(want)) != 0 {
					t.Errorf("%s = %s, want %s", what, got.String(), want)
				}
			}
			eq("requests.cpu", rec.Requests.CPU, "1250m")
			eq("requests.memory", rec.Requests.Memory, "3Gi")
			eq("quota.cpu", rec.Quota.CPU, "2")
			eq("quota.memory", rec.Quota.Memory, "4Gi")
			eq("currentRequests.cpu", rec.CurrentRequests.CPU, "4")
			eq("currentRequests.memory", rec.CurrentRequests.Memory, "8Gi")
			eq("frees.cpu", rec.Frees.CPU, "2750m")
			eq("frees.memory", rec.Frees.Memory, "5Gi")
			if rec.CurrentQuota == nil {
				t.Fatal("no current quota")
			}
			eq("currentQuota.cpu (the least of requests.cpu 10 and cpu 6)", rec.CurrentQuota.CPU, "6")
			eq("currentQuota.memory", rec.CurrentQuota.Memory, "16Gi")
			if rec.Covered != (platform.CoveredShares{CPU: "96.4%", Memory: "99.0%"}) {
				t.Errorf("covered %+v, want 96.4%% (rounded down) and 99.0%%", rec.Covered)
			}
		})
	}
}

// TestCurrentQuota: the binding quota is the least hard limit over the
// namespace's quotas without scopes, cpu and requests.cpu alike (a scoped
// one bounds only its pods); none limiting either resource is no current
// quota.
func TestCurrentQuota(t *testing.T) {
	for _, tc := range []struct {
		quotas []store.Quota
		want   store.UsageAmounts
		ok     bool
	}{
		{nil, store.UsageAmounts{}, false},
		{[]store.Quota{{Hard: map[string]string{"pods": "10", "count/jobs.batch": "5"}}}, store.UsageAmounts{}, false},
		{[]store.Quota{{Hard: map[string]string{"requests.cpu": "1500m"}}}, store.UsageAmounts{CPU: 1_500_000_000}, true},
		{[]store.Quota{{Name: "a", Hard: map[string]string{"requests.memory": "2Gi", "memory": "1Gi"}}, {Name: "b", Hard: map[string]string{"cpu": "2"}}},
			store.UsageAmounts{CPU: 2e9, Memory: 1 << 30}, true},
		{[]store.Quota{{Name: "a", Hard: map[string]string{"requests.cpu": "8"}}, {Name: "b", Hard: map[string]string{"requests.cpu": "1"}, Scopes: []string{"BestEffort"}}},
			store.UsageAmounts{CPU: 8e9}, true},
		{[]store.Quota{{Name: "b", Hard: map[string]string{"requests.cpu": "1"}, Scopes: []string{"NotTerminating"}}}, store.UsageAmounts{}, false},
	} {
		got, ok := currentQuota(tc.quotas)
		if got != tc.want || ok != tc.ok {
			t.Errorf("currentQuota(%v) = %+v, %v; want %+v, %v", tc.quotas, got, ok, tc.want, tc.ok)
		}
	}
}
