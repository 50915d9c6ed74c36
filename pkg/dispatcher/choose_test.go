package dispatcher

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	platform "github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
)

func shape(name string, count int64, cpu string) PodSet {
	return PodSet{Name: name, Count: count, Spec: platform.PlacementReportSpec{
		Requests: map[string]resource.Quantity{"cpu": resource.MustParse(cpu)}, Replicas: count}}
}

func fit(fits int64) platform.PlacementClusterFit { return platform.PlacementClusterFit{Fits: fits} }

func staleFit(fits int64, age time.Duration) platform.PlacementClusterFit {
	return platform.PlacementClusterFit{Fits: fits, Stale: true, DataAge: &metav1.Duration{Duration: age}}
}

var (
	small      = Candidate{Cluster: "small", Member: "worker-small"}
	large      = Candidate{Cluster: "large", Member: "worker-large"}
	none       = func(string) MemberRoom { return MemberRoom{} }
	waitPolicy = Policy{MaxDataAge: 2 * time.Minute, WhenNothingFits: FallbackWait}
)

func TestChoose(t *testing.T) {
	four := shape("main", 4, "1")
	cases := []struct {
		name    string
		podSets []PodSet
		answers []map[string]platform.PlacementClusterFit
		policy  Policy
		want    []string
		reason  string
	}{
		{"the most room left wins", []PodSet{four},
			[]map[string]platform.PlacementClusterFit{{"worker-small": fit(6), "worker-large": fit(40)}}, waitPolicy, []string{"large"}, ReasonFits},
		{"only where it fits", []PodSet{four},
			[]map[string]platform.PlacementClusterFit{{"worker-small": fit(3), "worker-large": fit(4)}}, waitPolicy, []string{"large"}, ReasonFits},
		{"current before stale, though stale has more room", []PodSet{four},
			[]map[string]platform.PlacementClusterFit{{"worker-small": fit(5), "worker-large": staleFit(40, time.Minute)}}, waitPolicy, []string{"small"}, ReasonFits},
		{"stale within the bound when nothing current fits", []PodSet{four},
			[]map[string]platform.PlacementClusterFit{{"worker-small": fit(1), "worker-large": staleFit(40, time.Minute)}}, waitPolicy, []string{"large"}, ReasonFits},
		{"never data older than the bound", []PodSet{four},
			[]map[string]platform.PlacementClusterFit{{"worker-small": fit(1), "worker-large": staleFit(40, 3*time.Minute)}}, waitPolicy, nil, ReasonWaiting},
		{"nothing fits: wait", []PodSet{four},
			[]map[string]platform.PlacementClusterFit{{"worker-small": fit(1), "worker-large": fit(3)}}, waitPolicy, nil, ReasonWaiting},
		{"nothing fits: most room", []PodSet{four},
			[]map[string]platform.PlacementClusterFit{{"worker-small": fit(1), "worker-large": fit(3)}},
			Policy{MaxDataAge: time.Minute, WhenNothingFits: FallbackMostRoom}, []string{"large"}, ReasonMostRoom},
		{"every pod set must fit", []PodSet{four, shape("workers", 2, "8")},
			[]map[string]platform.PlacementClusterFit{{"worker-small": fit(10), "worker-large": fit(5)}, {"worker-small": fit(1), "worker-large": fit(2)}},
			waitPolicy, []string{"large"}, ReasonFits},
		{"a member the registry does not know", []PodSet{four},
			[]map[string]platform.PlacementClusterFit{{"worker-small": fit(5)}}, waitPolicy, []string{"small"}, ReasonFits},
		{"stale of unknown age", []PodSet{four},
			[]map[string]platform.PlacementClusterFit{{"worker-small": {Fits: 9, Stale: true}}}, waitPolicy, nil, ReasonNoCandidate},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Choose(c.podSets, c.answers, []Candidate{small, large}, none, c.policy)
			if strings.Join(d.Nominate, ",") != strings.Join(c.want, ",") || d.Reason != c.reason {
				t.Fatalf("got %v (%s), want %v (%s): %s", d.Nominate, d.Reason, c.want, c.reason, d.Message)
			}
			if d.Message == "" || len(d.Verdicts) != 2 {
				t.Errorf("decision says too little: %+v", d)
			}
		})
	}
}

func TestChooseNoCandidate(t *testing.T) {
	d := Choose([]PodSet{shape("main", 1, "1")}, []map[string]platform.PlacementClusterFit{{}}, []Candidate{small}, none, waitPolicy)
	if len(d.Nominate) != 0 || d.Reason != ReasonNoCandidate || !strings.Contains(d.Message, `member "worker-small" is not in the registry`) {
		t.Fatalf("got %+v", d)
	}
}

