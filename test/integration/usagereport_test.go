package integration

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
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
	setupWith(t, framework.Options{PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"), StartControllerManager: true}).testUsageReports(t)
}

// testUsageReports records three hours of samples of prod-2's nodes, as
// discovery's scraper does, and asks UsageReports with client-go and
// kubectl: for the member, a node and a label selection, the answers equal
// what the test computes from the samples (averages and maxima exactly,
// percentiles within the stated 1 %); bad questions get 400 or 404.
func (e *env) testUsageReports(t *testing.T) {
	ctx := t.Context()
	now := time.Now().UTC()
	first := now.Truncate(time.Hour).Add(-2 * time.Hour)
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
		got, err := reports.Create(ctx, &v1alpha1.UsageReport{Spec: v1alpha1.UsageReportSpec{Cluster: "prod-2", Namespace: "team-a", Window: metav1.Duration{Duration: 3 * time.Hour}}}, metav1.CreateOptions{})
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
		checkStatistics(t, "cpu", got.Status.CPU, cpu, func(q resource.Quantity) int64 { return q.ScaledValue(resource.Nano) })
		checkStatistics(t, "memory", got.Status.Memory, mem, func(q resource.Quantity) int64 { return q.Value() })
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
			checkStatistics(t, "cpu", st.CPU, cpu, func(q resource.Quantity) int64 { return q.ScaledValue(resource.Nano) })
			checkStatistics(t, "memory", st.Memory, mem, func(q resource.Quantity) int64 { return q.Value() })
		})
	}

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

// checkStatistics compares got with the exact values of samples.
func checkStatistics(t *testing.T, what string, got *v1alpha1.UsageStatistics, samples []int64, value func(resource.Quantity) int64) {
	t.Helper()
	sorted := slices.Sorted(slices.Values(samples))
	var sum float64
	for _, v := range sorted {
		sum += float64(v)
	}
	if want, v := int64(math.Round(sum/float64(len(sorted)))), value(got.Average); v != want {
		t.Errorf("%s average %d, want %d", what, v, want)
	}
	if want, v := sorted[len(sorted)-1], value(got.Max); v != want {
		t.Errorf("%s max %d, want %d", what, v, want)
	}
	for _, p := range []struct {
		q float64
		v resource.Quantity
	}{{0.50, got.P50}, {0.95, got.P95}, {0.99, got.P99}} {
		want := sorted[max(int(math.Ceil(p.q*float64(len(sorted))))-1, 0)]
		if v := value(p.v); math.Abs(float64(v-want)) > 0.01*float64(want)+1 {
			t.Errorf("%s p%.0f %d, want %d within 1%%", what, 100*p.q, v, want)
		}
	}
}
