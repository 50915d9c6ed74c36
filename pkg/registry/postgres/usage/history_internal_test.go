package usage

import (
	"math"
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestPercentiles: percentiles are nearest-rank over the merged buckets,
// each bucket's representative within 1 % of its bounds, at most the exact
// maximum; no samples, no percentiles.
func TestPercentiles(t *testing.T) {
	t.Parallel()
	for b := int16(300); b < 1200; b++ {
		lo := math.Pow(bucketGrowth, float64(b-1))
		if v := float64(bucketValue(b)); math.Abs(v-lo)/lo > 0.021 {
			t.Fatalf("bucketValue(%d) = %v, not within 2 %% of its lower bound %v", b, v, lo)
		}
	}
	h := newHistogram(1 << 40)
	h.add([]int16{400, 500}, []int64{50, 40})
	h.add([]int16{600}, []int64{10, 99}) // a count without its bucket is ignored
	var st store.UsageStats
	h.fill(&st)
	if st.P50 != bucketValue(400) || st.P95 != bucketValue(600) || st.P99 != bucketValue(600) {
		t.Errorf("percentiles %d/%d/%d, want buckets 400, 600, 600 (%d, %d)", st.P50, st.P95, st.P99, bucketValue(400), bucketValue(600))
	}
	capped := newHistogram(5)
	capped.add([]int16{900}, []int64{1})
	if got := capped.percentile(0.5); got != 5 {
		t.Errorf("percentile above the maximum: %d, want the maximum 5", got)
	}
	if got := newHistogram(0).percentile(0.99); got != 0 {
		t.Errorf("percentile of no samples: %d, want 0", got)
	}
}
