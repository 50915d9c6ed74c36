package integration

import (
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/registry/store"
	"github.com/example/platform-apiserver/test/framework"
)

// TestRecommendationsBacktested: a week of synthetic usage of prod-1's
// team-a (a daily pattern plus noise, one sample every ten minutes,
// recorded through the scraper's write path), the recommendation asked
// after days 1–6 equals the test's own sizing of those samples (p95 within
// the histograms' 1 %, the maximum exactly, each plus 15 % rounded up),
// with the namespace's requests and quota now and what right-sizing frees
// exactly; it covers at least 95 % of day 7's samples; kubectl platform
// recommend prints it. Bad recommends are 400s naming the field.
func TestRecommendationsBacktested(t *testing.T) {
	t.Parallel()
	e := setupWith(t, framework.Options{PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
		ExtraPlatformArgs: []string{"--metrics-retention=192h"}})
	ctx := t.Context()
	now := time.Now().UTC()
	start := now.Add(-7 * 24 * time.Hour).Truncate(10 * time.Minute).Add(10 * time.Minute)
	dayOf := func(at time.Time) int { return int(at.Sub(start)/(24*time.Hour)) + 1 }
	// usage at a time: a working-hours peak around 14:00 UTC over a base,
	// plus noise (a fixed pseudo-random sequence, so runs agree).
	seed := uint32(7)
	noise := func() float64 { seed = seed*1664525 + 1013904223; return float64(seed>>8)/float64(1<<24) - 0.5 }
	sample := func(at time.Time) store.NamespaceMetricsSample {
		hour := float64(at.Hour()) + float64(at.Minute())/60
		daily := math.Max(0, math.Cos((hour-14)/24*2*math.Pi)) // 0 at night, 1 at 14:00
		return store.NamespaceMetricsSample{ClusterID: "prod-1", Namespace: "team-a", ObservedAt: at, Pods: 3,
			CPUNanoCores: int64(1e9 * (0.4 + 1.2*daily + 0.15*noise())),
			MemoryBytes:  int64(float64(1<<30) * (1.5 + 0.8*daily + 0.1*noise()))}
	}
	record := func(samples []store.NamespaceMetricsSample) {
		for _, s := range samples { // one scrape at a time, as the scraper records them
			if _, err := e.store.RecordNamespaceMetrics(ctx, store.Fence{ClusterID: "prod-1"}, []store.NamespaceMetricsSample{s},
				store.UsageReporting{Threshold: 0.05, Period: 5 * time.Minute}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var past, day7 []store.NamespaceMetricsSample
	for at := start; !at.After(now); at = at.Add(10 * time.Minute) {
		if s := sample(at); dayOf(at) <= 6 {
			past = append(past, s)
		} else {
			day7 = append(day7, s)
		}
	}
	record(past)

	reports := e.platform.PlatformV1alpha1().LocalUsageReports("team-a")
	got, err := reports.Create(ctx, &v1alpha1.LocalUsageReport{Spec: v1alpha1.UsageReportSpec{Cluster: "prod-1",
		Recommend: &v1alpha1.RecommendOptions{}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := got.Status.Recommendation
	if rec == nil || got.Status.Samples != int64(len(past)) {
		t.Fatalf("status %+v; want a recommendation from the %d samples of days 1–6", got.Status, len(past))
	}
	if rec.Percentile != 95 || rec.HeadroomPercent != 15 {
		t.Errorf("percentile %d, headroom %d; want the defaults 95 and 15", rec.Percentile, rec.HeadroomPercent)
	}
	var cpu, mem []int64
	for _, s := range past {
		cpu, mem = append(cpu, s.CPUNanoCores), append(mem, s.MemoryBytes)
	}
	slices.Sort(cpu)
	slices.Sort(mem)
	// The test's own sizing: nearest-rank p95 plus 15 %, rounded up to
	// whole millicores and MiB (the percentile within the stated 1 %);
	// the quota from the exact maximum.
	sized := func(v int64, unit int64) int64 { return int64(math.Ceil(float64(v)*1.15/float64(unit))) * unit }
	p95 := func(sorted []int64) int64 { return sorted[int(math.Ceil(0.95*float64(len(sorted))))-1] }
	within := func(what string, got resource.Quantity, value func(resource.Quantity) int64, want, unit int64) {
		t.Helper()
		if v := value(got); math.Abs(float64(v-want)) > 0.01*float64(want)+float64(unit) {
			t.Errorf("%s = %d, want %d within 1 %% (p95 from histograms) and the rounding", what, v, want)
		}
	}
	nano := func(q resource.Quantity) int64 { return q.ScaledValue(resource.Nano) }
	bytes := func(q resource.Quantity) int64 { return q.Value() }
	within("requests.cpu", rec.Requests.CPU, nano, sized(p95(cpu), 1e6), 1e6)
	within("requests.memory", rec.Requests.Memory, bytes, sized(p95(mem), 1<<20), 1<<20)
	if v, want := nano(rec.Quota.CPU), sized(cpu[len(cpu)-1], 1e6); v != want {
		t.Errorf("quota.cpu = %d, want the maximum plus 15 %%: %d", v, want)
	}
	if v, want := bytes(rec.Quota.Memory), sized(mem[len(mem)-1], 1<<20); v != want {
		t.Errorf("quota.memory = %d, want the maximum plus 15 %%: %d", v, want)
	}
	// Now: team-a's pods request 3 CPUs and 6Gi (fixture), its quota
	// compute limits requests.cpu to 4 and memory not at all.
	ns, err := e.platform.PlatformV1alpha1().ClusterNamespaces("team-a").Get(ctx, "prod-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rec.CurrentRequests.CPU.Cmp(ns.Status.Requests.CPU) != 0 || rec.CurrentRequests.Memory.Cmp(ns.Status.Requests.Memory) != 0 {
		t.Errorf("current requests %+v, want the ClusterNamespace's %+v", rec.CurrentRequests, ns.Status.Requests)
	}
	if rec.CurrentQuota == nil || rec.CurrentQuota.CPU.Cmp(resource.MustParse("4")) != 0 || !rec.CurrentQuota.Memory.IsZero() {
		t.Errorf("current quota %+v, want requests.cpu 4 and no memory limit", rec.CurrentQuota)
	}
	frees := func(now, rec resource.Quantity) resource.Quantity { now.Sub(rec); return now }
	if f := frees(ns.Status.Requests.CPU, rec.Requests.CPU); rec.Frees.CPU.Cmp(f) != 0 {
		t.Errorf("frees.cpu = %s, want %s", rec.Frees.CPU.String(), f.String())
	}
	if f := frees(ns.Status.Requests.Memory, rec.Requests.Memory); rec.Frees.Memory.Cmp(f) != 0 {
		t.Errorf("frees.memory = %s, want %s", rec.Frees.Memory.String(), f.String())
	}
	// The covered share is read from the histograms: between the exact
	// shares of the samples 2 % below and 2 % above the requests.
	checkCovered := func(what, covered string, sorted []int64, requests int64) {
		t.Helper()
		share := func(limit float64) float64 {
			n, _ := slices.BinarySearch(sorted, int64(limit)+1)
			return 100 * float64(n) / float64(len(sorted))
		}
		got, err := strconv.ParseFloat(strings.TrimSuffix(covered, "%"), 64)
		if err != nil || got < math.Floor(10*share(float64(requests)/1.02))/10-0.1 || got > share(float64(requests)*1.02) {
			t.Errorf("%s covered %q, want between %.1f%% and %.1f%%", what, covered, share(float64(requests)/1.02), share(float64(requests)*1.02))
		}
	}
	checkCovered("cpu", rec.Covered.CPU, cpu, nano(rec.Requests.CPU))
	checkCovered("memory", rec.Covered.Memory, mem, bytes(rec.Requests.Memory))

	// The backtest: day 7, recorded after the recommendation, stays
	// within it at least 95 % of the time.
	record(day7)
	for _, r := range []struct {
		name     string
		requests int64
		value    func(store.NamespaceMetricsSample) int64
	}{
		{"cpu", nano(rec.Requests.CPU), func(s store.NamespaceMetricsSample) int64 { return s.CPUNanoCores }},
		{"memory", bytes(rec.Requests.Memory), func(s store.NamespaceMetricsSample) int64 { return s.MemoryBytes }},
	} {
		covered := 0
		for _, s := range day7 {
			if r.value(s) <= r.requests {
				covered++
			}
		}
		if share := float64(covered) / float64(len(day7)); share < 0.95 {
			t.Errorf("the %s recommendation from days 1–6 covers %.1f%% of day 7's %d samples, want at least 95%%", r.name, 100*share, len(day7))
		}
	}

	t.Run("kubectl platform recommend", func(t *testing.T) {
		out, stderr, err := e.cp.KubectlPlugin(ctx, e.cp.AdminKubeconfig(), "platform", "recommend", "prod-1", "-n", "team-a", "--window", "168h")
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		t.Logf("kubectl platform recommend prod-1 -n team-a --window 168h:\n%s", out)
		if !strings.Contains(out, "namespace team-a in prod-1: ") || !strings.Contains(out, "requests at p95 + 15%") {
			t.Errorf("no heading:\n%s", out)
		}
		if r := row(t, out, "cpu"); len(r) != 7 || r[1] != "3" || r[5] != "4" {
			t.Errorf("cpu row %q, want requests now 3 and quota now 4:\n%s", r, out)
		}
		if r := row(t, out, "memory"); len(r) != 7 || r[1] != "6Gi" || r[5] != "<none>" {
			t.Errorf("memory row %q, want requests now 6Gi and no quota:\n%s", r, out)
		}
		_, stderr, err = e.cp.KubectlPlugin(ctx, e.cp.AdminKubeconfig(), "platform", "recommend", "prod-1")
		if err == nil || !strings.Contains(stderr, "name the namespace with -n") {
			t.Errorf("without -n: %v %s; want it refused saying so", err, stderr)
		}
	})

	t.Run("bad recommends", func(t *testing.T) {
		for _, tc := range []struct {
			spec v1alpha1.UsageReportSpec
			want string
		}{
			{v1alpha1.UsageReportSpec{Cluster: "prod-1", Recommend: &v1alpha1.RecommendOptions{Percentile: 20}}, "spec.recommend.percentile"},
			{v1alpha1.UsageReportSpec{Cluster: "prod-1", Recommend: &v1alpha1.RecommendOptions{HeadroomPercent: new(int32(500))}}, "spec.recommend.headroomPercent"},
			{v1alpha1.UsageReportSpec{Cluster: "prod-1", Window: metav1.Duration{Duration: 30 * 24 * time.Hour}, Recommend: &v1alpha1.RecommendOptions{}}, "spec.window"},
		} {
			_, err := reports.Create(ctx, &v1alpha1.LocalUsageReport{Spec: tc.spec}, metav1.CreateOptions{})
			if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%+v: %v, want a 400 naming %s", tc.spec, err, tc.want)
			}
		}
		_, err := e.platform.PlatformV1alpha1().UsageReports().Create(ctx, &v1alpha1.UsageReport{Spec: v1alpha1.UsageReportSpec{Cluster: "prod-1",
			Recommend: &v1alpha1.RecommendOptions{}}}, metav1.CreateOptions{})
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "spec.namespace: Required value") {
			t.Errorf("a recommendation of no namespace: %v, want a 400 asking for spec.namespace", err)
		}
	})
}
