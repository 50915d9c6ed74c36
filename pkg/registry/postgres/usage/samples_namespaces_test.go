package usage_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/writes"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestNamespaceUsageReporting: a namespace's usage is reported when first
// seen, when it moves by more than the threshold of the larger of its
// requests and its reported usage, when the number of pods measured
// changes, and once per period; otherwise the row keeps its version.
func TestNamespaceUsageReporting(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	mustApply(t, s, ctx, store.Batch{ClusterID: "c",
		Namespaces: []store.Namespace{{Name: "team-a", UID: "a", Phase: "Active"}},
		Nodes:      []store.Node{node("n1", 4000, 16*gib)},
		Pods:       []store.Pod{{Namespace: "team-a", Name: "p", UID: "p", NodeName: "n1", Phase: "Running", CPURequestMillis: 1000, MemoryRequestBytes: gib}},
	})
	policy := store.UsageReporting{Threshold: 0.05, Period: time.Hour}
	t0 := time.Now().UTC().Truncate(time.Hour)
	for i, step := range []struct {
		what        string
		cpu, memory int64
		pods        int64
		at          time.Duration
		reported    bool
	}{
		{"first sample", 400e6, gib / 2, 1, time.Minute, true},
		{"moved by 4 % of requests", 440e6, gib / 2, 1, 2 * time.Minute, false},
		{"moved by 6 % of requests", 460e6, gib / 2, 1, 3 * time.Minute, true},
		{"memory moved by 6 %", 460e6, gib/2 + gib*6/100, 1, 4 * time.Minute, true},
		{"a second pod measured", 460e6, gib/2 + gib*6/100, 2, 5 * time.Minute, true},
		{"an older sample", 900e6, gib, 2, 4 * time.Minute, false},
		{"a later period", 460e6, gib/2 + gib*6/100, 2, 2 * time.Hour, true},
	} {
		before := getNamespace(t, s, ctx, "c", "team-a")
		n, err := s.RecordNamespaceMetrics(ctx, store.Fence{ClusterID: "c"}, []store.NamespaceMetricsSample{{
			ClusterID: "c", Namespace: "team-a", CPUNanoCores: step.cpu, MemoryBytes: step.memory, Pods: step.pods, ObservedAt: t0.Add(step.at),
		}}, policy)
		if err != nil {
			t.Fatal(err)
		}
		after := getNamespace(t, s, ctx, "c", "team-a")
		if got := n == 1 && after.ResourceVersion > before.ResourceVersion; got != step.reported {
			t.Errorf("step %d (%s): reported %d, version %d -> %d; want reported %v", i, step.what, n, before.ResourceVersion, after.ResourceVersion, step.reported)
		}
		if step.reported && (after.Usage == nil || after.Usage.CPUNanoCores != step.cpu || after.Usage.Pods != step.pods || !after.Usage.Timestamp.Equal(t0.Add(step.at))) {
			t.Errorf("step %d (%s): usage %+v", i, step.what, after.Usage)
		}
	}
	if _, err := s.RecordNamespaceMetrics(ctx, store.Fence{ClusterID: "c"}, []store.NamespaceMetricsSample{{ClusterID: "other", Namespace: "team-a"}}, policy); err == nil {
		t.Error("a sample of another member was accepted")
	}
	// Every sample newer than the hour's last went into the history once,
	// reported or not; the older one and a repeat did not.
	if _, err := s.RecordNamespaceMetrics(ctx, store.Fence{ClusterID: "c"}, []store.NamespaceMetricsSample{{
		ClusterID: "c", Namespace: "team-a", CPUNanoCores: 460e6, MemoryBytes: gib/2 + gib*6/100, Pods: 2, ObservedAt: t0.Add(2 * time.Hour),
	}}, policy); err != nil {
		t.Fatal(err)
	}
	h, err := s.UsageHistory(ctx, store.UsageQuery{ClusterID: "c", Namespace: "team-a", Since: t0})
	if err != nil || h.Samples != 6 || h.CPU.Max != 460e6 || h.CPU.Average != 446_666_667 {
		t.Errorf("namespace history: %+v, %v; want 6 samples (400m, 440m, 460m four times)", h, err)
	}
	if _, err := s.UsageHistory(ctx, store.UsageQuery{ClusterID: "c", Namespace: "nope", Since: t0}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("history of an unknown namespace: %v, want not found", err)
	}

	// A namespace the registry does not hold gets no history, and a
	// replica that lost the member (its fence is stale) adds none.
	if _, err := s.RecordNamespaceMetrics(ctx, store.Fence{ClusterID: "c"}, []store.NamespaceMetricsSample{{
		ClusterID: "c", Namespace: "unknown", CPUNanoCores: 1, Pods: 1, ObservedAt: t0.Add(2 * time.Hour),
	}}, policy); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UsageHistory(ctx, store.UsageQuery{ClusterID: "c", Namespace: "unknown", Since: t0}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("history of a namespace the registry does not hold: %v, want not found", err)
	}
	if _, err := s.ClaimMember(ctx, "c", "replica-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordNamespaceMetrics(ctx, store.Fence{ClusterID: "c"}, []store.NamespaceMetricsSample{{
		ClusterID: "c", Namespace: "team-a", CPUNanoCores: 900e6, Pods: 2, ObservedAt: t0.Add(2*time.Hour + time.Minute),
	}}, policy); !errors.Is(err, store.ErrFenced) {
		t.Errorf("a sample with a stale fence: %v, want ErrFenced", err)
	}
	if h, err := s.UsageHistory(ctx, store.UsageQuery{ClusterID: "c", Namespace: "team-a", Since: t0}); err != nil || h.Samples != 6 {
		t.Errorf("namespace history after a fenced sample: %+v, %v; want the 6 samples before it", h, err)
	}

	// Without samples for two periods the usage becomes unknown.
	now := t0.Add(2 * time.Hour)
	got, err := s.MaintainNodeMetrics(ctx, store.MetricsMaintenance{Now: now, RetainAfter: now.Add(-24 * time.Hour), UnknownBefore: now.Add(time.Minute)})
	if err != nil || got.Unknown != 1 {
		t.Fatalf("maintenance: %+v, %v; want one usage made unknown", got, err)
	}
	if u := getNamespace(t, s, ctx, "c", "team-a").Usage; u != nil {
		t.Errorf("namespace usage after its samples stopped: %+v, want unknown", u)
	}
}