// A burst: the ledger's promises steer later Workloads away from the
// member the first ones were sent to, before the mirror shows them.
func TestChooseWithPromises(t *testing.T) {
	now := time.Unix(1000, 0)
	l := &Ledger{Settle: 10 * time.Second, Expiry: time.Minute}
	ps := shape("main", 4, "2") // 8 cores each
	// The registry still shows the room of before the burst: 20 cores on
	// large (10 replicas), 12 on small (6).
	answers := []map[string]platform.PlacementClusterFit{{"worker-small": fit(6), "worker-large": fit(10)}}
	free := map[string]corev1.ResourceList{
		"worker-small": {"cpu": resource.MustParse("12"), "pods": resource.MustParse("100")},
		"worker-large": {"cpu": resource.MustParse("20"), "pods": resource.MustParse("100")},
	}
	var got []string
	for i := range 4 {
		uid := types.UID(string(rune('a' + i)))
		d := Choose([]PodSet{ps}, answers, []Candidate{small, large}, func(m string) MemberRoom {
			return MemberRoom{Free: free[m], Promised: l.InFlight(m, uid, now, time.Time{})}
		}, waitPolicy)
		got = append(got, strings.Join(d.Nominate, ""))
		if d.Member != "" {
			l.Promise(uid, d.Member, ps.Demand(), now)
		}
	}
	// large (10→6 left), large (6→2), small (6→2), then nothing: 2 and 2.
	if want := "large,large,small,"; strings.Join(got, ",") != want {
		t.Fatalf("burst went %q, want %q", strings.Join(got, ","), want)
	}
}

// Room promised caps a member's count by the free room of each resource
// a replica takes; a resource the promises do not touch (GPUs here) does
// not shrink it, and PlacementReport's lower count stands.
func TestLeft(t *testing.T) {
	gpu := PodSet{Count: 1, Spec: platform.PlacementReportSpec{Requests: map[string]resource.Quantity{
		"cpu": resource.MustParse("1"), "memory": resource.MustParse("1Gi"), "nvidia.com/gpu": resource.MustParse("1")},
		Devices: []platform.DeviceRequest{{Driver: "gpu.example.com", Count: 1}}}}
	free := corev1.ResourceList{"cpu": resource.MustParse("40"), "memory": resource.MustParse("100Gi"), "pods": resource.MustParse("300"),
		"nvidia.com/gpu": resource.MustParse("4"), DevicePrefix + "gpu.example.com": resource.MustParse("8")}
	cases := []struct {
		name     string
		promised corev1.ResourceList
		want     int64
		ok       bool
	}{
		{"nothing promised: the count stands", nil, 0, false},
		{"CPU promised, GPUs bind", corev1.ResourceList{"cpu": resource.MustParse("30")}, 4, true},
		{"CPU promised, CPU binds", corev1.ResourceList{"cpu": resource.MustParse("38500m")}, 1, true},
		{"a GPU promised", corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}, 3, true},
		{"devices promised", corev1.ResourceList{DevicePrefix + "gpu.example.com": resource.MustParse("7")}, 1, true},
		{"more promised than free", corev1.ResourceList{"memory": resource.MustParse("200Gi")}, 0, true},
	}
	for _, c := range cases {
		got, ok := left(gpu, MemberRoom{Free: free, Promised: c.promised})
		if got != c.want || ok != c.ok {
			t.Errorf("%s: left = %d, %v; want %d, %v", c.name, got, ok, c.want, c.ok)
		}
	}
	if _, ok := left(gpu, MemberRoom{Promised: corev1.ResourceList{"cpu": resource.MustParse("1")}}); ok {
		t.Errorf("left with the free room unknown should leave the count alone")
	}
}

// The GPU Jobs of a burst: CPU promised to the big Jobs before them does
// not make them fit nowhere (the member's GPUs are free).
func TestChooseGPUsAfterCPUPromises(t *testing.T) {
	gpu := PodSet{Name: "main", Count: 1, Spec: platform.PlacementReportSpec{Requests: map[string]resource.Quantity{
		"cpu": resource.MustParse("1"), "nvidia.com/gpu": resource.MustParse("1")}, Replicas: 1}}
	answers := []map[string]platform.PlacementClusterFit{{"worker-small": fit(0), "worker-large": fit(4)}}
	room := func(m string) MemberRoom {
		if m == "worker-small" {
			return MemberRoom{Free: corev1.ResourceList{"cpu": resource.MustParse("16"), "pods": resource.MustParse("400")}}
		}
		return MemberRoom{Free: corev1.ResourceList{"cpu": resource.MustParse("48"), "pods": resource.MustParse("330"), "nvidia.com/gpu": resource.MustParse("4")},
			Promised: corev1.ResourceList{"cpu": resource.MustParse("15"), "pods": resource.MustParse("3")}}
	}
	if d := Choose([]PodSet{gpu}, answers, []Candidate{small, large}, room, waitPolicy); strings.Join(d.Nominate, ",") != "large" {
		t.Fatalf("got %v: %s", d.Nominate, d.Message)
	}
}
