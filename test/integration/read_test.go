package integration

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
)

// row returns the kubectl table row whose first column is name.
func row(t *testing.T, table, name string) []string {
	t.Helper()
	for line := range strings.SplitSeq(table, "\n") {
		fields := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1)
		if len(fields) > 0 && fields[0] == name {
			return fields
		}
	}
	t.Fatalf("no row %q in:\n%s", name, table)
	return nil
}

// cell returns the cell of the named row in the column headed header
// (kubectl's table: columns two or more spaces apart).
func cell(t *testing.T, table, name, header string) string {
	t.Helper()
	lines := strings.SplitN(strings.TrimSpace(table), "\n", 2)
	headers := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(lines[0]), -1)
	i := slices.Index(headers, header)
	if i < 0 {
		t.Fatalf("no column %q in:\n%s", header, table)
	}
	r := row(t, table, name)
	if i >= len(r) {
		t.Fatalf("row %q has no cell %d (%s):\n%s", name, i, header, table)
	}
	return r[i]
}

func rowCount(table string) int {
	n := 0
	for line := range strings.SplitSeq(strings.TrimSpace(table), "\n") {
		if line != "" && !strings.HasPrefix(line, "NAME") && !strings.HasPrefix(line, "NAMESPACE") {
			n++
		}
	}
	return n
}

func (e *env) testTables(t *testing.T) {
	out := e.kubectl(t, "get", "nodecapacities")
	if !strings.Contains(out, "CPU REQ/ALLOC") || !strings.Contains(out, "SCHEDULABLE") {
		t.Errorf("header lacks the spelled-out denominators:\n%s", out)
	}
	if got := rowCount(out); got != fixtureNodes {
		t.Errorf("kubectl get nodecapacities: %d rows, want %d", got, fixtureNodes)
	}
	want := []string{"prod-1.n1", "true", "<none>", "1250m/3920m (31%)", "2.5Gi/15Gi (16%)", "1234m/3920m (31%)", "3Gi/15Gi (20%)", "3/110"}
	if got := row(t, out, "prod-1.n1"); !slices.Equal(got[:len(want)], want) {
		t.Errorf("prod-1.n1 row = %q, want prefix %q", got, want)
	}
	for name, reason := range map[string]string{"prod-1.n2": "Cordoned", "prod-1.n3": "Tainted", "prod-1.n4": "NotReady"} {
		if got := row(t, out, name); got[1] != "false" || got[2] != reason {
			t.Errorf("%s SCHEDULABLE, REASON = %s, %s, want false, %s", name, got[1], got[2], reason)
		}
	}
	if got := row(t, out, "prod-1.n2"); got[5] != "<unknown>" {
		t.Errorf("prod-1.n2 has no metrics sample; CPU USE = %q, want <unknown>", got[5])
	}

	out = e.kubectl(t, "get", "clusternamespaces", "-A")
	var teamA []string
	for line := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(line, "team-a") && strings.Contains(line, "prod-1") {
			teamA = regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1)
		}
	}
	// 3 pods (one unscheduled) requesting 500m+500m+2000m and 1Gi+1Gi+4Gi.
	wantNS := []string{"team-a", "prod-1", "Active", "3", "3000m", "6Gi", "<unknown>", "requests.cpu 3/4 (75%)"}
	if !slices.Equal(teamA[:min(len(teamA), len(wantNS))], wantNS) {
		t.Errorf("team-a/prod-1 row = %q, want prefix %q\n%s", teamA, wantNS, out)
	}

	// Headroom on the schedulable nodes, with denominators: prod-1 has one
	// (n1: 3920m and 15Gi allocatable, 1250m and 2.5Gi requested).
	out = e.kubectl(t, "get", "clustercapacities")
	for _, want := range []string{"SCHEDULABLE", "CPU FREE/ALLOC", "MEM FREE/ALLOC", "LARGEST FREE"} {
		if !strings.Contains(out, want) {
			t.Errorf("clustercapacities header lacks %s:\n%s", want, out)
		}
	}
	for name, want := range map[string][]string{
		"prod-1": {"prod-1", "1/4", "2.7/3.9 (68%)", "12.5Gi/15Gi (83%)", "2670m, 12.5Gi", "3/110", "<unknown>"}, // no discovery: no mirroring state
		"prod-2": {"prod-2", "20/20", "78.4/78.4 (100%)", "300Gi/300Gi (100%)", "3920m, 15Gi", "0/2200", "<unknown>"},
	} {
		if got := row(t, out, name); !slices.Equal(got[:min(len(got), len(want))], want) {
			t.Errorf("clustercapacity %s row = %q, want prefix %q", name, got, want)
		}
	}
	// -o wide: ready, cordoned and tainted nodes, then CPU usage (n1's 1234m over the schedulable 3920m).
	out = e.kubectl(t, "get", "cc", "prod-1", "-o", "wide")
	if got, want := row(t, out, "prod-1"), []string{"3/4", "1", "1", "1.2/3.9 (31%)"}; len(got) < 13 || !slices.Equal(got[8:12], want) {
		t.Errorf("clustercapacity prod-1 -o wide = %q, want %q after AGE\n%s", got, want, out)
	}

	out = e.kubectl(t, "get", "platform", "-A")
	for _, want := range []string{"nodecapacity.platform.example.io/prod-1.n1", "clusternamespace.platform.example.io/prod-1", "clustercapacity.platform.example.io/prod-2"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get platform -A lacks %s:\n%s", want, out)
		}
	}
}

