package plugin

import (
	"bytes"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
)

func q(s string) *resource.Quantity {
	v := resource.MustParse(s)
	return &v
}

// TestRender: a member's six hours by the hour, the first hour of the window
// without samples; the sparkline is drawn against the allocatable per node.
func TestRender(t *testing.T) {
	asked := time.Date(2026, 12, 3, 11, 20, 0, 0, time.UTC)
	s := slots(asked, 6*time.Hour, time.Hour)
	if want := time.Date(2026, 12, 3, 5, 0, 0, 0, time.UTC); !s.first.Equal(want) || s.n != 7 {
		t.Fatalf("slots %+v, want 7 from %s", s, want)
	}
	bucket := func(h int, cpu, mem string) v1alpha1.UsageBucket {
		return v1alpha1.UsageBucket{Start: metav1.NewTime(s.first.Add(time.Duration(h) * time.Hour)), Samples: 240,
			CPU: v1alpha1.UsagePoint{Average: *q(cpu)}, Memory: v1alpha1.UsagePoint{Average: *q(mem)}}
	}
	from, to := metav1.NewTime(s.first.Add(time.Hour)), metav1.NewTime(s.first.Add(7*time.Hour))
	v := usageView{subject: "member prod-2", perNode: true, step: time.Hour, slots: s,
		ref: reference{cpu: pair{requested: q("1200m"), allocatable: q("4")}, memory: pair{requested: q("6Gi"), allocatable: q("16Gi")}},
		status: v1alpha1.UsageReportStatus{Nodes: 20, Samples: 1440, From: &from, To: &to,
			CPU:    &v1alpha1.UsageStatistics{Average: *q("2030m"), P95: *q("3800m"), Max: *q("3950m")},
			Memory: &v1alpha1.UsageStatistics{Average: *q("7600Mi"), P95: *q("14Gi"), Max: *q("15Gi")},
			Series: []v1alpha1.UsageBucket{bucket(1, "0", "0"), bucket(2, "1", "4Gi"), bucket(3, "2", "8Gi"), bucket(5, "3500m", "14Gi"), bucket(6, "4", "16Gi")}},
	}
	var out bytes.Buffer
	if err := render(&out, v); err != nil {
		t.Fatal(err)
	}
	want := `member prod-2: 1440 samples of 20 nodes, 2026-12-03 06:00 to 2026-12-03 12:00 UTC, per node
RESOURCE   REQUESTED   ALLOCATABLE   AVERAGE   P95     MAX     AVERAGE EACH 1h, OLDEST FIRST
cpu        1200m       4             2030m     3800m   3950m   ·▁▃▅·▇█  █ = 4
memory     6Gi         16Gi          7600Mi    14Gi    15Gi    ·▁▃▅·▇█  █ = 16Gi
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// TestRenderRecommendation: a recommendation as a table, a quota that
// limits CPU only shown as none for memory; without samples, says so.
func TestRenderRecommendation(t *testing.T) {
	from, to := metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)), metav1.NewTime(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	st := v1alpha1.UsageReportStatus{Samples: 1008, From: &from, To: &to, Recommendation: &v1alpha1.UsageRecommendation{
		Percentile: 95, HeadroomPercent: 15,
		Requests:        v1alpha1.RecommendedAmounts{CPU: *q("1250m"), Memory: *q("3200Mi")},
		Quota:           v1alpha1.RecommendedAmounts{CPU: *q("2"), Memory: *q("4Gi")},
		Covered:         v1alpha1.CoveredShares{CPU: "96.4%", Memory: "99.0%"},
		CurrentRequests: v1alpha1.RecommendedAmounts{CPU: *q("3"), Memory: *q("6Gi")},
		CurrentQuota:    &v1alpha1.RecommendedAmounts{CPU: *q("10"), Memory: *q("0")},
		Frees:           v1alpha1.RecommendedAmounts{CPU: *q("1750m"), Memory: *q("2944Mi")},
	}}
	var out bytes.Buffer
	if err := renderRecommendation(&out, "namespace team-a in prod-1", st); err != nil {
		t.Fatal(err)
	}
	want := `namespace team-a in prod-1: 1008 samples, 2026-11-30 12:00 to 2026-12-07 12:00 UTC; requests at p95 + 15%, quota at max + 15%
RESOURCE   REQUESTS NOW   RECOMMENDED   FREES    COVERED   QUOTA NOW   RECOMMENDED QUOTA
cpu        3              1250m         1750m    96.4%     10          2
memory     6Gi            3200Mi        2944Mi   99.0%     <none>      4Gi
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	out.Reset()
	if err := renderRecommendation(&out, "namespace team-a in prod-1", v1alpha1.UsageReportStatus{}); err != nil || out.String() != "namespace team-a in prod-1: no samples in the window, nothing to recommend\n" {
		t.Errorf("without samples: %q, %v", out.String(), err)
	}
}
