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

// TestRecommend: requests are the percentile plus the headroom rounded up
// to whole millicores and MiB, the quota the maximum plus the headroom
// (at least the requests), and the covered share counts the samples whose
// bucket is at or below the requests.
func TestRecommend(t *testing.T) {
	t.Parallel()
	bucket := func(v int64) int16 { return int16(1 + math.Floor(math.Log(float64(v))/math.Log(bucketGrowth))) }
	cpu, memory := newHistogram(3_000_000_000), newHistogram(5<<30)
	// 100 CPU samples: 90 at 1 core, 8 at 2, 2 at the maximum 3.
	cpu.add([]int16{bucket(1e9), bucket(2e9), bucket(3e9)}, []int64{90, 8, 2})
	memory.add([]int16{bucket(1 << 30), bucket(5 << 30)}, []int64{99, 1})
	rec := recommend(cpu, memory, store.RecommendQuery{Percentile: 0.95, Headroom: 0.15})
	wantCPU := roundUp(grow(bucketValue(bucket(2e9)), 0.15), nanocoresPerMilli) // the 95th sample is one of the 2-core ones
	if rec.Requests.CPU != wantCPU || rec.Requests.CPU%nanocoresPerMilli != 0 || math.Abs(float64(rec.Requests.CPU)/2.3e9-1) > 0.01 {
		t.Errorf("cpu requests %d, want %d (2 cores plus 15 %%, within 1 %%, whole millicores)", rec.Requests.CPU, wantCPU)
	}
	if want := roundUp(grow(3e9, 0.15), nanocoresPerMilli); rec.Quota.CPU != want {
		t.Errorf("cpu quota %d, want %d (the maximum plus 15 %%)", rec.Quota.CPU, want)
	}
	if rec.CPUCovered != 0.98 {
		t.Errorf("cpu covered %g, want 0.98 (the maximum's 2 samples above 2.3 cores)", rec.CPUCovered)
	}
	if rec.Requests.Memory%bytesPerMiB != 0 || math.Abs(float64(rec.Requests.Memory)/float64(1<<30)/1.15-1) > 0.01 || rec.MemoryCovered != 0.99 {
		t.Errorf("memory requests %d covering %g, want 1Gi plus 15 %% in whole MiB, covering 0.99", rec.Requests.Memory, rec.MemoryCovered)
	}
	if rec.Quota.Memory != roundUp(grow(5<<30, 0.15), bytesPerMiB) {
		t.Errorf("memory quota %d, want the maximum plus 15 %%", rec.Quota.Memory)
	}
	flat := newHistogram(1e9)
	flat.add([]int16{bucket(1e9)}, []int64{10})
	if r := recommend(flat, flat, store.RecommendQuery{Percentile: 1, Headroom: 0}); r.Quota.CPU < r.Requests.CPU || r.CPUCovered != 1 {
		t.Errorf("one value, no headroom: %+v; want a quota at least the requests, covering all", r)
	}
}