func (e *env) testYAML(t *testing.T) {
	var nc v1alpha1.NodeCapacity
	if err := yaml.Unmarshal([]byte(e.kubectl(t, "get", "nc", "prod-1.n1", "-o", "yaml")), &nc); err != nil {
		t.Fatal(err)
	}
	s := nc.Status
	checks := []struct {
		name      string
		got, want resource.Quantity
	}{
		{"requested cpu", s.Requested.CPU, resource.MustParse("1250m")},
		{"requested memory", s.Requested.Memory, resource.MustParse("2560Mi")},
		{"available cpu", s.Available.CPU, resource.MustParse("2670m")},
		{"available memory", s.Available.Memory, resource.MustParse("12800Mi")},
		{"allocatable cpu", s.Allocatable.CPU, resource.MustParse("3920m")},
		{"capacity memory", s.Capacity.Memory, resource.MustParse("16Gi")},
	}
	for _, c := range checks {
		if c.got.Cmp(c.want) != 0 {
			t.Errorf("%s = %s, want %s", c.name, c.got.String(), c.want.String())
		}
	}
	if s.Requested.Pods != 3 || s.Available.Pods != 107 {
		t.Errorf("pods requested/available = %d/%d, want 3/107", s.Requested.Pods, s.Available.Pods)
	}
	if s.Usage == nil || s.Usage.CPU.MilliValue() != 1234 || s.Usage.Window.Seconds() != 30 || !s.Usage.Timestamp.Time.Equal(fixtureTime) {
		t.Errorf("usage = %+v, want 1234m over 30s at %s", s.Usage, fixtureTime)
	}
	if !s.Schedulable || s.UnschedulableReason != "" || !s.Ready || s.Unschedulable || s.Cluster != "prod-1" || s.NodeName != "n1" {
		t.Errorf("status flags = %+v", s)
	}
	if nc.Labels["platform.example.io/cluster"] != "prod-1" || nc.Labels["pool"] != "big" {
		t.Errorf("labels = %v, want the node's plus platform.example.io/cluster", nc.Labels)
	}
	if nc.ResourceVersion == "" || nc.UID == "" {
		t.Errorf("metadata lacks resourceVersion or uid: %+v", nc.ObjectMeta)
	}

	var cn v1alpha1.ClusterNamespace
	if err := yaml.Unmarshal([]byte(e.kubectl(t, "get", "cns", "prod-1", "-n", "team-b", "-o", "yaml")), &cn); err != nil {
		t.Fatal(err)
	}
	if cn.Status.Phase != v1alpha1.NamespaceTerminating || cn.Status.PodCount != 1 || cn.Status.Requests.CPU.MilliValue() != 250 {
		t.Errorf("team-b/prod-1 status = %+v, want Terminating with one 250m pod", cn.Status)
	}
}

func (e *env) testLabelSelectors(t *testing.T) {
	tests := []struct {
		name     string
		selector string
		want     int
	}{
		{"equality", "pool=big", fixtureBigPool},
		{"cluster label", "platform.example.io/cluster=prod-1", 4},
		{"cluster label set", "platform.example.io/cluster in (prod-1,prod-3)", 4},
		{"inequality", "pool!=big", fixtureNodes - fixtureBigPool},
		{"exists", "pool", fixtureBigPool},
		{"does not exist", "!pool", fixtureNodes - fixtureBigPool},
		{"combined", "pool=big,platform.example.io/cluster=prod-2", fixtureBigPool - 1},
		{"no match", "pool=none", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := e.kubectl(t, "get", "nc", "-l", tt.selector, "-o", "name")
			if got := len(strings.Fields(out)); got != tt.want {
				t.Errorf("-l %q: %d objects, want %d:\n%s", tt.selector, got, tt.want, out)
			}
		})
	}
	out := e.kubectl(t, "get", "cns", "-A", "-l", "tenant=a", "-o", "name")
	if strings.TrimSpace(out) != "clusternamespace.platform.example.io/prod-1" {
		t.Errorf("clusternamespaces -l tenant=a = %q", out)
	}
	// Members carry no labels of their own: the cluster label selects.
	for selector, want := range map[string]string{clusterLabel + "=prod-1": "clustercapacity.platform.example.io/prod-1", "pool=big": ""} {
		if out := e.kubectl(t, "get", "cc", "-l", selector, "-o", "name"); strings.TrimSpace(out) != want {
			t.Errorf("clustercapacities -l %s = %q, want %q", selector, out, want)
		}
	}
}

