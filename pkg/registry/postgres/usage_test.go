package postgres_test

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestUsageHistory: the usage history of a node, of a member and of a
// label selection, over windows of whole hours, equals what the test
// computes from the samples it recorded itself: counts, averages and
// maxima exactly, nearest-rank percentiles within store.UsageAccuracy.
// Samples of another member, and hours outside the window, are left out;
// retention drops the rollups with the samples.
func TestUsageHistory(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	pool := func(name, p string) store.Node {
		n := node(name, metricsNodeCPU, metricsNodeMem)
		n.Labels = map[string]string{"pool": p}
		return n
	}
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Nodes: []store.Node{pool("a1", "a"), pool("a2", "a"), pool("b1", "b")}})
	mustApply(t, s, ctx, store.Batch{ClusterID: "other", Nodes: []store.Node{pool("a1", "a")}})

	// Four hours of samples every 5 minutes, the last hour the current one.
	now := time.Now().UTC()
	first := now.Truncate(time.Hour).Add(-3 * time.Hour)
	var samples []store.NodeMetricsSample
	i := 0
	for at := first; !at.After(now); at = at.Add(5 * time.Minute) {
		for k, name := range []string{"a1", "a2", "b1"} {
			i++
			// Spread over three orders of magnitude, with repeats.
			cpu := int64(1e6 * (1 + (i*7919+k*104729)%5000))
			mem := int64(1<<20) * int64(1+(i*6007+k*7)%20000)
			samples = append(samples, store.NodeMetricsSample{ClusterID: "c", Node: name, CPUNanoCores: cpu, MemoryBytes: mem, ObservedAt: at})
		}
		samples = append(samples, store.NodeMetricsSample{ClusterID: "other", Node: "a1", CPUNanoCores: 1 << 40, MemoryBytes: 1 << 40, ObservedAt: at})
	}
	for _, member := range []string{"c", "other"} {
		var of []store.NodeMetricsSample
		for _, smp := range samples {
			if smp.ClusterID == member {
				of = append(of, smp)
			}
		}
		for start := 0; start < len(of); start += 50 { // scrapes of a few nodes each
			batch := of[start:min(start+50, len(of))]
			if got, err := s.RecordNodeMetrics(ctx, store.Fence{ClusterID: member}, batch, policy); err != nil || got.Stored != int64(len(batch)) {
				t.Fatalf("RecordNodeMetrics = %+v, %v; want %d stored", got, err, len(batch))
			}
		}
	}

	// The member's usage heartbeat says up to when its samples are complete.
	heartbeat := now.Truncate(time.Second)
	if err := s.RecordMemberState(ctx, store.Fence{ClusterID: "c"}, store.MemberStatus{State: store.MemberSynced, LastUsage: heartbeat}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.UsageHistory(ctx, store.UsageQuery{ClusterID: "c", Since: now.Add(-time.Hour)}); err != nil || !got.SamplesAsOf.Equal(heartbeat) {
		t.Errorf("samples as of %v, %v; want the usage heartbeat %s", got.SamplesAsOf, err, heartbeat)
	}

	poolA, err := labels.Parse("pool=a")
	if err != nil {
		t.Fatal(err)
	}
	reqs, _ := poolA.Requirements()
	for _, tc := range []struct {
		name  string
		q     store.UsageQuery
		nodes []string
	}{
		{"node over 4h", store.UsageQuery{Node: "a1", Since: now.Add(-4 * time.Hour)}, []string{"a1"}},
		{"member over 4h", store.UsageQuery{Since: now.Add(-4 * time.Hour)}, []string{"a1", "a2", "b1"}},
		{"member over 90m: the hours overlapping it", store.UsageQuery{Since: now.Add(-90 * time.Minute)}, []string{"a1", "a2", "b1"}},
		{"label selection over 4h", store.UsageQuery{Labels: reqs, Since: now.Add(-4 * time.Hour)}, []string{"a1", "a2"}},
		{"node over 1m: the current hour", store.UsageQuery{Node: "b1", Since: now.Add(-time.Minute)}, []string{"b1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.q.ClusterID = "c"
			got, err := s.UsageHistory(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			from := tc.q.Since.Truncate(time.Hour)
			if from.Before(first) {
				from = first
			}
			var cpu, mem []int64
			for _, smp := range samples {
				if smp.ClusterID == "c" && slices.Contains(tc.nodes, smp.Node) && !smp.ObservedAt.Before(from) {
					cpu, mem = append(cpu, smp.CPUNanoCores), append(mem, smp.MemoryBytes)
				}
			}
			if got.Samples != int64(len(cpu)) || got.Nodes != int64(len(tc.nodes)) || !got.From.Equal(from) || !got.To.Equal(now.Truncate(time.Hour).Add(time.Hour)) {
				t.Errorf("%d samples of %d nodes from %s to %s; want %d of %d from %s to the end of this hour",
					got.Samples, got.Nodes, got.From, got.To, len(cpu), len(tc.nodes), from)
			}
			checkUsageStats(t, "cpu", got.CPU, cpu)
			checkUsageStats(t, "memory", got.Memory, mem)
		})
	}

	// Step by step: each bucket's statistics are those of its samples as the
	// test buckets them (aligned to multiples of the step since the epoch).
	epoch := time.Unix(0, 0).UTC()
	for _, step := range []time.Duration{time.Hour, 2 * time.Hour} {
		got, err := s.UsageHistory(ctx, store.UsageQuery{ClusterID: "c", Since: now.Add(-4 * time.Hour), Step: step})
		if err != nil {
			t.Fatal(err)
		}
		type bucket struct{ cpu, mem []int64 }
		want := map[time.Time]*bucket{}
		for _, smp := range samples {
			if smp.ClusterID != "c" {
				continue
			}
			start := epoch.Add(smp.ObservedAt.Sub(epoch).Truncate(step))
			if want[start] == nil {
				want[start] = &bucket{}
			}
			want[start].cpu, want[start].mem = append(want[start].cpu, smp.CPUNanoCores), append(want[start].mem, smp.MemoryBytes)
		}
		if len(got.Series) != len(want) {
			t.Fatalf("step %s: %d buckets, want %d", step, len(got.Series), len(want))
		}
		for i, b := range got.Series {
			w := want[b.Start]
			if w == nil || (i > 0 && !b.Start.After(got.Series[i-1].Start)) || b.Samples != int64(len(w.cpu)) {
				t.Fatalf("step %s: bucket %d starts %s with %d samples; want the buckets %v in order", step, i, b.Start, b.Samples, slices.Collect(maps.Keys(want)))
			}
			checkUsageStats(t, fmt.Sprintf("step %s at %s: cpu", step, b.Start), b.CPU, w.cpu)
			checkUsageStats(t, fmt.Sprintf("step %s at %s: memory", step, b.Start), b.Memory, w.mem)
		}
	}

	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Nodes: []store.Node{pool("new", "a")}})
	empty, err := s.UsageHistory(ctx, store.UsageQuery{ClusterID: "c", Node: "new", Since: now.Add(-time.Hour)})
	if err != nil || empty.Samples != 0 || empty.Nodes != 0 || !empty.From.IsZero() {
		t.Errorf("history of a node without samples: %+v, %v; want empty", empty, err)
	}
	for _, q := range []store.UsageQuery{{ClusterID: "c", Node: "nope"}, {ClusterID: "nope"}} {
		if _, err := s.UsageHistory(ctx, q); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("history of %+v, unknown to the registry: %v, want not found", q, err)
		}
	}

	// A deleted node's history goes with it; the member's keeps it.
	memberBefore, err := s.UsageHistory(ctx, store.UsageQuery{ClusterID: "c", Since: first})
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Deleted: store.Keys{store.ResourceNodes: {{Name: "b1"}}}, Nodes: []store.Node{pool("b1-new", "b")}})
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Nodes: []store.Node{pool("b1", "b")}}) // recreated: no history yet
	if h, err := s.UsageHistory(ctx, store.UsageQuery{ClusterID: "c", Node: "b1", Since: first}); err != nil || h.Samples != 0 {
		t.Errorf("history of a node deleted and recreated: %+v, %v; want none", h, err)
	}
	if h, err := s.UsageHistory(ctx, store.UsageQuery{ClusterID: "c", Since: first}); err != nil || h.Samples != memberBefore.Samples {
		t.Errorf("member history after a node's deletion: %+v, %v; want the %d samples it had", h, err, memberBefore.Samples)
	}

	// Retention drops the rollups of the hours whose samples it drops.
	if _, err := s.MaintainNodeMetrics(ctx, store.MetricsMaintenance{Now: now, RetainAfter: first.Add(2 * time.Hour), UnknownBefore: first}); err != nil {
		t.Fatal(err)
	}
	kept, err := s.UsageHistory(ctx, store.UsageQuery{ClusterID: "c", Since: first})
	if err != nil || !kept.From.Equal(first.Add(2*time.Hour)) {
		t.Errorf("after dropping the first two hours: %+v, %v; want history from %s", kept, err, first.Add(2*time.Hour))
	}
}

