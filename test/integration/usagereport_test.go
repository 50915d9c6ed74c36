package integration

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

// TestUsageReports has a stack of its own: it records samples, which
// report usage on the fixture's NodeCapacities that TestReadPath reads.
//
// kube-controller-manager aggregates the shipped platform-viewer into view
// for the access checks (usagereport_access_test.go).
func TestUsageReports(t *testing.T) {
	t.Parallel()
	setupWith(t, framework.Options{PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"), StartControllerManager: true}).testUsageReports(t)
}

// testUsageReports records six hours of samples of prod-2's nodes, as
// discovery's scraper does, and asks UsageReports with client-go and
// kubectl: for the member, a node and a label selection, the answers equal
// what the test computes from the samples (averages and maxima exactly,
// percentiles within the stated 1 %); bad questions get 400 or 404.
func (e *env) testUsageReports(t *testing.T) {
	ctx := t.Context()
	now := time.Now().UTC()
	first := now.Truncate(time.Hour).Add(-5 * time.Hour)
	var samples []store.NodeMetricsSample
	for at, i := first, 0; !at.After(now); at = at.Add(5 * time.Minute) {
		for n := range 20 {
			i++
			samples = append(samples, store.NodeMetricsSample{
				ClusterID: "prod-2", Node: fmt.Sprintf("m%02d", n), ObservedAt: at, Window: 30 * time.Second,
				CPUNanoCores: int64(1e6 * (50 + (i*7919)%3900)), MemoryBytes: int64(1<<20) * int64(100+(i*6007)%15000),
			})
		}
	}
	if _, err := e.store.RecordNodeMetrics(ctx, store.Fence{ClusterID: "prod-2"}, samples, store.UsageReporting{Threshold: 0.05, Period: 5 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	// And a namespace of prod-2, as the scraper reports its pods' sums.
	var nsSamples []store.NamespaceMetricsSample
	for at, i := first, 0; !at.After(now); at, i = at.Add(5*time.Minute), i+1 {
		nsSamples = append(nsSamples, store.NamespaceMetricsSample{ClusterID: "prod-2", Namespace: "team-a", ObservedAt: at, Pods: 3,
			CPUNanoCores: int64(1e6 * (200 + (i*7919)%1800)), MemoryBytes: int64(1<<20) * int64(256+(i*6007)%4000)})
	}
	for _, smp := range nsSamples { // one scrape at a time, as the scraper records them
		if _, err := e.store.RecordNamespaceMetrics(ctx, store.Fence{ClusterID: "prod-2"}, []store.NamespaceMetricsSample{smp}, store.UsageReporting{Threshold: 0.05, Period: 5 * time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	reports := e.platform.PlatformV1alpha1().UsageReports()
	t.Run("namespace", func(t *testing.T) {
		got, err := reports.Create(ctx, &v1alpha1.UsageReport{Spec: v1alpha1.UsageReportSpec{Cluster: "prod-2", Namespace: "team-a", Window: metav1.Duration{Duration: 6 * time.Hour}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var cpu, mem []int64
		for _, s := range nsSamples {
			cpu, mem = append(cpu, s.CPUNanoCores), append(mem, s.MemoryBytes)
		}
		if st := got.Status; st.Samples != int64(len(cpu)) || st.CPU == nil || st.Memory == nil {
			t.Fatalf("status %+v; want %d samples", st, len(cpu))
		}
		checkStatistics(t, "cpu", got.Status.CPU, cpu, cpuUnit)
		checkStatistics(t, "memory", got.Status.Memory, mem, memoryUnit)
	})
	for _, tc := range []struct {
		name  string
		spec  v1alpha1.UsageReportSpec
		nodes func(node string) bool
	}{
		{"member", v1alpha1.UsageReportSpec{Cluster: "prod-2", Window: metav1.Duration{Duration: 3 * time.Hour}},
			func(string) bool { return true }},
		{"node", v1alpha1.UsageReportSpec{Cluster: "prod-2", NodeName: "m03", Window: metav1.Duration{Duration: 90 * time.Minute}},
			func(n string) bool { return n == "m03" }},
		{"label selection", v1alpha1.UsageReportSpec{Cluster: "prod-2", NodeSelector: "pool=big", Window: metav1.Duration{Duration: 3 * time.Hour}},
			func(n string) bool { return slices.Contains([]string{"m00", "m04", "m08", "m12", "m16"}, n) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := reports.Create(ctx, &v1alpha1.UsageReport{Spec: tc.spec}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			from := now.Add(-tc.spec.Window.Duration).Truncate(time.Hour)
			if from.Before(first) {
				from = first
			}
			var cpu, mem []int64
			nodes := map[string]bool{}
			for _, s := range samples {
				if tc.nodes(s.Node) && !s.ObservedAt.Before(from) {
					cpu, mem = append(cpu, s.CPUNanoCores), append(mem, s.MemoryBytes)
					nodes[s.Node] = true
				}
			}
			st := got.Status
			if st.Samples != int64(len(cpu)) || st.Nodes != int64(len(nodes)) || st.From == nil || !st.From.Time.Equal(from) || st.CPU == nil || st.Memory == nil {
				t.Fatalf("status %+v; want %d samples of %d nodes from %s", st, len(cpu), len(nodes), from)
			}
			checkStatistics(t, "cpu", st.CPU, cpu, cpuUnit)
			checkStatistics(t, "memory", st.Memory, mem, memoryUnit)
		})
	}

	t.Run("step", func(t *testing.T) {
		// 1h over 6h: the six hours with samples, bucket by bucket.
		got, err := reports.Create(ctx, &v1alpha1.UsageReport{Spec: v1alpha1.UsageReportSpec{Cluster: "prod-2",
			Window: metav1.Duration{Duration: 6 * time.Hour}, Step: &metav1.Duration{Duration: time.Hour}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		series := got.Status.Series
		if len(series) != 6 {
			t.Fatalf("%d buckets, want 6: %+v", len(series), series)
		}
		for i, b := range series {
			start := first.Add(time.Duration(i) * time.Hour)
			var cpu, mem []int64
			for _, s := range samples {
				if s.ObservedAt.Truncate(time.Hour).Equal(start) {
					cpu, mem = append(cpu, s.CPUNanoCores), append(mem, s.MemoryBytes)
				}
			}
			if !b.Start.Time.Equal(start) || b.Samples != int64(len(cpu)) {
				t.Fatalf("bucket %d starts %s with %d samples; want %s with %d", i, b.Start, b.Samples, start, len(cpu))
			}
			what := "bucket " + start.Format(time.Kitchen)
			cpuUnit.check(t, what+" cpu", b.CPU.Average, b.CPU.P95, b.CPU.Max, cpu)
			memoryUnit.check(t, what+" memory", b.Memory.Average, b.Memory.P95, b.Memory.Max, mem)
		}
		// kubectl prints the quantities as kubectl top does.
		file := filepath.Join(t.TempDir(), "report.yaml")
		spec := "apiVersion: platform.example.io/v1alpha1\nkind: UsageReport\nspec:\n  cluster: prod-2\n  window: 6h\n  step: 1h\n"
		if err := os.WriteFile(file, []byte(spec), 0o600); err != nil {
			t.Fatal(err)
		}
		out := e.kubectl(t, "create", "-f", file, "-o", "yaml")
		quantities := regexp.MustCompile(`(?m)^\s+(average|p50|p95|p99|max): (.*)$`).FindAllStringSubmatch(out, -1)
		if len(quantities) != 2*5+6*2*3 {
			t.Fatalf("%d quantities in\n%s\nwant 2×5 statistics and 6 buckets × 2 × 3", len(quantities), out)
		}
		canonical := regexp.MustCompile(`^"?([0-9]+m?|[0-9]+[MGT]i)"?$`)
		for _, q := range quantities {
			if !canonical.MatchString(q[2]) {
				t.Errorf("%s: %s, want millicores or MiB (915m, 1628Mi) in\n%s", q[1], q[2], out)
			}
		}
	})

	t.Run("kubectl platform usage", e.testKubectlPlatformUsage)

	t.Run("kubectl create", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "report.yaml")
		spec := "apiVersion: platform.example.io/v1alpha1\nkind: UsageReport\nspec:\n  cluster: prod-2\n  nodeName: m07\n  window: 1h\n"
		if err := os.WriteFile(file, []byte(spec), 0o600); err != nil {
			t.Fatal(err)
		}
		var got v1alpha1.UsageReport
		if err := json.Unmarshal([]byte(e.kubectl(t, "create", "-f", file, "-o", "json")), &got); err != nil {
			t.Fatal(err)
		}
		if got.Status.Nodes != 1 || got.Status.Samples == 0 || got.Status.CPU == nil || got.Status.Accuracy == "" {
			t.Errorf("kubectl create of a report for m07: status %+v", got.Status)
		}
	})

	t.Run("who may read what", func(t *testing.T) { e.testUsageReportAccess(t, len(nsSamples)) })

	t.Run("bad questions", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			spec  v1alpha1.UsageReportSpec
			check func(error) bool
			want  string
		}{
			{"window beyond the retention", v1alpha1.UsageReportSpec{Cluster: "prod-2", Window: metav1.Duration{Duration: 48 * time.Hour}},
				apierrors.IsBadRequest, "--metrics-retention"},
			{"step not whole hours", v1alpha1.UsageReportSpec{Cluster: "prod-2", Window: metav1.Duration{Duration: time.Hour}, Step: &metav1.Duration{Duration: 15 * time.Minute}},
				apierrors.IsBadRequest, "spec.step: Invalid value: \"15m0s\": must be whole hours"},
			{"malformed selector", v1alpha1.UsageReportSpec{Cluster: "prod-2", NodeSelector: "pool in (", Window: metav1.Duration{Duration: time.Hour}},
				apierrors.IsBadRequest, "spec.nodeSelector"},
			{"no cluster", v1alpha1.UsageReportSpec{Window: metav1.Duration{Duration: time.Hour}},
				apierrors.IsBadRequest, "spec.cluster: Required"},
			{"node and selector", v1alpha1.UsageReportSpec{Cluster: "prod-2", NodeName: "m01", NodeSelector: "pool=big", Window: metav1.Duration{Duration: time.Hour}},
				apierrors.IsBadRequest, "not both"},
			{"unknown member", v1alpha1.UsageReportSpec{Cluster: "prod-9", Window: metav1.Duration{Duration: time.Hour}},
				apierrors.IsNotFound, `clustercapacities.platform.example.io "prod-9" not found`},
			{"unknown node", v1alpha1.UsageReportSpec{Cluster: "prod-2", NodeName: "m99", Window: metav1.Duration{Duration: time.Hour}},
				apierrors.IsNotFound, `"prod-2.m99" not found`},
			{"unknown namespace", v1alpha1.UsageReportSpec{Cluster: "prod-2", Namespace: "nope", Window: metav1.Duration{Duration: time.Hour}},
				apierrors.IsNotFound, `clusternamespaces.platform.example.io "nope/prod-2" not found`},
			{"namespace and node", v1alpha1.UsageReportSpec{Cluster: "prod-2", Namespace: "team-a", NodeName: "m01", Window: metav1.Duration{Duration: time.Hour}},
				apierrors.IsBadRequest, "spec.namespace"},
		} {
			_, err := reports.Create(ctx, &v1alpha1.UsageReport{Spec: tc.spec}, metav1.CreateOptions{})
			if !tc.check(err) || !strings.Contains(fmt.Sprint(err), tc.want) {
				t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
			}
		}
	})
}

// unit is what kubectl top rounds a resource to: millicores of nanocores,
// MiB of bytes.
type unit struct {
	size  int64                         // in the base unit
	value func(resource.Quantity) int64 // a quantity in the base unit
}

var (
	cpuUnit    = unit{1e6, func(q resource.Quantity) int64 { return q.ScaledValue(resource.Nano) }}
	memoryUnit = unit{1 << 20, func(q resource.Quantity) int64 { return q.Value() }}
)

// round is v rounded to the nearest unit, as the server answers it.
func (u unit) round(v int64) int64 { return (v + u.size/2) / u.size * u.size }

// checkStatistics compares got with the values of samples.
func checkStatistics(t *testing.T, what string, got *v1alpha1.UsageStatistics, samples []int64, u unit) {
	t.Helper()
	u.check(t, what, got.Average, got.P95, got.Max, samples)
	sorted := slices.Sorted(slices.Values(samples))
	u.checkPercentile(t, what, 0.50, got.P50, sorted)
	u.checkPercentile(t, what, 0.99, got.P99, sorted)
}

// check compares an average and a maximum with the exact ones of samples,
// rounded to the unit, and a 95th percentile within the stated 1 %.
func (u unit) check(t *testing.T, what string, average, p95, maximum resource.Quantity, samples []int64) {
	t.Helper()
	sorted := slices.Sorted(slices.Values(samples))
	var sum float64
	for _, v := range sorted {
		sum += float64(v)
	}
	if want, v := u.round(int64(math.Round(sum/float64(len(sorted))))), u.value(average); v != want {
		t.Errorf("%s average %d, want %d", what, v, want)
	}
	if want, v := u.round(sorted[len(sorted)-1]), u.value(maximum); v != want {
		t.Errorf("%s max %d, want %d", what, v, want)
	}
	u.checkPercentile(t, what, 0.95, p95, sorted)
}

// checkPercentile compares got with the nearest-rank q-percentile of
// sorted, within 1 % and the rounding to the unit.
func (u unit) checkPercentile(t *testing.T, what string, q float64, got resource.Quantity, sorted []int64) {
	t.Helper()
	want := sorted[max(int(math.Ceil(q*float64(len(sorted))))-1, 0)]
	if v := u.value(got); math.Abs(float64(v-want)) > 0.01*float64(want)+float64(u.size/2)+1 {
		t.Errorf("%s p%.0f %d, want %d within 1%%", what, 100*q, v, want)
	}
}