func (e *env) testFieldSelectors(t *testing.T) {
	tests := []struct {
		name, resource, selector string
		want                     int
	}{
		{"schedulable false", "nc", "status.schedulable=false", fixtureUnschedulable},
		{"schedulable true", "nc", "status.schedulable=true", fixtureNodes - fixtureUnschedulable},
		{"reason cordoned", "nc", "status.unschedulableReason=Cordoned", 1},
		{"reason tainted", "nc", "status.unschedulableReason=Tainted", 1},
		{"reason not ready", "nc", "status.unschedulableReason=NotReady", 1},
		{"no reason", "nc", "status.unschedulableReason=", fixtureNodes - fixtureUnschedulable},
		{"any reason", "nc", "status.unschedulableReason!=", fixtureUnschedulable},
		{"node name", "nc", "status.nodeName=n1", 1},
		{"object name", "nc", "metadata.name=prod-2.m03", 1},
		{"cluster not", "nc", "status.cluster!=prod-2", 4},
		{"no free GPU is 0 free", "nc", "status.available.other.nvidia.com/gpu=0", fixtureNodes},
		{"no node with a free GPU", "nc", "status.available.other.nvidia.com/gpu!=0", 0},
		{"no hugepages, as a quantity", "nc", "status.allocatable.other.hugepages-2Mi==0Gi", fixtureNodes},
		{"phase", "cns", "status.phase=Terminating", 1},
		{"namespace", "cns", "metadata.namespace=team-a", fixtureClusterNSTeamA},
		{"cluster name", "cns", "metadata.name=prod-2", 1},
		{"capacity by name", "cc", "metadata.name=prod-2", 1},
		{"capacity with room", "cc", "status.hasSchedulableCapacity=true", 2},
		{"capacity by cluster", "cc", "status.cluster!=prod-2", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := e.kubectl(t, "get", tt.resource, "-A", "--field-selector", tt.selector, "-o", "name")
			if got := len(strings.Fields(out)); got != tt.want {
				t.Errorf("--field-selector %q: %d objects, want %d:\n%s", tt.selector, got, tt.want, out)
			}
		})
	}
	t.Run("unsupported field names the supported ones", func(t *testing.T) {
		stderr := e.kubectlFails(t.Context(), t, e.cp.AdminKubeconfig(), "get", "nc", "--field-selector", "spec.foo=bar")
		for _, want := range []string{"BadRequest", "spec.foo", "status.schedulable", "status.nodeName", "status.unschedulableReason",
			"status.available.other.<resource name>", "status.allocatable.other.<resource name>"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("error lacks %q: %s", want, stderr)
			}
		}
	})
	t.Run("an other resource's bad name or amount says what is wrong", func(t *testing.T) {
		for sel, want := range map[string]string{
			"status.available.other.nvidia.com/gpu=lots": `value "lots" is not a quantity; use a whole number or a quantity such as 8, 500Mi or 1Gi`,
			"status.available.other.a/b/c!=0":            `"a/b/c" is not a valid resource name`,
			"status.allocatable.other.=1":                `needs a resource name after the prefix, e.g. status.allocatable.other.nvidia.com/gpu`,
		} {
			stderr := e.kubectlFails(t.Context(), t, e.cp.AdminKubeconfig(), "get", "nc", "--field-selector", sel)
			if !strings.Contains(stderr, "BadRequest") || !strings.Contains(stderr, want) {
				t.Errorf("--field-selector %s: %s, want 400 saying %s", sel, stderr, want)
			}
		}
	})
	t.Run("a reason that does not exist names those that do", func(t *testing.T) {
		stderr := e.kubectlFails(t.Context(), t, e.cp.AdminKubeconfig(), "get", "nc", "--field-selector", "status.unschedulableReason=cordoned")
		for _, want := range []string{"BadRequest", `value "cordoned" is not one of "", "NotReady", "Cordoned", "Tainted"`} {
			if !strings.Contains(stderr, want) {
				t.Errorf("error lacks %q: %s", want, stderr)
			}
		}
	})
}
