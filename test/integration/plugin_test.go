package integration

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/units"
)

// testKubectlPlatformUsage runs `kubectl platform usage` (cmd/kubectl-platform
// on the PATH, found by the real kubectl) over the six hours of prod-2's
// samples testUsageReports recorded: each row says what a UsageReport with
// the same question answers, next to the requests and allocatable per node
// the ClusterCapacity, NodeCapacities and ClusterNamespace say, and the
// sparkline draws each hour's average against the allocatable (· for the
// window's first hour, which has no samples).
func (e *env) testKubectlPlatformUsage(t *testing.T) {
	ctx := t.Context()
	api := e.platform.PlatformV1alpha1()
	cc, err := api.ClusterCapacities().Get(ctx, "prod-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodes := cc.Status.Nodes.Total
	perNode := map[string][2]string{ // requested, allocatable
		"cpu":    {cpuPer(cc.Status.All.Requested.CPU, nodes), cpuPer(cc.Status.All.Allocatable.CPU, nodes)},
		"memory": {memoryPer(cc.Status.All.Requested.Memory, nodes), memoryPer(cc.Status.All.Allocatable.Memory, nodes)},
	}
	m03, err := api.NodeCapacities().Get(ctx, "prod-2.m03", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := api.ClusterNamespaces("team-a").Get(ctx, "prod-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		args      []string
		spec      v1alpha1.UsageReportSpec
		reference map[string][2]string
		header    string
	}{
		{"member", nil, v1alpha1.UsageReportSpec{Cluster: "prod-2"}, perNode, "member prod-2: "},
		{"node", []string{"--node", "m03"}, v1alpha1.UsageReportSpec{Cluster: "prod-2", NodeName: "m03"}, map[string][2]string{
			"cpu":    {cpuPer(m03.Status.Requested.CPU, 1), cpuPer(m03.Status.Allocatable.CPU, 1)},
			"memory": {memoryPer(m03.Status.Requested.Memory, 1), memoryPer(m03.Status.Allocatable.Memory, 1)},
		}, "node m03 of prod-2: "},
		// Every prod-2 node has the same allocatable and no pods: the pool's
		// per node figures are the member's.
		{"selection", []string{"-l", "pool=big"}, v1alpha1.UsageReportSpec{Cluster: "prod-2", NodeSelector: "pool=big"}, perNode, "nodes pool=big of prod-2: "},
		{"namespace", []string{"-n", "team-a"}, v1alpha1.UsageReportSpec{Cluster: "prod-2", Namespace: "team-a"}, map[string][2]string{
			"cpu": {ns.Status.Requests.CPU.String(), "-"}, "memory": {ns.Status.Requests.Memory.String(), "-"},
		}, "namespace team-a in prod-2: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.Window, tc.spec.Step = metav1.Duration{Duration: 6 * time.Hour}, &metav1.Duration{Duration: time.Hour}
			out, stderr, err := e.cp.KubectlPlugin(ctx, e.cp.AdminKubeconfig(), append([]string{"platform", "usage", "prod-2", "--window", "6h", "--step", "1h"}, tc.args...)...)
			if err != nil || stderr != "" {
				t.Fatalf("kubectl platform usage: %v\n%s", err, stderr)
			}
			t.Logf("kubectl platform usage prod-2 --window 6h --step 1h %s\n%s", strings.Join(tc.args, " "), out)
			report, err := api.UsageReports().Create(ctx, &v1alpha1.UsageReport{Spec: tc.spec}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 4 || !strings.HasPrefix(lines[0], tc.header) || !strings.HasPrefix(lines[1], "RESOURCE ") {
				t.Fatalf("output\n%s\nwant a line starting %q, the column names and a row per resource", out, tc.header)
			}
			for i, r := range []struct {
				name  string
				stats *v1alpha1.UsageStatistics
				avg   func(v1alpha1.UsageBucket) resource.Quantity
			}{
				{"cpu", report.Status.CPU, func(b v1alpha1.UsageBucket) resource.Quantity { return b.CPU.Average }},
				{"memory", report.Status.Memory, func(b v1alpha1.UsageBucket) resource.Quantity { return b.Memory.Average }},
			} {
				row := strings.Fields(lines[2+i])
				want := []string{r.name, tc.reference[r.name][0], tc.reference[r.name][1], r.stats.Average.String(), r.stats.P95.String(), r.stats.Max.String(),
					sparklineOf(report.Status.Series, r.avg, tc.reference[r.name]), "█", "="}
				if len(row) != len(want)+1 || !slices.Equal(row[:len(want)], want) {
					t.Errorf("%s row %q, want %q and the top", r.name, row, want)
				}
			}
		})
	}
	t.Run("bad input", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"prod-2", "--step", "30m"}, "spec.step: Invalid value: \"30m0s\": must be whole hours"},
			{[]string{"prod-2", "--node", "m01", "-l", "pool=big"}, "--node and --selector both given"},
			{[]string{"prod-2", "--window", "soon"}, `invalid argument "soon" for "--window"`},
			{nil, "name one member cluster"},
			{[]string{"prod-9"}, `clustercapacities.platform.example.io "prod-9" not found`},
		} {
			_, stderr, err := e.cp.KubectlPlugin(ctx, e.cp.AdminKubeconfig(), append([]string{"platform", "usage"}, tc.args...)...)
			if err == nil || !strings.Contains(stderr, tc.want) {
				t.Errorf("kubectl platform usage %s: %v, stderr %q; want a failure saying %q", strings.Join(tc.args, " "), err, stderr, tc.want)
			}
		}
	})
}

func cpuPer(q resource.Quantity, nodes int64) string {
	v := units.CPU(q.ScaledValue(resource.Nano) / nodes)
	return v.String()
}

func memoryPer(q resource.Quantity, nodes int64) string {
	v := units.Memory(q.Value() / nodes)
	return v.String()
}

// sparklineOf is the line the plugin should draw for the series: seven
// hours, the first without samples, each average against the allocatable,
// or where there is none (a namespace) the larger of the requests and the
// highest average.
func sparklineOf(series []v1alpha1.UsageBucket, average func(v1alpha1.UsageBucket) resource.Quantity, reference [2]string) string {
	var top float64
	if reference[1] != "-" {
		q := resource.MustParse(reference[1])
		top = q.AsApproximateFloat64()
	} else {
		q := resource.MustParse(reference[0])
		top = q.AsApproximateFloat64()
		for _, b := range series {
			a := average(b)
			top = max(top, a.AsApproximateFloat64())
		}
	}
	bars := []rune("▁▂▃▄▅▆▇█")
	line := []rune{'·'}
	for _, b := range series {
		a := average(b)
		line = append(line, bars[min(int(math.Round(a.AsApproximateFloat64()/top*7)), 7)])
	}
	return string(line)
}