// TestNamespaceReportInParts: a member's first namespace scrape reports its
// 2,100 namespaces in transactions of at most ViewRowsPerCommit;
// later, one namespace that moved and one unconfirmed for UnknownAfter are
// the only ones a scrape of all the others stamps.
func TestNamespaceReportInParts(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	const namespaces = 2100
	batch := store.Batch{ClusterID: "c"}
	for i := range namespaces {
		batch.Namespaces = append(batch.Namespaces, store.Namespace{Name: fmt.Sprintf("ns-%04d", i), UID: fmt.Sprintf("u-%d", i), Phase: "Active"})
	}
	mustApply(t, s, ctx, batch)
	rv0 := registryRV(t, s, ctx)
	t0 := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
	scrape := func(at time.Time, n int, moved int) int64 {
		t.Helper()
		samples := make([]store.NamespaceMetricsSample, n)
		for i := range samples {
			cpu := int64(200e6)
			if i == moved {
				cpu = 900e6
			}
			samples[i] = store.NamespaceMetricsSample{ClusterID: "c", Namespace: batch.Namespaces[i].Name, CPUNanoCores: cpu, MemoryBytes: gib, Pods: 2, ObservedAt: at}
		}
		got, err := s.RecordNamespaceMetrics(ctx, store.Fence{ClusterID: "c"}, samples, quiet)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := scrape(t0, namespaces, -1); got != namespaces {
		t.Fatalf("first scrape reported %d namespaces, want %d", got, namespaces)
	}
	if n := countRows(t, b, `SELECT count(DISTINCT committed_at) FROM registry_change WHERE resource_version > $1 AND kind = 'ClusterNamespace'`, rv0); n != commitsInParts(namespaces) {
		t.Errorf("the first scrape reported its %d namespaces in %d transactions, want %d of at most %d", namespaces, n, commitsInParts(namespaces), writes.ViewRowsPerCommit)
	}
	// The last namespace runs no pod after t0; 6 minutes on, namespace 7 moved.
	rv := registryRV(t, s, ctx)
	if got := scrape(t0.Add(6*time.Minute), namespaces-1, 7); got != 2 {
		t.Errorf("a scrape with one namespace moved and one unconfirmed for over %s reported %d, want 2", quiet.UnknownAfter, got)
	}
	if n := countRows(t, b, `SELECT count(*) FROM registry_change WHERE resource_version > $1`, rv); n != 2 {
		t.Errorf("%d change-log entries after the scrape, want 2", n)
	}
	if u := getNamespace(t, s, ctx, "c", batch.Namespaces[7].Name).Usage; u == nil || u.CPUNanoCores != 900e6 {
		t.Errorf("the namespace that moved shows %+v, want 900m", u)
	}
	if u := getNamespace(t, s, ctx, "c", batch.Namespaces[namespaces-1].Name).Usage; u != nil {
		t.Errorf("the namespace the scrapes stopped listing shows %+v, want unknown", u)
	}
}