// checkUsageStats compares stats with the exact values of samples.
func checkUsageStats(t *testing.T, what string, got store.UsageStats, samples []int64) {
	t.Helper()
	sorted := slices.Sorted(slices.Values(samples))
	var sum float64
	for _, v := range sorted {
		sum += float64(v)
	}
	nearestRank := func(p float64) int64 { return sorted[max(int(math.Ceil(p*float64(len(sorted))))-1, 0)] }
	if want := int64(math.Round(sum / float64(len(sorted)))); got.Average != want {
		t.Errorf("%s average %d, want %d", what, got.Average, want)
	}
	if want := sorted[len(sorted)-1]; got.Max != want {
		t.Errorf("%s max %d, want %d", what, got.Max, want)
	}
	for _, p := range []struct {
		name string
		q    float64
		got  int64
	}{{"p50", 0.50, got.P50}, {"p95", 0.95, got.P95}, {"p99", 0.99, got.P99}} {
		want := nearestRank(p.q)
		if math.Abs(float64(p.got-want)) > store.UsageAccuracy*float64(want)+1 {
			t.Errorf("%s %s %d, want %d within %.0f%%", what, p.name, p.got, want, 100*store.UsageAccuracy)
		}
	}
}

// TestUsageHistogramAdd: usage_histogram_add (migration 020: one sample's
// bucket raised or inserted in place, other histograms merged by a query)
// returns the ascending union of two histograms with each bucket's counts
// summed, for random histograms of every shape a rollup meets: empty, one
// bucket present or new (before, between, after the others), several.
func TestUsageHistogramAdd(t *testing.T) {
	t.Parallel()
	_, b := setup(t, postgres.Options{})
	conn := b.Connect(t)
	rnd := rand.New(rand.NewPCG(1, 2))
	histogram := func(max int) ([]int16, []int64) {
		set := map[int16]int64{}
		for range rnd.IntN(max + 1) {
			set[int16(rnd.IntN(40))] = 1 + rnd.Int64N(9)
		}
		buckets := slices.Sorted(maps.Keys(set))
		counts := make([]int64, len(buckets))
		for i, k := range buckets {
			counts[i] = set[k]
		}
		return buckets, counts
	}
	for i := range 2000 {
		ab, ac := histogram(12)
		bb, bc := histogram(1) // a sample's histogram, or empty
		if i%4 == 0 {
			bb, bc = histogram(5)
		}
		want := map[int16]int64{}
		for j, k := range ab {
			want[k] += ac[j]
		}
		for j, k := range bb {
			want[k] += bc[j]
		}
		var gotB []int16
		var gotC []int64
		if err := conn.QueryRow(b.Ctx, `SELECT coalesce(buckets, '{}'), coalesce(counts, '{}') FROM usage_histogram_add($1, $2, $3, $4)`,
			ab, ac, bb, bc).Scan(&gotB, &gotC); err != nil {
			t.Fatal(err)
		}
		wantB := slices.Sorted(maps.Keys(want))
		wantC := make([]int64, len(wantB))
		for j, k := range wantB {
			wantC[j] = want[k]
		}
		if !slices.Equal(gotB, wantB) || !slices.Equal(gotC, wantC) {
			t.Fatalf("usage_histogram_add(%v, %v, %v, %v) = %v, %v; want %v, %v", ab, ac, bb, bc, gotB, gotC, wantB, wantC)
		}
	}
}
